// The `pyca.core` extension module (imported by the `pyca` package as `from .core import *`).
%module(package="pyca", docstring="pyca's compiled core: types, memory and operations (see the pyca package).") core

%feature("autodoc", "3");

%{
#include <Python.h>

#include <string>

#include "pyca/pyca.h"
#include "pyca/ops.h"

// Python classes of pyca's own exceptions (created in the module's init).
static PyObject* pyca_CudaError = nullptr;
static PyObject* pyca_MemoryTypeError = nullptr;
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
