"""The `similarity` family (docs/operations/similarity.md) against independent references.

BoxSum against scipy.ndimage.correlate with a box of ones and zero padding (truncated windows);
LNCC's value against a float64 NumPy evaluation of the documented formula (with a support, windows
truncated to it), its gradient against central finite differences of its value, the op with a support
against the unmasked one on the images cropped to it, on both memory types (the device ones skip
without a GPU).
"""
import numpy as np
import pytest
import scipy.ndimage as ndi

import pyca as ca
from memory_helpers import MEMS


def image(arr, mem):
    return ca.Image3D.from_array(np.asfortranarray(arr, np.float32), ca.GridInfo(arr.shape)).to(mem)


def box_ref(a, r):
    return ndi.correlate(np.asarray(a, np.float64), np.ones([2 * k + 1 for k in r]), mode="constant", cval=0.0)


def lncc_ref(I, J, r, w=None, eps=1e-5, s=None):
    """The documented S: windows truncated to the grid and to the support s (means weighted by s), the
    sum weighted by the mask w."""
    I, J = I.astype(np.float64), J.astype(np.float64)
    m = np.ones_like(I) if s is None else np.asarray(s, np.float64)
    n = box_ref(m, r)
    live = n > 0
    n = np.where(live, n, 1.0)
    mI, mJ = box_ref(m * I, r) / n, box_ref(m * J, r) / n
    c = box_ref(m * I * J, r) / n - mI * mJ
    vI = np.maximum(box_ref(m * I * I, r) / n - mI**2, 0)
    vJ = np.maximum(box_ref(m * J * J, r) / n - mJ**2, 0)
    cc = np.where(live, (c**2 + eps) / (vI * vJ + eps), 0.0)
    return float(np.sum(cc if w is None else w * cc))


def smooth_pair(shape, seed=0):
    rng = np.random.default_rng(seed)
    I = ndi.gaussian_filter(rng.random(shape), 1.0)
    J = 0.5 * I + 0.3 * ndi.gaussian_filter(rng.random(shape), 1.5) + 0.1
    return I.astype(np.float32), J.astype(np.float32)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("shape, r", [((11, 9, 7), (2, 1, 3)), ((13, 10, 1), (3, 2, 0)), ((6, 5, 4), (0, 4, 1))])
