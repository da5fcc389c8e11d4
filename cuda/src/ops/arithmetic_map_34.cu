// Elementwise kernels of the `arithmetic` family for the formulas of arity 3 and 4.
#include "arithmetic_map.cuh"

PYCA_ARITH_FUNCTORS_3(PYCA_ARITH_INSTANTIATE_MAP)
PYCA_ARITH_FUNCTORS_4(PYCA_ARITH_INSTANTIATE_MAP)
