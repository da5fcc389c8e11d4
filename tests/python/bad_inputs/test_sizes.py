"""Sizes: integer overflow of sizes, voxel counts and allocations, and parameters that would make
the work unbounded (issue 19). Each is refused at once with a named exception."""
import time

import numpy as np
import pytest

import pyca as ca

HUGE = (2**21, 2**21, 2**20)  # 2^62 voxels: 4 * 2^62 bytes wrapped to a 0-byte allocation before


def test_size_beyond_a_32_bit_int_names_the_value(refused):
    msg = refused(lambda: ca.GridInfo((2**31, 5, 5)), (OverflowError, ValueError), ["2147483648"])
    assert "overloaded" not in msg  # one line, not SWIG's list of prototypes
    refused(lambda: ca.Vec3Di(5, -2**31 - 1, 5), OverflowError, ["2147483649"])
    refused(lambda: ca.GaussianBlur(ca.Image3D((3, 3, 3)), ca.Image3D((3, 3, 3)), (1, 1, 1), (2**40, 1, 1)),
            (OverflowError, TypeError), ["kRadius"])


@pytest.mark.parametrize("kind", ["GridInfo", "Image3D", "Field3D"])
def test_voxel_count_overflow_is_refused(refused, kind):
    make = {"GridInfo": ca.GridInfo, "Image3D": lambda s: ca.Image3D(s), "Field3D": lambda s: ca.Field3D(s)}[kind]
    refused(lambda: make(HUGE), ValueError, ["GridInfo", "size", "2097152"])
    refused(lambda: make((2**31 - 1, 2**31 - 1, 2**31 - 1)), ValueError, ["size"])


def test_set_size_overflow_leaves_the_grid_alone(refused):
    g = ca.GridInfo((4, 5, 6), (1.0, 2.0, 3.0))
    refused(lambda: g.setSize(ca.Vec3Di(*HUGE)), ValueError, ["size"], g)


def test_set_grid_to_an_overflowing_grid_is_refused(refused, make):
    im = make("image", (4, 5, 6))
    refused(lambda: im.setGrid(ca.GridInfo(HUGE)), ValueError, ["size"], im)


@pytest.mark.parametrize("radius", [(2**20 + 1, 2, 2), (10**9, 2, 2), (2, 2, 2**31 - 1)])
def test_gaussian_blur_huge_radius_is_refused_at_once(refused, make, radius):
    im, out = make("image", (5, 6, 7)), make("image", (5, 6, 7), seed=1)
    t = time.perf_counter()
    refused(lambda: ca.GaussianBlur(out, im, ca.Vec3Df(1, 1, 1), ca.Vec3Di(*radius)), ValueError,
            ["GaussianBlur", "kRadius"], im, out)
    assert time.perf_counter() - t < 1.0


def test_gaussian_radius_beyond_the_image_is_bounded_work(make):
    """A radius larger than the image (allowed: the border is clamped) costs as much as one of the
    image's size, and gives the clamped result (scipy's mode='nearest', truncate at the radius)."""
    scipy_ndimage = pytest.importorskip("scipy.ndimage")
    im, out = make("image", (9, 8, 7)), make("image", (9, 8, 7))
    t = time.perf_counter()
    ca.GaussianBlur(out, im, ca.Vec3Df(2.0, 3.0, 1.5), ca.Vec3Di(2**20, 50, 2**20))
    assert time.perf_counter() - t < 2.0
    ref = np.asarray(im).astype(np.float64)
    for axis, (s, r) in enumerate([(2.0, 60), (3.0, 50), (1.5, 60)]):  # weights beyond 60 underflow
        ref = scipy_ndimage.gaussian_filter1d(ref, s, axis=axis, mode="nearest", radius=r)
    np.testing.assert_allclose(np.asarray(out), ref, atol=2e-5)


@pytest.mark.parametrize("sigma,spacing", [((1e9, 1, 1), (1, 1, 1)), ((1, 1, 1), (1e-30, 1, 1)),
                                           ((1, 3e38, 1), (1, 1e-3, 1))])
def test_gaussian_blur_huge_sigma_in_voxels_is_refused(refused, make, sigma, spacing):
    im, out = make("image", (5, 6, 7), spacing), make("image", (5, 6, 7), spacing, seed=1)
    refused(lambda: ca.GaussianBlur(out, im, ca.Vec3Df(*sigma)), ValueError, ["GaussianBlur", "sigma"], im, out)
    f, fo = make("field", (5, 6, 7), spacing), make("field", (5, 6, 7), spacing, seed=1)
    refused(lambda: ca.GaussianBlur(fo, f, ca.Vec3Df(*sigma)), ValueError, ["GaussianBlur", "sigma"], f, fo)


def test_gaussian_filter_huge_radius_is_refused(refused):
    g = ca.GaussianFilter()
    refused(lambda: g.updateParams(ca.Vec3Di(5, 6, 7), ca.Vec3Df(1, 1, 1), ca.Vec3Di(3, 10**9, 3)), ValueError,
            ["GaussianFilter", "kRadius"])


@pytest.mark.parametrize("lpow", [65, 2**31 - 1])
def test_fluid_operator_huge_power_is_refused_at_once(refused, make, lpow):
    f, out = make("field", (6, 5, 4)), make("field", (6, 5, 4), seed=1)
    t = time.perf_counter()
    refused(lambda: ca.ApplyFluidOperator(out, f, 1.0, 0.5, 1.0, lpow), ValueError, ["ApplyFluidOperator", "lpow"],
            f, out)
    k = ca.FluidKernelFFT()
    k.setGrid(f.grid())
    refused(lambda: k.setLPow(lpow), ValueError, ["lpow"])
    assert k.getLPow() == 1
    assert time.perf_counter() - t < 1.0


@pytest.mark.parametrize("param,value", [("time_steps", 10**12), ("lpow", 10**12), ("lpow", 65),
                                         ("time_steps", float("nan"))])
def test_lddmm_unbounded_parameters_are_refused_at_once(refused, param, value):
    from pyca.apps import lddmm

    rng = np.random.default_rng(0)
    a, b = rng.uniform(0, 1, (12, 12, 12)).astype(np.float32), rng.uniform(0, 1, (12, 12, 12)).astype(np.float32)
    t = time.perf_counter()
    refused(lambda: lddmm.register(a, b, **{param: value}), ValueError, ["lddmm", param], a, b)
    assert time.perf_counter() - t < 5.0
