// How many OpenMP threads a CPU loop gets: the one policy every parallel loop of the core uses
// (`#pragma omp parallel for num_threads(detail::threadsFor(n))`).
//
// A parallel region costs a fork and a join whatever its size; a thread that the OS has taken off
// its core (a busy machine) makes the whole team wait at the join. So a loop over few elements
// runs on one thread, and a larger one gets one thread per kParallelMin elements, up to the
// OpenMP maximum (OMP_NUM_THREADS, omp_set_num_threads). Measured in docs/performance.md
// ("Threads on small grids").
#pragma once

#include <cstddef>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace pyca {
namespace detail {

// Elements (voxels, or floats of a plane) per thread below which another thread does not pay.
constexpr std::ptrdiff_t kParallelMin = std::ptrdiff_t(1) << 15;

inline int threadsFor(std::size_t work) {
#ifdef _OPENMP
  const std::size_t byWork = work / std::size_t(kParallelMin);
  if (byWork <= 1) return 1;
  const int most = omp_get_max_threads();
  return byWork < std::size_t(most) ? int(byWork) : most;
#else
  (void)work;
  return 1;
#endif
}

}  // namespace detail
}  // namespace pyca
