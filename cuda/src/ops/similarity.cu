// CUDA backend of the `similarity` family (ops/similarity.yaml), LNCC and box sums: truncated box sums
// along one axis (one thread per voxel, 2 r + 1 taps), the LNCC coefficient and gradient maps (the per-voxel
// math of pyca/math/similarity.h, shared with the CPU loops), and the sum of the local correlations by the
// reductions backend. Scratch from the stream-ordered pool; LNCC waits for its sum. Mutual information:
// mutual_information.cu.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "ops/cuda_common.cuh"
#include "ops/reductions_cuda.h"
#include "ops/similarity_cuda.h"
#include "pyca/math/similarity.h"

namespace pyca {
namespace cuda_impl {
namespace {

constexpr int kBlock = 256;

// out = truncated window sum of in along axis `axis` (stride `st`, n voxels on it); out != in.
__global__ void boxAxisKernel(float* __restrict__ out, const float* __restrict__ in, int nx, int ny, int nz,
                              int axis, int r) {
  const std::size_t nv = std::size_t(nx) * ny * nz;
  const std::size_t nxy = std::size_t(nx) * ny;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < nv;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const int x = int(i % nx), y = int((i / nx) % ny), z = int(i / nxy);
    const int c = axis == 0 ? x : (axis == 1 ? y : z);
    const int n = axis == 0 ? nx : (axis == 1 ? ny : nz);
    const std::size_t st = axis == 0 ? 1 : (axis == 1 ? std::size_t(nx) : nxy);
    const int lo = c - r < 0 ? 0 : c - r, hi = c + r > n - 1 ? n - 1 : c + r;
    const float* p = in + (i - std::size_t(c) * st);
    double s = 0.0;
    for (int j = lo; j <= hi; ++j) s += p[std::size_t(j) * st];
    out[i] = float(s);
  }
}

// With a support u: the supported terms (pyca/math/similarity.h), t5 the support (the window weights' map).
__global__ void lnccStatsKernel(float* t0, float* t1, float* t2, float* t3, float* t4, float* t5,
                                const float* __restrict__ a, const float* __restrict__ b,
                                const float* __restrict__ u, std::size_t nv) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < nv;
       i += std::size_t(gridDim.x) * blockDim.x)
    math::lnccTerms(i, a[i], b[i], u, t0, t1, t2, t3, t4, t5);
}

// t0..t3 <- the coefficient maps, cc <- w cc (pyca/math/similarity.h); n: the windows' weights (with a
// support), or null (the boxes' voxel counts).
__global__ void lnccCoeffKernel(float* t0, float* t1, float* t2, float* t3, float* cc, const float* t4,
                                const float* __restrict__ w, const float* __restrict__ n, int nx, int ny,
                                int nz, int3 r, float eps) {
  const std::size_t nv = std::size_t(nx) * ny * nz;
  const std::size_t nxy = std::size_t(nx) * ny;
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < nv;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const int x = int(i % nx), y = int((i / nx) % ny), z = int(i / nxy);
    const float cnt =
        n ? n[i]
          : float(math::boxCount(x, r.x, nx) * math::boxCount(y, r.y, ny) * math::boxCount(z, r.z, nz));
    float k[4];
    cc[i] = math::lnccCoeffs(t0[i], t1[i], t2[i], t3[i], t4[i], cnt, w ? w[i] : 1.f, eps, k);
    t0[i] = k[0];
    t1[i] = k[1];
    t2[i] = k[2];
    t3[i] = k[3];
  }
}

__global__ void lnccGradKernel(float* __restrict__ g, const float* __restrict__ a,
                               const float* __restrict__ b, const float* __restrict__ u, const float* t0,
                               const float* t1, const float* t2, const float* t3, std::size_t nv) {
  for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < nv;
       i += std::size_t(gridDim.x) * blockDim.x)
    g[i] = u ? math::lnccMaskedGradAt(a[i], b[i], u[i], t0[i], t1[i], t2[i], t3[i])
             : math::lnccGradAt(a[i], b[i], t0[i], t1[i], t2[i], t3[i]);
}

