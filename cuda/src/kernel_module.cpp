// NVRTC compilation, the CUDA runtime's library API, the registry of compiled-in kernels and
// launches, for pyca.cuda and pyca.dispatch (see kernel_module.h and docs/design/dispatch.md).
#include "kernel_module.h"

#include <cuda_runtime_api.h>
#include <nvrtc.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>

#include "cuda_libs.h"
#include "pyca/errors.h"
#include "pyca/kernel.cuh"
#include "pyca/runtime.h"

namespace pyca {
namespace cuda_rt {

namespace {

[[noreturn]] void nvrtcFail(const char* call, nvrtcResult r) {
  throw CudaError(std::string("NVRTC: ") + call + " failed: " + nvrtcGetErrorString(r));
}

[[noreturn]] void cudaFail(const std::string& what, cudaError_t err) {
  cudaGetLastError();  // clear a non-sticky error so that later calls are not blamed for it
  throw CudaError(what + ": " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) + ")");
}

// Destroys an nvrtcProgram on every path.
struct Program {
  nvrtcProgram p = nullptr;
  ~Program() {
    if (p) nvrtcDestroyProgram(&p);
  }
};

std::mutex& registryMutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, KernelInfo>& registry() {
  static std::map<std::string, KernelInfo> r;
  return r;
}

}  // namespace

// ---- NVRTC ------------------------------------------------------------------------------------

CompileResult compile(const std::string& source, const std::string& name,
                      const std::vector<std::string>& options,
                      const std::vector<std::pair<std::string, std::string>>& headers,
                      const std::vector<std::string>& nameExpressions) {
  std::vector<const char*> hdrBodies, hdrNames;
  for (const auto& h : headers) {
    hdrNames.push_back(h.first.c_str());
    hdrBodies.push_back(h.second.c_str());
  }
  Program prog;
  nvrtcResult r = nvrtcCreateProgram(&prog.p, source.c_str(), name.c_str(), int(headers.size()),
                                     hdrBodies.empty() ? nullptr : hdrBodies.data(),
                                     hdrNames.empty() ? nullptr : hdrNames.data());
  if (r != NVRTC_SUCCESS) nvrtcFail("nvrtcCreateProgram", r);
  for (const auto& e : nameExpressions) {
    r = nvrtcAddNameExpression(prog.p, e.c_str());
    if (r != NVRTC_SUCCESS) nvrtcFail("nvrtcAddNameExpression", r);
  }
  std::vector<const char*> opts;
  for (const auto& o : options) opts.push_back(o.c_str());
  const nvrtcResult cr = nvrtcCompileProgram(prog.p, int(opts.size()), opts.empty() ? nullptr : opts.data());

  CompileResult out;
  std::size_t logSize = 0;
  if (nvrtcGetProgramLogSize(prog.p, &logSize) == NVRTC_SUCCESS && logSize > 1) {
    out.log.resize(logSize);
    nvrtcGetProgramLog(prog.p, &out.log[0]);
    out.log.resize(logSize - 1);  // drop the terminating NUL
  }
  if (cr == NVRTC_ERROR_COMPILATION || cr == NVRTC_ERROR_INVALID_OPTION ||
      cr == NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID) {
    if (out.log.empty()) out.log = nvrtcGetErrorString(cr);
    out.ok = false;
    return out;
  }
  if (cr != NVRTC_SUCCESS) nvrtcFail("nvrtcCompileProgram", cr);

  // CUBIN exists when a real architecture (sm_XX) was asked for; otherwise take PTX.
  std::size_t n = 0;
  if (nvrtcGetCUBINSize(prog.p, &n) == NVRTC_SUCCESS && n > 0) {
    out.image.resize(n);
    r = nvrtcGetCUBIN(prog.p, &out.image[0]);
    if (r != NVRTC_SUCCESS) nvrtcFail("nvrtcGetCUBIN", r);
    out.cubin = true;
  } else {
    r = nvrtcGetPTXSize(prog.p, &n);
    if (r != NVRTC_SUCCESS) nvrtcFail("nvrtcGetPTXSize", r);
    out.image.resize(n);
    r = nvrtcGetPTX(prog.p, &out.image[0]);
    if (r != NVRTC_SUCCESS) nvrtcFail("nvrtcGetPTX", r);
    // Keep the PTX NUL-terminated (the loader needs it): std::string adds one after size().
    if (!out.image.empty() && out.image.back() == '\0') out.image.pop_back();
    out.cubin = false;
  }
  for (const auto& e : nameExpressions) {
    const char* lowered = nullptr;
    r = nvrtcGetLoweredName(prog.p, e.c_str(), &lowered);
    if (r != NVRTC_SUCCESS) nvrtcFail("nvrtcGetLoweredName", r);
    out.loweredNames.emplace_back(lowered ? lowered : "");
  }
  out.ok = true;
  return out;
}

std::string nvrtcLibraryPath() { return cudaLibraryPath(CudaLib::nvrtc); }
const char* nvrtcSoname() { return cudaLibrarySoname(CudaLib::nvrtc); }

std::pair<int, int> nvrtcVersion() {
  int major = 0, minor = 0;
  const nvrtcResult r = ::nvrtcVersion(&major, &minor);
  if (r != NVRTC_SUCCESS) nvrtcFail("nvrtcVersion", r);
  return {major, minor};
}

int deviceArch() {
  if (!cudaAvailable()) return 0;
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return 10 * major + minor;
}

// ---- Loaded code ------------------------------------------------------------------------------

Library::Library(const std::string& image) {
  requireCuda("loading a CUDA kernel module");
  cudaLibrary_t lib = nullptr;
  const cudaError_t err = cudaLibraryLoadData(&lib, image.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0);
  if (err != cudaSuccess) cudaFail("cudaLibraryLoadData (loading compiled kernels)", err);
  lib_ = lib;
}

Library::~Library() {
  if (lib_) {
    cudaLibraryUnload(static_cast<cudaLibrary_t>(lib_));
    cudaGetLastError();  // unloading at interpreter exit may fail harmlessly
  }
}

const void* Library::kernel(const std::string& name) const {
  cudaKernel_t k = nullptr;
  const cudaError_t err = cudaLibraryGetKernel(&k, static_cast<cudaLibrary_t>(lib_), name.c_str());
  if (err != cudaSuccess) {
    cudaGetLastError();
    throw ValueError("no kernel named '" + name + "' in the compiled module (" + cudaGetErrorName(err) + ")");
  }
  return reinterpret_cast<const void*>(k);
}

// ---- Registry ---------------------------------------------------------------------------------

bool registerKernel(const char* name, const void* func, const char* codes) {
  std::lock_guard<std::mutex> lock(registryMutex());
  registry()[name] = KernelInfo{name, func, codes};
  return true;
}

const KernelInfo* findKernel(const std::string& name) {
  std::lock_guard<std::mutex> lock(registryMutex());
  auto it = registry().find(name);
  return it == registry().end() ? nullptr : &it->second;  // entries are never erased
}

std::vector<KernelInfo> registeredKernels() {
  std::lock_guard<std::mutex> lock(registryMutex());
  std::vector<KernelInfo> out;
  for (const auto& kv : registry()) out.push_back(kv.second);
  return out;
}

// ---- Launching --------------------------------------------------------------------------------

std::size_t paramSize(char code) {
  switch (code) {
    case 'I':
      return sizeof(ImageView);
    case 'F':
      return sizeof(FieldView);
    case 'f':
    case 'i':
    case 'u':
      return 4;
    case 'd':
    case 'l':
    case 'L':
    case 'p':
      return 8;
    case 'b':
      return sizeof(bool);
    case 'V':
    case 'v':
      return 12;
    default:
      return 0;
  }
}

void checkParams(const char* op, const void* func, const std::string& codes) {
  // Sizes of the declared parameters. (The runtime API of CUDA 13.0 cannot count a kernel's
  // parameters without an error-returning probe, which tools such as compute-sanitizer report:
  // extra parameters beyond the declared ones go unnoticed.)
  for (std::size_t i = 0; i < codes.size(); ++i) {
    std::size_t offset = 0, size = 0;
    const cudaError_t err = cudaFuncGetParamInfo(func, i, &offset, &size);
    if (err != cudaSuccess) {
      cudaGetLastError();
      throw TypeError(std::string(op) + ": the kernel takes " + std::to_string(i) + " parameters, but " +
                      std::to_string(codes.size()) + " are declared");
    }
    if (size != paramSize(codes[i])) {
      throw TypeError(std::string(op) + ": kernel parameter " + std::to_string(i) + " has " +
                      std::to_string(size) + " bytes, but its declared kind '" + codes[i] + "' has " +
                      std::to_string(paramSize(codes[i])) +
                      " (was the kernel compiled against another pyca/kernel.cuh?)");
    }
  }
}

Dim3 defaultBlock(const Vec3Di& size) {
  if (size.z == 1) return Dim3{32, 8, 1};
  return Dim3{32, 4, 2};
}

Dim3 gridFor(const Vec3Di& size, const Dim3& block) {
  auto blocks = [](int n, unsigned b, unsigned long long cap) {
    const unsigned long long v = (static_cast<unsigned long long>(std::max(n, 1)) + b - 1) / b;
    return static_cast<unsigned>(std::min(v, cap));
  };
  const unsigned bx = std::max(block.x, 1u), by = std::max(block.y, 1u), bz = std::max(block.z, 1u);
  return Dim3{blocks(size.x, bx, 2147483647ull), blocks(size.y, by, 65535ull), blocks(size.z, bz, 65535ull)};
}

void launch(const char* op, const void* func, const Dim3& grid, const Dim3& block, std::size_t sharedMem,
            std::size_t stream, void** args) {
  const cudaError_t err =
      cudaLaunchKernel(func, dim3(grid.x, grid.y, grid.z), dim3(block.x, block.y, block.z), args, sharedMem,
                       reinterpret_cast<cudaStream_t>(stream));
  if (err != cudaSuccess) {
    cudaFail(std::string(op) + ": CUDA kernel launch failed (grid " + std::to_string(grid.x) + "x" +
                 std::to_string(grid.y) + "x" + std::to_string(grid.z) + ", block " +
                 std::to_string(block.x) + "x" + std::to_string(block.y) + "x" + std::to_string(block.z) +
                 ", " + std::to_string(sharedMem) + " bytes shared)",
             err);
  }
}

}  // namespace cuda_rt
}  // namespace pyca
