#include "pyca/grid_info.h"

#include <cmath>
#include <sstream>

#include "pyca/detail/sizes.h"
#include "pyca/errors.h"
#include "pyca/mem_type.h"

namespace pyca {

const char* memTypeName(MemoryType m) {
  switch (m) {
    case MEM_HOST:
      return "MEM_HOST";
    case MEM_HOST_PINNED:
      return "MEM_HOST_PINNED";
    case MEM_DEVICE:
      return "MEM_DEVICE";
    default:
      return "MEM_UNINITIALIZED";
  }
}

GridInfo::GridInfo(const Vec3Di& size, const Vec3Df& spacing, const Vec3Df& origin) {
  setSize(size);
  setSpacing(spacing);
  setOrigin(origin);
}

GridInfo::GridInfo(const Vec3Di& size, const Vec3Df& spacing, const Vec3Df& origin, const Mat3d& direction)
    : GridInfo(size, spacing, origin) {
  setDirection(direction);
}

namespace {
// Finite entries and orthonormal columns within tol (|D^T D - I| entrywise).
bool isOrthonormal(const Mat3d& d, double tol) {
  for (double v : d) {
    if (!std::isfinite(v)) return false;
  }
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      const double dot = d[a] * d[b] + d[3 + a] * d[3 + b] + d[6 + a] * d[6 + b];
      if (std::fabs(dot - (a == b ? 1.0 : 0.0)) > tol) return false;
    }
  }
  return true;
}
}  // namespace

void GridInfo::setDirection(const Mat3d& d) {
  if (!isOrthonormal(d, kDirectionTolerance)) {
    std::ostringstream os;
    os << "GridInfo: direction must be a finite 3x3 matrix with orthonormal columns (a rotation, possibly "
          "with flips), got (("
       << d[0] << ", " << d[1] << ", " << d[2] << "), (" << d[3] << ", " << d[4] << ", " << d[5] << "), ("
       << d[6] << ", " << d[7] << ", " << d[8] << "))";
    throw ValueError(os.str());
  }
  direction_ = d;
}

bool GridInfo::sameDirection(const GridInfo& o, double tol) const {
  for (int k = 0; k < 9; ++k) {
    if (std::fabs(direction_[k] - o.direction_[k]) > tol) return false;
  }
  return true;
}

Vec3Df GridInfo::voxelToWorld(const Vec3Df& index) const {
  const double s[3] = {double(spacing_.x) * index.x, double(spacing_.y) * index.y,
                       double(spacing_.z) * index.z};
  const Mat3d& d = direction_;
  return Vec3Df(float(origin_.x + d[0] * s[0] + d[1] * s[1] + d[2] * s[2]),
                float(origin_.y + d[3] * s[0] + d[4] * s[1] + d[5] * s[2]),
                float(origin_.z + d[6] * s[0] + d[7] * s[1] + d[8] * s[2]));
}

Vec3Df GridInfo::worldToVoxel(const Vec3Df& world) const {
  // D has orthonormal columns, so D^-1 = D^T.
  const double w[3] = {double(world.x) - origin_.x, double(world.y) - origin_.y, double(world.z) - origin_.z};
  const Mat3d& d = direction_;
  return Vec3Df(float((d[0] * w[0] + d[3] * w[1] + d[6] * w[2]) / spacing_.x),
                float((d[1] * w[0] + d[4] * w[1] + d[7] * w[2]) / spacing_.y),
                float((d[2] * w[0] + d[5] * w[1] + d[8] * w[2]) / spacing_.z));
}

void GridInfo::setSize(const Vec3Di& s) {
  if (s.x < 1 || s.y < 1 || s.z < 1) {
    std::ostringstream os;
    os << "GridInfo: size must be >= 1 in every dimension, got (" << s.x << ", " << s.y << ", " << s.z << ")";
    throw ValueError(os.str());
  }
  detail::checkedVoxels(s.x, s.y, s.z, "GridInfo", "size");
  size_ = s;
}

void GridInfo::setSpacing(const Vec3Df& s) {
  if (!(s.x > 0.f && s.y > 0.f && s.z > 0.f && std::isfinite(s.x) && std::isfinite(s.y) &&
        std::isfinite(s.z))) {
    std::ostringstream os;
    os << "GridInfo: spacing must be finite and > 0 in every dimension, got (" << s.x << ", " << s.y << ", "
       << s.z << ")";
    throw ValueError(os.str());
  }
  spacing_ = s;
}

void GridInfo::setOrigin(const Vec3Df& o) {
  if (!(std::isfinite(o.x) && std::isfinite(o.y) && std::isfinite(o.z))) {
    std::ostringstream os;
    os << "GridInfo: origin must be finite, got (" << o.x << ", " << o.y << ", " << o.z << ")";
    throw ValueError(os.str());
  }
  origin_ = o;
}

std::string GridInfo::str() const {
  std::ostringstream os;
  os << "GridInfo(size=(" << size_.x << ", " << size_.y << ", " << size_.z << "), spacing=(" << spacing_.x
     << ", " << spacing_.y << ", " << spacing_.z << "), origin=(" << origin_.x << ", " << origin_.y << ", "
     << origin_.z << ")";
  if (!hasIdentityDirection()) {
    const Mat3d& d = direction_;
    os << ", direction=((" << d[0] << ", " << d[1] << ", " << d[2] << "), (" << d[3] << ", " << d[4] << ", "
       << d[5] << "), (" << d[6] << ", " << d[7] << ", " << d[8] << "))";
  }
  os << ")";
  return os.str();
}

}  // namespace pyca
