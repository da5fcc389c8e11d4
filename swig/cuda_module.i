// SWIG fragment (included by pyca.i; no %module): the compiled half of pyca.dispatch and pyca.cuda.
//
// _DispatchPlan checks the arguments of one call of a dispatched operation (types, memory side,
// sizes) in one pass over the argument tuple and, for device arguments, packs them into the kernel
// parameter layout of pyca/kernel.cuh and launches: one crossing from Python to C++ per call.
// The _cuda_* functions give pyca.cuda NVRTC, library loading and the registry of compiled-in
// kernels. Everything here manipulates Python objects, so the GIL stays held (%nothread) except
// around NVRTC compilation, which releases it itself.
//
// Errors: pyca's C++ exceptions (pyca.i's %exception maps them); a function returning PyObject*
// returns NULL with a Python exception set for errors raised through the Python C API.

%{
#include <array>
#include <cstdint>
#include <memory>
#include <cstring>
#include <string>
#include <vector>

#include "pyca/kernel.cuh"
#include "pyca/runtime.h"
#ifdef PYCA_WITH_CUDA
#include "kernel_module.h"  // cuda/src is on the SWIG module's include path
#endif

namespace pyca {
namespace pydispatch {

// An owned reference.
struct PyRef {
  PyObject* p = nullptr;
  explicit PyRef(PyObject* o = nullptr) : p(o) {}
  ~PyRef() { Py_XDECREF(p); }
  PyRef(const PyRef&) = delete;
  PyRef& operator=(const PyRef&) = delete;
  PyObject* get() const { return p; }
  PyObject* release() {
    PyObject* r = p;
    p = nullptr;
    return r;
  }
};

inline std::string pyTypeName(PyObject* o) {
  PyTypeObject* t = Py_TYPE(o);
  std::string mod;
  PyRef m(PyObject_GetAttrString(reinterpret_cast<PyObject*>(t), "__module__"));
  if (m.get() && PyUnicode_Check(m.get())) {
    const char* s = PyUnicode_AsUTF8(m.get());
    if (s && std::strcmp(s, "builtins") != 0) {
      mod = s;
      if (mod == "pyca.core") mod = "pyca";
      mod += ".";
    }
  }
  PyErr_Clear();
  return mod + t->tp_name;
}

inline std::string sizeStr(const Vec3Di& s) {
  return std::to_string(s.x) + "x" + std::to_string(s.y) + "x" + std::to_string(s.z);
}

inline std::vector<std::string> stringList(PyObject* seq, const char* what) {
  std::vector<std::string> out;
  if (seq == Py_None) return out;
  PyRef fast(PySequence_Fast(seq, what));
  if (!fast.get()) {
    PyErr_Clear();
    throw TypeError(std::string(what) + " must be a sequence of str");
  }
  const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast.get());
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* it = PySequence_Fast_GET_ITEM(fast.get(), i);
    const char* s = PyUnicode_Check(it) ? PyUnicode_AsUTF8(it) : nullptr;
    if (!s) {
      PyErr_Clear();
      throw TypeError(std::string(what) + " must be a sequence of str");
    }
    out.emplace_back(s);
  }
  return out;
}

inline bool isNumpyBool(PyObject* o) {
  const char* n = Py_TYPE(o)->tp_name;
  return std::strcmp(n, "numpy.bool") == 0 || std::strcmp(n, "numpy.bool_") == 0;
}

// One kernel parameter, as the kernel receives it.
union Slot {
  ImageView image;
  FieldView field;
  float f;
  double d;
  int i;
  unsigned u;
  long long l;
  unsigned long long L;
  bool b;
  Vec3Df V;
  Vec3Di v;
  void* p;
  Slot() {}  // pack() sets each slot it hands to the kernel; the others stay unused (not zeroed: 4 KB a call)
};

constexpr std::size_t kMaxParams = 64;

// Parameter kinds: I Image3D, F Field3D, f float, d double, i int32, u uint32, l int64, L uint64,
// b bool, V Vec3Df, v Vec3Di, p device pointer (int), o any object (CPU-only operations).
class DispatchPlan {
 public:
  DispatchPlan(const std::string& op, PyObject* names, const std::string& codes, int outIndex, bool checkSizes)
      : op_(op), names_(stringList(names, "names")), codes_(codes), checkSizes_(checkSizes) {
    if (names_.size() != codes_.size()) throw ValueError(op_ + ": " + std::to_string(names_.size()) +
                                                         " parameter names but " + std::to_string(codes_.size()) +
                                                         " parameter kinds");
    if (codes_.size() > kMaxParams) throw ValueError(op_ + ": more than 64 parameters");
    for (std::size_t i = 0; i < codes_.size(); ++i) {
      if (std::strchr("IFfdiulLbVvpo", codes_[i]) == nullptr) {
        throw ValueError(op_ + ": unknown parameter kind '" + std::string(1, codes_[i]) + "' for '" + names_[i] + "'");
      }
      if ((codes_[i] == 'I' || codes_[i] == 'F') && firstArray_ < 0) firstArray_ = int(i);
    }
    outIndex_ = outIndex >= 0 ? outIndex : firstArray_;
    if (outIndex_ >= int(codes_.size()) || (outIndex_ >= 0 && codes_[outIndex_] != 'I' && codes_[outIndex_] != 'F')) {
      throw ValueError(op_ + ": the launch grid must come from an Image3D or Field3D parameter");
    }
  }

  void setKernel(unsigned long long handle) { func_ = reinterpret_cast<const void*>(handle); }
  bool hasKernel() const { return func_ != nullptr; }
  // A second kernel, for the calls where an array has 2^31 voxels or more (64-bit voxel indices; the
  // kernel of setKernel then uses 32-bit ones). Handle 0 declares that the operation has one without
  // setting it: call() returns 3 for such calls until it is set.
  // The default grid: 1/v of the blocks that give every voxel of the output a thread, as one linear
  // dimension (for kernels that loop over several voxels per thread, such as the tiles of ca.line).
  void setVoxelsPerThread(unsigned v) { voxelsPerThread_ = v > 0 ? v : 1; }
  void setWideKernel(unsigned long long handle) {
    wide_ = true;
    funcWide_ = reinterpret_cast<const void*>(handle);
  }
  std::string op() const { return op_; }
  std::string codes() const { return codes_; }

  // Checks the arguments. Returns 0 when they are on the host (the caller runs the CPU version),
  // 1 when they were on the device and the kernel was launched, 2 when they are on the device but
  // no kernel is set. `stream`: None (pyca's current stream) or an int; `grid`/`block`: None or
  // 3-tuples of ints; `sharedMem`: bytes of dynamic shared memory.
  PyObject* call(PyObject* args, PyObject* stream, PyObject* grid, PyObject* block, unsigned long long sharedMem) {
    Arrays arrays;
    if (!inspect(args, arrays)) return nullptr;
    if (arrays.count == 0 || !arrays.onDevice) return PyLong_FromLong(0);
    if (!func_) return PyLong_FromLong(2);
    const void* f = func_;
    if (wide_ && anyWide(arrays)) {
      if (!funcWide_) return PyLong_FromLong(3);
      f = funcWide_;
    }
#ifdef PYCA_WITH_CUDA
    std::array<Slot, kMaxParams> slots;
    std::array<void*, kMaxParams> ptrs;
    if (!pack(args, arrays, slots.data(), ptrs.data())) return nullptr;
    cuda_rt::Dim3 b, g;
    if (!config(arrays, block, grid, b, g)) return nullptr;
    std::size_t s = 0;
    if (!streamHandle(stream, s)) return nullptr;
    cuda_rt::launch(op_.c_str(), f, g, b, std::size_t(sharedMem), s, ptrs.data());
    return PyLong_FromLong(1);
#else
    (void)stream;
    (void)grid;
    (void)block;
    (void)sharedMem;
    throw CudaError(op_ + ": pyca was built without CUDA");
#endif
  }

  // The memory side of valid arguments: 0 host (or no arrays), 1 device; raises like call().
  PyObject* side(PyObject* args) {
    Arrays arrays;
    if (!inspect(args, arrays)) return nullptr;
    return PyLong_FromLong(arrays.count > 0 && arrays.onDevice ? 1 : 0);
  }

  // Benchmark helper: packs `args` once (device arrays) and launches `n` times; no checks per
  // launch. Measures the cost of cudaLaunchKernel alone.
  PyObject* launchRepeated(PyObject* args, long n) {
    Arrays arrays;
    if (!inspect(args, arrays)) return nullptr;
    if (!arrays.onDevice || !func_) throw ValueError(op_ + ": launchRepeated needs device arguments and a kernel");
    const void* f = wide_ && anyWide(arrays) ? funcWide_ : func_;
    if (!f) throw ValueError(op_ + ": launchRepeated: the kernel for arrays of 2^31 voxels or more is not loaded");
#ifdef PYCA_WITH_CUDA
    std::array<Slot, kMaxParams> slots;
    std::array<void*, kMaxParams> ptrs;
    if (!pack(args, arrays, slots.data(), ptrs.data())) return nullptr;
    cuda_rt::Dim3 b, g;
    if (!config(arrays, Py_None, Py_None, b, g)) return nullptr;
    const std::size_t s = currentStream();
    for (long k = 0; k < n; ++k) cuda_rt::launch(op_.c_str(), f, g, b, 0, s, ptrs.data());
#else
    (void)n;
#endif
    Py_RETURN_NONE;
  }

 private:
  struct Arrays {
    std::array<const Array3D*, kMaxParams> ptr{};
    int count = 0;
    bool onDevice = false;
  };

  // Whether an array of the call has 2^31 voxels or more.
  static bool anyWide(const Arrays& arrays) {
    for (const Array3D* a : arrays.ptr) {
      if (!a) continue;
      const Vec3Di s = a->size();
      if ((unsigned long long)s.x * (unsigned long long)s.y * (unsigned long long)s.z >= (1ull << 31)) return true;
    }
    return false;
  }

  [[noreturn]] void typeError(std::size_t i, const char* expected, PyObject* got) const {
    PyErr_Clear();
    throw TypeError(op_ + ": argument '" + names_[i] + "' must be " + expected + ", got " + pyTypeName(got));
  }

  // Type checks of every argument, then memory side and sizes of the arrays.
  bool inspect(PyObject* args, Arrays& arrays) const {
    if (!PyTuple_Check(args)) throw TypeError(op_ + ": internal error: arguments must come as a tuple");
    const std::size_t n = std::size_t(PyTuple_GET_SIZE(args));
    if (n != codes_.size()) {
      throw TypeError(op_ + ": takes " + std::to_string(codes_.size()) + " arguments (" + std::to_string(n) +
                      " given)");
    }
    const Array3D* first = nullptr;
    std::size_t firstIdx = 0;
    for (std::size_t i = 0; i < n; ++i) {
      PyObject* o = PyTuple_GET_ITEM(args, i);
      const char c = codes_[i];
      const Array3D* a = nullptr;
      if (c == 'I') {
        void* p = nullptr;
        if (!SWIG_IsOK(SWIG_ConvertPtr(o, &p, SWIGTYPE_p_pyca__Image3D, 0)) || !p) typeError(i, "a pyca.Image3D", o);
        a = static_cast<const Image3D*>(p);
      } else if (c == 'F') {
        void* p = nullptr;
        if (!SWIG_IsOK(SWIG_ConvertPtr(o, &p, SWIGTYPE_p_pyca__Field3D, 0)) || !p) typeError(i, "a pyca.Field3D", o);
        a = static_cast<const Field3D*>(p);
      } else {
        checkScalar(i, o);
        continue;
      }
      if (!a->data()) throw ValueError(op_ + ": argument '" + names_[i] + "' has no memory (no grid set)");
      arrays.ptr[i] = a;
      ++arrays.count;
      if (!first) {
        first = a;
        firstIdx = i;
        arrays.onDevice = a->memType() == MEM_DEVICE;
        continue;
      }
      if (isHostMem(a->memType()) != isHostMem(first->memType())) {
        throw MemoryTypeError(op_ + ": argument '" + names_[i] + "' is in " + memTypeName(a->memType()) +
                              " memory but '" + names_[firstIdx] + "' is in " + memTypeName(first->memType()) +
                              " memory; all image and field arguments must be on the host (MEM_HOST, "
                              "MEM_HOST_PINNED) or all on the device (MEM_DEVICE): move them with toType()");
      }
      if (checkSizes_ && a->size() != first->size()) {
        throw ValueError(op_ + ": size of '" + names_[i] + "' (" + sizeStr(a->size()) + ") does not match size of '" +
                         names_[firstIdx] + "' (" + sizeStr(first->size()) + ")");
      }
    }
    return true;
  }

  // Validates a scalar argument (the CPU version receives the original object).
  void checkScalar(std::size_t i, PyObject* o) const {
    switch (codes_[i]) {
      case 'f':
      case 'd':
        if (!PyFloat_Check(o) && !PyLong_Check(o)) {
          if (PyUnicode_Check(o) || PyBytes_Check(o) || o == Py_None) typeError(i, "a real number", o);
          const double v = PyFloat_AsDouble(o);
          if (v == -1.0 && PyErr_Occurred()) typeError(i, "a real number", o);
        }
        return;
      case 'i':
      case 'u':
      case 'l':
      case 'L':
      case 'p':
        if (PyLong_Check(o)) return;
        if (codes_[i] == 'p' && o == Py_None) return;
        if (PyFloat_Check(o) || !PyIndex_Check(o)) typeError(i, codes_[i] == 'p' ? "an int (a device address)" : "an int", o);
        return;
      case 'b':
        if (!PyBool_Check(o) && !PyLong_Check(o) && !isNumpyBool(o)) typeError(i, "a bool", o);
        return;
      case 'V':
      case 'v': {
        double tmp[3];
        if (!vec3(o, tmp, codes_[i] == 'v')) typeError(i, codes_[i] == 'v' ? "a Vec3Di or 3 ints" : "a Vec3Df or 3 numbers", o);
        return;
      }
      default:
        return;  // 'o': anything
    }
  }

  // Components of a Vec3Df / Vec3Di / 3-sequence; false (no exception set) when not one.
  static bool vec3(PyObject* o, double out[3], bool integral) {
    static const char* names[3] = {"x", "y", "z"};
    PyObject* items[3] = {nullptr, nullptr, nullptr};
    PyRef holder[3];
    PyRef fast;
    if (PyObject_HasAttrString(o, "x") && PyObject_HasAttrString(o, "y") && PyObject_HasAttrString(o, "z")) {
      for (int k = 0; k < 3; ++k) {
        holder[k].p = PyObject_GetAttrString(o, names[k]);
        items[k] = holder[k].p;
        if (!items[k]) return (PyErr_Clear(), false);
      }
    } else {
      if (PyUnicode_Check(o) || PyBytes_Check(o)) return false;
      fast.p = PySequence_Fast(o, "");
      if (!fast.p) return (PyErr_Clear(), false);
      if (PySequence_Fast_GET_SIZE(fast.p) != 3) return false;
      for (int k = 0; k < 3; ++k) items[k] = PySequence_Fast_GET_ITEM(fast.p, k);
    }
    for (int k = 0; k < 3; ++k) {
      if (integral) {
        if (PyFloat_Check(items[k]) || !PyIndex_Check(items[k])) return false;
        const long long v = PyLong_AsLongLong(items[k]);
        if (v == -1 && PyErr_Occurred()) return (PyErr_Clear(), false);
        out[k] = double(v);
      } else {
        const double v = PyFloat_AsDouble(items[k]);
        if (v == -1.0 && PyErr_Occurred()) return (PyErr_Clear(), false);
        out[k] = v;
      }
    }
    return true;
  }

#ifdef PYCA_WITH_CUDA
  // Converts the arguments to kernel parameters (Python scalars to the kernel's C types).
  bool pack(PyObject* args, const Arrays& arrays, Slot* slots, void** ptrs) const {
    for (std::size_t i = 0; i < codes_.size(); ++i) {
      PyObject* o = PyTuple_GET_ITEM(args, i);
      Slot& s = slots[i];
      ptrs[i] = &s;
      switch (codes_[i]) {
        case 'I': {
          const Image3D* im = static_cast<const Image3D*>(arrays.ptr[i]);
          s.image.data = const_cast<float*>(im->data());
          s.image.size = im->size();
          s.image.spacing = im->spacing();
          s.image.origin = im->origin();
          break;
        }
        case 'F': {
          const Field3D* f = static_cast<const Field3D*>(arrays.ptr[i]);
          s.field.x = const_cast<float*>(f->x());
          s.field.y = const_cast<float*>(f->y());
          s.field.z = const_cast<float*>(f->z());
          s.field.size = f->size();
          s.field.spacing = f->spacing();
          s.field.origin = f->origin();
          break;
        }
        case 'f':
        case 'd': {
          const double v = PyFloat_AsDouble(o);
          if (v == -1.0 && PyErr_Occurred()) typeError(i, "a real number", o);
          if (codes_[i] == 'f') {
            s.f = float(v);
          } else {
            s.d = v;
          }
          break;
        }
        case 'i':
        case 'l': {
          PyRef idx(PyNumber_Index(o));
          if (!idx.get()) typeError(i, "an int", o);
          const long long v = PyLong_AsLongLong(idx.get());
          if (v == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            throw ValueError(op_ + ": argument '" + names_[i] + "' is out of the range of the kernel's integer type");
          }
          if (codes_[i] == 'i') {
            if (v < -2147483648LL || v > 2147483647LL) {
              throw ValueError(op_ + ": argument '" + names_[i] + "' = " + std::to_string(v) +
                               " does not fit the kernel's int (32 bits)");
            }
            s.i = int(v);
          } else {
            s.l = v;
          }
          break;
        }
        case 'u':
        case 'L':
        case 'p': {
          if (o == Py_None) {
            s.p = nullptr;
            break;
          }
          PyRef idx(PyNumber_Index(o));
          if (!idx.get()) typeError(i, "an int", o);
          const unsigned long long v = PyLong_AsUnsignedLongLong(idx.get());
          if (v == (unsigned long long)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            throw ValueError(op_ + ": argument '" + names_[i] + "' must be a non-negative int that fits 64 bits");
          }
          if (codes_[i] == 'u') {
            if (v > 4294967295ULL) {
              throw ValueError(op_ + ": argument '" + names_[i] + "' = " + std::to_string(v) +
                               " does not fit the kernel's unsigned int (32 bits)");
            }
            s.u = unsigned(v);
          } else if (codes_[i] == 'L') {
            s.L = v;
          } else {
            s.p = reinterpret_cast<void*>(v);
          }
          break;
        }
        case 'b': {
          const int t = PyObject_IsTrue(o);
          if (t < 0) typeError(i, "a bool", o);
          s.b = t != 0;
          break;
        }
        case 'V':
        case 'v': {
          double c[3];
          if (!vec3(o, c, codes_[i] == 'v')) typeError(i, "a 3-vector", o);
          if (codes_[i] == 'V') {
            s.V = Vec3Df(float(c[0]), float(c[1]), float(c[2]));
          } else {
            s.v = Vec3Di(int(c[0]), int(c[1]), int(c[2]));
          }
          break;
        }
        default:
          throw TypeError(op_ + ": argument '" + names_[i] + "' has no kernel parameter kind (declare its type)");
      }
    }
    return true;
  }

  bool dims(PyObject* o, const char* what, cuda_rt::Dim3& d) const {
    if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 3) throw TypeError(op_ + ": " + what + " must be a 3-tuple of ints");
    unsigned long v[3];
    for (int k = 0; k < 3; ++k) {
      v[k] = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(o, k));
      if ((v[k] == (unsigned long)-1 && PyErr_Occurred()) || v[k] == 0 || v[k] > 0xffffffffUL) {
        PyErr_Clear();
        throw ValueError(op_ + ": " + what + " must hold 3 positive ints");
      }
    }
    d = cuda_rt::Dim3{unsigned(v[0]), unsigned(v[1]), unsigned(v[2])};
    return true;
  }

  // Block and grid: given, or computed from the output's grid.
  bool config(const Arrays& arrays, PyObject* block, PyObject* grid, cuda_rt::Dim3& b, cuda_rt::Dim3& g) const {
    const Vec3Di size = outIndex_ >= 0 ? arrays.ptr[outIndex_]->size() : Vec3Di(1, 1, 1);
    if (block == Py_None) {
      b = cuda_rt::defaultBlock(size);
    } else if (!dims(block, "block", b)) {
      return false;
    }
    if (grid == Py_None) {
      g = cuda_rt::gridFor(size, b);
      if (voxelsPerThread_ > 1) {  // a kernel that loops over several voxels per thread: fewer blocks
        const unsigned long long n = (unsigned long long)g.x * g.y * g.z;
        const unsigned long long m = (n + voxelsPerThread_ - 1) / voxelsPerThread_;
        g = cuda_rt::Dim3{unsigned(m < 2147483647ull ? m : 2147483647ull), 1u, 1u};
      }
    } else if (!dims(grid, "grid", g)) {
      return false;
    }
    return true;
  }

  bool streamHandle(PyObject* stream, std::size_t& s) const {
    if (stream == Py_None) {
      s = currentStream();
      return true;
    }
    const unsigned long long v = PyLong_AsUnsignedLongLong(stream);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
      PyErr_Clear();
      throw TypeError(op_ + ": stream must be None or a cudaStream_t as a non-negative int");
    }
    s = std::size_t(v);
    return true;
  }
