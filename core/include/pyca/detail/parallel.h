// How many OpenMP threads a CPU loop gets: the one policy every parallel loop of the core uses
// (`#pragma omp parallel for num_threads(detail::threadsFor(n))`), and sums whose bits do not depend
// on the threads (orderedSum).
//
// A parallel region costs a fork and a join whatever its size; a thread that the OS has taken off
// its core (a busy machine) makes the whole team wait at the join. So a loop over few elements
// runs on one thread, and a larger one gets one thread per kParallelMin elements, up to the
// OpenMP maximum (OMP_NUM_THREADS, omp_set_num_threads). Measured in docs/performance.md
// ("Threads on small grids").
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

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

// Items per block of orderedSum(): large enough that a block's loop vectorises and the partial
// sums are few, small enough that a grid of a few blocks still spreads over the threads.
constexpr std::ptrdiff_t kSumBlock = std::ptrdiff_t(1) << 14;

// sum_b blockSum(b * block, min(n, (b + 1) * block)) over the blocks b of [0, n), added in block
// order: the same bits on every run, for any number of threads. (An OpenMP reduction clause adds
// the threads' partial sums in the order the threads finish, so the last bits of a large sum change
// from run to run on a many-core CPU, and with OMP_NUM_THREADS.) blockSum sums its items in order
// (a `#pragma omp simd` reduction inside it is one fixed order for a given build). `work`: the
// elements the whole loop touches, for threadsFor (0: n, where an item is one element).
template <class BlockSum>
double orderedSum(std::ptrdiff_t n, std::ptrdiff_t block, BlockSum blockSum, std::size_t work = 0) {
  if (n <= 0) return 0.0;
  const std::ptrdiff_t nb = (n + block - 1) / block;
  if (nb == 1) return blockSum(std::ptrdiff_t(0), n);
  std::vector<double> part(static_cast<std::size_t>(nb));
#pragma omp parallel for schedule(static) num_threads(threadsFor(work ? work : std::size_t(n)))
  for (std::ptrdiff_t b = 0; b < nb; ++b)
    part[std::size_t(b)] = blockSum(b * block, std::min(n, (b + 1) * block));
  double s = 0.0;
  for (double x : part) s += x;
  return s;
}

// orderedSum over `rows` rows of `rowLength` items each, rowSum(row) summing one row in order: blocks
// of whole rows of about kSumBlock items.
template <class RowSum>
double orderedRowSum(std::ptrdiff_t rows, std::ptrdiff_t rowLength, RowSum rowSum) {
  const std::ptrdiff_t block =
      std::max<std::ptrdiff_t>(1, kSumBlock / std::max<std::ptrdiff_t>(1, rowLength));
  return orderedSum(
      rows, block,
      [&](std::ptrdiff_t lo, std::ptrdiff_t hi) {
        double s = 0.0;
        for (std::ptrdiff_t row = lo; row < hi; ++row) s += rowSum(row);
        return s;
      },
      std::size_t(rows) * std::size_t(rowLength));
}

}  // namespace detail
}  // namespace pyca
