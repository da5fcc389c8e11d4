// Device availability and the current stream (pyca/runtime.h), with Python names.
%rename(cuda_available) pyca::cudaAvailable;
%rename(cuda_unavailable_reason) pyca::cudaUnavailableReason;
%rename(built_with_cuda) pyca::builtWithCuda;
%rename(device_info) pyca::deviceInfo;
%rename(GetNumberOfCUDADevices) pyca::cudaDeviceCount;
%rename(current_stream) pyca::currentStream;
%rename(set_current_stream) pyca::setCurrentStream;
%rename(synchronize) pyca::synchronize;
%ignore pyca::requireCuda;
%ignore pyca::checkLaunch;
%ignore pyca::detail::deviceAlloc;
%ignore pyca::detail::deviceFree;
%ignore pyca::detail::pinnedAlloc;
%ignore pyca::detail::pinnedFree;
%ignore pyca::detail::runtimeCopy;
%ignore pyca::detail::deviceFill;
%include "pyca/runtime.h"
