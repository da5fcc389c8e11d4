// Argument checks every operation runs before touching memory, and the CPU/CUDA routing.
// Messages name the operation and the argument, e.g.
//   "Add: argument 'b' is in MEM_DEVICE memory but 'out' is in MEM_HOST memory".
#pragma once

#include <initializer_list>
#include <string>

#include "pyca/array3d.h"
#include "pyca/errors.h"

namespace pyca {
namespace detail {

struct Arg {
  const char* name;
  const Array3D* a;
};

// Checks that every argument has memory and that all live on the same side (host and pinned
// are one side); returns true when they are on the device. Throws MemoryTypeError / ValueError.
bool onDevice(const char* op, std::initializer_list<Arg> args);
// Largest y size of a device array: the kernels launch 8 rows per block along y, at most 65535 blocks.
constexpr int kMaxDeviceY = 65535 * 8;
// ValueError naming `op` and argument `name` when a device array of size `s` is beyond the CUDA
// kernels' launch extents (y <= kMaxDeviceY, x * y < 2^31); onDevice() runs it on device arguments.
void checkDeviceExtent(const char* op, const char* name, const Vec3Di& s);
// Checks that all arguments have the size of the first one (ValueError otherwise).
void checkSameSize(const char* op, std::initializer_list<Arg> args);
// onDevice + checkSameSize: the usual preamble of a voxel-wise operation.
bool prepare(const char* op, std::initializer_list<Arg> args);
// Throws ValueError when `out` shares memory with `in` (for operations that cannot run in place).
void checkNoAlias(const char* op, Arg out, Arg in);
// "17x23x31" and "(17, 23, 31)", for messages.
std::string sizeStr(const Vec3Di& s);
std::string vecStr(const Vec3Di& v);
// Throws ValueError unless `cond`; the message is "op: what".
void require(bool cond, const char* op, const char* what);

}  // namespace detail
}  // namespace pyca

// Calls a function of the CUDA backend, or, in a build without CUDA, throws CudaError naming
// the operation (device arguments cannot exist there, so this is only a guard).
#ifdef PYCA_WITH_CUDA
#define PYCA_CUDA_CALL(op, call) call
#else
#define PYCA_CUDA_CALL(op, call) throw ::pyca::CudaError(std::string(op) + ": pyca was built without CUDA")
#endif

// Runs `call`, a function that both backends define with the same arguments, on the CUDA backend
// (cuda_impl) when `dev`, else on the CPU loops (cpu_impl).
#define PYCA_BACKEND_RUN(dev, op, call)    \
  do {                                     \
    if (dev) {                             \
      PYCA_CUDA_CALL(op, cuda_impl::call); \
    } else {                               \
      cpu_impl::call;                      \
    }                                      \
  } while (0)
