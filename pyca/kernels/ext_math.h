// Per-voxel math of pyca.ext's dispatched operations, written once: included by the CUDA kernels
// (pyca/kernels/ext.cu, under nvcc or NVRTC) and by the Cython CPU loops (pyca/_ext/loops.pyx).
// Plain C-compatible inline functions; no CUDA-only code.
#pragma once

#if defined(__CUDACC__)
#define PYCA_EXT_HD __host__ __device__ __forceinline__
#else
#define PYCA_EXT_HD static inline
#endif

// Residual of an image match: deformed - target.
PYCA_EXT_HD float pyca_ext_voxel_residual(float deformed, float target) { return deformed - target; }

// (a - b)^2.
PYCA_EXT_HD float pyca_ext_voxel_squared_diff(float a, float b) {
  const float d = a - b;
  return d * d;
}

// a * x + b * y.
PYCA_EXT_HD float pyca_ext_voxel_axpby(float a, float x, float b, float y) { return a * x + b * y; }
