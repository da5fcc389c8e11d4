// Lazy loading of cuFFT and NVRTC (see cuda_libs.h): the cufft*/nvrtc* functions pyca calls are
// defined here with the signatures of <cufft.h> and <nvrtc.h> (the compiler checks them against
// the headers' declarations) and forward to the library found at the first call.
//
// A new call site of a function not listed below fails at link time (libpyca links with
// --no-undefined) naming the function: add one PYCA_FORWARD line for it.
#include "cuda_libs.h"

#include <cuda_runtime_api.h>
#include <cufft.h>
#include <dirent.h>
#include <dlfcn.h>
#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

#include "pyca/errors.h"

namespace pyca {
namespace cuda_rt {

namespace {

#define PYCA_STR2(x) #x
#define PYCA_STR(x) PYCA_STR2(x)

struct LibSpec {
  const char* what;     // "cuFFT"
  const char* soname;   // "libcufft.so.12"
  const char* wheel;    // folder of the NVIDIA wheel under site-packages
  const char* pipName;  // the PyPI package that holds it
};

// The sonames of the major versions pyca is compiled against, and the NVIDIA wheels holding them.
#if CUDART_VERSION >= 14000
#error "cuda_libs.cpp: add the library names and wheel folders of this CUDA major version"
#elif CUDART_VERSION >= 13000
const LibSpec kSpecs[2] = {
    {"cuFFT", "libcufft.so." PYCA_STR(CUFFT_VER_MAJOR), "nvidia/cu13/lib", "nvidia-cufft"},
    {"NVRTC", "libnvrtc.so.13", "nvidia/cu13/lib", "nvidia-cuda-nvrtc"},
};
#else
const LibSpec kSpecs[2] = {
    {"cuFFT", "libcufft.so." PYCA_STR(CUFFT_VER_MAJOR), "nvidia/cufft/lib", "nvidia-cufft-cu12"},
    {"NVRTC", "libnvrtc.so.12", "nvidia/cuda_nvrtc/lib", "nvidia-cuda-nvrtc-cu12"},
};
#endif

struct Loaded {
  std::once_flag once;
  void* handle = nullptr;
  std::string path;
  std::string error;
};
Loaded gLoaded[2];

std::vector<std::string> splitDirs(const char* s) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = s;; ++p) {
    if (*p == ':' || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return out;
}

// The folder holding libpyca (site-packages/pyca for an installed wheel).
std::string ownDir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaLibraryPath), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string f = info.dli_fname;
  const auto slash = f.rfind('/');
  return slash == std::string::npos ? std::string(".") : f.substr(0, slash);
}

bool fileExists(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f) std::fclose(f);
  return f != nullptr;
}

// NVRTC loads its builtins library (libnvrtc-builtins.so.MAJOR.MINOR) by name; loading the copy
// beside the chosen libnvrtc first makes that name resolve to it wherever the folder is.
void preloadNvrtcBuiltins(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return;
  const std::string prefix = "libnvrtc-builtins.so.";
  while (dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n.compare(0, prefix.size(), prefix) == 0) dlopen((dir + "/" + n).c_str(), RTLD_NOW | RTLD_GLOBAL);
  }
  closedir(d);
}

void* openIn(const std::string& dir, const LibSpec& spec, std::string* path) {
  const std::string p = dir + "/" + spec.soname;
  if (!fileExists(p)) return nullptr;
  if (&spec == &kSpecs[int(CudaLib::nvrtc)]) preloadNvrtcBuiltins(dir);
  void* h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h) *path = p;
  return h;
}

std::string loadedPath(void* h, const char* fallback) {
  char buf[4096] = {0};
  if (dlinfo(h, RTLD_DI_ORIGIN, buf) == 0 && buf[0]) return std::string(buf) + "/" + fallback;
  return fallback;
}

