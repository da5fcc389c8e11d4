// The core types: Vec3, GridInfo, Image3D/Field3D in host memory, argument checks, errors.
#include <gtest/gtest.h>

#include <numeric>

#include "pyca/detail/checks.h"
#include "pyca/pyca.h"

using namespace pyca;

TEST(Vec3, ArithmeticAndReductions) {
  Vec3Df a(1.f, 2.f, 3.f), b(4.f, 5.f, 6.f);
  EXPECT_EQ(a + b, Vec3Df(5.f, 7.f, 9.f));
  EXPECT_EQ(b - a, Vec3Df(3.f, 3.f, 3.f));
  EXPECT_EQ(a * 2.f, Vec3Df(2.f, 4.f, 6.f));
  EXPECT_EQ(2.f * a, a * 2.f);
  EXPECT_EQ(b / a, Vec3Df(4.f, 2.5f, 2.f));
  EXPECT_FLOAT_EQ(a.dot(b), 32.f);
  EXPECT_DOUBLE_EQ(Vec3Df(3.f, 4.f, 0.f).normL2(), 5.0);
  EXPECT_EQ(Vec3Di(2, 3, 4).prod(), 24);
  EXPECT_EQ(Vec3Df(Vec3Di(1, 2, 3)), a);
  Vec3Df c = a;
  c += b;
  c *= 2.f;
  EXPECT_EQ(c, Vec3Df(10.f, 14.f, 18.f));
  EXPECT_EQ(c[0], 10.f);
  EXPECT_EQ(c.maxElm(), 18.f);
  EXPECT_EQ(c.minElm(), 10.f);
}

TEST(GridInfo, ValidatesAndConverts) {
  GridInfo g(Vec3Di(4, 5, 6), Vec3Df(2.f, 1.f, 0.5f), Vec3Df(10.f, 0.f, -1.f));
  EXPECT_EQ(g.nVox(), 120u);
  EXPECT_FALSE(g.is2D());
  EXPECT_EQ(g.voxelToWorld(Vec3Df(1.f, 2.f, 4.f)), Vec3Df(12.f, 2.f, 1.f));
  EXPECT_EQ(g.worldToVoxel(Vec3Df(12.f, 2.f, 1.f)), Vec3Df(1.f, 2.f, 4.f));
  EXPECT_TRUE(GridInfo(Vec3Di(3, 3, 1)).is2D());
  EXPECT_THROW(GridInfo(Vec3Di(0, 1, 1)), ValueError);
  EXPECT_THROW(GridInfo(Vec3Di(1, 1, 1), Vec3Df(1.f, 0.f, 1.f)), ValueError);
  EXPECT_EQ(g, GridInfo(Vec3Di(4, 5, 6), Vec3Df(2.f, 1.f, 0.5f), Vec3Df(10.f, 0.f, -1.f)));
  EXPECT_NE(g, GridInfo(Vec3Di(4, 5, 6)));
}

TEST(Image3D, HostMemoryFillCloneCopy) {
  GridInfo g(Vec3Di(7, 5, 3));
  Image3D im(g, MEM_HOST);
  EXPECT_EQ(im.memType(), MEM_HOST);
  EXPECT_EQ(im.nVox(), 105u);
  std::iota(im.data(), im.data() + im.nVox(), 0.f);
  Image3D c = im.clone();
  im.fill(-1.f);
  for (std::size_t i = 0; i < c.nVox(); ++i) ASSERT_EQ(c.data()[i], float(i));
  for (std::size_t i = 0; i < im.nVox(); ++i) ASSERT_EQ(im.data()[i], -1.f);
  im.copyFrom(c);
  EXPECT_EQ(im.data()[104], 104.f);
  Image3D wrong(GridInfo(Vec3Di(7, 5, 4)));
  EXPECT_THROW(im.copyFrom(wrong), ValueError);
}

TEST(Field3D, ThreePlanesInOneAllocation) {
  GridInfo g(Vec3Di(4, 3, 2));
  Field3D f(g, MEM_HOST);
  f.fill(Vec3Df(1.f, 2.f, 3.f));
  EXPECT_EQ(f.planeStride(), 24u);
  EXPECT_EQ(f.y(), f.x() + 24);
  EXPECT_EQ(f.z(), f.x() + 48);
  for (std::size_t i = 0; i < 24; ++i) {
    ASSERT_EQ(f.x()[i], 1.f);
    ASSERT_EQ(f.y()[i], 2.f);
    ASSERT_EQ(f.z()[i], 3.f);
  }
  Field3D c = f.clone();
  EXPECT_NE(c.x(), f.x());
  EXPECT_EQ(c.z()[23], 3.f);
}

TEST(Array3D, SetGridWithinCapacityOnly) {
  Image3D im(GridInfo(Vec3Di(4, 4, 4)));
  im.setGrid(GridInfo(Vec3Di(2, 4, 4)));
  EXPECT_EQ(im.nVox(), 32u);
  EXPECT_THROW(im.setGrid(GridInfo(Vec3Di(8, 8, 8))), ValueError);
  Image3D empty(MEM_HOST);  // PyCA's Image3D(mem): may take any grid
  empty.setGrid(GridInfo(Vec3Di(8, 8, 8)));
  EXPECT_EQ(empty.nVox(), 512u);
}

TEST(Checks, NameTheOperationAndArgument) {
  Image3D a(GridInfo(Vec3Di(4, 4, 4))), b(GridInfo(Vec3Di(4, 4, 5)));
  try {
    detail::prepare("Add", {{"out", &a}, {"b", &b}});
    FAIL() << "expected ValueError";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("Add: size of 'b'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(detail::prepare("Add", {{"out", &a}, {"a", &a}}));
  EXPECT_THROW(detail::checkNoAlias("Splat", {"out", &a}, {"in", &a}), ValueError);
}

TEST(Runtime, NoGpuMeansCudaErrorNotCrash) {
  if (cudaAvailable()) GTEST_SKIP() << "a GPU is present: " << deviceInfo();
  EXPECT_FALSE(cudaUnavailableReason().empty());
  EXPECT_THROW(Image3D(GridInfo(Vec3Di(2, 2, 2)), MEM_DEVICE), CudaError);
  EXPECT_THROW(Image3D(GridInfo(Vec3Di(2, 2, 2)), MEM_HOST_PINNED), CudaError);
}

TEST(Runtime, DeviceRoundTrip) {
  if (!cudaAvailable()) GTEST_SKIP() << "needs a CUDA GPU: " << cudaUnavailableReason();
  Image3D im(GridInfo(Vec3Di(17, 23, 31)), MEM_HOST);
  std::iota(im.data(), im.data() + im.nVox(), 0.f);
  Image3D d = im.clone(MEM_DEVICE);
  d.fill(0.f);
  d.copyFrom(im);
  Image3D back = d.clone(MEM_HOST);
  for (std::size_t i = 0; i < im.nVox(); ++i) ASSERT_EQ(back.data()[i], float(i));
  Field3D f(GridInfo(Vec3Di(5, 6, 7)), MEM_DEVICE);
  f.fill(Vec3Df(1.f, 2.f, 3.f));
  f.toType(MEM_HOST_PINNED);
  EXPECT_EQ(f.y()[0], 2.f);
}
