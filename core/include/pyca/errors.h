// Exceptions thrown by pyca. The SWIG layer maps each to one Python exception:
//   ValueError -> ValueError, TypeError -> TypeError, MemoryTypeError -> pyca.MemoryTypeError
//   (a TypeError), OutOfMemory -> MemoryError, CudaError -> pyca.CudaError,
//   NotImplementedError -> NotImplementedError, IndexError -> IndexError.
#pragma once

#include <stdexcept>
#include <string>

namespace pyca {

struct ValueError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
struct TypeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};
// Arguments of one call live in different kinds of memory (host vs device).
struct MemoryTypeError : TypeError {
  using TypeError::TypeError;
};
struct IndexError : std::out_of_range {
  using std::out_of_range::out_of_range;
};
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct NotImplementedError : std::logic_error {
  using std::logic_error::logic_error;
};

}  // namespace pyca
