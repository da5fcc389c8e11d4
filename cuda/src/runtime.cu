// The CUDA runtime behind pyca: device availability, the current stream, and memory
// (device memory from the runtime's stream-ordered pool, pinned memory from cudaMallocHost).
#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <sstream>
#include <string>

#include "pyca/errors.h"
#include "pyca/runtime.h"

namespace pyca {

namespace {

thread_local std::size_t tl_stream = 0;
// The device setDevice chose (-1: none; each thread keeps the runtime's current device) and the one
// this thread last made current for it.
std::atomic<int> g_selectedDevice{-1};
thread_local int tl_appliedDevice = -1;

struct Availability {
  int count = 0;
  std::string reason;
};

// Whether the NVIDIA driver's library can be loaded at all (the static runtime loads the same name).
bool driverLibraryPresent() {
  void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (h == nullptr) return false;
  dlclose(h);
  return true;
}

const Availability& availability() {
  static Availability a;
  static std::once_flag once;
  std::call_once(once, [] {
    int n = 0;
    cudaError_t err = cudaGetDeviceCount(&n);
    if (err == cudaErrorInsufficientDriver && !driverLibraryPresent()) {
      // The runtime says "driver version is insufficient" when there is no driver at all.
      a.reason = "no NVIDIA driver (libcuda.so.1 not found): pyca runs on the CPU";
    } else if (err != cudaSuccess) {
      a.reason = std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(err) + ")";
      cudaGetLastError();
      n = 0;
    } else if (n == 0) {
      a.reason = "no CUDA device found";
    }
    a.count = n;
  });
  return a;
}

cudaStream_t stream() { return reinterpret_cast<cudaStream_t>(tl_stream); }

[[noreturn]] void fail(const char* call, cudaError_t err) {
  cudaGetLastError();  // clear a non-sticky error so later calls are not blamed for it
  throw CudaError(std::string(call) + " failed: " + cudaGetErrorName(err) + " (" + cudaGetErrorString(err) +
                  ")");
}

void check(cudaError_t err, const char* call) {
  if (err != cudaSuccess) fail(call, err);
}

// Keep freed blocks in the pool instead of returning them to the driver at each synchronisation:
// repeated allocations of same-sized temporaries then cost nothing.
void setupPool(int device) {
  static std::mutex m;
  static std::uint64_t done = 0;  // one bit per device ordinal below 64
  std::lock_guard<std::mutex> lock(m);
  const std::uint64_t bit = device >= 0 && device < 64 ? std::uint64_t(1) << device : 0;
  if (bit == 0 || (done & bit) != 0) return;
  done |= bit;
  cudaMemPool_t pool;
  if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess) {
    std::uint64_t threshold = UINT64_MAX;
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold);
  }
  cudaGetLastError();
}

__global__ void fillKernel(float* __restrict__ dst, std::size_t n, float v) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    dst[i] = v;
  }
}

}  // namespace

bool builtWithCuda() { return true; }
bool cudaAvailable() { return availability().count > 0; }
std::string cudaUnavailableReason() { return availability().reason; }
int cudaDeviceCount() { return availability().count; }

void requireCuda(const char* what) {
  if (!cudaAvailable()) throw CudaError(std::string(what) + ": " + availability().reason);
}

void setDevice(int device) {
  requireCuda("SetCUDADevice");
  const int n = cudaDeviceCount();
  if (device < 0 || device >= n) {
    throw ValueError("SetCUDADevice: device " + std::to_string(device) +
                     " is out of range: " + std::to_string(n) + " CUDA device" + (n == 1 ? "" : "s") +
                     " (0.." + std::to_string(n - 1) + ") can be used");
  }
  check(cudaSetDevice(device), "cudaSetDevice");
  g_selectedDevice.store(device);
  tl_appliedDevice = device;
}

int getDevice() {
  if (!cudaAvailable()) return -1;
  const int s = g_selectedDevice.load();
  if (s >= 0) return s;
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  return dev;
}

namespace detail {
int useSelectedDevice() {
  const int s = g_selectedDevice.load();
  if (s >= 0) {
    if (tl_appliedDevice != s) {
      check(cudaSetDevice(s), "cudaSetDevice");
      tl_appliedDevice = s;
    }
    return s;
  }
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  return dev;
}
}  // namespace detail

std::string deviceInfo() {
  if (!cudaAvailable()) return availability().reason;
  const int dev = detail::useSelectedDevice();
  cudaDeviceProp p;
  check(cudaGetDeviceProperties(&p, dev), "cudaGetDeviceProperties");
  int drv = 0, rt = 0;
  cudaDriverGetVersion(&drv);
  cudaRuntimeGetVersion(&rt);
  std::ostringstream os;
  os.precision(1);
  os << std::fixed << p.name << " (sm_" << p.major << p.minor << ", " << p.multiProcessorCount << " SMs, "
     << double(p.totalGlobalMem) / double(1ull << 30) << " GiB), device " << dev << " of "
     << cudaDeviceCount() << ", driver " << drv / 1000 << "." << (drv % 1000) / 10 << ", runtime "
     << rt / 1000 << "." << (rt % 1000) / 10;
  return os.str();
}