// Box sums of `in` into `out` through `tmp` (three distinct buffers except out == in allowed).
void box(float* out, const float* in, float* tmp, const Vec3Di& s, const Vec3Di& r, const char* op) {
  const std::size_t nv = std::size_t(s.x) * s.y * s.z;
  const int rr[3] = {r.x, r.y, r.z}, n[3] = {s.x, s.y, s.z};
  const float* src = in;
  // Alternate tmp / out so that the last pass writes out; a skipped axis passes nothing.
  int passes = 0;
  for (int d = 0; d < 3; ++d) passes += (rr[d] > 0 && n[d] > 1);
  float* bufs[2] = {passes % 2 == 0 ? tmp : out, passes % 2 == 0 ? out : tmp};
  int k = 0;
  for (int d = 0; d < 3; ++d) {
    if (!(rr[d] > 0 && n[d] > 1)) continue;
    float* dst = bufs[k % 2];
    boxAxisKernel<<<blocksFor(nv, kBlock), kBlock, 0, stream()>>>(dst, src, s.x, s.y, s.z, d, rr[d]);
    check(cudaGetLastError(), op, "box sum kernel launch");
    src = dst;
    ++k;
  }
  if (passes == 0 && out != in)
    check(cudaMemcpyAsync(out, in, nv * sizeof(float), cudaMemcpyDeviceToDevice, stream()), op,
          "cudaMemcpyAsync");
}

}  // namespace

void BoxSum(float* out, const float* in, const Vec3Di& size, const Vec3Di& radius) {
  const std::size_t nv = std::size_t(size.x) * size.y * size.z;
  if (nv == 0) return;
  Scratch tmp(nv * sizeof(float), "BoxSum");
  if (out == in) {
    // An even number of passes would write out (= in) in the first pass: copy in aside first.
    Scratch src(nv * sizeof(float), "BoxSum");
    check(cudaMemcpyAsync(src.as<float>(), in, nv * sizeof(float), cudaMemcpyDeviceToDevice, stream()),
          "BoxSum", "cudaMemcpyAsync");
    box(out, src.as<float>(), tmp.as<float>(), size, radius, "BoxSum");
    return;
  }
  box(out, in, tmp.as<float>(), size, radius, "BoxSum");
}

double LNCC(float* grad, const float* I, const float* J, const float* mask, const float* support,
            const Vec3Di& size, const Vec3Di& radius, float eps) {
  const char* op = "LNCC";
  const std::size_t nv = std::size_t(size.x) * size.y * size.z;
  if (nv == 0) return 0.0;
  // t[0..4] the window terms, t[7] (with a support) the support's map then the windows' weights.
  const int nt = support ? 8 : 7;
  Scratch sc(std::size_t(nt) * nv * sizeof(float), op);
  float* t[8] = {};
  for (int k = 0; k < nt; ++k) t[k] = sc.as<float>() + std::size_t(k) * nv;
  const unsigned blocks = blocksFor(nv, kBlock);
  lnccStatsKernel<<<blocks, kBlock, 0, stream()>>>(t[0], t[1], t[2], t[3], t[4], t[7], I, J, support, nv);
  check(cudaGetLastError(), op, "kernel launch");
  // t[5] holds the box sum of t[k] (t[6]: scratch), then is swapped in.
  for (int k : {0, 1, 2, 3, 4, 7}) {
    if (!t[k]) continue;
    box(t[5], t[k], t[6], size, radius, op);
    float* x = t[k];
    t[k] = t[5];
    t[5] = x;
  }
  lnccCoeffKernel<<<blocks, kBlock, 0, stream()>>>(t[0], t[1], t[2], t[3], t[5], t[4], mask, t[7], size.x,
                                                   size.y, size.z, make_int3(radius.x, radius.y, radius.z),
                                                   eps);
  check(cudaGetLastError(), op, "kernel launch");
  double S = 0.0;
  reduceSum(op, SumKind::kSum, t[5], 0, nullptr, 0, 1, nv, &S);
  for (int k = 0; k < 4; ++k) {
    box(t[4], t[k], t[6], size, radius, op);
    float* x = t[k];
    t[k] = t[4];
    t[4] = x;
  }
  lnccGradKernel<<<blocks, kBlock, 0, stream()>>>(grad, I, J, support, t[0], t[1], t[2], t[3], nv);
  check(cudaGetLastError(), op, "kernel launch");
  return S;
}

}  // namespace cuda_impl
}  // namespace pyca
