// Vec3Df / Vec3Di: small 3-vectors usable on host and device.
#pragma once

#include <cmath>
#include <cstddef>

#include "pyca/config.h"

namespace pyca {

namespace detail {

// Value type behind Vec3Df and Vec3Di. Kept header-only because CUDA kernels use it.
template <class T>
struct Vec3 {
  T x = T(0);
  T y = T(0);
  T z = T(0);

  Vec3() = default;
  PYCA_HD Vec3(T x_, T y_, T z_) : x(x_), y(y_), z(z_) {}
  PYCA_HD explicit Vec3(T v) : x(v), y(v), z(v) {}
  template <class U>
  PYCA_HD explicit Vec3(const Vec3<U>& o)
      : x(static_cast<T>(o.x)), y(static_cast<T>(o.y)), z(static_cast<T>(o.z)) {}

  PYCA_HD void set(T x_, T y_, T z_) {
    x = x_;
    y = y_;
    z = z_;
  }
  PYCA_HD T& operator[](int i) { return i == 0 ? x : (i == 1 ? y : z); }
  PYCA_HD const T& operator[](int i) const { return i == 0 ? x : (i == 1 ? y : z); }

  PYCA_HD Vec3 operator-() const { return Vec3(-x, -y, -z); }
  PYCA_HD Vec3& operator+=(const Vec3& o) { return *this = *this + o; }
  PYCA_HD Vec3& operator-=(const Vec3& o) { return *this = *this - o; }
  PYCA_HD Vec3& operator*=(const Vec3& o) { return *this = *this * o; }
  PYCA_HD Vec3& operator/=(const Vec3& o) { return *this = *this / o; }
  PYCA_HD Vec3& operator+=(T s) { return *this = *this + Vec3(s); }
  PYCA_HD Vec3& operator-=(T s) { return *this = *this - Vec3(s); }
  PYCA_HD Vec3& operator*=(T s) { return *this = *this * Vec3(s); }
  PYCA_HD Vec3& operator/=(T s) { return *this = *this / Vec3(s); }

  friend PYCA_HD Vec3 operator+(const Vec3& a, const Vec3& b) {
    return Vec3(a.x + b.x, a.y + b.y, a.z + b.z);
  }
  friend PYCA_HD Vec3 operator-(const Vec3& a, const Vec3& b) {
    return Vec3(a.x - b.x, a.y - b.y, a.z - b.z);
  }
  friend PYCA_HD Vec3 operator*(const Vec3& a, const Vec3& b) {
    return Vec3(a.x * b.x, a.y * b.y, a.z * b.z);
  }
  friend PYCA_HD Vec3 operator/(const Vec3& a, const Vec3& b) {
    return Vec3(a.x / b.x, a.y / b.y, a.z / b.z);
  }
  friend PYCA_HD Vec3 operator+(const Vec3& a, T s) { return a + Vec3(s); }
  friend PYCA_HD Vec3 operator-(const Vec3& a, T s) { return a - Vec3(s); }
  friend PYCA_HD Vec3 operator*(const Vec3& a, T s) { return a * Vec3(s); }
  friend PYCA_HD Vec3 operator/(const Vec3& a, T s) { return a / Vec3(s); }
  friend PYCA_HD Vec3 operator*(T s, const Vec3& a) { return Vec3(s) * a; }
  friend PYCA_HD bool operator==(const Vec3& a, const Vec3& b) {
    return a.x == b.x && a.y == b.y && a.z == b.z;
  }
  friend PYCA_HD bool operator!=(const Vec3& a, const Vec3& b) { return !(a == b); }
  // Lexicographic order, so vectors can be sorted and compared like tuples.
  friend PYCA_HD bool operator<(const Vec3& a, const Vec3& b) {
    return a.x != b.x ? a.x < b.x : (a.y != b.y ? a.y < b.y : a.z < b.z);
  }

  PYCA_HD T prod() const { return x * y * z; }
  PYCA_HD T sum() const { return x + y + z; }
  PYCA_HD T dot(const Vec3& o) const { return x * o.x + y * o.y + z * o.z; }
  PYCA_HD double normL2() const { return std::sqrt(double(x) * x + double(y) * y + double(z) * z); }
  PYCA_HD double norm() const { return normL2(); }
  PYCA_HD T maxElm() const { return x > y ? (x > z ? x : z) : (y > z ? y : z); }
  PYCA_HD T minElm() const { return x < y ? (x < z ? x : z) : (y < z ? y : z); }
};

}  // namespace detail

using Vec3Df = detail::Vec3<float>;
using Vec3Di = detail::Vec3<int>;

}  // namespace pyca
