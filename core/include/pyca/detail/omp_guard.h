// Carries an exception out of an OpenMP parallel region. A C++ exception must not leave a region
// (the runtime then calls std::terminate), so code that may throw inside one (an allocation, a
// check) runs through guard.run(...), and the caller calls guard.rethrow() after the region:
//
//   detail::OmpGuard guard;
//   #pragma omp parallel
//   guard.run([&] { std::vector<float> scratch(n); ... });
//   guard.rethrow();
//
// The first exception is kept; later ones are dropped. failed() lets loops skip remaining work.
#pragma once

#include <atomic>
#include <exception>

namespace pyca {
namespace detail {

class OmpGuard {
 public:
  template <class F>
  void run(F&& f) noexcept {
    try {
      f();
    } catch (...) {
      keep(std::current_exception());
    }
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  void rethrow() {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  void keep(std::exception_ptr e) noexcept {
#pragma omp critical(pyca_omp_guard)
    {
      if (!first_) first_ = e;
    }
    failed_.store(true, std::memory_order_relaxed);
  }
  std::atomic<bool> failed_{false};
  std::exception_ptr first_;
};

}  // namespace detail
}  // namespace pyca
