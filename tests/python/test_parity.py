"""CPU/GPU parity of every registered pyca operation (the built-in ones from ops/*.yaml and pyca.ext),
generated from pyca.registry: one test per operation, overload, grid (odd 3-D, 2-D) and enum value,
on seeded random inputs, within each operation's tolerance. Without a GPU every case is skipped with
"needs a CUDA GPU"; operations without a GPU version are skipped with that reason."""
import pytest

from pyca.testing import parity_params


@pytest.mark.parametrize("case", parity_params(owner="pyca"))
def test_parity(case):
    case.run()
