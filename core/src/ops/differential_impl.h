// Helpers shared by the CPU files of the `differential` family (core/src/ops/differential.cpp,
// core/src/ops/differential_extra.cpp): the grid handed to the per-voxel math, enum checks and the
// OpenMP loop over voxels. Private to the library.
#pragma once

#include <cstddef>
#include <string>

#include "pyca/array3d.h"
#include "pyca/detail/parallel.h"
#include "pyca/enums.h"
#include "pyca/errors.h"
#include "pyca/math/differential.h"

namespace pyca {
namespace diff_detail {

inline math::Grid3 gridOf(const Array3D& a) {
  const Vec3Di& s = a.size();
  const Vec3Df& sp = a.spacing();
  return math::Grid3{s.x, s.y, s.z, 1.f / sp.x, 1.f / sp.y, 1.f / sp.z};
}

inline void checkDim(const char* op, DimT dim) {
  if (dim != DIM_X && dim != DIM_Y && dim != DIM_Z) {
    throw ValueError(std::string(op) + ": argument 'dim' must be DIM_X, DIM_Y or DIM_Z, not " +
                     std::to_string(int(dim)));
  }
}

inline void checkDiffBc(const char* op, DiffT d, BoundaryCondT bc) {
  if (d != DIFF_FORWARD && d != DIFF_BACKWARD && d != DIFF_CENTRAL) {
    throw ValueError(std::string(op) + ": argument 'diffType' must be DIFF_FORWARD, DIFF_BACKWARD or " +
                     "DIFF_CENTRAL, not " + std::to_string(int(d)));
  }
  if (bc != BC_APPROX && bc != BC_WRAP && bc != BC_CLAMP) {
    throw ValueError(std::string(op) + ": argument 'bc' must be BC_APPROX, BC_WRAP or BC_CLAMP, not " +
                     std::to_string(int(bc)));
  }
}

inline void checkBc(const char* op, BoundaryCondT bc) { checkDiffBc(op, DIFF_CENTRAL, bc); }

// Calls f(i, x, y, z) for every voxel, i the linear index; OpenMP over the (z, y) lines.
template <class F>
void forEachVoxel(const math::Grid3& g, F&& f) {
  const int nx = g.nx, ny = g.ny, nz = g.nz;
#pragma omp parallel for collapse(2) schedule(static) \
    num_threads(detail::threadsFor(std::size_t(nx) * ny * nz))
  for (int z = 0; z < nz; ++z) {
    for (int y = 0; y < ny; ++y) {
      std::size_t i = (std::size_t(z) * ny + y) * std::size_t(nx);
      for (int x = 0; x < nx; ++x, ++i) f(i, x, y, z);
    }
  }
}

}  // namespace diff_detail
}  // namespace pyca
