// Where the bytes of an Image3D or Field3D live.
#pragma once

namespace pyca {

enum MemoryType {
  MEM_UNINITIALIZED = 0,  // PyCA's value for "no memory yet"; never accepted for allocation
  MEM_HOST = 1,           // pageable host memory
  MEM_HOST_PINNED = 2,    // page-locked host memory from the CUDA runtime
  MEM_DEVICE = 3,         // CUDA device memory (stream-ordered pool)
};

// "MEM_HOST", "MEM_HOST_PINNED", ... for messages and repr.
const char* memTypeName(MemoryType m);

// Host and pinned memory are both addressable by the CPU.
inline bool isHostMem(MemoryType m) { return m == MEM_HOST || m == MEM_HOST_PINNED; }

}  // namespace pyca
