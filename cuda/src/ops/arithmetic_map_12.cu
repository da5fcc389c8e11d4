// Elementwise kernels of the `arithmetic` family for the formulas of arity 1 and 2.
#include "arithmetic_map.cuh"

PYCA_ARITH_FUNCTORS_1(PYCA_ARITH_INSTANTIATE_MAP)
PYCA_ARITH_FUNCTORS_2(PYCA_ARITH_INSTANTIATE_MAP)