#endif

  std::string op_;
  std::vector<std::string> names_;
  std::string codes_;
  bool checkSizes_;
  int firstArray_ = -1;
  int outIndex_ = -1;
  const void* func_ = nullptr;
  const void* funcWide_ = nullptr;
  bool wide_ = false;
  unsigned voxelsPerThread_ = 1;
};

// ---- pyca.cuda helpers --------------------------------------------------------------------------

[[noreturn]] inline void noCuda(const char* what) {
  throw CudaError(std::string(what) + ": pyca was built without CUDA (no NVRTC, no kernels)");
}

}  // namespace pydispatch
}  // namespace pyca
%}

%nothread;

%rename(_DispatchPlan) pyca::pydispatch::DispatchPlan;
%rename(set_kernel) pyca::pydispatch::DispatchPlan::setKernel;
%rename(has_kernel) pyca::pydispatch::DispatchPlan::hasKernel;
%rename(set_wide_kernel) pyca::pydispatch::DispatchPlan::setWideKernel;
%rename(set_voxels_per_thread) pyca::pydispatch::DispatchPlan::setVoxelsPerThread;
%rename(launch_repeated) pyca::pydispatch::DispatchPlan::launchRepeated;
%ignore pyca::pydispatch::PyRef;
%ignore pyca::pydispatch::Slot;

