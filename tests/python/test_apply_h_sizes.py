"""ApplyH with a source of another size than the output (docs/operations/deformation.md, "Deforming
images and fields"): h, on the output's grid, holds voxel coordinates of the source's own grid, and
the background strategy applies at the source's borders. References: scipy.ndimage.map_coordinates
(order=1 for trilinear, order=0 for nearest neighbour) on the source; the identity H-field of the
source's grid for the identity backgrounds (closed form); and the generated CPU/GPU parity cases,
which must include sources of another size."""
import numpy as np
import pytest
import scipy.ndimage as ndi

import pyca as ca
from pyca import registry
from memory_helpers import MEMS

# (output size, source size): the source smaller along some axes, larger along others; a 2-D pair.
SIZES = {"3d": ((13, 10, 8), (9, 14, 6)), "2d": ((31, 33, 1), (23, 40, 1))}
MODES = {ca.BACKGROUND_STRATEGY_CLAMP: "nearest", ca.BACKGROUND_STRATEGY_WRAP: "grid-wrap",
         ca.BACKGROUND_STRATEGY_PARTIAL_ZERO: "grid-constant", ca.BACKGROUND_STRATEGY_ZERO: "constant"}


def _arr(a, mem, spacing=(1.0, 1.0, 1.0)):
    a = np.asarray(a, np.float32)
    cls = ca.Field3D if a.ndim == 4 else ca.Image3D
    host = cls(ca.GridInfo(a.shape[:3], spacing, (0.0, 0.0, 0.0)), ca.MEM_HOST)
    np.asarray(host)[...] = a
    return host if mem == ca.MEM_HOST else host.clone(mem)


def _positions(out_size, src_size, rng, nn=False):
    """The identity of the output grid scaled onto the source's box, plus noise: positions inside
    the source and up to ~1 voxel beyond each border. z holds garbage on a 2-D source (ignored).
    nn: no position within 0.01 of a half voxel (where rounding conventions may differ)."""
    idx = np.stack(np.meshgrid(*[np.arange(n, dtype=np.float64) for n in out_size], indexing="ij"), -1)
    scale = np.array([(s - 1) / max(o - 1, 1) for o, s in zip(out_size, src_size)])
    h = idx * scale * 1.15 - 0.075 * (np.array(src_size) - 1) + rng.uniform(-0.6, 0.6, idx.shape)
    if nn:
        frac = h - np.floor(h)
        h = np.where(np.abs(frac - 0.5) < 0.01, h + 0.05, h)
    if src_size[2] == 1:
        h[..., 2] = rng.uniform(-4, 4, out_size)
    return h.astype(np.float32)


def _scipy(vol, pts, order, mode):
    vol, pts = np.asarray(vol, np.float64), np.asarray(pts, np.float64)
    if vol.shape[2] == 1:  # the documented 2-D rule: an axis of size 1 is not interpolated
        return ndi.map_coordinates(vol[:, :, 0], [pts[..., 0], pts[..., 1]], order=order, mode=mode)
    return ndi.map_coordinates(vol, [pts[..., 0], pts[..., 1], pts[..., 2]], order=order, mode=mode)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("kind", list(SIZES))
@pytest.mark.parametrize("bg", list(MODES), ids=lambda b: MODES[b])
@pytest.mark.parametrize("interp", [ca.INTERP_LINEAR, ca.INTERP_NN], ids=["linear", "nn"])
def test_apply_h_of_a_source_of_another_size_matches_scipy(mem, kind, bg, interp):
    rng = np.random.default_rng(7)
    out_size, src_size = SIZES[kind]
    src = rng.uniform(-1, 1, src_size).astype(np.float32)
    h = _positions(out_size, src_size, rng, nn=interp == ca.INTERP_NN)
    # The grids' spacings differ too: ApplyH reads neither (voxel coordinates only).
    out = ca.Image3D(ca.GridInfo(out_size, (1.5, 1.0, 2.0), (0.0, 0.0, 0.0)), mem)
    ca.ApplyH(out, _arr(src, mem, (0.7, 2.0, 1.0)), _arr(h, mem, (1.5, 1.0, 2.0)), bg, interp)
    order = 1 if interp == ca.INTERP_LINEAR else 0
    if interp == ca.INTERP_NN and bg == ca.BACKGROUND_STRATEGY_ZERO:
        # scipy's order-0 'constant' counts [-0.5, n - 0.5] as inside; pyca's ZERO, as for every
        # order, [0, n - 1] (documented): compare with 'nearest' there, 0 beyond.
        want = _scipy(src, h, 0, "nearest")
        n = np.array(src_size)
        ax = [a for a in range(3) if n[a] > 1]
        inside = np.all([(h[..., a] >= 0) & (h[..., a] <= n[a] - 1) for a in ax], axis=0)
        want = np.where(inside, want, 0.0)
    else:
        want = _scipy(src, h, order, MODES[bg])
    assert np.isfinite(want).all() and (want == 0).mean() < 0.75  # many positions fall inside
    atol = 2e-6
    if bg == ca.BACKGROUND_STRATEGY_WRAP:
        # The wrapped coordinate x - n floor(x / n) is float32: off by up to half its ulp (about
        # 1.9e-6 at n = 40), times a tap difference up to 2 (values in [-1, 1]).
        atol += float(np.spacing(np.float32(max(src_size))))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=atol)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("kind", list(SIZES))
