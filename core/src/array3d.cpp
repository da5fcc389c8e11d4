#include "pyca/array3d.h"

#include <sstream>

#include "pyca/detail/sizes.h"
#include "pyca/errors.h"

namespace pyca {

namespace {
void checkMem(const char* what, MemoryType mem) {
  if (mem != MEM_HOST && mem != MEM_HOST_PINNED && mem != MEM_DEVICE) {
    throw ValueError(std::string(what) +
                     ": argument 'mem' must be MEM_HOST, MEM_HOST_PINNED or MEM_DEVICE, not " +
                     std::to_string(int(mem)));
  }
}

const char* kindOf(int ncomp) { return ncomp == 1 ? "Image3D" : "Field3D"; }

std::shared_ptr<Buffer> allocFor(int ncomp, const GridInfo& g, MemoryType mem) {
  checkMem(kindOf(ncomp), mem);
  const std::size_t floats =
      detail::checkedMul(g.nVox(), std::size_t(ncomp), "allocating an array", "floats");
  return Buffer::allocate(mem, detail::checkedMul(floats, sizeof(float), "allocating an array", "bytes"));
}
}  // namespace

Array3D::Array3D(int ncomp, MemoryType mem) : grid_(), mem_(mem), ncomp_(ncomp) {
  // PyCA's Image3D(mem): a one-voxel array until setGrid gives it a real grid.
  buf_ = allocFor(ncomp, grid_, mem);
}

Array3D::Array3D(int ncomp, const GridInfo& grid, MemoryType mem)
    : grid_(grid), mem_(mem), ncomp_(ncomp), buf_(allocFor(ncomp, grid, mem)) {}

Array3D::Array3D(int ncomp, const GridInfo& grid, std::shared_ptr<Buffer> buf)
    : grid_(grid), mem_(buf ? buf->memType() : MEM_UNINITIALIZED), ncomp_(ncomp), buf_(std::move(buf)) {
  if (!buf_) throw ValueError("cannot wrap a null buffer");
  if (buf_->bytes() < nBytes()) {
    throw ValueError("buffer of " + std::to_string(buf_->bytes()) + " bytes is too small for " +
                     std::to_string(nBytes()) + " bytes");
  }
}

std::size_t Array3D::capacity() const {
  return buf_ ? buf_->bytes() / (sizeof(float) * std::size_t(ncomp_)) : 0;
}

void Array3D::setGrid(const GridInfo& g) {
  if (g.nVox() > capacity()) {
    // PyCA required the capacity; an empty array (PyCA's Image3D(mem)) may grow, since it holds no data.
    if (grid_.nVox() > 1 || !buf_ || !buf_.unique()) {
      throw ValueError("setGrid: grid of " + std::to_string(g.nVox()) + " voxels exceeds the capacity of " +
                       std::to_string(capacity()) + " voxels");
    }
    buf_ = allocFor(ncomp_, g, mem_);
  }
  grid_ = g;
}

void Array3D::toType(MemoryType mem) {
  if (mem == mem_) return;
  checkMem("toType", mem);
  auto nb = Buffer::allocate(mem, buf_->bytes());
  copyMemory(nb->data(), mem, buf_->data(), mem_, buf_->bytes());
  buf_ = std::move(nb);
  mem_ = mem;
}

void Array3D::fill(float value) {
  if (ncomp_ == 1 || capacity() == nVox()) {
    fillMemory(data(), mem_, nElements(), value);
  } else {
    for (int c = 0; c < ncomp_; ++c) fillMemory(data() + c * capacity(), mem_, nVox(), value);
  }
}

void Array3D::copyDataFrom(const Array3D& src, const char* op) {
  if (src.size() != size()) {
    throw ValueError(std::string(op) + ": source size does not match (" + src.grid().str() + " vs " +
                     grid().str() + ")");
  }
  if (capacity() == nVox() && src.capacity() == src.nVox()) {
    copyMemory(data(), mem_, src.data(), src.mem_, nBytes());
  } else {
    for (int c = 0; c < ncomp_; ++c) {
      copyMemory(data() + c * capacity(), mem_, src.data() + c * src.capacity(), src.mem_,
                 nVox() * sizeof(float));
    }
  }
}

std::string Array3D::describe(const char* kind) const {
  const Vec3Di& s = size();
  const Vec3Df& sp = spacing();
  const Vec3Df& o = origin();
  std::ostringstream os;
  os << kind << "(size=(" << s.x << ", " << s.y << ", " << s.z << "), spacing=(" << sp.x << ", " << sp.y
     << ", " << sp.z << "), origin=(" << o.x << ", " << o.y << ", " << o.z << "), mem=" << memTypeName(mem_)
     << ")";
  return os.str();
}

Image3D::Image3D(MemoryType mem) : Array3D(1, mem) {}
Image3D::Image3D(const GridInfo& grid, MemoryType mem) : Array3D(1, grid, mem) {}
Image3D::Image3D(const GridInfo& grid, std::shared_ptr<Buffer> buf) : Array3D(1, grid, std::move(buf)) {}

Image3D Image3D::clone() const { return clone(mem_); }
Image3D Image3D::clone(MemoryType mem) const {
  Image3D out(grid_, mem);
  out.copyFrom(*this);
  return out;
}

Field3D::Field3D(MemoryType mem) : Array3D(3, mem) {}
Field3D::Field3D(const GridInfo& grid, MemoryType mem) : Array3D(3, grid, mem) {}
Field3D::Field3D(const GridInfo& grid, std::shared_ptr<Buffer> buf) : Array3D(3, grid, std::move(buf)) {}

Field3D Field3D::clone() const { return clone(mem_); }
Field3D Field3D::clone(MemoryType mem) const {
  Field3D out(grid_, mem);
  out.copyFrom(*this);
  return out;
}

void Field3D::fill(const Vec3Df& v) {
  fillMemory(x(), mem_, nVox(), v.x);
  fillMemory(y(), mem_, nVox(), v.y);
  fillMemory(z(), mem_, nVox(), v.z);
}

}  // namespace pyca
