// Kernels that pyca launches for Python (pyca.cuda, pyca.dispatch): run-time compilation with
// NVRTC, loading with the CUDA runtime's library API (cudaLibraryLoadData, so libpyca never links
// libcuda), kernels compiled into the library and registered by name, and launches.
// No CUDA types here: kernel handles travel as `const void*` (a cudaKernel_t, or the host stub of
// a __global__ function, both accepted by cudaLaunchKernel).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "pyca/vec3.h"

namespace pyca {
namespace cuda_rt {

// ---- NVRTC ------------------------------------------------------------------------------------
struct CompileResult {
  bool ok = false;
  std::string log;                        // the compiler's log (warnings too), also on success
  std::string image;                      // CUBIN (sm_XX) or PTX (compute_XX); empty on failure
  bool cubin = false;                     // image is CUBIN (else PTX)
  std::vector<std::string> loweredNames;  // one per name expression, in order
};

// Compiles CUDA C++ `source` (named `name` in messages). `options` go to nvrtcCompileProgram
// as they are (give --gpu-architecture=sm_XX for CUBIN, compute_XX for PTX). `headers` are
// (include name, contents) pairs resolved before the include path. `nameExpressions` are
// kernels with C++ linkage whose mangled names are wanted. Compile errors are returned (ok ==
// false, the log says why), not thrown; NVRTC failures of another kind throw CudaError.
CompileResult compile(const std::string& source, const std::string& name,
                      const std::vector<std::string>& options,
                      const std::vector<std::pair<std::string, std::string>>& headers,
                      const std::vector<std::string>& nameExpressions);
// NVRTC's version (major, minor).
std::pair<int, int> nvrtcVersion();
// The file libnvrtc was loaded from (loading it now if it was not), and the file name the loader
// opens (libnvrtc.so.MAJOR) without loading it.
std::string nvrtcLibraryPath();
const char* nvrtcSoname();
// 10 * major + minor of the current device's compute capability, 0 when no device can be used.
int deviceArch();

// ---- Loaded code ------------------------------------------------------------------------------
// A CUBIN or PTX image loaded into the CUDA runtime (all devices). Needs a usable GPU.
class Library {
 public:
  explicit Library(const std::string& image);  // throws CudaError
  ~Library();
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  // The kernel named `name` (the mangled name for C++ linkage); throws ValueError if absent.
  const void* kernel(const std::string& name) const;

 private:
  void* lib_ = nullptr;  // cudaLibrary_t
};

// ---- Kernels compiled into the library --------------------------------------------------------
struct KernelInfo {
  std::string name;
  const void* func = nullptr;  // host stub of the __global__ function
  std::string codes;           // parameter kinds, one letter each (see paramSize)
};
// Registers a kernel (PYCA_REGISTER_KERNEL in pyca/kernel.cuh calls this at load time). A second
// registration of a name replaces the first.
bool registerKernel(const char* name, const void* func, const char* codes);
// The kernel registered as `name`, or nullptr.
const KernelInfo* findKernel(const std::string& name);
std::vector<KernelInfo> registeredKernels();

// ---- Launching --------------------------------------------------------------------------------
// Size in bytes of a parameter of kind `code`: I ImageView, F FieldView, f float, d double, i int,
// u unsigned, l int64, L uint64, b bool, V Vec3Df, v Vec3Di, p pointer. 0 for an unknown code.
std::size_t paramSize(char code);
// Checks that `func` takes at least the parameters `codes` describe, with their sizes; throws
// TypeError naming `op` otherwise. Needs a usable GPU.
void checkParams(const char* op, const void* func, const std::string& codes);

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};
// Default block for a grid of size `size`: 256 threads, 3-D (32x4x2), or 32x8x1 on a 2-D grid.
Dim3 defaultBlock(const Vec3Di& size);
// Blocks covering `size` with `block`, capped to the device's limits (kernels loop over voxels).
Dim3 gridFor(const Vec3Di& size, const Dim3& block);
// Launches `func` on `stream` (a cudaStream_t as an integer). `args[i]` points at parameter i.
// Launch errors throw CudaError naming `op`; nothing synchronises.
void launch(const char* op, const void* func, const Dim3& grid, const Dim3& block, std::size_t sharedMem,
            std::size_t stream, void** args);

}  // namespace cuda_rt
}  // namespace pyca
