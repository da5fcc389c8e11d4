#include "pyca/detail/checks.h"

#include <string>

namespace pyca {
namespace detail {

std::string sizeStr(const Vec3Di& s) {
  return std::to_string(s.x) + "x" + std::to_string(s.y) + "x" + std::to_string(s.z);
}

std::string vecStr(const Vec3Di& v) {
  return "(" + std::to_string(v.x) + ", " + std::to_string(v.y) + ", " + std::to_string(v.z) + ")";
}

bool onDevice(const char* op, std::initializer_list<Arg> args) {
  const Arg* first = nullptr;
  for (const Arg& a : args) {
    if (!a.a || !a.a->data()) throw ValueError(std::string(op) + ": argument '" + a.name + "' has no memory");
    if (!first) {
      first = &a;
    } else if (isHostMem(a.a->memType()) != isHostMem(first->a->memType())) {
      throw MemoryTypeError(
          std::string(op) + ": argument '" + a.name + "' is in " + memTypeName(a.a->memType()) +
          " memory but '" + first->name + "' is in " + memTypeName(first->a->memType()) +
          " memory; move one with toType() so that all are on the host or all on the device");
    }
  }
  return first && first->a->memType() == MEM_DEVICE;
}

void checkSameSize(const char* op, std::initializer_list<Arg> args) {
  const Arg* first = nullptr;
  for (const Arg& a : args) {
    if (!first) {
      first = &a;
    } else if (a.a->size() != first->a->size()) {
      throw ValueError(std::string(op) + ": size of '" + a.name + "' (" + sizeStr(a.a->size()) +
                       ") does not match size of '" + first->name + "' (" + sizeStr(first->a->size()) + ")");
    }
  }
}

bool prepare(const char* op, std::initializer_list<Arg> args) {
  const bool dev = onDevice(op, args);
  checkSameSize(op, args);
  return dev;
}

void checkNoAlias(const char* op, Arg out, Arg in) {
  if (out.a->buffer() && out.a->buffer() == in.a->buffer()) {
    throw ValueError(std::string(op) + ": output '" + out.name + "' must not share memory with input '" +
                     in.name + "'");
  }
}

void require(bool cond, const char* op, const char* what) {
  if (!cond) throw ValueError(std::string(op) + ": " + what);
}

}  // namespace detail
}  // namespace pyca
