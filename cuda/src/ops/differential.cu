// CUDA backend of the `differential` family: one grid-stride kernel per operation, each calling
// the per-voxel math of pyca/math/differential.h (the same functions as the CPU loops). Work is
// queued on pyca's current stream; nothing here synchronises.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

#include "ops/cuda_common.cuh"
#include "ops/differential_cuda.h"
#include "ops/differential_launch.cuh"
#include "pyca/math/differential.h"
#include "pyca/runtime.h"

namespace pyca {
namespace cuda_impl {

namespace {

using differential_detail::kBlock;

// Runs f(i) for i in [0, n).
template <class F>
__global__ void linearKernel(std::size_t n, F f) {
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    f(i);
  }
}

struct FiniteDiffF {
  float* out;
  const float* im;
  math::Grid3 g;
  int dim;
  DiffT d;
  BoundaryCondT bc;
  __device__ void operator()(std::size_t i, int x, int y, int z) const {
    out[i] = math::finiteDiff(im + i, g, x, y, z, dim, d, bc);
  }
};

struct GradientF {
  float *ox, *oy, *oz;
  const float* im;
  math::Grid3 g;
  DiffT d;
  BoundaryCondT bc;
  __device__ void operator()(std::size_t i, int x, int y, int z) const {
    float gx, gy, gz;
    math::gradient(im + i, g, x, y, z, d, bc, gx, gy, gz);
    ox[i] = gx;
    oy[i] = gy;
    oz[i] = gz;
  }
};

struct GradientMaskF {
  float *ox, *oy, *oz;
  const float *im, *mask;
  math::Grid3 g;
  DiffT d;
  BoundaryCondT bc;
  __device__ void operator()(std::size_t i, int x, int y, int z) const {
    float gx, gy, gz;
    math::gradientMask(im + i, mask + i, g, x, y, z, d, bc, gx, gy, gz);
    ox[i] = gx;
    oy[i] = gy;
    oz[i] = gz;
  }
};

struct GradientMagF {
  float* out;
  const float* im;
  math::Grid3 g;
  DiffT d;
  BoundaryCondT bc;
  __device__ void operator()(std::size_t i, int x, int y, int z) const {
    float gx, gy, gz;
    math::gradient(im + i, g, x, y, z, d, bc, gx, gy, gz);
    out[i] = sqrtf(gx * gx + gy * gy + gz * gz);
  }
};

struct DivergenceF {
  float* out;
  const float *vx, *vy, *vz;
  math::Grid3 g;
  DiffT d;
  BoundaryCondT bc;
  __device__ void operator()(std::size_t i, int x, int y, int z) const {
    out[i] = math::finiteDiff(vx + i, g, x, y, z, 0, d, bc) + math::finiteDiff(vy + i, g, x, y, z, 1, d, bc) +
             math::finiteDiff(vz + i, g, x, y, z, 2, d, bc);
  }
};

struct LaplacianF {
  float* out;
  const float* im;
  math::Grid3 g;
  BoundaryCondT bc;
  __device__ void operator()(std::size_t i, int x, int y, int z) const {
    out[i] = math::laplacian(im + i, g, x, y, z, bc);
  }
};

struct UpwindDiffF {
  float* out;
  const float *im, *speed;
  math::Grid3 g;
  int dim;
  __device__ void operator()(std::size_t i, int x, int y, int z) const {
    const int k = dim == 0 ? x : (dim == 1 ? y : z);
    out[i] = math::upwindDiff1(im + i, math::axisStride(g, dim), k, math::axisSize(g, dim), speed[i]) *
             math::axisInvSpacing(g, dim);
  }
};

struct UpwindGradMagF {
  float* out;
  const float *im, *speed;
  math::Grid3 g;
  __device__ void operator()(std::size_t i, int x, int y, int z) const {
    out[i] = math::upwindGradMag(im + i, g, x, y, z, speed[i]);
  }
};

struct JacDetHF {
  float* out;
  const float *hx, *hy, *hz;
  math::Grid3 g;
  DiffT d;
  BoundaryCondT bc;
  __device__ void operator()(std::size_t i, int x, int y, int z) const {
    out[i] = math::jacDetH(hx + i, hy + i, hz + i, g, x, y, z, d, bc);
  }
};

struct JacDetVF {
  float* out;
  const float *vx, *vy, *vz;
  math::Grid3 g;
  DiffT d;
  BoundaryCondT bc;
  __device__ void operator()(std::size_t i, int x, int y, int z) const {
    out[i] = math::jacDetV(vx + i, vy + i, vz + i, g, x, y, z, d, bc);
  }
};

struct JacDetHGradsF {
  float* out;
  GradPlanes p;
  bool is2D;
  __device__ void operator()(std::size_t i) const {
    out[i] = math::jacDetHFromGrads(p.x[0][i], p.x[1][i], p.x[2][i], p.y[0][i], p.y[1][i], p.y[2][i],
                                    p.z[0][i], p.z[1][i], p.z[2][i], is2D);
  }
};

struct JacDetVGradsF {
  float* out;
  GradPlanes p;
  __device__ void operator()(std::size_t i) const {
    out[i] = math::jacDetVFromGrads(p.x[0][i], p.x[1][i], p.x[2][i], p.y[0][i], p.y[1][i], p.y[2][i],
                                    p.z[0][i], p.z[1][i], p.z[2][i]);
  }
};

struct JacDetVInvGradsF {
  float* out;
  GradPlanes p;
  __device__ void operator()(std::size_t i) const {
    out[i] = math::jacDetVInvFromGrads(p.x[0][i], p.x[1][i], p.x[2][i], p.y[0][i], p.y[1][i], p.y[2][i],
                                       p.z[0][i], p.z[1][i], p.z[2][i]);
  }
};

}  // namespace

void FiniteDiff(float* out, const float* im, const math::Grid3& g, DimT dim, DiffT d, BoundaryCondT bc) {
  differential_detail::launchVoxels(g, FiniteDiffF{out, im, g, int(dim), d, bc}, "FiniteDiff");
}

void Gradient(float* ox, float* oy, float* oz, const float* im, const math::Grid3& g, DiffT d,
              BoundaryCondT bc, const char* name) {
  differential_detail::launchVoxels(g, GradientF{ox, oy, oz, im, g, d, bc}, name);
}

void GradientMask(float* ox, float* oy, float* oz, const float* im, const float* mask, const math::Grid3& g,
                  DiffT d, BoundaryCondT bc) {
  differential_detail::launchVoxels(g, GradientMaskF{ox, oy, oz, im, mask, g, d, bc}, "GradientMask");
}

void GradientMag(float* out, const float* im, const math::Grid3& g, DiffT d, BoundaryCondT bc,
                 const char* name) {
  differential_detail::launchVoxels(g, GradientMagF{out, im, g, d, bc}, name);
}

void Divergence(float* out, const float* vx, const float* vy, const float* vz, const math::Grid3& g, DiffT d,
                BoundaryCondT bc, const char* name) {
  differential_detail::launchVoxels(g, DivergenceF{out, vx, vy, vz, g, d, bc}, name);
}

void Laplacian(float* out, const float* im, const math::Grid3& g, BoundaryCondT bc) {
  differential_detail::launchVoxels(g, LaplacianF{out, im, g, bc}, "Laplacian");
}

void UpwindDiff(float* out, const float* im, const float* speed, const math::Grid3& g, DimT dim) {
  differential_detail::launchVoxels(g, UpwindDiffF{out, im, speed, g, int(dim)}, "UpwindDiff");
}

void UpwindGradMag(float* out, const float* im, const float* speed, const math::Grid3& g) {
  differential_detail::launchVoxels(g, UpwindGradMagF{out, im, speed, g}, "UpwindGradMag");
}

void JacDetH(float* out, const float* hx, const float* hy, const float* hz, const math::Grid3& g, DiffT d,
             BoundaryCondT bc) {
  differential_detail::launchVoxels(g, JacDetHF{out, hx, hy, hz, g, d, bc}, "JacDetH");
}

void JacDetV(float* out, const float* vx, const float* vy, const float* vz, const math::Grid3& g, DiffT d,
             BoundaryCondT bc) {
  differential_detail::launchVoxels(g, JacDetVF{out, vx, vy, vz, g, d, bc}, "JacDetV");
}

void JacDetHGrads(float* out, const GradPlanes& p, std::size_t n, bool is2D) {
  if (n == 0) return;
  linearKernel<<<blocksFor(n, kBlock), kBlock, 0, stream()>>>(n, JacDetHGradsF{out, p, is2D});
  pyca::checkLaunch("JacDetH");
}

void JacDetVGrads(float* out, const GradPlanes& p, std::size_t n) {
  if (n == 0) return;
  linearKernel<<<blocksFor(n, kBlock), kBlock, 0, stream()>>>(n, JacDetVGradsF{out, p});
  pyca::checkLaunch("JacDetV");
}

void JacDetVInvGrads(float* out, const GradPlanes& p, std::size_t n) {
  if (n == 0) return;
  linearKernel<<<blocksFor(n, kBlock), kBlock, 0, stream()>>>(n, JacDetVInvGradsF{out, p});
  pyca::checkLaunch("JacDetVInv");
}

}  // namespace cuda_impl
}  // namespace pyca
