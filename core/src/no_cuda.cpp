// The runtime entry points of a build without the CUDA backend: everything that would need a GPU
// throws CudaError saying so.
#ifndef PYCA_WITH_CUDA
#include <string>

#include "pyca/errors.h"
#include "pyca/runtime.h"

namespace pyca {

namespace {
const char* kReason = "pyca was built without CUDA (rebuild with -DPYCA_WITH_CUDA=ON and the CUDA toolkit)";
[[noreturn]] void fail(const char* what) { throw CudaError(std::string(what) + ": " + kReason); }
}  // namespace

bool builtWithCuda() { return false; }
bool cudaAvailable() { return false; }
std::string cudaUnavailableReason() { return kReason; }
int cudaDeviceCount() { return 0; }
std::string deviceInfo() { return std::string("no CUDA device: ") + kReason; }
void requireCuda(const char* what) { fail(what); }
void setDevice(int) { fail("SetCUDADevice"); }
int getDevice() { return -1; }
std::size_t deviceMemoryPeak() { return 0; }
void resetDeviceMemoryPeak() {}
std::size_t currentStream() { return 0; }
void setCurrentStream(std::size_t) { fail("setCurrentStream"); }
void synchronize() {}
void checkLaunch(const char*) {}

namespace detail {
int useSelectedDevice() { return -1; }
void* deviceAlloc(std::size_t, int*) { fail("allocating MEM_DEVICE memory"); }
void deviceFree(void*) {}
void* pinnedAlloc(std::size_t) { fail("allocating MEM_HOST_PINNED memory"); }
void pinnedFree(void*) {}
void runtimeCopy(void*, const void*, std::size_t) { fail("copying to or from device memory"); }
void deviceFill(float*, std::size_t, float) { fail("filling device memory"); }
}  // namespace detail

}  // namespace pyca
#endif
