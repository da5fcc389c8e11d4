// Build-wide macros shared by the C++ core and the CUDA backend.
#pragma once

// Functions that the CPU loops and the CUDA kernels both call carry PYCA_HD:
// under nvcc they compile for host and device, elsewhere they are plain inline.
#if defined(__CUDACC__)
#define PYCA_HD __host__ __device__ __forceinline__
#else
#define PYCA_HD inline
#endif

// PYCA_HD for the per-voxel formulas that also run on the CPU's vectors of 16 floats
// (core/src/ops/simd16.h): always inlined on the host, even at -O0, since the functions that use them
// there are compiled for AVX-512, and a call between code of two instruction sets would pass the
// vectors by two different conventions.
#if defined(__CUDACC__)
#define PYCA_HD_LANES __host__ __device__ __forceinline__
#else
#define PYCA_HD_LANES inline __attribute__((always_inline))
#endif