std::size_t currentStream() { return tl_stream; }
void setCurrentStream(std::size_t s) { tl_stream = s; }

namespace {

// Whether the current device's primary context (the one the runtime, and so pyca, CuPy and PyTorch,
// put work on) exists. Without it no work can be pending, and cudaStreamSynchronize would create it:
// hundreds of MiB of device memory for a process that never used the GPU. Asked of the driver
// through the runtime's entry-point table, so the library still links no libcuda. True when the
// driver cannot say (the old behaviour: synchronise).
bool primaryContextActive() {
  using DeviceGet = int (*)(int*, int);
  using GetState = int (*)(int, unsigned int*, int*);
  static DeviceGet deviceGet = nullptr;
  static GetState getState = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    auto entry = [](const char* name) -> void* {
      void* f = nullptr;
      cudaDriverEntryPointQueryResult q{};
#if CUDART_VERSION >= 12050
      cudaError_t err = cudaGetDriverEntryPointByVersion(name, &f, 12000, cudaEnableDefault, &q);
#else
      cudaError_t err = cudaGetDriverEntryPoint(name, &f, cudaEnableDefault, &q);
#endif
      cudaGetLastError();
      return err == cudaSuccess && q == cudaDriverEntryPointSuccess ? f : nullptr;
    };
    void* a = entry("cuDeviceGet");
    void* b = entry("cuDevicePrimaryCtxGetState");
    if (a != nullptr && b != nullptr) {
      deviceGet = reinterpret_cast<DeviceGet>(a);
      getState = reinterpret_cast<GetState>(b);
    }
  });
  int ordinal = 0, dev = 0, active = 1;
  unsigned int flags = 0;
  if (getState == nullptr || cudaGetDevice(&ordinal) != cudaSuccess || deviceGet(&dev, ordinal) != 0 ||
      getState(dev, &flags, &active) != 0) {
    cudaGetLastError();
    return true;
  }
  return active != 0;
}

}  // namespace

std::size_t deviceMemoryPeak() {
  if (!cudaAvailable() || !primaryContextActive()) return 0;
  int dev = 0;
  cudaMemPool_t pool;
  std::uint64_t high = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetDefaultMemPool(&pool, dev) != cudaSuccess ||
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return static_cast<std::size_t>(high);
}

void resetDeviceMemoryPeak() {
  if (!cudaAvailable() || !primaryContextActive()) return;
  int dev = 0;
  cudaMemPool_t pool;
  std::uint64_t zero = 0;  // (the pool sets the high-water mark to the memory in use now)
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetDefaultMemPool(&pool, dev) != cudaSuccess ||
      cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero) != cudaSuccess) {
    cudaGetLastError();
  }
}

void synchronize() {
  if (!cudaAvailable() || !primaryContextActive()) return;
  check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
}

void checkLaunch(const char* op) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    throw CudaError(std::string(op) + ": CUDA kernel launch failed: " + cudaGetErrorName(err) + " (" +
                    cudaGetErrorString(err) + ")");
  }
}

namespace detail {

void* deviceAlloc(std::size_t bytes, int* device) {
  requireCuda("allocating MEM_DEVICE memory");
  *device = useSelectedDevice();
  setupPool(*device);
  void* p = nullptr;
  cudaError_t err = cudaMallocAsync(&p, bytes, stream());
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw OutOfMemory("out of device memory allocating " + std::to_string(bytes) +
                      " bytes (cudaMallocAsync)");
  }
  check(err, "cudaMallocAsync");
  return p;
}

void deviceFree(void* p) { cudaFreeAsync(p, stream()); }

void* pinnedAlloc(std::size_t bytes) {
  requireCuda("allocating MEM_HOST_PINNED memory");
  void* p = nullptr;
  cudaError_t err = cudaMallocHost(&p, bytes);
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw OutOfMemory("out of pinned host memory allocating " + std::to_string(bytes) +
                      " bytes (cudaMallocHost)");
  }
  check(err, "cudaMallocHost");
  return p;
}

void pinnedFree(void* p) { cudaFreeHost(p); }

void runtimeCopy(void* dst, const void* src, std::size_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream()), "cudaMemcpyAsync");
  // A host side must hold its data when we return; device-to-device copies stay asynchronous.
  cudaPointerAttributes ad, as;
  const bool devDst = cudaPointerGetAttributes(&ad, dst) == cudaSuccess && ad.type == cudaMemoryTypeDevice;
  const bool devSrc = cudaPointerGetAttributes(&as, src) == cudaSuccess && as.type == cudaMemoryTypeDevice;
  cudaGetLastError();
  if (!(devDst && devSrc)) check(cudaStreamSynchronize(stream()), "cudaStreamSynchronize");
}

void deviceFill(float* dst, std::size_t count, float value) {
  if (count == 0) return;
  const unsigned block = 256;
  const unsigned grid = unsigned(std::min<std::size_t>((count + block - 1) / block, 65535u * 8));
  fillKernel<<<grid, block, 0, stream()>>>(dst, count, value);
  checkLaunch("fill");
}

}  // namespace detail
}  // namespace pyca
