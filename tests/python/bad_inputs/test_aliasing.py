"""Aliasing: an output that shares memory with an input is refused when the operation cannot run
in place, whether it is the same object or another one over the same memory (a from_array view, a
field's component) (issue 19)."""
import numpy as np
import pytest

import pyca as ca


def view_of(a):
    """An Image3D/Field3D over the same memory as the host array `a` (no copy)."""
    v = type(a).from_array(np.asarray(a), a.grid())
    assert v.rawptr() == a.rawptr()
    return v


def component(f, c):
    """An Image3D over component c of the host field f (no copy)."""
    plane = np.asarray(f)[..., c]
    assert plane.flags.f_contiguous
    return ca.Image3D.from_array(plane, f.grid())


def test_splat_into_a_view_of_its_input(refused, make):
    im = make("image", (5, 6, 7))
    h = ca.Field3D(im.grid(), ca.MEM_HOST)
    ca.SetToIdentity(h)
    out = view_of(im)
    refused(lambda: ca.Splat(out, h, im), ValueError, ["Splat", "out", "im"], im, h)
    refused(lambda: ca.Splat(im, h, im), ValueError, ["Splat"], im, h)  # the same object: refused before too


@pytest.mark.parametrize("c", [0, 1, 2])
def test_gradient_of_a_component_of_its_output(refused, make, c):
    out = make("field", (5, 6, 7))
    im = component(out, c)
    refused(lambda: ca.Gradient(out, im), ValueError, ["Gradient", "out", "im"], out)


def test_apply_h_into_a_view_of_its_image(refused, make):
    h = make("field", (5, 6, 7))
    ca.SetToIdentity(h)
    im = make("image", (5, 6, 7))
    refused(lambda: ca.ApplyH(view_of(im), im, h), ValueError, ["ApplyH", "out", "im"], h, im)


def test_convolve_with_a_kernel_that_is_its_output(refused, make):
    out = make("image", (3, 3, 3))
    im = make("image", (3, 3, 3), seed=1)
    refused(lambda: ca.Convolve(out, im, view_of(out)), ValueError, ["Convolve", "kernel"], out, im)


def test_partial_overlap_is_aliasing(refused, make):
    buf = np.asfortranarray(np.random.default_rng(0).uniform(-1, 1, (5, 6, 9)).astype(np.float32))
    a = ca.Image3D.from_array(buf[:, :, :7])  # slices 0..6
    b = ca.Image3D.from_array(buf[:, :, 2:])  # slices 2..8: overlaps a
    refused(lambda: ca.FiniteDiff(b, a, ca.DIM_X), ValueError, ["FiniteDiff"], a, buf)


def test_disjoint_views_of_one_array_are_not_aliasing(make):
    buf = np.asfortranarray(np.random.default_rng(0).uniform(-1, 1, (5, 6, 14)).astype(np.float32))
    a = ca.Image3D.from_array(buf[:, :, :7])
    b = ca.Image3D.from_array(buf[:, :, 7:])
    ca.FiniteDiff(b, a, ca.DIM_X, ca.DIFF_FORWARD, ca.BC_CLAMP)
    ref = np.diff(buf[:, :, :7].astype(np.float64), axis=0, append=buf[-1:, :, :7])
    np.testing.assert_allclose(buf[:, :, 7:], ref, atol=1e-6)
