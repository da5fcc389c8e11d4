// SWIG fragment (included by pyca.i; no %module): PyCA's filter objects of pyca/filters.h.
//
// One C++ class serves host and device memory (each call runs where its arguments live), so PyCA's
// GaussianFilterCPU / GaussianFilterGPU and FluidKernelFFTCPU / FluidKernelFFTGPU are aliases of
// GaussianFilter and FluidKernelFFT. PyCA scripts call both g.filter(out, in, tmp) and
// g.Filter(out, in, tmp); both work. Semantics: docs/operations/filters.md.

%{
#include "pyca/filters.h"
%}

%feature("docstring") pyca::GaussianFilter
"Separable Gaussian smoothing, PyCA's GaussianFilterCPU/GPU object (one class for host and device).

    g = ca.GaussianFilter()                     # or ca.GaussianFilterCPU(), ca.GaussianFilterGPU()
    g.updateParams(size, sigma, kRadius)        # sigma and kernel radius per axis in VOXELS
    g.filter(out, in, tmp)                      # or g.Filter(out, in, tmp); tmp may be omitted

Normalised kernel of length 2*kRadius+1, clamped border. For sigma in world units use
ca.GaussianBlur(out, in, sigma[, kRadius]). See docs/operations/filters.md.";

%feature("docstring") pyca::FluidKernelFFT
"The fluid operator L = -alpha Laplacian - beta grad(div) + gamma (power lpow) and its inverse
K = L^-lpow, in Fourier space; PyCA's FluidKernelFFTCPU/GPU object (one class for host and device).

    k = ca.FluidKernelFFT()                     # or ca.FluidKernelFFTCPU(), ca.FluidKernelFFTGPU()
    k.setAlpha(0.01); k.setBeta(0.0); k.setGamma(0.001); k.setLPow(1)
    k.setGrid(v.grid())
    k.applyOperator(f, v)                       # f = L v
    k.applyInverseOperator(v, f)                # v = K f

Defaults alpha=1, beta=0, gamma=0, lpow=1. The function form is ca.ApplyFluidOperator. See
docs/operations/filters.md.";

// Moves are C++-only.
%ignore pyca::FluidKernelFFT::FluidKernelFFT(FluidKernelFFT&&);
%ignore pyca::FluidKernelFFT::operator=;
// A test helper (tests/cpp/test_filters.cpp), not Python API.
%ignore pyca::detail::fftwPlanText;

%include "pyca/filters.h"

%extend pyca::GaussianFilter {
  // PyCA's Python spelling.
  void Filter(pyca::Image3D& out, const pyca::Image3D& in, pyca::Image3D& tmp) const { $self->filter(out, in, tmp); }
  void Filter(pyca::Image3D& out, const pyca::Image3D& in) const { $self->filter(out, in); }
  void Filter(pyca::Field3D& out, const pyca::Field3D& in) const { $self->filter(out, in); }
}

%pythoncode %{
GaussianFilterCPU = GaussianFilter
GaussianFilterGPU = GaussianFilter
FluidKernelFFTCPU = FluidKernelFFT
FluidKernelFFTGPU = FluidKernelFFT
%}
