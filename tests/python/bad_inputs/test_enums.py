"""Enumerations: a value outside the enumeration (a stray int, a memory type) is refused naming the
operation and the argument, before any work (issue 19)."""
import pytest

import pyca as ca


@pytest.fixture
def args(make):
    im, out = make("image", (5, 6, 7)), make("image", (5, 6, 7), seed=1)
    h = ca.Field3D(im.grid(), ca.MEM_HOST)
    ca.SetToIdentity(h)
    return im, out, h


@pytest.mark.parametrize("bad", [-1, 7, 99, 2**31 - 1])
def test_background_strategy(refused, args, bad):
    im, out, h = args
    refused(lambda: ca.ApplyH(out, im, h, bad), ValueError, ["ApplyH", "background"], im, out, h)


@pytest.mark.parametrize("bad", [-1, 3, 2**31 - 1])
def test_interpolation(refused, args, bad):
    im, out, h = args
    refused(lambda: ca.ApplyH(out, im, h, ca.BACKGROUND_STRATEGY_CLAMP, bad), ValueError, ["ApplyH", "interp"],
            im, out, h)


@pytest.mark.parametrize("which,bad", [("dim", 7), ("diffType", 9), ("bc", -5), ("bc", 2**31 - 1)])
def test_finite_difference_enums(refused, args, which, bad):
    im, out, _ = args
    kw = dict(dim=ca.DIM_X, diffType=ca.DIFF_CENTRAL, bc=ca.BC_CLAMP)
    kw[which] = bad
    refused(lambda: ca.FiniteDiff(out, im, kw["dim"], kw["diffType"], kw["bc"]), ValueError,
            ["FiniteDiff", which], im, out)


@pytest.mark.parametrize("kind", ["Image3D", "Field3D"])
@pytest.mark.parametrize("bad", [7, -1, ca.MEM_UNINITIALIZED])
def test_memory_type(refused, kind, bad):
    cls = getattr(ca, kind)
    # an int that is no MemoryType: TypeError from the Python layer; MEM_UNINITIALIZED: ValueError from C++
    refused(lambda: cls(ca.GridInfo((2, 3, 4)), bad), (ValueError, TypeError), [kind, "mem"])


def test_to_type(refused, make):
    im = make("image", (2, 3, 4))
    refused(lambda: im.toType(9), ValueError, ["toType", "mem"], im)
