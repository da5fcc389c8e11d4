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
     << origin_.z << "))";
  return os.str();
}

}  // namespace pyca
