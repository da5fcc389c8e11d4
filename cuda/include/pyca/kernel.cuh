// The standard convention of kernels launched by pyca's dispatcher (pyca.dispatch.pyca_dispatch,
// pyca.cuda.Function): every Image3D argument arrives as an ImageView, every Field3D argument as a
// FieldView, so the grid (size, spacing, origin) always reaches a kernel the same way.
//
// This header compiles three ways: under nvcc (kernels built into libpyca, registered by name with
// PYCA_REGISTER_KERNEL), under NVRTC (pyca.cuda.SourceModule; pyca supplies the few standard
// headers that pyca/vec3.h needs), and as plain C++ (the host side packs arguments into these
// structs). The layouts below are fixed: pyca/cuda.py mirrors them, and static_asserts keep them.
//
//   #include <pyca/kernel.cuh>
//   extern "C" __global__ void scale(pyca::ImageView out, pyca::ImageView in, float s) {
//     PYCA_FOR_EACH_VOXEL(out.size, x, y, z) {
//       const size_t i = out.index(x, y, z);
//       out.data[i] = s * in.data[i];
//     }
//   }
//
// Launch configuration: by default 3-D blocks of 256 threads over the grid of the output (the
// first array argument), capped to the device's grid limits; kernels must therefore loop with
// PYCA_FOR_EACH_VOXEL (a 3-D grid-stride loop), which is correct for any configuration.
#pragma once

#include "pyca/config.h"
#include "pyca/vec3.h"

namespace pyca {

// An Image3D as a kernel sees it: data[x + size.x * (y + size.y * z)], x fastest.
struct ImageView {
  float* data;
  Vec3Di size;
  Vec3Df spacing;  // world units per voxel
  Vec3Df origin;   // world position of voxel (0, 0, 0)

  PYCA_HD unsigned long long nVox() const {
    return (unsigned long long)size.x * (unsigned long long)size.y * (unsigned long long)size.z;
  }
  // Linear index of voxel (x, y, z), 64-bit.
  PYCA_HD unsigned long long index(int x, int y, int z) const {
    return ((unsigned long long)z * (unsigned long long)size.y + (unsigned long long)y) *
               (unsigned long long)size.x +
           (unsigned long long)x;
  }
  PYCA_HD float& operator()(int x, int y, int z) const { return data[index(x, y, z)]; }
  PYCA_HD bool contains(int x, int y, int z) const {
    return x >= 0 && y >= 0 && z >= 0 && x < size.x && y < size.y && z < size.z;
  }
  // World coordinates of voxel (x, y, z): origin + spacing * index.
  PYCA_HD Vec3Df world(int x, int y, int z) const {
    return origin + spacing * Vec3Df(float(x), float(y), float(z));
  }
};

// A Field3D as a kernel sees it: three planes x, y, z, each laid out like an ImageView's data.
struct FieldView {
  float* x;
  float* y;
  float* z;
  Vec3Di size;
  Vec3Df spacing;
  Vec3Df origin;

  PYCA_HD unsigned long long nVox() const {
    return (unsigned long long)size.x * (unsigned long long)size.y * (unsigned long long)size.z;
  }
  PYCA_HD unsigned long long index(int i, int j, int k) const {
    return ((unsigned long long)k * (unsigned long long)size.y + (unsigned long long)j) *
               (unsigned long long)size.x +
           (unsigned long long)i;
  }
  PYCA_HD Vec3Df get(unsigned long long i) const { return Vec3Df(x[i], y[i], z[i]); }
  PYCA_HD void set(unsigned long long i, const Vec3Df& v) const {
    x[i] = v.x;
    y[i] = v.y;
    z[i] = v.z;
  }
  PYCA_HD bool contains(int i, int j, int k) const {
    return i >= 0 && j >= 0 && k >= 0 && i < size.x && j < size.y && k < size.z;
  }
  PYCA_HD Vec3Df world(int i, int j, int k) const {
    return origin + spacing * Vec3Df(float(i), float(j), float(k));
  }
};

static_assert(sizeof(Vec3Df) == 12 && sizeof(Vec3Di) == 12,
              "pyca kernel views: Vec3 must be 3 packed values");
static_assert(sizeof(ImageView) == 48, "pyca::ImageView layout is fixed (pyca/cuda.py mirrors it)");
static_assert(sizeof(FieldView) == 64, "pyca::FieldView layout is fixed (pyca/cuda.py mirrors it)");

}  // namespace pyca

