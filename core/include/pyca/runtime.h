// What the CUDA runtime offers pyca, with no CUDA types in the interface: the core builds and
// runs without CUDA, and then every call here that needs a GPU throws CudaError saying why.
#pragma once

#include <cstddef>
#include <string>

namespace pyca {

// True when pyca was built with its CUDA backend.
bool builtWithCuda();
// True when a CUDA device can be used now (built with CUDA, a driver and at least one GPU).
bool cudaAvailable();
// Why cudaAvailable() is false ("" when it is true).
std::string cudaUnavailableReason();
// Number of usable CUDA devices (0 without CUDA).
int cudaDeviceCount();
// "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.1 GiB), driver 13.0, runtime 13.0" or the reason.
std::string deviceInfo();
// The most device memory pyca's allocations held at once, in bytes, on the current device since the
// process started or the last resetDeviceMemoryPeak() (the stream-ordered pool's
// cudaMemPoolAttrUsedMemHigh). 0 without CUDA, or where no CUDA context was ever created (nothing
// was allocated there); asking starts no context.
std::size_t deviceMemoryPeak();
// Starts deviceMemoryPeak() again from the memory held now.
void resetDeviceMemoryPeak();
// Throws CudaError naming `what` when no GPU can be used.
void requireCuda(const char* what);
// The GPU pyca works on (PyCA's SetCUDADevice / GetCUDADevice). setDevice(d) makes d current for the
// calling thread and for every other thread at its next pyca device operation or allocation; memory
// allocated before stays on its GPU, and an operation given device memory of another GPU raises
// MemoryTypeError. Throws ValueError for a device out of range, CudaError without a usable GPU.
void setDevice(int device);
// The GPU pyca works on now: the one setDevice chose, else the calling thread's current device
// (0 unless the process chose another through CUDA); -1 without a usable GPU.
int getDevice();

// How the CPU loops of the fused LDDMM steps run here: "AVX-512, 16 voxels at once", or "scalar: "
// and the reason (no AVX-512 on this CPU, PYCA_CPU_SIMD=0, not an x86-64 build). Defined by the core
// (core/src/ops/lddmm_simd.cpp), with or without CUDA.
std::string cpuVectorInfo();

// The stream pyca enqueues its device work on (a cudaStream_t as an integer; 0 = legacy
// default stream). Set per thread; inherited by nothing else.
std::size_t currentStream();
void setCurrentStream(std::size_t stream);
// Waits for all work queued on pyca's current stream. Returns at once, starting no CUDA context,
// in a process whose device has none yet (nothing can be queued there).
void synchronize();
// Throws CudaError if the last kernel launch on this thread failed; names `op`.
void checkLaunch(const char* op);

namespace detail {
// Makes the device setDevice chose current on the calling thread (nothing when none was chosen);
// returns the calling thread's current device. Called before device work and allocations.
int useSelectedDevice();
// Backend entry points used by Buffer; implemented in cuda/src/runtime.cpp or, without CUDA,
// in core/src/no_cuda.cpp (which throws CudaError).
void* deviceAlloc(std::size_t bytes, int* device);
void deviceFree(void* p);
void* pinnedAlloc(std::size_t bytes);
void pinnedFree(void* p);
// Copy with the runtime (cudaMemcpyDefault); synchronous with respect to host memory.
void runtimeCopy(void* dst, const void* src, std::size_t bytes);
void deviceFill(float* dst, std::size_t count, float value);
}  // namespace detail

}  // namespace pyca
