// Sharing memory with other libraries without copies:
//  - _HostBuffer: the C base class of Image3D/Field3D proxies that implements PEP 3118 for host memory;
//  - DLPack export (__dlpack__) and import, and wrapping of foreign pointers (from_array);
//  - the C API capsule for Cython/C++ extensions (swig/pyca_capi.h).
%{
#include "pyca/detail/dlpack.h"  // the DLPack ABI, declared by pyca (no system package)

#include <memory>

#include "pyca_capi.h"

namespace {

// The C++ array behind a Python Image3D/Field3D proxy (NULL with TypeError set otherwise).
pyca::Array3D* pyca_array_of(PyObject* self) {
  void* p = nullptr;
  if (SWIG_IsOK(SWIG_ConvertPtr(self, &p, SWIGTYPE_p_pyca__Image3D, SWIG_POINTER_NO_NULL)))
    return static_cast<pyca::Image3D*>(p);
  if (SWIG_IsOK(SWIG_ConvertPtr(self, &p, SWIGTYPE_p_pyca__Field3D, SWIG_POINTER_NO_NULL)))
    return static_cast<pyca::Field3D*>(p);
  PyErr_Format(PyExc_TypeError, "expected a pyca.Image3D or pyca.Field3D, got %s", Py_TYPE(self)->tp_name);
  return nullptr;
}

// Shape and strides (in bytes) of an array in pyca's layout: (sx, sy, sz[, 3]), x fastest.
int pyca_layout(const pyca::Array3D& a, Py_ssize_t shape[4], Py_ssize_t strides[4]) {
  const pyca::Vec3Di& s = a.size();
  shape[0] = s.x;
  shape[1] = s.y;
  shape[2] = s.z;
  strides[0] = sizeof(float);
  strides[1] = Py_ssize_t(sizeof(float)) * s.x;
  strides[2] = Py_ssize_t(sizeof(float)) * s.x * s.y;
  if (a.nComponents() == 1) return 3;
  shape[3] = 3;
  strides[3] = Py_ssize_t(sizeof(float) * a.capacity());
  return 4;
}

struct BufferViewState {
  Py_ssize_t shape[4];
  Py_ssize_t strides[4];
  std::shared_ptr<pyca::Buffer> keep;  // the memory stays valid while the view lives, even after toType()
};

int pyca_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  pyca::Array3D* a = pyca_array_of(self);
  if (!a) return -1;
  if (a->memType() == pyca::MEM_DEVICE) {
    PyErr_Format(PyExc_BufferError,
                 "%s is in device memory (MEM_DEVICE) and has no host buffer: copy it to the host with "
                 "obj.to(pyca.MEM_HOST) (or obj.toType(pyca.MEM_HOST) in place), or share it on the GPU with "
                 "cupy.asarray(obj) / torch.from_dlpack(obj)",
                 Py_TYPE(self)->tp_name);
    return -1;
  }
  auto* st = new BufferViewState();
  st->keep = a->buffer();
  const int ndim = pyca_layout(*a, st->shape, st->strides);
  int extended = 0;  // dimensions longer than 1: with more than one, x-fastest is not C order
  for (int i = 0; i < ndim; ++i) extended += st->shape[i] > 1;
  if ((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && extended > 1) {
    delete st;
    PyErr_SetString(PyExc_BufferError, "pyca arrays are Fortran-ordered (x fastest), not C-contiguous");
    return -1;
  }
  view->buf = const_cast<float*>(a->data());
  view->obj = self;
  Py_INCREF(self);
  view->len = Py_ssize_t(a->nBytes());
  view->readonly = 0;
  view->itemsize = sizeof(float);
  view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>("f") : nullptr;
  view->ndim = (flags & PyBUF_ND) ? ndim : 1;  // a simple request sees one run of bytes
  view->shape = (flags & PyBUF_ND) ? st->shape : nullptr;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? st->strides : nullptr;
  view->suboffsets = nullptr;
  view->internal = st;
  if (!(flags & PyBUF_STRIDES) && ndim > 1) {
    // A consumer that cannot take strides gets the data as one contiguous run only when it is one.
    if (a->nComponents() == 3 && a->capacity() != a->nVox()) {
      delete st;
      Py_DECREF(self);
      view->obj = nullptr;
      PyErr_SetString(PyExc_BufferError, "this Field3D's planes are not contiguous; request strides");
      return -1;
    }
  }
  return 0;
}

void pyca_releasebuffer(PyObject*, Py_buffer* view) { delete static_cast<BufferViewState*>(view->internal); }

PyBufferProcs pyca_buffer_procs = {pyca_getbuffer, pyca_releasebuffer};
PyTypeObject pyca_HostBuffer_Type = {PyVarObject_HEAD_INIT(nullptr, 0) "pyca.core._HostBuffer"};

// ---- DLPack
struct DLPackCtx {
  DLManagedTensor tensor;
  int64_t shape[4];
  int64_t strides[4];
  std::shared_ptr<pyca::Buffer> keep;
};

void pyca_dlpack_deleter(DLManagedTensor* t) { delete static_cast<DLPackCtx*>(t->manager_ctx); }

void pyca_dlpack_capsule_destructor(PyObject* cap) {
  if (PyCapsule_IsValid(cap, "dltensor")) {  // never consumed
    auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap, "dltensor"));
    if (t && t->deleter) t->deleter(t);
  } else {
    PyErr_Clear();
  }
}

