#include "pyca/detail/checks.h"

#include <climits>
#include <cstdint>
#include <string>
#include <utility>

#include "pyca/detail/sizes.h"
#include "pyca/runtime.h"

namespace pyca {
namespace detail {

std::size_t checkedMul(std::size_t a, std::size_t b, const char* op, const char* what, std::size_t limit) {
  std::size_t r = 0;
  if (__builtin_mul_overflow(a, b, &r) || r > limit) {
    throw ValueError(std::string(op) + ": " + what + " of " + std::to_string(a) + " x " + std::to_string(b) +
                     " exceeds the largest size pyca supports (" + std::to_string(limit) + ")");
  }
  return r;
}

std::uint64_t checkedVoxels(long long nx, long long ny, long long nz, const char* op, const char* what,
                            std::uint64_t limit) {
  unsigned long long xy = 0, xyz = 0;
  const bool bad =
      nx < 0 || ny < 0 || nz < 0 ||
      __builtin_mul_overflow(static_cast<unsigned long long>(nx), static_cast<unsigned long long>(ny), &xy) ||
      __builtin_mul_overflow(xy, static_cast<unsigned long long>(nz), &xyz) || xyz > limit;
  if (bad) {
    throw ValueError(std::string(op) + ": " + what + " (" + std::to_string(nx) + ", " + std::to_string(ny) +
                     ", " + std::to_string(nz) + ") has more voxels than pyca supports (at most " +
                     std::to_string(limit) + ")");
  }
  return xyz;
}

std::string sizeStr(const Vec3Di& s) {
  return std::to_string(s.x) + "x" + std::to_string(s.y) + "x" + std::to_string(s.z);
}

std::string vecStr(const Vec3Di& v) {
  return "(" + std::to_string(v.x) + ", " + std::to_string(v.y) + ", " + std::to_string(v.z) + ")";
}

bool onDevice(const char* op, std::initializer_list<Arg> args) {
  const Arg* first = nullptr;
  for (const Arg& a : args) {
    if (!a.a || !a.a->data()) throw ValueError(std::string(op) + ": argument '" + a.name + "' has no memory");
    if (!first) {
      first = &a;
    } else if (isHostMem(a.a->memType()) != isHostMem(first->a->memType())) {
      throw MemoryTypeError(
          std::string(op) + ": argument '" + a.name + "' is in " + memTypeName(a.a->memType()) +
          " memory but '" + first->name + "' is in " + memTypeName(first->a->memType()) +
          " memory; move one with toType() so that all are on the host or all on the device");
    }
  }
  const bool dev = first && first->a->memType() == MEM_DEVICE;
  if (dev) {
    const int current = useSelectedDevice();  // SetCUDADevice's choice, on this thread too
    for (const Arg& a : args) {
      checkDeviceExtent(op, a.name, a.a->size());
      const int d = a.a->buffer() ? a.a->buffer()->device() : -1;
      if (d >= 0 && d != current) {
        throw MemoryTypeError(std::string(op) + ": argument '" + a.name + "' is on GPU " + std::to_string(d) +
                              " but pyca works on GPU " + std::to_string(current) +
                              " now (SetCUDADevice); copy it over with toType() through the host");
      }
    }
  }
  return dev;
}

void checkDeviceExtent(const char* op, const char* name, const Vec3Di& s) {
  // The CUDA kernels launch blocks of 8 rows along y (grid.y <= 65535) and index within an x-y plane
  // with 32-bit ints: grids beyond are refused here rather than failing to launch or wrapping.
  if (s.y > kMaxDeviceY || std::int64_t(s.x) * s.y > std::int64_t(INT_MAX)) {
    throw ValueError(std::string(op) + ": argument '" + name + "' of size " + sizeStr(s) +
                     " is beyond the GPU kernels' launch extents (y <= " + std::to_string(kMaxDeviceY) +
                     " and x * y < 2^31 voxels); process it on the host");
  }
}

void checkSameSize(const char* op, std::initializer_list<Arg> args) {
  const Arg* first = nullptr;
  for (const Arg& a : args) {
    if (!first) {
      first = &a;
    } else if (a.a->size() != first->a->size()) {
      throw ValueError(std::string(op) + ": size of '" + a.name + "' (" + sizeStr(a.a->size()) +
                       ") does not match size of '" + first->name + "' (" + sizeStr(first->a->size()) + ")");
    }
  }
}

bool prepare(const char* op, std::initializer_list<Arg> args) {
  const bool dev = onDevice(op, args);
  checkSameSize(op, args);
  return dev;
}

// The bytes an array's data occupy: from its first float to the end of its last component.
static std::pair<std::uintptr_t, std::uintptr_t> extent(const Array3D& a) {
  const auto lo = reinterpret_cast<std::uintptr_t>(a.data());
  const std::size_t floats = std::size_t(a.nComponents() - 1) * a.capacity() + a.nVox();
  return {lo, lo + floats * sizeof(float)};
}

void checkNoAlias(const char* op, Arg out, Arg in) {
  // Overlap of memory, not identity of objects: a view made with from_array, a component view or a
  // second object sharing a buffer aliases as much as the same object passed twice. Host and device
  // pointers never overlap (one address space), and onDevice() has put both on one side.
  bool overlap = out.a->buffer() && out.a->buffer() == in.a->buffer();
  if (!overlap && out.a->data() && in.a->data()) {
    const auto o = extent(*out.a), i = extent(*in.a);
    overlap = o.first < i.second && i.first < o.second;
  }
  if (overlap) {
    throw ValueError(std::string(op) + ": output '" + out.name + "' must not share memory with input '" +
                     in.name + "'");
  }
}

void require(bool cond, const char* op, const char* what) {
  if (!cond) throw ValueError(std::string(op) + ": " + what);
}

}  // namespace detail
}  // namespace pyca
