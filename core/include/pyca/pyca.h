// Everything a C++ user of pyca includes.
#pragma once

#include "pyca/array3d.h"
#include "pyca/buffer.h"
#include "pyca/enums.h"
#include "pyca/errors.h"
#include "pyca/grid_info.h"
#include "pyca/mem_type.h"
#include "pyca/runtime.h"
#include "pyca/vec3.h"
#if __has_include("pyca/ops.h")
#include "pyca/ops.h"  // generated from ops/*.yaml
#endif