#if defined(__CUDACC__)
// 3-D grid-stride loop over the voxels of a grid of size `sz` (a Vec3Di): declares int x, y, z.
// Correct for any launch configuration (each voxel is visited by exactly one thread).
#define PYCA_FOR_EACH_VOXEL(sz, X, Y, Z)                                                                   \
  for (int Z = int(blockIdx.z * blockDim.z + threadIdx.z); Z < (sz).z; Z += int(gridDim.z * blockDim.z))   \
    for (int Y = int(blockIdx.y * blockDim.y + threadIdx.y); Y < (sz).y; Y += int(gridDim.y * blockDim.y)) \
      for (int X = int(blockIdx.x * blockDim.x + threadIdx.x); X < (sz).x; X += int(gridDim.x * blockDim.x))

namespace pyca {
namespace kernel {
// The voxel this thread starts at (first iteration of PYCA_FOR_EACH_VOXEL).
__device__ __forceinline__ Vec3Di threadVoxel() {
  return Vec3Di(int(blockIdx.x * blockDim.x + threadIdx.x), int(blockIdx.y * blockDim.y + threadIdx.y),
                int(blockIdx.z * blockDim.z + threadIdx.z));
}
}  // namespace kernel
}  // namespace pyca
#endif

// ---------------------------------------------------------------------------------------------
// Kernels compiled into a library with nvcc register themselves by name, so that Python finds
// them (pyca.cuda.get_kernel(name)); the parameter kinds are taken from the function's type.
// Under NVRTC the macro expands to nothing, so one .cu file serves both ways.
#if defined(__CUDACC__) && !defined(__CUDACC_RTC__)
namespace pyca {
namespace cuda_rt {
// Defined in libpyca (cuda/src/kernel_module.cpp). `codes` has one letter a parameter (see
// ParamCode); returns true so that it can initialise a static.
bool registerKernel(const char* name, const void* func, const char* codes);

template <class T>
struct ParamCode;  // no definition: a parameter type pyca cannot pass is a compile error
#define PYCA_PARAM_CODE(T, C)        \
  template <>                        \
  struct ParamCode<T> {              \
    static constexpr char value = C; \
  }
PYCA_PARAM_CODE(ImageView, 'I');
PYCA_PARAM_CODE(FieldView, 'F');
PYCA_PARAM_CODE(float, 'f');
PYCA_PARAM_CODE(double, 'd');
PYCA_PARAM_CODE(int, 'i');
PYCA_PARAM_CODE(unsigned int, 'u');
PYCA_PARAM_CODE(long, 'l');
PYCA_PARAM_CODE(long long, 'l');
PYCA_PARAM_CODE(unsigned long, 'L');
PYCA_PARAM_CODE(unsigned long long, 'L');
PYCA_PARAM_CODE(bool, 'b');
PYCA_PARAM_CODE(Vec3Df, 'V');
PYCA_PARAM_CODE(Vec3Di, 'v');
#undef PYCA_PARAM_CODE
template <class T>
struct ParamCode<T*> {
  static constexpr char value = 'p';
};

template <class... A>
inline const char* paramCodes(void (*)(A...)) {
  static const char codes[] = {ParamCode<A>::value..., '\0'};
  return codes;
}
template <class... A>
inline bool registerKernelFn(const char* name, void (*fn)(A...)) {
  return registerKernel(name, reinterpret_cast<const void*>(fn), paramCodes(fn));
}
}  // namespace cuda_rt
}  // namespace pyca

#define PYCA_KERNEL_CONCAT2(a, b) a##b
#define PYCA_KERNEL_CONCAT(a, b) PYCA_KERNEL_CONCAT2(a, b)
// Registers __global__ function `fn` under the name `name` (a string).
#define PYCA_REGISTER_KERNEL_AS(name, fn)                                                    \
  static const bool PYCA_KERNEL_CONCAT(pyca_registered_kernel_, __LINE__) [[maybe_unused]] = \
      ::pyca::cuda_rt::registerKernelFn(name, fn)
// Registers __global__ function `fn` under its own name.
#define PYCA_REGISTER_KERNEL(fn) PYCA_REGISTER_KERNEL_AS(#fn, fn)
#else
#define PYCA_REGISTER_KERNEL_AS(name, fn)
#define PYCA_REGISTER_KERNEL(fn)
#endif