def test_boxsum_matches_zero_padded_correlation(mem, shape, r):
    a = np.random.default_rng(1).random(shape).astype(np.float32)
    out = image(np.zeros(shape), mem)
    ca.BoxSum(out, image(a, mem), ca.Vec3Di(*r))
    np.testing.assert_allclose(out.numpy(), box_ref(a, r), rtol=1e-5, atol=1e-5)
    # in place
    x = image(a, mem)
    ca.BoxSum(x, x, ca.Vec3Di(*r))
    np.testing.assert_allclose(x.numpy(), box_ref(a, r), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("masked", [False, True, "support"])
def test_lncc_value_and_gradient(mem, masked):
    shape, r = (9, 8, 7), (2, 2, 1)
    I, J = smooth_pair(shape)
    w = (np.random.default_rng(3).random(shape) > 0.3).astype(np.float32) if masked else None
    sup = (np.random.default_rng(4).random(shape) > 0.2).astype(np.float32) if masked == "support" else None
    g = image(np.zeros(shape), mem)
    args = ((image(I, mem), image(J, mem)) + ((image(w, mem),) if masked else ())
            + ((image(sup, mem),) if sup is not None else ()) + (ca.Vec3Di(*r),))
    S = ca.LNCC(g, *args)
    ref = lambda I_: lncc_ref(I_, J, r, w, s=sup)  # noqa: E731
    assert S == pytest.approx(ref(I), rel=1e-4)
    grad = g.numpy()
    # Central differences of the float64 reference at a few voxels (interior, border, corner).
    h = 1e-3
    for idx in [(4, 4, 3), (0, 3, 2), (8, 7, 6), (1, 0, 0), (5, 2, 6)]:
        Ip, Im = I.astype(np.float64), I.astype(np.float64)
        Ip = Ip.copy()
        Im = Im.copy()
        Ip[idx] += h
        Im[idx] -= h
        fd = (ref(Ip) - ref(Im)) / (2 * h)
        assert grad[idx] == pytest.approx(fd, rel=2e-3, abs=2e-3 * float(np.abs(grad).max())), idx


@pytest.mark.parametrize("mem", MEMS)
def test_lncc_with_a_support_does_not_read_the_voxels_outside_it(mem):
    """With a support the windows are truncated to it: whatever the images hold outside (here a slab at
    the far x face, as pyca lddmm's working grid adds), S and grad are the same bits, and equal the
    unmasked LNCC of the images cropped to the support; grad is 0 outside. With the mask alone (the sum
    weighted, the windows whole), the fills move S by -29 and -64 of 564 and grad by up to 1.6 where it is
    at most 2.5 (the mask's meaning: which windows count, not which voxels exist)."""
    shape, r = (12, 9, 7), ca.Vec3Di(2, 2, 1)
    I, J = smooth_pair(shape)
    w = np.ones(shape, np.float32)
    w[9:] = 0.0  # the far slab
    out = {}
    for support in (True, False):
        for fill in (None, 5.0, -3.0):
            Ii, Jj = I.copy(), J.copy()
            if fill is not None:
                Ii[9:], Jj[9:] = fill, -fill * np.random.default_rng(int(fill + 9)).random(Jj[9:].shape)
            g = image(np.zeros(shape), mem)
            args = (image(Ii, mem), image(Jj, mem), image(w, mem)) + ((image(w, mem),) if support else ())
            out[support, fill] = (ca.LNCC(g, *args, r), g.clone(ca.MEM_HOST).numpy())
    base = out[True, None]
    for fill in (5.0, -3.0):
        assert out[True, fill][0] == base[0]
        np.testing.assert_array_equal(out[True, fill][1], base[1])
        assert abs(out[False, fill][0] - out[False, None][0]) > 10  # the mask alone reads the slab
    assert not np.any(base[1][9:])
    g = image(np.zeros((9,) + shape[1:]), mem)
    S = ca.LNCC(g, image(I[:9], mem), image(J[:9], mem), r)
    assert base[0] == pytest.approx(S, rel=1e-5)
    np.testing.assert_allclose(base[1][:9], g.clone(ca.MEM_HOST).numpy(), rtol=1e-4, atol=1e-5)


def test_lncc_is_one_for_affine_intensity_change():
    I, _ = smooth_pair((10, 10, 10))
    g = image(np.zeros(I.shape), ca.MEM_HOST)
    S = ca.LNCC(g, image(I, ca.MEM_HOST), image(3.0 - 2.5 * I, ca.MEM_HOST), ca.Vec3Di(2, 2, 2), 1e-12)
    assert S / I.size == pytest.approx(1.0, abs=1e-3)
    assert np.abs(g.numpy()).max() < 1e-2 * I.size ** 0  # a maximum: the gradient vanishes


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("masked", [False, True])
def test_lncc_of_an_image_with_itself_is_exactly_its_maximum(mem, masked):
    # A flat region (0), a weakly textured one (variances near eps) and a textured one: cc is exactly 1 in
    # every window and I = J exactly a stationary point (with eps in the denominator only, the weakly
    # textured windows give cc < 1 and a gradient that raises their contrast).
    shape, r = (12, 10, 9), ca.Vec3Di(2, 2, 2)
    rng = np.random.default_rng(5)
    I = np.zeros(shape, np.float32)
    I[4:8] = 0.3 + 0.004 * rng.standard_normal((4,) + shape[1:])
    I[8:] = ndi.gaussian_filter(rng.random((4,) + shape[1:]), 1.0)
    w = (rng.random(shape) > 0.3).astype(np.float32)
    g = image(np.ones(shape), mem)
    args = (image(I, mem), image(I, mem)) + ((image(w, mem),) if masked else ()) + (r,)
    S = ca.LNCC(g, *args)
    assert S == (float(w.astype(np.float64).sum()) if masked else float(I.size))
    assert not np.any(g.clone(ca.MEM_HOST).numpy())
    # the reference agrees that this is the maximum: every window's cc is 1 (to float64 rounding)
    assert lncc_ref(I, I, (2, 2, 2)) == pytest.approx(I.size, rel=1e-9)


def test_bad_arguments():
    a = image(np.random.default_rng(0).random((6, 6, 6)), ca.MEM_HOST)
    b = a.clone()
    with pytest.raises(ValueError, match="radius"):
        ca.BoxSum(b, a, ca.Vec3Di(-1, 1, 1))
    with pytest.raises(ValueError, match="grad"):
        ca.LNCC(a, a, b, ca.Vec3Di(1, 1, 1))
    with pytest.raises(ValueError, match="eps"):
        ca.LNCC(ca.Image3D(a.grid(), ca.MEM_HOST), a, b, ca.Vec3Di(1, 1, 1), 0.0)
