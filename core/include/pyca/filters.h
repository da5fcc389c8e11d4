// PyCA's filter objects: GaussianFilter and FluidKernelFFT. One class serves host and device
// memory: each call runs on the side where its arguments live (PyCA's GaussianFilterCPU/GPU and
// FluidKernelFFTCPU/GPU are Python aliases of these classes). Semantics: docs/operations/filters.md.
// The plain-function forms are GaussianBlur and ApplyFluidOperator (ops/filters.yaml).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "pyca/array3d.h"
#include "pyca/grid_info.h"
#include "pyca/vec3.h"

namespace pyca {

// Separable Gaussian smoothing with sigma and kernel radius in VOXELS (PyCA's convention for this
// class: updateParams only knows the grid size), normalised kernel, clamped border (the value
// beyond the border is the border value). An axis with sigma <= 0 or radius 0 is left alone.
class GaussianFilter {
 public:
  GaussianFilter();

  // size: the grid size of the images to filter; sigma: standard deviation per axis in voxels;
  // kRadius: kernel radius per axis in voxels (kernel length 2 * kRadius + 1; negative values
  // throw ValueError). PyCA's Python name of kRadius is kernelSize.
  void updateParams(const Vec3Di& size, const Vec3Df& sigma, const Vec3Di& kRadius);

  // out = G * in. `tmp` is scratch of the same size (used on the device, ignored on the host).
  // out may be in (in place); tmp must differ from both. All three in the same kind of memory.
  void filter(Image3D& out, const Image3D& in, Image3D& tmp) const;
  // Same, with scratch allocated as needed.
  void filter(Image3D& out, const Image3D& in) const;
  // Component by component.
  void filter(Field3D& out, const Field3D& in) const;

  const Vec3Di& size() const { return size_; }
  const Vec3Df& sigma() const { return sigma_; }
  const Vec3Di& kRadius() const { return kRadius_; }

 private:
  void check(const char* op, const Array3D& out, const Array3D& in) const;
  Vec3Di size_;
  Vec3Df sigma_;
  Vec3Di kRadius_;
  std::vector<float> w_[3];  // half kernels (centre weight first) along x, y, z
};

// The fluid operator L = -alpha Laplacian - beta grad(div) + gamma (to the power lpow) and its
// inverse K = L^-lpow, applied to vector fields in Fourier space with the periodic
// finite-difference symbol of L on the grid given to setGrid (spacing enters). CPU: FFTW single
// precision, plans made once per grid size and reused, threads as OpenMP's; GPU: cuFFT, plans
// cached per grid size and stream, on pyca's current stream. Defaults as PyCA: alpha = 1,
// beta = 0, gamma = 0, lpow = 1 (with gamma = 0 the inverse discards the field's mean).
class FluidKernelFFT {
 public:
  FluidKernelFFT();
  ~FluidKernelFFT();
  FluidKernelFFT(FluidKernelFFT&&) noexcept;
  FluidKernelFFT& operator=(FluidKernelFFT&&) noexcept;
  FluidKernelFFT(const FluidKernelFFT&) = delete;
  FluidKernelFFT& operator=(const FluidKernelFFT&) = delete;

  void setAlpha(float alpha);
  float getAlpha() const;
  void setBeta(float beta);
  float getBeta() const;
  void setGamma(float gamma);
  float getGamma() const;
  // Power of L (>= 0; a negative value throws ValueError).
  void setLPow(int lpow);
  int getLPow() const;
  // When true, the result is projected onto (discretely) divergence-free fields, as PyCA's option.
  void setDivergenceFree(bool divFree);
  bool getDivergenceFree() const;
  // The band: per axis the largest |k| (frequency index, k and n - k being one frequency) that the
  // operator keeps; every frequency with a larger |k| on some axis gives 0, as if the fields were
  // first projected onto the band-limited ones. -1 (the default): the whole axis. Values below -1
  // throw ValueError. A band where K's symbol has fallen below a tolerance skips work on the GPU
  // (docs/design/fluid-fft.md); pyca.apps.lddmm chooses it so (band_tol).
  void setBand(const Vec3Di& band);
  Vec3Di getBand() const;

  // The grid of the fields to process (size and spacing). Must be called before applying.
  void setGrid(const GridInfo& grid);
  const GridInfo& grid() const;

  // out = L^lpow in. out may be in.
  void applyOperator(Field3D& out, const Field3D& in);
  // out = K in = L^-lpow in. out may be in.
  void applyInverseOperator(Field3D& out, const Field3D& in);
  // In place: f = L^lpow f, f = K f.
  void applyOperator(Field3D& f);
  void applyInverseOperator(Field3D& f);

  // out = K in, as applyInverseOperator, and <in, out> (the sum over voxels and components of
  // in * out) added to this object's accumulator. The sum is taken from the spectra in the pass
  // that applies the operator (Parseval), so it costs no pass of its own and no wait.
  void applyInverseOperatorDot(Field3D& out, const Field3D& in);
  // The sum accumulated by applyInverseOperatorDot since the last call (0 if none), which resets
  // it. On the GPU this waits for the queued work once.
  double takeDot();
  // Queues, behind the work already queued, the move of the sum accumulated so far into host memory
  // this object owns, without waiting; takeDot() then returns it with anything added later. A caller
  // that waits for the GPU anyway before takeDot() (the LDDMM solver: its match energy) thus saves
  // takeDot() a launch and a round trip. Nothing to do on the CPU.
  void stageDot();

 private:
  void apply(const char* op, Field3D& out, const Field3D& in, bool inverse, bool dot = false);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

namespace detail {
// FFTW's description of the host plans (forward, then inverse) FluidKernelFFT uses for a grid of
// this size with the current OpenMP thread count; for tests and diagnostics.
std::string fftwPlanText(const Vec3Di& size);
}  // namespace detail

}  // namespace pyca
