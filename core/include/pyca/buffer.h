// Buffer: one allocation (host, pinned or device) shared by the objects and views that use it.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>

#include "pyca/mem_type.h"

namespace pyca {

class Buffer {
 public:
  // Allocates `bytes` of memory of type `mem`. Host memory is 64-byte aligned, pinned memory
  // comes from cudaMallocHost and device memory from the runtime's stream-ordered pool.
  // Throws OutOfMemory, CudaError (no GPU / CUDA failure) or ValueError (MEM_UNINITIALIZED).
  static std::shared_ptr<Buffer> allocate(MemoryType mem, std::size_t bytes);
  // Wraps memory owned by someone else; `release` runs when the last user lets go
  // (used to share NumPy / CuPy / PyTorch memory without copying).
  static std::shared_ptr<Buffer> wrap(void* ptr, std::size_t bytes, MemoryType mem, int device,
                                      std::function<void()> release);

  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return ptr_; }
  std::size_t bytes() const { return bytes_; }
  MemoryType memType() const { return mem_; }
  int device() const { return device_; }  // CUDA device ordinal, -1 for host memory
  bool owned() const { return !release_; }

 private:
  Buffer() = default;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
  MemoryType mem_ = MEM_UNINITIALIZED;
  int device_ = -1;
  std::function<void()> release_;
};

// Copies `bytes` between two allocations of any memory types (synchronous for the host side:
// when it returns, host destinations hold the data).
void copyMemory(void* dst, MemoryType dstMem, const void* src, MemoryType srcMem, std::size_t bytes);
// Sets `count` floats to `value` in memory of type `mem`.
void fillMemory(float* dst, MemoryType mem, std::size_t count, float value);

}  // namespace pyca
