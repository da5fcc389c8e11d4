// Image3D (scalar float32 volume) and Field3D (three float32 components) on a GridInfo.
//
// Memory layout: x fastest, then y, then z. A Field3D is one allocation of three planes
// (all x components, then all y, then all z). Objects are handles to a shared Buffer:
// copying the C++ object is not allowed (use clone()), moving is.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

#include "pyca/buffer.h"
#include "pyca/grid_info.h"
#include "pyca/mem_type.h"

namespace pyca {

// What Image3D and Field3D share: a grid, a number of components and a buffer.
class Array3D {
 public:
  const GridInfo& grid() const { return grid_; }
  const Vec3Di& size() const { return grid_.size(); }
  const Vec3Df& spacing() const { return grid_.spacing(); }
  const Vec3Df& origin() const { return grid_.origin(); }
  MemoryType memType() const { return mem_; }
  std::size_t nVox() const { return grid_.nVox(); }
  int nComponents() const { return ncomp_; }
  // Number of floats held: nVox() * nComponents().
  std::size_t nElements() const { return grid_.nVox() * std::size_t(ncomp_); }
  // Bytes the data needs (the buffer may be larger after setGrid to a smaller grid).
  std::size_t nBytes() const { return nElements() * sizeof(float); }
  std::size_t capacity() const;  // floats per component the buffer can hold

  // Changes the grid. A grid with more voxels than the capacity throws ValueError (as PyCA did).
  void setGrid(const GridInfo& g);
  void setSpacing(const Vec3Df& s) { grid_.setSpacing(s); }
  void setOrigin(const Vec3Df& o) { grid_.setOrigin(o); }

  // Moves the data to memory type `mem` in place (a no-op when already there). Views that
  // still refer to the old memory keep it alive, but no longer see this object's data.
  void toType(MemoryType mem);
  // Sets every element to `value`.
  void fill(float value);
  // True when the data is on the CPU (host or pinned).
  bool onHost() const { return isHostMem(mem_); }

  const std::shared_ptr<Buffer>& buffer() const { return buf_; }
  float* data() { return buf_ ? static_cast<float*>(buf_->data()) : nullptr; }
  const float* data() const { return buf_ ? static_cast<const float*>(buf_->data()) : nullptr; }

 protected:
  Array3D(int ncomp, MemoryType mem);
  Array3D(int ncomp, const GridInfo& grid, MemoryType mem);
  Array3D(int ncomp, const GridInfo& grid, std::shared_ptr<Buffer> buf);
  Array3D(Array3D&&) noexcept = default;
  Array3D& operator=(Array3D&&) noexcept = default;
  ~Array3D() = default;
  void copyDataFrom(const Array3D& src, const char* op);
  void swapWith(Array3D& other) noexcept {
    std::swap(grid_, other.grid_);
    std::swap(mem_, other.mem_);
    std::swap(buf_, other.buf_);
  }
  std::string describe(const char* kind) const;

  GridInfo grid_;
  MemoryType mem_;
  int ncomp_;
  std::shared_ptr<Buffer> buf_;
};

class Image3D : public Array3D {
 public:
  // An image with no voxels yet (PyCA's Image3D(mem)); setGrid or fromlist gives it some.
  explicit Image3D(MemoryType mem = MEM_HOST);
  Image3D(const GridInfo& grid, MemoryType mem = MEM_HOST);
  // Shares `buf` (which must hold at least grid.nVox() floats).
  Image3D(const GridInfo& grid, std::shared_ptr<Buffer> buf);
  Image3D(Image3D&&) noexcept = default;
  Image3D& operator=(Image3D&&) noexcept = default;

  // A deep copy in the same memory type (or in `mem`).
  Image3D clone() const;
  Image3D clone(MemoryType mem) const;
  // Copies data from `src` (same grid size, any memory type) into this image.
  void copyFrom(const Image3D& src) { copyDataFrom(src, "Image3D.copyFrom"); }
  // Exchanges grids, memory types and data with `other` (no copy; PyCA's swap).
  void swap(Image3D& other) noexcept { swapWith(other); }
  std::string repr() const { return describe("Image3D"); }
};

class Field3D : public Array3D {
 public:
  explicit Field3D(MemoryType mem = MEM_HOST);
  Field3D(const GridInfo& grid, MemoryType mem = MEM_HOST);
  // Shares `buf` (which must hold at least 3 * grid.nVox() floats, x plane first).
  Field3D(const GridInfo& grid, std::shared_ptr<Buffer> buf);
  Field3D(Field3D&&) noexcept = default;
  Field3D& operator=(Field3D&&) noexcept = default;

  float* x() { return data(); }
  float* y() { return data() + capacity(); }
  float* z() { return data() + 2 * capacity(); }
  const float* x() const { return data(); }
  const float* y() const { return data() + capacity(); }
  const float* z() const { return data() + 2 * capacity(); }
  // Distance in floats between the x, y and z planes (the capacity, not nVox, after a shrink).
  std::size_t planeStride() const { return capacity(); }

  Field3D clone() const;
  Field3D clone(MemoryType mem) const;
  void copyFrom(const Field3D& src) { copyDataFrom(src, "Field3D.copyFrom"); }
  void swap(Field3D& other) noexcept { swapWith(other); }
  // Sets every voxel to the vector v.
  void fill(const Vec3Df& v);
  using Array3D::fill;
  std::string repr() const { return describe("Field3D"); }
};

}  // namespace pyca
