// The thread-count policy of the CPU loops (core/include/pyca/detail/parallel.h).
#include <gtest/gtest.h>

#include "pyca/detail/parallel.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

using pyca::detail::kParallelMin;
using pyca::detail::threadsFor;

TEST(Parallel, SmallLoopsRunOnOneThread) {
  EXPECT_EQ(threadsFor(0), 1);
  EXPECT_EQ(threadsFor(1), 1);
  EXPECT_EQ(threadsFor(16 * 16 * 12), 1);  // the coarsest scale of the default pyca lddmm
  EXPECT_EQ(threadsFor(2 * std::size_t(kParallelMin) - 1), 1);
}

#ifdef _OPENMP
TEST(Parallel, OneThreadPerBlockUpToTheOpenMPMaximum) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(8);
  EXPECT_EQ(threadsFor(2 * std::size_t(kParallelMin)), 2);
  EXPECT_EQ(threadsFor(5 * std::size_t(kParallelMin) + 7), 5);
  EXPECT_EQ(threadsFor(std::size_t(1) << 40), 8);  // never more than the maximum
  omp_set_num_threads(1);
  EXPECT_EQ(threadsFor(std::size_t(1) << 40), 1);  // OMP_NUM_THREADS=1 is obeyed
  omp_set_num_threads(saved);
}

TEST(Parallel, ALoopGetsTheThreadsThePolicySays) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(4);
  for (std::size_t n : {std::size_t(100), 3 * std::size_t(kParallelMin), std::size_t(64) << 20}) {
    int team = 0;
#pragma omp parallel num_threads(threadsFor(n))
    {
#pragma omp single
      team = omp_get_num_threads();
    }
    EXPECT_EQ(team, threadsFor(n)) << n;
  }
  omp_set_num_threads(saved);
}
#endif

}  // namespace