def test_apply_h_fields_of_another_size(mem, kind):
    rng = np.random.default_rng(3)
    out_size, src_size = SIZES[kind]
    h = _positions(out_size, src_size, rng)
    # The identity H-field of the source's grid, extended by the identity beyond its borders
    # (PARTIAL_ID, ID): the result is the position itself, 0 along an axis of size 1.
    ident = np.stack(np.meshgrid(*[np.arange(n, dtype=np.float32) for n in src_size], indexing="ij"), -1)
    want = h.astype(np.float64).copy()
    if src_size[2] == 1:
        want[..., 2] = 0.0
    for bg in (ca.BACKGROUND_STRATEGY_PARTIAL_ID, ca.BACKGROUND_STRATEGY_ID):
        out = ca.Field3D(ca.GridInfo(out_size), mem)
        ca.ApplyH(out, _arr(ident, mem), _arr(h, mem), bg)
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-6, atol=2e-5)
    # Any field, component by component, as images are.
    f = rng.uniform(-1, 1, src_size + (3,)).astype(np.float32)
    out = ca.Field3D(ca.GridInfo(out_size), mem)
    ca.ApplyH(out, _arr(f, mem), _arr(h, mem), ca.BACKGROUND_STRATEGY_PARTIAL_ZERO)
    want = np.stack([_scipy(f[..., c], h, 1, "grid-constant") for c in range(3)], -1)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("mem", MEMS)
def test_apply_h_still_needs_h_of_the_output_size(mem):
    im = ca.Image3D(ca.GridInfo((6, 5, 4)), mem)
    h = ca.Field3D(ca.GridInfo((7, 5, 4)), mem)
    out = ca.Image3D(ca.GridInfo((6, 5, 4)), mem)
    with pytest.raises(ValueError, match=r"ApplyH: size of 'h' \(7x5x4\) does not match size of 'out' \(6x5x4\)"):
        ca.ApplyH(out, im, h)
    v = ca.Field3D(ca.GridInfo((6, 5, 4)), mem)
    with pytest.raises(ValueError, match=r"ApplyV: size of 'im'"):  # ApplyV keeps one size
        ca.ApplyV(out, ca.Image3D(ca.GridInfo((3, 5, 4)), mem), v)


def test_parity_cases_include_sources_of_another_size():
    """The generated CPU/GPU parity cases (tests/python/test_parity.py) of ApplyH include sources of
    another size, in 3-D and 2-D, for every overload; their inputs run on the CPU here."""
    cases = registry.parity_cases(names=["ApplyH"], gpu_available=True)
    kinds = {(c.overload, c.grid_kind) for c in cases}
    assert {(k, g) for k in (0, 1) for g in ("3d-any-size", "2d-any-size")} <= kinds
    for c in cases:
        if not c.grid_kind.endswith("-any-size") or c.skip_reason:
            continue
        out, src, h = c.inputs()[:3]
        base = c.grid_kind.removesuffix("-any-size")
        assert tuple(out.size()) == tuple(h.size()) == registry.PARITY_GRIDS[base]["size"]
        assert tuple(src.size()) == registry.OTHER_SIZE_GRIDS[base]["size"]
        args = c.inputs()
        c.op.call(*args)  # the host half of the case
        assert np.isfinite(args[0].numpy()).all()
