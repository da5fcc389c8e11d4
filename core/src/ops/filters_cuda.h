// CUDA entry points of the `filters` family (cuda/src/ops/filters.cu, filters_fft.cu). Private to
// the library: pyca types and raw device pointers only, no CUDA types. Work is queued on pyca's
// current stream; nothing synchronises except the first use of a grid size by the FFT (plan and
// table creation). Argument checks happen in core/src/ops/filters*.cpp.
#pragma once

#include "pyca/grid_info.h"
#include "pyca/math/filters.h"
#include "pyca/vec3.h"

namespace pyca {
namespace cuda_impl {

// Separable Gaussian on a size.x * size.y * size.z device volume. w[d] (HOST pointers) are the
// half kernels (centre weight first, r[d] + 1 values) along axis d; an axis with r[d] == 0 or a
// single voxel is skipped. out may equal in. tmp (may be null) is scratch of nVox floats distinct
// from out and in; what else is needed comes from the stream-ordered pool.
void GaussianFilter(float* out, const float* in, float* tmp, const Vec3Di& size, const float* const w[3],
                    const int r[3]);

// out = im convolved with the kernel (device pointer, ksize voxels, odd sizes), clamped border.
void Convolve(float* out, const float* im, const Vec3Di& size, const float* kernel, const Vec3Di& ksize);

// out = L^lpow in or L^-lpow in (p.inverse) per pyca/math/filters.h, for fields on `grid`
// (component planes given separately; out may equal in).
// dot (device, may be null): adds <in, out> (Parseval, from the spectra) to *dot.
void FluidApply(float* const out[3], const float* const in[3], const GridInfo& grid,
                const math::FluidParams& p, double* dot = nullptr);

// The current device.
int CurrentDevice();
}  // namespace cuda_impl
}  // namespace pyca
