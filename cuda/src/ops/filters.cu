// CUDA backend of the `filters` family, spatial part: separable Gaussian (one pass per axis,
// shared-memory tiles with clamped halos) and small-kernel convolution. Work is queued on pyca's
// current stream; scratch comes from the stream-ordered pool; nothing synchronises (except the
// copy of the weights of a kernel radius > 255, from pageable host memory).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "ops/cuda_common.cuh"
#include "ops/filters_cuda.h"
#include "pyca/errors.h"
#include "pyca/math/filters.h"
#include "pyca/runtime.h"

namespace pyca {
namespace cuda_impl {

namespace {

constexpr const char* kGaussOp = "GaussianFilter";

constexpr int kMaxParamR = 255;
constexpr int kSharedLimit = 48 * 1024;  // bytes of dynamic shared memory without opting in

// Half kernel passed by value (kernel parameter space, broadcast reads).
struct ParamW {
  float w[kMaxParamR + 1];
  __device__ float operator[](int j) const { return w[j]; }
};
// Half kernel in device memory (radius > kMaxParamR).
struct GlobalW {
  const float* p;
  __device__ float operator[](int j) const { return __ldg(p + j); }
};

__device__ __forceinline__ int clampi(int i, int n) { return i < 0 ? 0 : (i >= n ? n - 1 : i); }

// Pass along x (contiguous): each block convolves TX outputs of one row at a time.
constexpr int TX = 128;
template <class W>
__global__ void convX(float* __restrict__ out, const float* __restrict__ in, int nx, long long rows, int r,
                      W w) {
  extern __shared__ float sh[];  // TX + 2r
  const int x0 = blockIdx.x * TX;
  const int len = TX + 2 * r;
  for (long long row = blockIdx.y; row < rows; row += gridDim.y) {
    const float* src = in + row * nx;
    __syncthreads();
    for (int k = threadIdx.x; k < len; k += blockDim.x) sh[k] = src[clampi(x0 - r + k, nx)];
    __syncthreads();
    const int x = x0 + threadIdx.x;
    if (x < nx) {
      const float* c = sh + r + threadIdx.x;
      float acc = w[0] * c[0];
      for (int j = 1; j <= r; ++j) acc += w[j] * (c[-j] + c[j]);
      out[row * nx + x] = acc;
    }
  }
}

// Pass along a strided axis (y or z): blocks of 32 x-columns by TA outputs along the axis, with a
// (TA + 2r) x 32 tile in shared memory; `o` runs over the remaining axis.
constexpr int TA = 64, BY = 8;
template <class W>
__global__ void convAxis(float* __restrict__ out, const float* __restrict__ in, int nx, int nA, int nO,
                         long long strideA, long long strideO, int r, W w) {
  extern __shared__ float sh[];  // (TA + 2r) * 32
  const int x = blockIdx.x * 32 + threadIdx.x;
  const int a0 = blockIdx.y * TA;
  const int len = TA + 2 * r;
  for (int o = blockIdx.z; o < nO; o += gridDim.z) {
    const float* base = in + (long long)o * strideO;
    __syncthreads();
    for (int k = threadIdx.y; k < len; k += BY) {
      const int ai = clampi(a0 - r + k, nA);
      sh[k * 32 + threadIdx.x] = x < nx ? base[ai * strideA + x] : 0.f;
    }
    __syncthreads();
    if (x < nx) {
      for (int t = threadIdx.y; t < TA && a0 + t < nA; t += BY) {
        const float* c = sh + (t + r) * 32 + threadIdx.x;
        float acc = w[0] * c[0];
        for (int j = 1; j <= r; ++j) acc += w[j] * (c[-j * 32] + c[j * 32]);
        out[(long long)o * strideO + (long long)(a0 + t) * strideA + x] = acc;
      }
    }
  }
}

// Any axis, straight from global memory (radii too large for the shared-memory tiles).
template <class W>
__global__ void convSimple(float* __restrict__ out, const float* __restrict__ in, int nx, int ny, int nz,
                           int axis, int r, W w) {
  const std::size_t n = std::size_t(nx) * ny * nz, nxy = std::size_t(nx) * ny;
  const long long stride = axis == 0 ? 1 : (axis == 1 ? nx : (long long)nxy);
  const int na = axis == 0 ? nx : (axis == 1 ? ny : nz);
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t z = i / nxy, rem = i - z * nxy, y = rem / nx, x = rem - y * nx;
    const int a = axis == 0 ? int(x) : (axis == 1 ? int(y) : int(z));
    const float* c = in + i;
    float acc = w[0] * c[0];
    for (int j = 1; j <= r; ++j) {
      acc += w[j] * (c[(long long)(clampi(a - j, na) - a) * stride] +
                     c[(long long)(clampi(a + j, na) - a) * stride]);
    }
    out[i] = acc;
  }
}

template <class W>
void pass(float* out, const float* in, const Vec3Di& s, int axis, int r, const W& w) {
  const int nx = s.x, ny = s.y, nz = s.z;
  cudaStream_t st = stream();
  if (axis == 0) {
    const std::size_t shm = std::size_t(TX + 2 * r) * sizeof(float);
    if (shm <= std::size_t(kSharedLimit)) {
      const long long rows = (long long)ny * nz;
      dim3 grid(unsigned((nx + TX - 1) / TX), unsigned(std::min<long long>(rows, 65535)));
      convX<<<grid, TX, shm, st>>>(out, in, nx, rows, r, w);
      pyca::checkLaunch("GaussianFilter");
      return;
    }
  } else {
    const std::size_t shm = std::size_t(TA + 2 * r) * 32 * sizeof(float);
    if (shm <= std::size_t(kSharedLimit)) {
      const int nA = axis == 1 ? ny : nz, nO = axis == 1 ? nz : ny;
      const long long strideA = axis == 1 ? nx : (long long)nx * ny;
      const long long strideO = axis == 1 ? (long long)nx * ny : nx;
      dim3 grid(unsigned((nx + 31) / 32), unsigned((nA + TA - 1) / TA), unsigned(std::min(nO, 65535)));
      convAxis<<<grid, dim3(32, BY), shm, st>>>(out, in, nx, nA, nO, strideA, strideO, r, w);
      pyca::checkLaunch("GaussianFilter");
      return;
    }
  }
  const std::size_t n = std::size_t(nx) * ny * nz;
  convSimple<<<blocksFor(n, 256), 256, 0, st>>>(out, in, nx, ny, nz, axis, r, w);
  pyca::checkLaunch("GaussianFilter");
}

void passAny(float* out, const float* in, const Vec3Di& s, int axis, const float* hw, int r) {
  if (r <= kMaxParamR) {
    ParamW w;
    for (int j = 0; j <= kMaxParamR; ++j) w.w[j] = j <= r ? hw[j] : 0.f;
    pass(out, in, s, axis, r, w);
  } else {
    Scratch dw((std::size_t(r) + 1) * sizeof(float), kGaussOp);
    check(cudaMemcpyAsync(dw.p, hw, (std::size_t(r) + 1) * sizeof(float), cudaMemcpyHostToDevice, stream()),
          kGaussOp, "cudaMemcpyAsync");
    pass(out, in, s, axis, r, GlobalW{dw.as<float>()});
  }
}

// out = im correlated with the kernel (PyCA's Convolve), clamped border. The weights and the linear offsets
// of the taps sit in shared memory; voxels whose taps all fall inside the grid take the offsets directly, the
// others clamp each coordinate.
constexpr int kMaxTaps = 2048;
__global__ void convolveKernel(float* __restrict__ out, const float* __restrict__ im, int nx, int ny, int nz,
                               const float* __restrict__ k, int kx, int ky, int kz) {
  extern __shared__ float shw[];  // taps weights, then taps offsets (long long)
  const int taps = kx * ky * kz;
  long long* shoff = reinterpret_cast<long long*>(shw + ((taps + 1) & ~1));
  const std::size_t n = std::size_t(nx) * ny * nz, nxy = std::size_t(nx) * ny;
  const int cx = kx / 2, cy = ky / 2, cz = kz / 2;
  for (int u = threadIdx.x; u < taps; u += blockDim.x) {
    const int a = u % kx, b = (u / kx) % ky, c = u / (kx * ky);
    shw[u] = k[u];
    shoff[u] = (long long)(a - cx) + (long long)(b - cy) * nx + (long long)(c - cz) * (long long)nxy;
  }
  __syncthreads();
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const int z = int(i / nxy), rem = int(i - std::size_t(z) * nxy), y = rem / nx, x = rem - y * nx;
    float acc = 0.f;
    if (x >= cx && x < nx - cx && y >= cy && y < ny - cy && z >= cz && z < nz - cz) {
      const float* c0 = im + i;
      for (int u = 0; u < taps; ++u) acc += shw[u] * __ldg(c0 + shoff[u]);
    } else {
      int u = 0;
      for (int c = 0; c < kz; ++c) {
        const int zz = clampi(z + (c - cz), nz);
        for (int b = 0; b < ky; ++b) {
          const int yy = clampi(y + (b - cy), ny);
          const float* row = im + std::size_t(zz) * nxy + std::size_t(yy) * nx;
          for (int a = 0; a < kx; ++a, ++u) acc += shw[u] * __ldg(row + clampi(x + (a - cx), nx));
        }
      }
    }
    out[i] = acc;
  }
}

// Kernels with more taps than fit in shared memory: weights straight from global memory.
__global__ void convolveLarge(float* __restrict__ out, const float* __restrict__ im, int nx, int ny, int nz,
                              const float* __restrict__ k, int kx, int ky, int kz) {
  const std::size_t n = std::size_t(nx) * ny * nz, nxy = std::size_t(nx) * ny;
  const int cx = kx / 2, cy = ky / 2, cz = kz / 2;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const int z = int(i / nxy), rem = int(i - std::size_t(z) * nxy), y = rem / nx, x = rem - y * nx;
    float acc = 0.f;
    for (int c = 0; c < kz; ++c) {
      const int zz = clampi(z + (c - cz), nz);
      for (int b = 0; b < ky; ++b) {
        const int yy = clampi(y + (b - cy), ny);
        const float* row = im + std::size_t(zz) * nxy + std::size_t(yy) * nx;
        const float* krow = k + (std::size_t(c) * ky + b) * kx;
        for (int a = 0; a < kx; ++a) acc += __ldg(krow + a) * row[clampi(x + (a - cx), nx)];
      }
    }
    out[i] = acc;
  }
}

}  // namespace

