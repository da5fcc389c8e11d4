// CUDA kernels of pyca.ext's dispatched operations (the CPU loops are in pyca/_ext/loops.pyx, the
// per-voxel math in ext_math.h). Compiled at run time by NVRTC (pyca.cuda.SourceModule.from_file)
// and, when libpyca's build adds this file, with nvcc into the library, where PYCA_REGISTER_KERNEL
// makes each kernel available by name (pyca.cuda.get_kernel).
#include <pyca/kernel.cuh>

#include "ext_math.h"

// out = (deformed - target) * grad, per voxel and component.
extern "C" __global__ void pyca_ext_ssd_gradient(pyca::FieldView out, pyca::ImageView deformed,
                                                 pyca::ImageView target, pyca::FieldView grad) {
  PYCA_FOR_EACH_VOXEL(out.size, x, y, z) {
    const unsigned long long i = out.index(x, y, z);
    const float r = pyca_ext_voxel_residual(deformed.data[i], target.data[i]);
    out.x[i] = r * grad.x[i];
    out.y[i] = r * grad.y[i];
    out.z[i] = r * grad.z[i];
  }
}
PYCA_REGISTER_KERNEL(pyca_ext_ssd_gradient);

// out = a * x + b * y, per voxel and component.
extern "C" __global__ void pyca_ext_field_axpby(pyca::FieldView out, float a, pyca::FieldView x, float b,
                                                pyca::FieldView y) {
  PYCA_FOR_EACH_VOXEL(out.size, i, j, k) {
    const unsigned long long v = out.index(i, j, k);
    out.x[v] = pyca_ext_voxel_axpby(a, x.x[v], b, y.x[v]);
    out.y[v] = pyca_ext_voxel_axpby(a, x.y[v], b, y.y[v]);
    out.z[v] = pyca_ext_voxel_axpby(a, x.z[v], b, y.z[v]);
  }
}
PYCA_REGISTER_KERNEL(pyca_ext_field_axpby);

// out = (a - b)^2, per voxel.
extern "C" __global__ void pyca_ext_squared_diff(pyca::ImageView out, pyca::ImageView a, pyca::ImageView b) {
  PYCA_FOR_EACH_VOXEL(out.size, x, y, z) {
    const unsigned long long i = out.index(x, y, z);
    out.data[i] = pyca_ext_voxel_squared_diff(a.data[i], b.data[i]);
  }
}
PYCA_REGISTER_KERNEL(pyca_ext_squared_diff);
