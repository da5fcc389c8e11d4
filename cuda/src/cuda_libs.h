// cuFFT and NVRTC are not linked into libpyca: they are loaded the first time pyca calls them
// (cuda_libs.cpp defines the cufft*/nvrtc* entry points pyca uses and forwards each through
// dlsym), so that `import pyca` works without them and a binary wheel carries no absolute path
// to a CUDA toolkit. Call sites use the ordinary names from <cufft.h> and <nvrtc.h>.
//
// Where each library is looked for, first hit wins:
//   1. PYCA_CUDA_LIB_DIRS (folders separated by ':'), when set: there only;
//   2. a copy already loaded in the process (PyTorch, CuPy, ...);
//   3. the NVIDIA wheels beside the pyca package (pip install pyca3d[cuda]):
//      site-packages/nvidia/cu13/lib (CUDA 13), nvidia/cufft/lib and nvidia/cuda_nvrtc/lib (CUDA 12),
//      then those of the other sys.path folders (`import pyca` lists them in PYCA_CUDA_WHEEL_DIRS);
//   4. the system's library path (LD_LIBRARY_PATH, ldconfig);
//   5. $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64.
// When none has it, the call throws pyca::CudaError naming the library and how to install it.
#pragma once

#include <string>

namespace pyca {
namespace cuda_rt {

enum class CudaLib { cufft, nvrtc };

// The file the library was loaded from, loading it now if it was not; throws CudaError when it
// cannot be found (the message names the library, the folders searched and how to install it).
std::string cudaLibraryPath(CudaLib lib);

// The library's file name as the loader opens it (libnvrtc.so.13, ...), without loading it.
const char* cudaLibrarySoname(CudaLib lib);

}  // namespace cuda_rt
}  // namespace pyca
