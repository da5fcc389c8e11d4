"""Fixtures shared by pyca's Python tests; this folder on sys.path, so that helper modules here (not test
modules: pytest's importlib mode keeps those apart) import by name, e.g. deformation_helpers."""
import os
import sys

import numpy as np
import pytest

import pyca as ca

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture(params=[(17, 23, 31), (31, 33, 1)], ids=["3d", "2d"])
def grid(request):
    """An odd-sized 3-D grid and a 2-D one, both with anisotropic spacing and an origin."""
    size = request.param
    sp = (1.5, 2.1, 1.0) if size[2] == 1 else (1.5, 1.0, 2.0)
    return ca.GridInfo(size, sp, (0.5, -1.0, 2.0))


@pytest.fixture(scope="module")
def kernel_cache(tmp_path_factory):
    """One kernel cache folder for a module's compilations (and its subprocesses' cache hits); a module
    uses it with pytestmark = pytest.mark.usefixtures("kernel_cache")."""
    d = tmp_path_factory.mktemp("kernel-cache")
    ca.cuda.set_cache_dir(str(d))
    yield d
    ca.cuda.set_cache_dir(None)
