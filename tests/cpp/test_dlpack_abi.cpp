// pyca's own declaration of the DLPack ABI (pyca/detail/dlpack.h) against the layout the DLPack
// specification fixes for 64-bit platforms: field offsets, sizes and the numbers of the enumerators
// that other producers and consumers (NumPy, PyTorch, CuPy) read.
#include <gtest/gtest.h>

#include <cstddef>

#include "pyca/detail/dlpack.h"

namespace {

TEST(DLPackAbi, VersionIsOneX) {
  EXPECT_EQ(DLPACK_MAJOR_VERSION, 1);
  EXPECT_GE(DLPACK_MINOR_VERSION, 0);
}

TEST(DLPackAbi, EnumeratorNumbers) {
  EXPECT_EQ(int(kDLCPU), 1);
  EXPECT_EQ(int(kDLCUDA), 2);
  EXPECT_EQ(int(kDLCUDAHost), 3);
  EXPECT_EQ(int(kDLCUDAManaged), 13);
  EXPECT_EQ(int(kDLInt), 0);
  EXPECT_EQ(int(kDLUInt), 1);
  EXPECT_EQ(int(kDLFloat), 2);
  EXPECT_EQ(int(kDLBfloat), 4);
  EXPECT_EQ(int(kDLBool), 6);
}

TEST(DLPackAbi, LayoutOn64BitPlatforms) {
  static_assert(sizeof(void*) == 8, "the offsets below are those of LP64 platforms");
  EXPECT_EQ(sizeof(DLPackVersion), 8u);
  EXPECT_EQ(sizeof(DLDevice), 8u);
  EXPECT_EQ(sizeof(DLDataType), 4u);
  EXPECT_EQ(offsetof(DLDataType, bits), 1u);
  EXPECT_EQ(offsetof(DLDataType, lanes), 2u);
  // data, device, ndim, dtype, shape, strides, byte_offset
  EXPECT_EQ(offsetof(DLTensor, data), 0u);
  EXPECT_EQ(offsetof(DLTensor, device), 8u);
  EXPECT_EQ(offsetof(DLTensor, ndim), 16u);
  EXPECT_EQ(offsetof(DLTensor, dtype), 20u);
  EXPECT_EQ(offsetof(DLTensor, shape), 24u);
  EXPECT_EQ(offsetof(DLTensor, strides), 32u);
  EXPECT_EQ(offsetof(DLTensor, byte_offset), 40u);
  EXPECT_EQ(sizeof(DLTensor), 48u);
  EXPECT_EQ(offsetof(DLManagedTensor, manager_ctx), 48u);
  EXPECT_EQ(offsetof(DLManagedTensor, deleter), 56u);
  EXPECT_EQ(sizeof(DLManagedTensor), 64u);
  // The versioned form puts the version first, the tensor last.
  EXPECT_EQ(offsetof(DLManagedTensorVersioned, version), 0u);
  EXPECT_EQ(offsetof(DLManagedTensorVersioned, manager_ctx), 8u);
  EXPECT_EQ(offsetof(DLManagedTensorVersioned, deleter), 16u);
  EXPECT_EQ(offsetof(DLManagedTensorVersioned, flags), 24u);
  EXPECT_EQ(offsetof(DLManagedTensorVersioned, dl_tensor), 32u);
  EXPECT_EQ(sizeof(DLManagedTensorVersioned), 80u);
  EXPECT_EQ(DLPACK_FLAG_BITMASK_READ_ONLY, 1UL);
  EXPECT_EQ(DLPACK_FLAG_BITMASK_IS_COPIED, 2UL);
}

}  // namespace