DLDevice pyca_dl_device(const pyca::Array3D& a) {
  switch (a.memType()) {
    case pyca::MEM_DEVICE:
      return DLDevice{kDLCUDA, a.buffer()->device() < 0 ? 0 : a.buffer()->device()};
    case pyca::MEM_HOST_PINNED:
      return DLDevice{kDLCUDAHost, 0};
    default:
      return DLDevice{kDLCPU, 0};
  }
}

// Releases a foreign owner (a Python object) when pyca lets go of its memory.
std::function<void()> pyca_owner_release(PyObject* owner) {
  Py_XINCREF(owner);
  return [owner] {
    if (!owner || !Py_IsInitialized()) return;
    PyGILState_STATE s = PyGILState_Ensure();
    Py_DECREF(owner);
    PyGILState_Release(s);
  };
}

}  // namespace
%}

%init %{
  pyca_HostBuffer_Type.tp_basicsize = sizeof(PyObject);
  pyca_HostBuffer_Type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE;
  pyca_HostBuffer_Type.tp_doc = "Base of Image3D/Field3D: exports host memory through the buffer protocol (PEP 3118).";
  pyca_HostBuffer_Type.tp_as_buffer = &pyca_buffer_procs;
  pyca_HostBuffer_Type.tp_new = PyType_GenericNew;
  if (PyType_Ready(&pyca_HostBuffer_Type) < 0) return -1;
  Py_INCREF(&pyca_HostBuffer_Type);
  PyModule_AddObject(m, "_HostBuffer", (PyObject*)&pyca_HostBuffer_Type);
%}

// The wrappers return new objects: the Python proxy owns them, so that deleting it releases the
// foreign memory's owner (without this every from_array kept its source alive for good).
%newobject pyca::py::wrap_image;
%newobject pyca::py::wrap_field;