void load(CudaLib which) {
  const LibSpec& spec = kSpecs[int(which)];
  Loaded& L = gLoaded[int(which)];
  std::vector<std::string> searched;
  auto tryDir = [&](const std::string& dir) {
    if (L.handle || dir.empty()) return;
    searched.push_back(dir);
    L.handle = openIn(dir, spec, &L.path);
  };
  if (const char* env = std::getenv("PYCA_CUDA_LIB_DIRS")) {
    for (const auto& d : splitDirs(env)) tryDir(d);
    if (!L.handle) {
      std::string where;
      for (const auto& d : searched) where += (where.empty() ? "" : ", ") + d;
      L.error = std::string(spec.what) + " is not available: " + spec.soname +
                " is not in PYCA_CUDA_LIB_DIRS (" + (where.empty() ? std::string("empty") : where) + ")";
    }
    return;
  }
  // A copy some other extension loaded already.
  if ((L.handle = dlopen(spec.soname, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD))) {
    L.path = loadedPath(L.handle, spec.soname);
    return;
  }
  const std::string own = ownDir();
  if (!own.empty()) tryDir(own + "/../" + spec.wheel);
  // The same wheels in other folders of sys.path (a venv over system site-packages, the user's
  // site): `import pyca` lists the ones that exist here (pyca/_cuda_libs.py).
  if (const char* wheels = std::getenv("PYCA_CUDA_WHEEL_DIRS"))
    for (const auto& d : splitDirs(wheels)) tryDir(d);
  if (!L.handle) {
    searched.push_back("the system's library path");
    if ((L.handle = dlopen(spec.soname, RTLD_NOW | RTLD_LOCAL))) L.path = loadedPath(L.handle, spec.soname);
  }
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char* v = std::getenv(var)) tryDir(std::string(v) + "/lib64");
  tryDir("/usr/local/cuda/lib64");
  if (!L.handle) {
    std::string where;
    for (const auto& d : searched) where += (where.empty() ? "" : ", ") + d;
    L.error = std::string(spec.what) + " is not available: " + spec.soname + " was not found (searched " +
              where + "). Install it with `pip install pyca3d[cuda]` (the " + spec.pipName +
              " wheel) or the CUDA toolkit, or name its folder in PYCA_CUDA_LIB_DIRS";
  }
}

void* handleOf(CudaLib which) {
  Loaded& L = gLoaded[int(which)];
  std::call_once(L.once, load, which);
  if (!L.handle) throw CudaError(L.error);
  return L.handle;
}

// The library's function `name`, typed as the header declares it.
template <typename F>
F resolve(CudaLib which, const char* name) {
  void* h = handleOf(which);
  void* s = dlsym(h, name);
  if (!s)
    throw CudaError(std::string(kSpecs[int(which)].what) + " (" + gLoaded[int(which)].path +
                    ") has no function " + name +
                    ": the library is older than the headers pyca was built with");
  return reinterpret_cast<F>(s);
}

}  // namespace

std::string cudaLibraryPath(CudaLib lib) {
  handleOf(lib);
  return gLoaded[int(lib)].path;
}

const char* cudaLibrarySoname(CudaLib lib) { return kSpecs[int(lib)].soname; }

}  // namespace cuda_rt
}  // namespace pyca

