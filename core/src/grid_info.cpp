#include "pyca/grid_info.h"

#include <sstream>

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

GridInfo::GridInfo(const Vec3Di& size, const Vec3Df& spacing, const Vec3Df& origin) : origin_(origin) {
  setSize(size);
  setSpacing(spacing);
}

void GridInfo::setSize(const Vec3Di& s) {
  if (s.x < 1 || s.y < 1 || s.z < 1) {
    std::ostringstream os;
    os << "GridInfo: size must be >= 1 in every dimension, got (" << s.x << ", " << s.y << ", " << s.z << ")";
    throw ValueError(os.str());
  }
  size_ = s;
}

void GridInfo::setSpacing(const Vec3Df& s) {
  if (!(s.x > 0.f && s.y > 0.f && s.z > 0.f)) {
    std::ostringstream os;
    os << "GridInfo: spacing must be > 0 in every dimension, got (" << s.x << ", " << s.y << ", " << s.z
       << ")";
    throw ValueError(os.str());
  }
  spacing_ = s;
}

std::string GridInfo::str() const {
  std::ostringstream os;
  os << "GridInfo(size=(" << size_.x << ", " << size_.y << ", " << size_.z << "), spacing=(" << spacing_.x
     << ", " << spacing_.y << ", " << spacing_.z << "), origin=(" << origin_.x << ", " << origin_.y << ", "
     << origin_.z << "))";
  return os.str();
}

}  // namespace pyca
