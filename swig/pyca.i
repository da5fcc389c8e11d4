// The `pyca.core` extension module (imported by the `pyca` package as `from .core import *`).
%module(package="pyca", docstring="pyca's compiled core: types, memory and operations (see the pyca package).") core

%feature("autodoc", "3");

// NumPy scalars wherever Python numbers are accepted (issue 19): with SWIG's cast mode a float
// argument takes any object with __float__ or __index__ (np.float32(2), np.int64(3)) and an integer
// or enum argument any object with __index__ (or a float of integral value); strings, arrays and
// other objects are still refused. Overloads keep SWIG's declared order (no cast ranking).
%begin %{
#define SWIG_PYTHON_CAST_MODE
%}

%{
#include <Python.h>

#include <string>

#include "pyca/pyca.h"
#include "pyca/ops.h"

// Python classes of pyca's own exceptions (created in the module's init).
static PyObject* pyca_CudaError = nullptr;
static PyObject* pyca_MemoryTypeError = nullptr;
%}

// A call that no overload accepts raises one TypeError line saying what was given and what is
// accepted, naming the argument when only one is wrong. SWIG's overload dispatchers report through
// SWIG_Python_RaiseOrModifyTypeError (with argc/argv in scope); the text is formatted by
// pyca._signatures.overload_error, with SWIG's own message as the fallback.
%header %{
static void pyca_overload_error(const char* message, Py_ssize_t argc, PyObject** argv) {
  PyObject* previous = nullptr;
  if (PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return;  // not a type mismatch: keep that error
    PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
    PyErr_Fetch(&type, &value, &tb);
    previous = value ? PyObject_Str(value) : nullptr;
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
  }
  PyObject* text = nullptr;
  PyObject* args = PyTuple_New(argc > 0 ? argc : 0);
  PyObject* mod = args ? PyImport_ImportModule("pyca._signatures") : nullptr;
  if (mod) {
    for (Py_ssize_t i = 0; i < argc; ++i) {
      Py_INCREF(argv[i]);
      PyTuple_SET_ITEM(args, i, argv[i]);
    }
    text = PyObject_CallMethod(mod, "overload_error", "sOO", message, args, previous ? previous : Py_None);
  }
  Py_XDECREF(mod);
  Py_XDECREF(args);
  Py_XDECREF(previous);
  if (text && PyUnicode_Check(text)) {
    PyErr_SetObject(PyExc_TypeError, text);
  } else {
    PyErr_Clear();
    PyErr_SetString(PyExc_TypeError, message);
  }
  Py_XDECREF(text);
}
#define SWIG_Python_RaiseOrModifyTypeError(message) pyca_overload_error(message, argc, argv)
%}

// One place maps every C++ exception to its Python exception, for every wrapped call.
%exception {
  try {
    $action
  } catch (const pyca::MemoryTypeError& e) {
    SWIG_PYTHON_THREAD_BEGIN_BLOCK;
    PyErr_SetString(pyca_MemoryTypeError, e.what());
    SWIG_PYTHON_THREAD_END_BLOCK;
    SWIG_fail;
  } catch (const pyca::TypeError& e) {
    SWIG_PYTHON_THREAD_BEGIN_BLOCK;
    PyErr_SetString(PyExc_TypeError, e.what());
    SWIG_PYTHON_THREAD_END_BLOCK;
    SWIG_fail;
  } catch (const pyca::ValueError& e) {
    SWIG_PYTHON_THREAD_BEGIN_BLOCK;
    PyErr_SetString(PyExc_ValueError, e.what());
    SWIG_PYTHON_THREAD_END_BLOCK;
    SWIG_fail;
  } catch (const pyca::IndexError& e) {
    SWIG_PYTHON_THREAD_BEGIN_BLOCK;
    PyErr_SetString(PyExc_IndexError, e.what());
    SWIG_PYTHON_THREAD_END_BLOCK;
    SWIG_fail;
  } catch (const pyca::OutOfMemory& e) {
    SWIG_PYTHON_THREAD_BEGIN_BLOCK;
    PyErr_SetString(PyExc_MemoryError, e.what());
    SWIG_PYTHON_THREAD_END_BLOCK;
    SWIG_fail;
  } catch (const std::bad_alloc&) {
    SWIG_PYTHON_THREAD_BEGIN_BLOCK;
    PyErr_SetString(PyExc_MemoryError, "out of host memory");
    SWIG_PYTHON_THREAD_END_BLOCK;
    SWIG_fail;
  } catch (const pyca::CudaError& e) {
    SWIG_PYTHON_THREAD_BEGIN_BLOCK;
    PyErr_SetString(pyca_CudaError, e.what());
    SWIG_PYTHON_THREAD_END_BLOCK;
    SWIG_fail;
  } catch (const pyca::NotImplementedError& e) {
    SWIG_PYTHON_THREAD_BEGIN_BLOCK;
    PyErr_SetString(PyExc_NotImplementedError, e.what());
    SWIG_PYTHON_THREAD_END_BLOCK;
    SWIG_fail;
  } catch (const std::exception& e) {
    SWIG_PYTHON_THREAD_BEGIN_BLOCK;
    PyErr_SetString(PyExc_RuntimeError, e.what());
    SWIG_PYTHON_THREAD_END_BLOCK;
    SWIG_fail;
  }
}

%init %{
  pyca_CudaError = PyErr_NewExceptionWithDoc(
      "pyca.CudaError", "A CUDA call failed, or a GPU was needed and none can be used.", PyExc_RuntimeError, NULL);
  pyca_MemoryTypeError = PyErr_NewExceptionWithDoc(
      "pyca.MemoryTypeError", "Arguments of one call live in different kinds of memory (host vs device).",
      PyExc_TypeError, NULL);
  Py_INCREF(pyca_CudaError);
  Py_INCREF(pyca_MemoryTypeError);
  PyModule_AddObject(m, "CudaError", pyca_CudaError);
  PyModule_AddObject(m, "MemoryTypeError", pyca_MemoryTypeError);
%}

%pythoncode %{
CudaError = _core.CudaError
MemoryTypeError = _core.MemoryTypeError
%}

%include <std_string.i>
%include <std_pair.i>
%template(FloatPair) std::pair<float, float>;

%include "types.i"
%include "buffers.i"
%include "runtime.i"

// Operations, declared in headers generated from ops/*.yaml.
%include "ops.i"

// Hand-written fragments of the helpers' areas (present once written).
#if defined(PYCA_HAVE_FILTERS_I)
%include "filters.i"
#endif
#if defined(PYCA_HAVE_CUDA_MODULE_I)
%include "cuda_module.i"
#endif

// Keyword arguments and signatures for the operations and the overloaded methods (pyca/_signatures.py).
%pythoncode %{
_mixins.finish_enums(globals())
from . import _signatures as _pyca_signatures
_pyca_signatures.install_methods(globals())
_pyca_signatures.install_ops(globals())
del _pyca_signatures
%}
