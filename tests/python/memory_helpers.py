"""The memory types a test runs on, as pytest parameters (a helper module, not a test module:
conftest.py puts this folder on sys.path): MEM_HOST always, MEM_DEVICE skipped without a usable GPU."""
import pytest

import pyca as ca

__all__ = ["MEMS"]

MEMS = [
    pytest.param(ca.MEM_HOST, id="host"),
    pytest.param(ca.MEM_DEVICE, id="device",
                 marks=pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")),
]