void GaussianFilter(float* out, const float* in, float* tmp, const Vec3Di& size, const float* const w[3],
                    const int r[3]) {
  const int n[3] = {size.x, size.y, size.z};
  int axes[3], P = 0;
  for (int d = 0; d < 3; ++d) {
    if (r[d] > 0 && n[d] > 1) axes[P++] = d;
  }
  const std::size_t nv = std::size_t(size.x) * size.y * size.z;
  cudaStream_t st = stream();
  if (P == 0) {
    if (out != in)
      check(cudaMemcpyAsync(out, in, nv * sizeof(float), cudaMemcpyDeviceToDevice, st), kGaussOp,
            "cudaMemcpyAsync");
    return;
  }
  const bool aliased = out == in;
  // Intermediate buffers: buf[0] = in, buf[P] = out, and no pass reads and writes one buffer.
  // first scratch: the caller's tmp, else from the pool; the second only for 3 passes in place
  Scratch s1(tmp ? 0 : nv * sizeof(float), kGaussOp);
  Scratch s2(P == 3 && aliased ? nv * sizeof(float) : 0, kGaussOp);
  float* a = tmp ? tmp : s1.as<float>();
  float* buf[4] = {const_cast<float*>(in), nullptr, nullptr, out};
  if (P == 1) {
    if (!aliased) {
      passAny(out, in, size, axes[0], w[axes[0]], r[axes[0]]);
    } else {
      passAny(a, in, size, axes[0], w[axes[0]], r[axes[0]]);
      check(cudaMemcpyAsync(out, a, nv * sizeof(float), cudaMemcpyDeviceToDevice, st), kGaussOp,
            "cudaMemcpyAsync");
    }
    return;
  }
  if (P == 2) {
    passAny(a, in, size, axes[0], w[axes[0]], r[axes[0]]);
    passAny(out, a, size, axes[1], w[axes[1]], r[axes[1]]);
    return;
  }
  // P == 3: in -> I1 -> I2 -> out with I1 != in, I2 != I1, I2 != out.
  float* I1 = aliased ? s2.as<float>() : out;
  float* I2 = a;
  buf[1] = I1;
  buf[2] = I2;
  for (int k = 0; k < 3; ++k)
    passAny(k == 2 ? out : buf[k + 1], buf[k], size, axes[k], w[axes[k]], r[axes[k]]);
}

void Convolve(float* out, const float* im, const Vec3Di& size, const float* kernel, const Vec3Di& ksize) {
  const std::size_t n = std::size_t(size.x) * size.y * size.z;
  if (n == 0) return;
  const long long taps = (long long)ksize.x * ksize.y * ksize.z;
  if (taps <= kMaxTaps) {
    const std::size_t shm =
        std::size_t((taps + 1) & ~1LL) * sizeof(float) + std::size_t(taps) * sizeof(long long);
    convolveKernel<<<blocksFor(n, 256), 256, shm, stream()>>>(out, im, size.x, size.y, size.z, kernel,
                                                              ksize.x, ksize.y, ksize.z);
  } else {
    convolveLarge<<<blocksFor(n, 256), 256, 0, stream()>>>(out, im, size.x, size.y, size.z, kernel, ksize.x,
                                                           ksize.y, ksize.z);
  }
  pyca::checkLaunch("Convolve");
}

}  // namespace cuda_impl
}  // namespace pyca
