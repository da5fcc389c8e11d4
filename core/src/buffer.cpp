#include "pyca/buffer.h"

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "pyca/detail/sizes.h"
#include "pyca/errors.h"
#include "pyca/runtime.h"

namespace pyca {

std::shared_ptr<Buffer> Buffer::allocate(MemoryType mem, std::size_t bytes) {
  if (bytes > kMaxAllocBytes) {
    // Checked before any arithmetic on `bytes` (the rounding below), so nothing can wrap around.
    throw ValueError("cannot allocate " + std::to_string(bytes) + " bytes of " + memTypeName(mem) +
                     " memory: more than the largest allocation pyca supports (" +
                     std::to_string(kMaxAllocBytes) + " bytes)");
  }
  std::shared_ptr<Buffer> b(new Buffer());
  b->bytes_ = bytes;
  b->mem_ = mem;
  const std::size_t n = bytes ? bytes : 1;
  switch (mem) {
    case MEM_HOST: {
      const std::size_t rounded = (n + 63) / 64 * 64;
      b->ptr_ = std::aligned_alloc(64, rounded);
      if (!b->ptr_) {
        throw OutOfMemory("out of host memory allocating " + std::to_string(bytes) + " bytes");
      }
      break;
    }
    case MEM_HOST_PINNED:
      b->ptr_ = detail::pinnedAlloc(n);
      break;
    case MEM_DEVICE:
      b->ptr_ = detail::deviceAlloc(n, &b->device_);
      break;
    default:
      throw ValueError("cannot allocate memory of type MEM_UNINITIALIZED");
  }
  return b;
}

std::shared_ptr<Buffer> Buffer::wrap(void* ptr, std::size_t bytes, MemoryType mem, int device,
                                     std::function<void()> release) {
  std::shared_ptr<Buffer> b(new Buffer());
  b->ptr_ = ptr;
  b->bytes_ = bytes;
  b->mem_ = mem;
  b->device_ = device;
  b->release_ = release ? std::move(release) : [] {};
  return b;
}

Buffer::~Buffer() {
  if (release_) {
    release_();
    return;
  }
  if (!ptr_) return;
  // Destructors must not throw: a failing free (e.g. a context already torn down at exit) is ignored.
  try {
    switch (mem_) {
      case MEM_HOST:
        std::free(ptr_);
        break;
      case MEM_HOST_PINNED:
        detail::pinnedFree(ptr_);
        break;
      case MEM_DEVICE:
        detail::deviceFree(ptr_);
        break;
      default:
        break;
    }
  } catch (...) {
  }
}

void copyMemory(void* dst, MemoryType dstMem, const void* src, MemoryType srcMem, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (isHostMem(dstMem) && isHostMem(srcMem)) {
    std::memcpy(dst, src, bytes);
  } else {
    detail::runtimeCopy(dst, src, bytes);
  }
}

void fillMemory(float* dst, MemoryType mem, std::size_t count, float value) {
  if (isHostMem(mem)) {
#pragma omp parallel for simd schedule(static) if (count > (1u << 16))
    for (std::size_t i = 0; i < count; ++i) dst[i] = value;
  } else {
    detail::deviceFill(dst, count, value);
  }
}

}  // namespace pyca