// These functions use the Python C API: they keep the GIL (the module is built with -threads).
%nothread;
%inline %{
namespace pyca {
namespace py {

// A DLPack capsule ("dltensor") sharing `obj`'s memory; the memory stays valid until the consumer
// releases it, even if `obj` is deleted or moved with toType().
PyObject* to_dlpack(PyObject* obj) {
  pyca::Array3D* a = pyca_array_of(obj);
  if (!a) return nullptr;
  auto* ctx = new DLPackCtx();
  ctx->keep = a->buffer();
  Py_ssize_t shape[4], strides[4];
  const int ndim = pyca_layout(*a, shape, strides);
  for (int i = 0; i < ndim; ++i) {
    ctx->shape[i] = shape[i];
    ctx->strides[i] = strides[i] / Py_ssize_t(sizeof(float));  // DLPack strides count elements
  }
  DLTensor& t = ctx->tensor.dl_tensor;
  t.data = const_cast<float*>(a->data());
  t.device = pyca_dl_device(*a);
  t.ndim = ndim;
  t.dtype = DLDataType{kDLFloat, 32, 1};
  t.shape = ctx->shape;
  t.strides = ctx->strides;
  t.byte_offset = 0;
  ctx->tensor.manager_ctx = ctx;
  ctx->tensor.deleter = pyca_dlpack_deleter;
  return PyCapsule_New(&ctx->tensor, "dltensor", pyca_dlpack_capsule_destructor);
}

// (device_type, device_id) as DLPack numbers them: kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3.
PyObject* dlpack_device(PyObject* obj) {
  pyca::Array3D* a = pyca_array_of(obj);
  if (!a) return nullptr;
  DLDevice d = pyca_dl_device(*a);
  return Py_BuildValue("(ii)", int(d.device_type), int(d.device_id));
}

// Wraps foreign memory (ptr, nbytes) as an Image3D / Field3D on `grid`, keeping `owner` alive.
pyca::Image3D* wrap_image(std::size_t ptr, std::size_t nbytes, pyca::MemoryType mem, int device,
                          const pyca::GridInfo& grid, PyObject* owner) {
  return new pyca::Image3D(grid, pyca::Buffer::wrap(reinterpret_cast<void*>(ptr), nbytes, mem, device,
                                                     pyca_owner_release(owner)));
}
pyca::Field3D* wrap_field(std::size_t ptr, std::size_t nbytes, pyca::MemoryType mem, int device,
                          const pyca::GridInfo& grid, PyObject* owner) {
  return new pyca::Field3D(grid, pyca::Buffer::wrap(reinterpret_cast<void*>(ptr), nbytes, mem, device,
                                                     pyca_owner_release(owner)));
}

// Consumes a DLPack capsule: returns (ptr, nbytes, mem, device, shape, strides_in_elements, owner)
// where `owner` releases the tensor when garbage collected. Only float32 is accepted.
PyObject* from_dlpack_capsule(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) {
    PyErr_SetString(PyExc_TypeError, "expected an unconsumed DLPack capsule named 'dltensor'");
    return nullptr;
  }
  auto* t = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  const DLTensor& d = t->dl_tensor;
  if (d.dtype.code != kDLFloat || d.dtype.bits != 32 || d.dtype.lanes != 1) {
    PyErr_Format(PyExc_TypeError, "expected float32 data, got DLPack dtype (code %d, bits %d, lanes %d)",
                 int(d.dtype.code), int(d.dtype.bits), int(d.dtype.lanes));
    return nullptr;
  }
  pyca::MemoryType mem;
  switch (d.device.device_type) {
    case kDLCPU:
      mem = pyca::MEM_HOST;
      break;
    case kDLCUDAHost:
      mem = pyca::MEM_HOST_PINNED;
      break;
    case kDLCUDA:
      mem = pyca::MEM_DEVICE;
      break;
    default:
      PyErr_Format(PyExc_TypeError, "DLPack device type %d is not host, pinned host or CUDA",
                   int(d.device.device_type));
      return nullptr;
  }
  PyObject* shape = PyTuple_New(d.ndim);
  PyObject* strides = PyTuple_New(d.ndim);
  int64_t n = 1, expect = 1;
  for (int i = 0; i < d.ndim; ++i) n *= d.shape[i];
  for (int i = d.ndim - 1; i >= 0; --i) {  // C-order strides when the producer gives none
    PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(d.shape[i]));
    PyTuple_SET_ITEM(strides, i, PyLong_FromLongLong(d.strides ? d.strides[i] : expect));
    expect *= d.shape[i];
  }
  // The capsule is now ours: rename it so that its producer does not free it, and hand the
  // deleter to a new capsule that the wrapping pyca object keeps alive.
  PyCapsule_SetName(capsule, "used_dltensor");
  PyObject* owner = PyCapsule_New(t, "pyca_dltensor_owner", [](PyObject* c) {
    auto* mt = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(c, "pyca_dltensor_owner"));
    if (mt && mt->deleter) mt->deleter(mt);
  });
  char* base = static_cast<char*>(d.data) + d.byte_offset;
  return Py_BuildValue("(KKiiNNN)", (unsigned long long)(std::size_t)base, (unsigned long long)(n * 4), int(mem),
                       int(d.device.device_id), shape, strides, owner);
}

}  // namespace py
}  // namespace pyca
%}
%clearnothread;

%{
namespace {
pyca::Image3D* capi_as_image(PyObject* o) {
  void* p = nullptr;
  if (SWIG_IsOK(SWIG_ConvertPtr(o, &p, SWIGTYPE_p_pyca__Image3D, SWIG_POINTER_NO_NULL)))
    return static_cast<pyca::Image3D*>(p);
  PyErr_Format(PyExc_TypeError, "expected pyca.Image3D, got %s", Py_TYPE(o)->tp_name);
  return nullptr;
}
pyca::Field3D* capi_as_field(PyObject* o) {
  void* p = nullptr;
  if (SWIG_IsOK(SWIG_ConvertPtr(o, &p, SWIGTYPE_p_pyca__Field3D, SWIG_POINTER_NO_NULL)))
    return static_cast<pyca::Field3D*>(p);
  PyErr_Format(PyExc_TypeError, "expected pyca.Field3D, got %s", Py_TYPE(o)->tp_name);
  return nullptr;
}
PyObject* capi_image_to_python(const pyca::Image3D& src) {
  return SWIG_NewPointerObj(new pyca::Image3D(src.grid(), src.buffer()), SWIGTYPE_p_pyca__Image3D, SWIG_POINTER_OWN);
}
PyObject* capi_field_to_python(const pyca::Field3D& src) {
  return SWIG_NewPointerObj(new pyca::Field3D(src.grid(), src.buffer()), SWIGTYPE_p_pyca__Field3D, SWIG_POINTER_OWN);
}
const pyca_capi pyca_capi_table = {PYCA_CAPI_VERSION, capi_as_image, capi_as_field, capi_image_to_python,
                                   capi_field_to_python};
}  // namespace
%}

%init %{
  PyModule_AddObject(m, "_C_API", PyCapsule_New(const_cast<pyca_capi*>(&pyca_capi_table), PYCA_CAPI_CAPSULE, nullptr));
%}
