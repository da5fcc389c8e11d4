// Vec3Df, Vec3Di, GridInfo, MemoryType, the enums, Image3D and Field3D.
%{
#include <climits>
#include <cmath>
#include <type_traits>

// Reads a pyca Vec3 proxy or any sequence of three numbers into `out`.
template <class T>
static bool pyca_py_to_vec3(PyObject* o, pyca::detail::Vec3<T>* out, swig_type_info* tf, swig_type_info* ti) {
  void* p = nullptr;
  if (SWIG_IsOK(SWIG_ConvertPtr(o, &p, tf, SWIG_POINTER_NO_NULL))) {
    *out = pyca::detail::Vec3<T>(*static_cast<pyca::detail::Vec3<float>*>(p));
    return true;
  }
  if (SWIG_IsOK(SWIG_ConvertPtr(o, &p, ti, SWIG_POINTER_NO_NULL))) {
    *out = pyca::detail::Vec3<T>(*static_cast<pyca::detail::Vec3<int>*>(p));
    return true;
  }
  if (PyUnicode_Check(o) || PyBytes_Check(o) || !PySequence_Check(o) || PySequence_Size(o) != 3) {
    PyErr_Clear();
    return false;
  }
  T v[3];
  for (int i = 0; i < 3; ++i) {
    PyObject* item = PySequence_GetItem(o, i);
    if (!item) {
      PyErr_Clear();
      return false;
    }
    const bool isNum = PyNumber_Check(item) && !PyUnicode_Check(item);
    double d = isNum ? PyFloat_AsDouble(item) : 0.0;
    Py_DECREF(item);
    if (!isNum || PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    if (std::is_integral<T>::value && d != std::floor(d)) return false;  // no silent truncation
    // Out of T's range: not convertible (the cast would be undefined); the typemap says so.
    if (std::is_integral<T>::value && !(d >= double(INT_MIN) && d <= double(INT_MAX))) return false;
    v[i] = static_cast<T>(d);
  }
  out->set(v[0], v[1], v[2]);
  return true;
}

// The error of a Vec3 argument that did not convert: OverflowError for integers beyond a 32-bit int
// (a size of 2**31), TypeError otherwise.
// True when `o` is a sequence of 3 Python ints, one of them beyond a 32-bit int.
static bool pyca_vec3i_overflow(PyObject* o) {
  if (!PySequence_Check(o) || PyUnicode_Check(o) || PyBytes_Check(o) || PySequence_Size(o) != 3) {
    PyErr_Clear();
    return false;
  }
  bool ints = true, overflow = false;
  for (int i = 0; i < 3; ++i) {
    PyObject* item = PySequence_GetItem(o, i);
    if (item && PyLong_Check(item)) {
      int over = 0;
      const long long v = PyLong_AsLongLongAndOverflow(item, &over);
      overflow = overflow || over || v > INT_MAX || v < INT_MIN;
    } else {
      ints = false;
    }
    Py_XDECREF(item);
  }
  PyErr_Clear();
  return ints && overflow;
}

template <class T>
static void pyca_vec3_error(PyObject* o, const char* fn, int argnum, const char* arg, const char* name) {
  if (std::is_integral<T>::value && pyca_vec3i_overflow(o)) {
    PyErr_Format(PyExc_OverflowError, "in '%s', argument %d ('%s') = %R is out of the range of a %s "
                 "(32-bit ints, at most 2147483647)", fn, argnum, arg, o, name);
    return;
  }
  PyErr_Clear();
  PyErr_Format(PyExc_TypeError, "in '%s', argument %d ('%s') must be a %s or a sequence of 3 %s, not %s", fn, argnum,
               arg, name, std::is_integral<T>::value ? "ints" : "floats", Py_TYPE(o)->tp_name);
}
%}

// Vec3 arguments accept a Vec3Df, a Vec3Di or any sequence of three numbers.
%define PYCA_VEC3_IN(T, NAME)
%typemap(in) const pyca::detail::Vec3<T>& (pyca::detail::Vec3<T> temp) {
  if (!pyca_py_to_vec3<T>($input, &temp, $descriptor(pyca::detail::Vec3<float>*),
                          $descriptor(pyca::detail::Vec3<int>*))) {
    pyca_vec3_error<T>($input, "$symname", $argnum, "$1_name", "NAME");
    SWIG_fail;
  }
  $1 = &temp;
}
%typemap(in) pyca::detail::Vec3<T> {
  if (!pyca_py_to_vec3<T>($input, &$1, $descriptor(pyca::detail::Vec3<float>*),
                          $descriptor(pyca::detail::Vec3<int>*))) {
    pyca_vec3_error<T>($input, "$symname", $argnum, "$1_name", "NAME");
    SWIG_fail;
  }
}
// Integers beyond a 32-bit int still select the Vec3Di overload, whose conversion then raises
// OverflowError naming the argument (not a list of prototypes).
%typemap(typecheck, precedence=SWIG_TYPECHECK_POINTER) const pyca::detail::Vec3<T>&, pyca::detail::Vec3<T> {
  pyca::detail::Vec3<T> tmp;
  $1 = (pyca_py_to_vec3<T>($input, &tmp, $descriptor(pyca::detail::Vec3<float>*),
                           $descriptor(pyca::detail::Vec3<int>*)) ||
        (std::is_integral<T>::value && pyca_vec3i_overflow($input))) ? 1 : 0;
}
// Returned references become independent copies (a GridInfo taken from an image outlives it).
%typemap(out) const pyca::detail::Vec3<T>& {
  $result = SWIG_NewPointerObj(new pyca::detail::Vec3<T>(*$1), $descriptor(pyca::detail::Vec3<T>*), SWIG_POINTER_OWN);
}
%enddef
PYCA_VEC3_IN(float, Vec3Df)
PYCA_VEC3_IN(int, Vec3Di)

%typemap(out) const pyca::GridInfo& {
  $result = SWIG_NewPointerObj(new pyca::GridInfo(*$1), $descriptor(pyca::GridInfo*), SWIG_POINTER_OWN);
}

%pythonbegin %{
from . import _mixins
%}

// ---- Vec3Df / Vec3Di: the C++ value type; Python arithmetic lives in pyca/_mixins.py.
%ignore pyca::detail::Vec3::operator[];
%ignore pyca::detail::Vec3::operator-;
%ignore pyca::detail::Vec3::operator+=;
%ignore pyca::detail::Vec3::operator-=;
%ignore pyca::detail::Vec3::operator*=;
%ignore pyca::detail::Vec3::operator/=;
%ignore pyca::detail::Vec3::Vec3(T);
%feature("python:abc", "_mixins.Vec3Mixin") pyca::detail::Vec3<float>;
%feature("python:abc", "_mixins.Vec3Mixin") pyca::detail::Vec3<int>;
%feature("docstring") pyca::detail::Vec3 "A 3-vector (x, y, z). Vec3Df holds floats, Vec3Di ints; both take
arithmetic with each other and with numbers, indexing, len(), iteration and tolist().";
// A Python int beyond a 32-bit int (e.g. a size of 2**31) is an OverflowError naming the value,
// not an overload mismatch (rel, issue 19).
%typemap(typecheck, precedence=SWIG_TYPECHECK_INTEGER) int x_, int y_, int z_ {
  $1 = (PyLong_Check($input) || SWIG_IsOK(SWIG_AsVal_int($input, NULL))) ? 1 : 0;
}
%typemap(in) int x_, int y_, int z_ {
  if (PyLong_Check($input)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow($input, &overflow);
    if (overflow || v > INT_MAX || v < INT_MIN) {
      PyErr_Format(PyExc_OverflowError, "Vec3Di: %R (argument '%s') is out of the range of a Vec3Di component "
                   "(a 32-bit int, at most 2147483647)", $input, "$1_name");
      SWIG_fail;
    }
  }
  int ecode = SWIG_AsVal_int($input, &$1);
  if (!SWIG_IsOK(ecode)) {
    SWIG_exception_fail(SWIG_ArgError(ecode), "in method '$symname', argument $argnum of type 'int'");
  }
}
%include "pyca/config.h"
%include "pyca/vec3.h"
%template(Vec3Df) pyca::detail::Vec3<float>;
%template(Vec3Di) pyca::detail::Vec3<int>;
%clear int x_, int y_, int z_;

// ---- MemoryType and PyCA's enumerations: module-level constants as in PyCA, and IntEnum members
// (pyca/_mixins.py make_enums): `print(ca.MEM_HOST)` says MEM_HOST, comparisons with and passing of
// ints keep working. Functions returning an enum return its member (pyca_enum_out).
%{
static PyObject* pyca_enum_members = nullptr;  // enum name -> tuple of members indexed by value

static PyObject* pyca_enum_out(const char* name, long v) {
  PyObject* t = pyca_enum_members ? PyDict_GetItemString(pyca_enum_members, name) : nullptr;
  if (t && PyTuple_Check(t) && v >= 0 && v < PyTuple_GET_SIZE(t) && PyTuple_GET_ITEM(t, v) != Py_None) {
    PyObject* m = PyTuple_GET_ITEM(t, v);
    Py_INCREF(m);
    return m;
  }
  return PyLong_FromLong(v);
}
%}
%inline %{
void _set_enum_members(PyObject* members) {
  if (!PyDict_Check(members)) throw pyca::TypeError("_set_enum_members: expected a dict");
  Py_INCREF(members);
  Py_XDECREF(pyca_enum_members);
  pyca_enum_members = members;
}
%}
%define PYCA_ENUM_OUT(E)
%typemap(out) pyca::E {
  $result = pyca_enum_out(#E, static_cast<long>($1));
}
%enddef
PYCA_ENUM_OUT(MemoryType)
PYCA_ENUM_OUT(BackgroundStrategy)
PYCA_ENUM_OUT(InterpT)
PYCA_ENUM_OUT(DimT)
PYCA_ENUM_OUT(DiffT)
PYCA_ENUM_OUT(BoundaryCondT)
%include "pyca/mem_type.h"
%include "pyca/enums.h"
%pythoncode %{
_mixins.make_enums(globals())
%}

// ---- GridInfo
%feature("docstring") pyca::GridInfo "GridInfo(size, spacing=(1, 1, 1), origin=(0, 0, 0), direction=None): the
sampling grid of a volume: size in voxels (Vec3Di), spacing and origin in world units (Vec3Df), and a 3x3
direction matrix with orthonormal columns (identity by default; column c is the world direction of voxel
axis c). world = origin + direction @ (spacing * index); affine() is that map as a 4x4 matrix.
A grid with size z = 1 is a 2-D image.";
%feature("python:abc", "_mixins.GridInfoMixin") pyca::GridInfo;
// Keyword arguments and scalars: GridInfo((17, 23, 31), spacing=1.5). The direction (a 3x3 matrix)
// goes through _setDirection; direction(), setDirection() and affine() live in _mixins.GridInfoMixin.
%feature("shadow") pyca::GridInfo::GridInfo %{
def __init__(self, size=None, spacing=None, origin=None, direction=None):
    _core.GridInfo_swiginit(self, _core.new_GridInfo(*_mixins.grid_args(size, spacing, origin, direction)))
    if direction is not None:
        self.setDirection(direction)
%}
%rename(__str__) pyca::GridInfo::str;
%ignore pyca::GridInfo::direction;
%ignore pyca::GridInfo::setDirection;
%ignore pyca::GridInfo::GridInfo(const Vec3Di&, const Vec3Df&, const Vec3Df&, const Mat3d&);
%ignore pyca::GridInfo::kDirectionTolerance;
%ignore pyca::kIdentityDirection;
%include "pyca/grid_info.h"
%feature("nothread") pyca::GridInfo::_direction;
%extend pyca::GridInfo {
  std::string __repr__() const { return $self->str(); }
  // The direction, row-major (9 numbers); uses the Python C API, so it keeps the GIL (nothread above).
  PyObject* _direction() const {
    const pyca::Mat3d& d = $self->direction();
    return Py_BuildValue("(ddddddddd)", d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8]);
  }
  void _setDirection(double d00, double d01, double d02, double d10, double d11, double d12, double d20,
                     double d21, double d22) {
    $self->setDirection(pyca::Mat3d{d00, d01, d02, d10, d11, d12, d20, d21, d22});
  }
}

// ---- Image3D / Field3D
%ignore pyca::Array3D::buffer;
%ignore pyca::Array3D::data;
%ignore pyca::Array3D::Array3D;
%ignore pyca::Image3D::Image3D(const GridInfo&, std::shared_ptr<Buffer>);
%ignore pyca::Field3D::Field3D(const GridInfo&, std::shared_ptr<Buffer>);
%ignore pyca::Image3D::Image3D(Image3D&&);
%ignore pyca::Field3D::Field3D(Field3D&&);
%ignore pyca::Image3D::operator=;
%ignore pyca::Field3D::operator=;
%ignore pyca::Field3D::x;
%ignore pyca::Field3D::y;
%ignore pyca::Field3D::z;
%ignore pyca::Image3D::repr;
%ignore pyca::Field3D::repr;
%ignore pyca::Field3D::copyFrom;
%ignore pyca::Image3D::copyFrom;
%feature("python:abc", "_core._HostBuffer, _mixins.ImageMixin") pyca::Image3D;
%feature("python:abc", "_core._HostBuffer, _mixins.FieldMixin") pyca::Field3D;
%feature("docstring") pyca::Image3D "Image3D(grid, mem=MEM_HOST) or Image3D(mem): a float32 scalar volume on a GridInfo,
in host (MEM_HOST), pinned (MEM_HOST_PINNED) or device (MEM_DEVICE) memory. Layout x fastest, then y, then z.
Host images share their memory with NumPy (np.asarray(im), shape (sx, sy, sz)), memoryview and Cython; device
images with CuPy (__cuda_array_interface__) and PyTorch (__dlpack__).";
%feature("docstring") pyca::Field3D "Field3D(grid, mem=MEM_HOST) or Field3D(mem): three float32 components (x, y, z)
per voxel, one allocation of three planes. np.asarray(f) has shape (sx, sy, sz, 3); asnp() gives (vx, vy, vz).";
// Objects returned by value (clone) are moved, never copied.
%typemap(out) pyca::Image3D {
  $result = SWIG_NewPointerObj(new pyca::Image3D(std::move($1)), $descriptor(pyca::Image3D*), SWIG_POINTER_OWN);
}
%typemap(out) pyca::Field3D {
  $result = SWIG_NewPointerObj(new pyca::Field3D(std::move($1)), $descriptor(pyca::Field3D*), SWIG_POINTER_OWN);
}

// Image3D(grid, mem=MEM_HOST), Image3D(mem) (PyCA's empty image), with keywords.
%feature("shadow") pyca::Image3D::Image3D %{
def __init__(self, *args, **kwargs):
    _core.Image3D_swiginit(self, _core.new_Image3D(*_mixins.array_args("Image3D", *args, **kwargs)))
%}
%feature("shadow") pyca::Field3D::Field3D %{
def __init__(self, *args, **kwargs):
    _core.Field3D_swiginit(self, _core.new_Field3D(*_mixins.array_args("Field3D", *args, **kwargs)))
%}
%include "pyca/array3d.h"

%define PYCA_ARRAY_EXTEND(CLS)
%extend pyca::CLS {
  std::string __repr__() const { return $self->repr(); }
  // Address of the first element (host or device), for interop.
  std::size_t rawptr() const { return reinterpret_cast<std::size_t>($self->data()); }
  // Copies data from `src` (same size, any memory type) into this object.
  void copy_from(const pyca::CLS& src) { $self->copyFrom(src); }
  // An object sharing this one's memory (no copy).
  pyca::CLS* _share() const { return new pyca::CLS($self->grid(), $self->buffer()); }
}
%enddef
PYCA_ARRAY_EXTEND(Image3D)
PYCA_ARRAY_EXTEND(Field3D)

// PyCA's set(dim, value) beside set(x, y, z).
%define PYCA_VEC3_SET(T)
%extend pyca::detail::Vec3<T> {
  void set(int dim, T value) {
    if (dim < 0 || dim > 2) throw pyca::IndexError("Vec3.set: dim must be 0, 1 or 2");
    (*$self)[dim] = value;
  }
}
%enddef
PYCA_VEC3_SET(float)
PYCA_VEC3_SET(int)
%extend pyca::detail::Vec3<float> {
  std::string __repr__() const {
    return "Vec3Df(" + std::to_string($self->x) + ", " + std::to_string($self->y) + ", " + std::to_string($self->z) + ")";
  }
}
%extend pyca::detail::Vec3<int> {
  std::string __repr__() const {
    return "Vec3Di(" + std::to_string($self->x) + ", " + std::to_string($self->y) + ", " + std::to_string($self->z) + ")";
  }
}