namespace pyca {
namespace pydispatch {
class DispatchPlan {
 public:
  DispatchPlan(const std::string& op, PyObject* names, const std::string& codes, int outIndex, bool checkSizes);
  void setKernel(unsigned long long handle);
  bool hasKernel() const;
  void setWideKernel(unsigned long long handle);
  void setVoxelsPerThread(unsigned v);
  std::string op() const;
  std::string codes() const;
  PyObject* call(PyObject* args, PyObject* stream, PyObject* grid, PyObject* block, unsigned long long sharedMem);
  PyObject* side(PyObject* args);
  PyObject* launchRepeated(PyObject* args, long n);
};
}  // namespace pydispatch
}  // namespace pyca

%inline %{
// (ok, log, image: bytes, cubin: bool, lowered_names: list[str]) from NVRTC; releases the GIL while
// compiling. `headers` is a sequence of (include name, contents) pairs.
PyObject* _cuda_compile(PyObject* source, PyObject* name, PyObject* options, PyObject* headers,
                        PyObject* name_expressions) {
#ifdef PYCA_WITH_CUDA
  using pyca::pydispatch::PyRef;
  using pyca::pydispatch::stringList;
  if (!PyUnicode_Check(source) || !PyUnicode_Check(name)) throw pyca::TypeError("_cuda_compile: source and name must be str");
  const std::string src = PyUnicode_AsUTF8(source);
  const std::string nm = PyUnicode_AsUTF8(name);
  const std::vector<std::string> opts = stringList(options, "options");
  const std::vector<std::string> exprs = stringList(name_expressions, "name_expressions");
  std::vector<std::pair<std::string, std::string>> hdrs;
  if (headers != Py_None) {
    PyRef fast(PySequence_Fast(headers, "headers must be a sequence of (name, contents) pairs"));
    if (!fast.get()) return nullptr;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(fast.get()); ++i) {
      const std::vector<std::string> pair = stringList(PySequence_Fast_GET_ITEM(fast.get(), i), "a header");
      if (pair.size() != 2) throw pyca::TypeError("_cuda_compile: headers must be (name, contents) pairs");
      hdrs.emplace_back(pair[0], pair[1]);
    }
  }
  pyca::cuda_rt::CompileResult r;
  std::string failure;
  Py_BEGIN_ALLOW_THREADS
  try {
    r = pyca::cuda_rt::compile(src, nm, opts, hdrs, exprs);
  } catch (const std::exception& e) {
    failure = e.what();
  }
  Py_END_ALLOW_THREADS
  if (!failure.empty()) throw pyca::CudaError(failure);
  PyRef lowered(PyList_New(0));
  for (const auto& s : r.loweredNames) {
    PyRef u(PyUnicode_FromString(s.c_str()));
    if (!u.get() || PyList_Append(lowered.get(), u.get()) < 0) return nullptr;
  }
  return Py_BuildValue("(Os#y#OO)", r.ok ? Py_True : Py_False, r.log.data(), Py_ssize_t(r.log.size()), r.image.data(),
                       Py_ssize_t(r.image.size()), r.cubin ? Py_True : Py_False, lowered.get());
#else
  (void)source;
  (void)name;
  (void)options;
  (void)headers;
  (void)name_expressions;
  pyca::pydispatch::noCuda("pyca.cuda.SourceModule");
#endif
}

