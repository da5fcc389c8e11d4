"""Shared checks of the bad-input tests (issue 19): a refused call raises the named exception, its
message names the operation or the argument, and it changes none of its inputs."""
import copy

import numpy as np
import pytest

import pyca as ca


def _snapshot(x):
    if isinstance(x, (ca.Image3D, ca.Field3D)):
        return ("array", str(x.grid()), x.memType(), np.array(x.numpy(), copy=True))
    if isinstance(x, ca.GridInfo):
        return ("grid", str(x))
    if isinstance(x, np.ndarray):
        return ("ndarray", x.dtype, x.shape, x.copy())
    try:
        return ("value", copy.deepcopy(x))
    except Exception:  # noqa: BLE001 - an object that cannot be copied is compared by repr
        return ("repr", repr(x))


def _same(a, b):
    if a[0] != b[0] or len(a) != len(b):
        return False
    for u, v in zip(a[1:], b[1:]):
        if isinstance(u, np.ndarray):
            if u.shape != v.shape or not np.array_equal(u, v, equal_nan=u.dtype.kind == "f"):
                return False
        elif u != v and not (u is v):
            return False
    return True


def refuses(call, exc, names, *inputs):
    """Calls `call()`, expecting `exc`; every string of `names` must be in the message, and every
    object of `inputs` (pyca arrays, grids, NumPy arrays, values) must be unchanged afterwards.
    Returns the message."""
    before = [_snapshot(x) for x in inputs]
    with pytest.raises(exc) as info:
        call()
    msg = str(info.value)
    for n in names:
        assert n in msg, f"the message does not name {n!r}: {msg}"
    for i, (x, b) in enumerate(zip(inputs, before)):
        assert _same(_snapshot(x), b), f"input {i} ({type(x).__name__}) was changed by the refused call"
    return msg


@pytest.fixture
def refused():
    return refuses


def host(kind, size, spacing=(1.0, 1.0, 1.0), origin=(0.0, 0.0, 0.0), seed=0):
    """A host Image3D/Field3D of `size` filled with random values."""
    g = ca.GridInfo(size, spacing, origin)
    a = (ca.Image3D if kind == "image" else ca.Field3D)(g, ca.MEM_HOST)
    np.asarray(a)[...] = np.random.default_rng(seed).uniform(-1, 1, np.asarray(a).shape)
    return a


@pytest.fixture
def make():
    return host
