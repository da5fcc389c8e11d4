// GridInfo: the sampling grid of a volume (size in voxels, spacing and origin in world units).
#pragma once

#include <cstddef>
#include <string>

#include "pyca/vec3.h"

namespace pyca {

class GridInfo {
 public:
  GridInfo() : size_(1, 1, 1), spacing_(1.f, 1.f, 1.f), origin_(0.f, 0.f, 0.f) {}
  // Throws ValueError for a size with a component < 1 or more than kMaxVoxels voxels
  // (pyca/detail/sizes.h), a spacing with a component <= 0 or not finite, or an origin not finite.
  explicit GridInfo(const Vec3Di& size, const Vec3Df& spacing = Vec3Df(1.f, 1.f, 1.f),
                    const Vec3Df& origin = Vec3Df(0.f, 0.f, 0.f));

  const Vec3Di& size() const { return size_; }
  const Vec3Df& spacing() const { return spacing_; }
  const Vec3Df& origin() const { return origin_; }
  void setSize(const Vec3Di& s);
  void setSpacing(const Vec3Df& s);
  void setOrigin(const Vec3Df& o);

  std::size_t nVox() const { return std::size_t(size_.x) * std::size_t(size_.y) * std::size_t(size_.z); }
  // A grid with size.z == 1 is a 2-D image, as in PyCA.
  bool is2D() const { return size_.z == 1; }

  // world = origin + spacing * index (index may be fractional).
  Vec3Df voxelToWorld(const Vec3Df& index) const { return origin_ + spacing_ * index; }
  Vec3Df worldToVoxel(const Vec3Df& world) const { return (world - origin_) / spacing_; }

  bool operator==(const GridInfo& o) const {
    return size_ == o.size_ && spacing_ == o.spacing_ && origin_ == o.origin_;
  }
  bool operator!=(const GridInfo& o) const { return !(*this == o); }
  // Same size and spacing; origins may differ.
  bool sameSizeAndSpacing(const GridInfo& o) const { return size_ == o.size_ && spacing_ == o.spacing_; }

  std::string str() const;  // "GridInfo(size=(17, 23, 31), spacing=(1, 1, 1), origin=(0, 0, 0))"

 private:
  Vec3Di size_;
  Vec3Df spacing_;
  Vec3Df origin_;
};

}  // namespace pyca
