// The DLPack exchange ABI (https://dmlc.github.io/dlpack/latest/), declared by pyca itself so that
// building pyca needs no system package for it. DLPack is a small, versioned C ABI: the layouts,
// names and numbers below are those the specification fixes for version 1.1 (every 1.x producer
// and consumer agrees on them; the unversioned DLManagedTensor is the pre-1.0 form that the
// "dltensor" capsule still carries). Written from the specification, not copied from its header.
//
// Compatibility with the reference header <dlpack/dlpack.h>: both use the include guard
// DLPACK_DLPACK_H_, so whichever is included first provides the (identical) declarations and the
// other is skipped; a translation unit may include both in any order.
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_

#include <stdint.h>

#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

// The ABI version a DLManagedTensorVersioned was produced with.
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

// Where the data lives (numbers fixed by the specification).
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,  // pinned host memory (cudaMallocHost)
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17,
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;  // the device ordinal (0 for host memory)
} DLDevice;

// The kind of an element (DLDataType::code).
typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U,
  kDLFloat8_e3m4 = 7U,
  kDLFloat8_e4m3 = 8U,
  kDLFloat8_e4m3b11fnuz = 9U,
  kDLFloat8_e4m3fn = 10U,
  kDLFloat8_e4m3fnuz = 11U,
  kDLFloat8_e5m2 = 12U,
  kDLFloat8_e5m2fnuz = 13U,
  kDLFloat8_e8m0fnu = 14U,
  kDLFloat6_e2m3fn = 15U,
  kDLFloat6_e3m2fn = 16U,
  kDLFloat4_e2m1fn = 17U,
} DLDataTypeCode;

// An element type: float32 is {kDLFloat, 32, 1}.
typedef struct {
  uint8_t code;    // a DLDataTypeCode
  uint8_t bits;    // bits of one lane
  uint16_t lanes;  // 1 for scalars
} DLDataType;

// A strided view of memory. strides count elements, not bytes; NULL strides mean C-contiguous.
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

// The pre-1.0 managed tensor (capsule name "dltensor", "used_dltensor" once consumed). The consumer
// calls deleter(self) when done; the producer's manager_ctx keeps the memory alive until then.
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;

// DLManagedTensorVersioned::flags bits.
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)

// The 1.x managed tensor (capsule name "dltensor_versioned", "used_dltensor_versioned" once
// consumed). version comes first so that a consumer can check it before reading anything else.
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // DLPACK_DLPACK_H_
