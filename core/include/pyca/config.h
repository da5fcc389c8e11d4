// Build-wide macros shared by the C++ core and the CUDA backend.
#pragma once

// Functions that the CPU loops and the CUDA kernels both call carry PYCA_HD:
// under nvcc they compile for host and device, elsewhere they are plain inline.
#if defined(__CUDACC__)
#define PYCA_HD __host__ __device__ __forceinline__
#else
#define PYCA_HD inline
#endif
