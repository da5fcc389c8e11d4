// GridInfo: the sampling grid of a volume (size in voxels, spacing and origin in world units, and
// the direction matrix that orients the voxel axes in the world; docs/design/orientation.md).
#pragma once

#include <array>
#include <cstddef>
#include <string>

#include "pyca/vec3.h"

namespace pyca {

// A 3x3 matrix, row-major: m[3 * r + c].
using Mat3d = std::array<double, 9>;

inline constexpr Mat3d kIdentityDirection = {1, 0, 0, 0, 1, 0, 0, 0, 1};

class GridInfo {
 public:
  GridInfo() : size_(1, 1, 1), spacing_(1.f, 1.f, 1.f), origin_(0.f, 0.f, 0.f) {}
  // Throws ValueError for a size with a component < 1 or more than kMaxVoxels voxels
  // (pyca/detail/sizes.h), a spacing with a component <= 0 or not finite, or an origin not finite.
  explicit GridInfo(const Vec3Di& size, const Vec3Df& spacing = Vec3Df(1.f, 1.f, 1.f),
                    const Vec3Df& origin = Vec3Df(0.f, 0.f, 0.f));
  // ... and a direction matrix (see setDirection).
  GridInfo(const Vec3Di& size, const Vec3Df& spacing, const Vec3Df& origin, const Mat3d& direction);

  const Vec3Di& size() const { return size_; }
  const Vec3Df& spacing() const { return spacing_; }
  const Vec3Df& origin() const { return origin_; }
  // Column c is the world direction of voxel axis c (ITK's Direction): world = origin + D * (spacing *
  // index).
  const Mat3d& direction() const { return direction_; }
  void setSize(const Vec3Di& s);
  void setSpacing(const Vec3Df& s);
  void setOrigin(const Vec3Df& o);
  // Throws ValueError unless every entry is finite and the columns are orthonormal within
  // kDirectionTolerance (|D^T D - I| entrywise).
  void setDirection(const Mat3d& d);
  bool hasIdentityDirection() const { return direction_ == kIdentityDirection; }
  // Directions equal within `tol` entrywise.
  bool sameDirection(const GridInfo& o, double tol = 1e-6) const;
  static constexpr double kDirectionTolerance = 1e-4;

  std::size_t nVox() const { return std::size_t(size_.x) * std::size_t(size_.y) * std::size_t(size_.z); }
  // A grid with size.z == 1 is a 2-D image, as in PyCA.
  bool is2D() const { return size_.z == 1; }

  // world = origin + D * (spacing * index) (index may be fractional); worldToVoxel is its inverse.
  Vec3Df voxelToWorld(const Vec3Df& index) const;
  Vec3Df worldToVoxel(const Vec3Df& world) const;

  bool operator==(const GridInfo& o) const {
    return size_ == o.size_ && spacing_ == o.spacing_ && origin_ == o.origin_ && direction_ == o.direction_;
  }
  bool operator!=(const GridInfo& o) const { return !(*this == o); }
  // Same size and spacing; origins may differ.
  bool sameSizeAndSpacing(const GridInfo& o) const { return size_ == o.size_ && spacing_ == o.spacing_; }

  // "GridInfo(size=(17, 23, 31), spacing=(1, 1, 1), origin=(0, 0, 0))", then
  // ", direction=((r0), (r1), (r2))" when the direction is not the identity.
  std::string str() const;

 private:
  Vec3Di size_;
  Vec3Df spacing_;
  Vec3Df origin_;
  Mat3d direction_ = kIdentityDirection;
};

}  // namespace pyca
