"""pyca_dispatch: a wrong decorator argument or launch keyword is a TypeError (or ValueError for a
value out of range) naming it, at definition or call time, before anything runs (issue 19)."""
import numpy as np
import pytest

import pyca as ca
from pyca.dispatch import pyca_dispatch


def _scale(out: ca.Image3D, im: ca.Image3D, s: float):
    np.asarray(out)[...] = np.asarray(im) * s


@pytest.mark.parametrize("sig", [5, 2.5, ["out: Image3D"], object()])
def test_signature_of_a_wrong_type(refused, sig):
    refused(lambda: pyca_dispatch(None, signature=sig, register=False)(_scale), TypeError, ["_scale", "signature"])


@pytest.fixture
def op():
    return pyca_dispatch(None, register=False)(_scale)


@pytest.mark.parametrize("kw,value", [("grid", "x"), ("grid", (1.5,)), ("grid", (1, 2, 3, 4)), ("block", "abc"),
                                      ("block", None.__class__), ("grid", (True, 1))])
def test_launch_keyword_of_a_wrong_type(refused, make, op, kw, value):
    im, out = make("image", (4, 5, 6)), make("image", (4, 5, 6), seed=1)
    refused(lambda: op(out, im, 2.0, **{kw: value}), TypeError, ["_scale", kw], im, out)


@pytest.mark.parametrize("kw,value", [("grid", 0), ("block", (32, 0, 1)), ("grid", (-1,))])
def test_launch_keyword_out_of_range(refused, make, op, kw, value):
    im, out = make("image", (4, 5, 6)), make("image", (4, 5, 6), seed=1)
    refused(lambda: op(out, im, 2.0, **{kw: value}), ValueError, ["_scale", kw], im, out)


def test_default_block_of_a_wrong_type(refused):
    refused(lambda: pyca_dispatch(None, block="x", register=False)(_scale), TypeError, ["_scale", "block"])


def test_good_launch_keywords_still_run_the_cpu_version(make, op):
    im, out = make("image", (4, 5, 6)), make("image", (4, 5, 6), seed=1)
    op(out, im, 2.0, grid=(1, 1), block=32)
    np.testing.assert_allclose(np.asarray(out), 2.0 * np.asarray(im))