// NVRTC's (major, minor).
PyObject* _cuda_nvrtc_version() {
#ifdef PYCA_WITH_CUDA
  const auto v = pyca::cuda_rt::nvrtcVersion();
  return Py_BuildValue("(ii)", v.first, v.second);
#else
  pyca::pydispatch::noCuda("NVRTC");
#endif
}

// The file name of the libnvrtc pyca opens (libnvrtc.so.MAJOR), without loading it; the path of the
// one it loaded (loading it now if it was not).
PyObject* _cuda_nvrtc_soname() {
#ifdef PYCA_WITH_CUDA
  return PyUnicode_FromString(pyca::cuda_rt::nvrtcSoname());
#else
  pyca::pydispatch::noCuda("NVRTC");
#endif
}
PyObject* _cuda_nvrtc_path() {
#ifdef PYCA_WITH_CUDA
  return PyUnicode_FromString(pyca::cuda_rt::nvrtcLibraryPath().c_str());
#else
  pyca::pydispatch::noCuda("NVRTC");
#endif
}

// 10 * major + minor of the current device's compute capability; 0 without a usable device.
int _cuda_device_arch() {
#ifdef PYCA_WITH_CUDA
  return pyca::cuda_rt::deviceArch();
#else
  return 0;
#endif
}

// {name: (handle, codes)} of the kernels compiled into libpyca and registered by name.
PyObject* _cuda_registered_kernels() {
  PyObject* d = PyDict_New();
#ifdef PYCA_WITH_CUDA
  for (const auto& k : pyca::cuda_rt::registeredKernels()) {
    PyObject* v = Py_BuildValue("(Ks)", (unsigned long long)reinterpret_cast<std::uintptr_t>(k.func), k.codes.c_str());
    if (!v || PyDict_SetItemString(d, k.name.c_str(), v) < 0) {
      Py_XDECREF(v);
      Py_DECREF(d);
      return nullptr;
    }
    Py_DECREF(v);
  }
#endif
  return d;
}