// Each entry: the library, the return type, the name, the parameters, the arguments. The
// function is resolved once, at its first call.
#define PYCA_FORWARD(lib, ret, name, params, args)                                                        \
  ret name params {                                                                                       \
    static const auto fn = pyca::cuda_rt::resolve<decltype(&::name)>(pyca::cuda_rt::CudaLib::lib, #name); \
    return fn args;                                                                                       \
  }

extern "C" {

// ---- cuFFT --------------------------------------------------------------------------------------
PYCA_FORWARD(cufft, cufftResult, cufftCreate, (cufftHandle * h), (h))
PYCA_FORWARD(cufft, cufftResult, cufftDestroy, (cufftHandle p), (p))
PYCA_FORWARD(cufft, cufftResult, cufftGetVersion, (int* v), (v))
PYCA_FORWARD(cufft, cufftResult, cufftPlan1d, (cufftHandle * p, int nx, cufftType t, int batch),
             (p, nx, t, batch))
PYCA_FORWARD(cufft, cufftResult, cufftPlan2d, (cufftHandle * p, int nx, int ny, cufftType t), (p, nx, ny, t))
PYCA_FORWARD(cufft, cufftResult, cufftPlan3d, (cufftHandle * p, int nx, int ny, int nz, cufftType t),
             (p, nx, ny, nz, t))
PYCA_FORWARD(cufft, cufftResult, cufftPlanMany,
             (cufftHandle * p, int rank, int* n, int* inembed, int istride, int idist, int* onembed,
              int ostride, int odist, cufftType t, int batch),
             (p, rank, n, inembed, istride, idist, onembed, ostride, odist, t, batch))
PYCA_FORWARD(cufft, cufftResult, cufftMakePlanMany,
             (cufftHandle p, int rank, int* n, int* inembed, int istride, int idist, int* onembed,
              int ostride, int odist, cufftType t, int batch, size_t* work),
             (p, rank, n, inembed, istride, idist, onembed, ostride, odist, t, batch, work))
PYCA_FORWARD(cufft, cufftResult, cufftEstimateMany,
             (int rank, int* n, int* inembed, int istride, int idist, int* onembed, int ostride, int odist,
              cufftType t, int batch, size_t* work),
             (rank, n, inembed, istride, idist, onembed, ostride, odist, t, batch, work))
PYCA_FORWARD(cufft, cufftResult, cufftGetSize, (cufftHandle p, size_t* work), (p, work))
PYCA_FORWARD(cufft, cufftResult, cufftSetAutoAllocation, (cufftHandle p, int a), (p, a))
PYCA_FORWARD(cufft, cufftResult, cufftSetWorkArea, (cufftHandle p, void* w), (p, w))
PYCA_FORWARD(cufft, cufftResult, cufftSetStream, (cufftHandle p, cudaStream_t s), (p, s))
PYCA_FORWARD(cufft, cufftResult, cufftExecR2C, (cufftHandle p, cufftReal* i, cufftComplex* o), (p, i, o))
PYCA_FORWARD(cufft, cufftResult, cufftExecC2R, (cufftHandle p, cufftComplex* i, cufftReal* o), (p, i, o))
PYCA_FORWARD(cufft, cufftResult, cufftExecC2C, (cufftHandle p, cufftComplex* i, cufftComplex* o, int dir),
             (p, i, o, dir))

// ---- NVRTC --------------------------------------------------------------------------------------
PYCA_FORWARD(nvrtc, const char*, nvrtcGetErrorString, (nvrtcResult r), (r))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcVersion, (int* major, int* minor), (major, minor))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcGetNumSupportedArchs, (int* n), (n))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcGetSupportedArchs, (int* a), (a))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcCreateProgram,
             (nvrtcProgram * p, const char* src, const char* name, int nh, const char* const* hs,
              const char* const* names),
             (p, src, name, nh, hs, names))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcDestroyProgram, (nvrtcProgram * p), (p))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcCompileProgram, (nvrtcProgram p, int n, const char* const* o),
             (p, n, o))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcGetPTXSize, (nvrtcProgram p, size_t* n), (p, n))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcGetPTX, (nvrtcProgram p, char* s), (p, s))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcGetCUBINSize, (nvrtcProgram p, size_t* n), (p, n))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcGetCUBIN, (nvrtcProgram p, char* s), (p, s))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcGetLTOIRSize, (nvrtcProgram p, size_t* n), (p, n))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcGetLTOIR, (nvrtcProgram p, char* s), (p, s))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcGetProgramLogSize, (nvrtcProgram p, size_t* n), (p, n))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcGetProgramLog, (nvrtcProgram p, char* s), (p, s))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcAddNameExpression, (nvrtcProgram p, const char* const e), (p, e))
PYCA_FORWARD(nvrtc, nvrtcResult, nvrtcGetLoweredName, (nvrtcProgram p, const char* const e, const char** l),
             (p, e, l))

}  // extern "C"
