// C API that the pyca extension module exports to other extensions (Cython, C++), through the
// capsule `pyca._core._C_API`. It turns Python pyca objects into the C++ objects behind them with a
// type check, so third-party code never guesses at SWIG's object layout.
#pragma once

#include <Python.h>

#include "pyca/array3d.h"

#define PYCA_CAPI_VERSION 1
#define PYCA_CAPI_CAPSULE "pyca._core._C_API"

extern "C" {
struct pyca_capi {
  int version;  // PYCA_CAPI_VERSION
  // The C++ object behind a pyca.Image3D / pyca.Field3D (or a subclass). On a wrong type: sets
  // TypeError ("expected pyca.Image3D, got numpy.ndarray") and returns NULL. The pointer lives as
  // long as the Python object.
  pyca::Image3D* (*as_image)(PyObject* obj);
  pyca::Field3D* (*as_field)(PyObject* obj);
  // New Python objects sharing the memory of `src` (no copy). NULL with an exception set on error.
  PyObject* (*image_to_python)(const pyca::Image3D& src);
  PyObject* (*field_to_python)(const pyca::Field3D& src);
};
}

// Imports the capsule (once per process); NULL with an exception set when pyca cannot be imported.
static inline const pyca_capi* pyca_import_capi(void) {
  static const pyca_capi* api = nullptr;
  if (!api) {
    api = static_cast<const pyca_capi*>(PyCapsule_Import(PYCA_CAPI_CAPSULE, 0));
    if (api && api->version != PYCA_CAPI_VERSION) {
      PyErr_SetString(PyExc_ImportError, "pyca C API version mismatch: rebuild the extension");
      api = nullptr;
    }
  }
  return api;
}