// Checks that kernel `handle` takes the parameters `codes` describes (count and sizes).
void _cuda_check_params(const std::string& op, unsigned long long handle, const std::string& codes) {
#ifdef PYCA_WITH_CUDA
  pyca::cuda_rt::checkParams(op.c_str(), reinterpret_cast<const void*>(handle), codes);
#else
  (void)op;
  (void)handle;
  (void)codes;
  pyca::pydispatch::noCuda("pyca.cuda");
#endif
}
%}

%{
namespace pyca {
namespace pydispatch {
// A CUBIN or PTX image loaded with cudaLibraryLoadData (kept alive by the Python object).
class CudaLibrary {
 public:
  explicit CudaLibrary(PyObject* image) {
    char* buf = nullptr;
    Py_ssize_t n = 0;
    if (!PyBytes_Check(image) || PyBytes_AsStringAndSize(image, &buf, &n) < 0) {
      PyErr_Clear();
      throw TypeError("_CudaLibrary: image must be bytes");
    }
#ifdef PYCA_WITH_CUDA
    lib_.reset(new cuda_rt::Library(std::string(buf, std::size_t(n))));
#else
    noCuda("loading CUDA kernels");
#endif
  }
  // The kernel's handle (a cudaKernel_t as an int).
  unsigned long long kernel(const std::string& name) const {
#ifdef PYCA_WITH_CUDA
    return (unsigned long long)reinterpret_cast<std::uintptr_t>(lib_->kernel(name));
#else
    (void)name;
    return 0;
#endif
  }

 private:
#ifdef PYCA_WITH_CUDA
  std::unique_ptr<cuda_rt::Library> lib_;
#endif
};
}  // namespace pydispatch
}  // namespace pyca
%}

%rename(_CudaLibrary) pyca::pydispatch::CudaLibrary;
namespace pyca {
namespace pydispatch {
class CudaLibrary {
 public:
  explicit CudaLibrary(PyObject* image);
  unsigned long long kernel(const std::string& name) const;
};
}  // namespace pydispatch
}  // namespace pyca

%clearnothread;
