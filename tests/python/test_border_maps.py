"""ComposeHHBorder (docs/operations/deformation.md, 'Maps extended by their border displacement'): a map
sampled beyond its grid continues by its border displacement. Against SciPy (`map_coordinates` of
f - id with mode 'nearest', plus g) with a tenth or more of the points up to 5 voxels outside, f of the
same or another size, in place on g; ComposeHH (the identity extension) differs there; its refusals;
the GPU against the CPU (skipped without a GPU). The fused LDDMM steps that use the same per-voxel rule
(math::sampleMapBorder) are tested in test_lddmm_ops.py, ComposeHH's own extension in
test_ops_deformation.py."""
import numpy as np
import pytest

import pyca as ca
from pyca.testing import needs_gpu

from deformation_helpers import MEMS, field, identity, is2d, make, map_coords, shape


def _border_map_case(grid, rng, f_shape=None):
    """f: a map whose border moves (identity + a smooth displacement of up to ~3 voxels + noise), on
    f_shape (grid's size by default); g: points of f's grid up to 5 voxels beyond it (z garbage on a
    2-D grid); and the SciPy reference f(g): f - id interpolated with mode 'nearest' (the border's
    displacement continued) plus g, z not interpolated on a 2-D grid."""
    fs = tuple(f_shape or shape(grid))
    fgrid = ca.GridInfo(ca.Vec3Di(*fs))
    idf = identity(fgrid)
    disp = np.stack([2.0 + np.sin(idf[..., 1] / 3.0), -1.5 * np.cos(idf[..., 0] / 4.0),
                     np.full(fs, 3.0)], -1) + rng.uniform(-0.3, 0.3, fs + (3,))
    f = (idf + disp).astype(np.float32)
    hi = np.array(fs, float) - 1
    g = rng.uniform(-5.0, 5.0, shape(grid) + (3,)) + rng.uniform(0, 1, shape(grid) + (3,)) * hi
    if fs[2] == 1:
        g[..., 2] = rng.uniform(-5, 5, shape(grid))
    g = g.astype(np.float32)
    ref = np.stack([map_coords(f[..., k] - idf[..., k], g, "nearest") for k in range(3)], -1) + g
    if fs[2] == 1:  # an axis of size 1 is not interpolated: f's z plane, no border term
        ref[..., 2] = map_coords(f[..., 2], g, "nearest")
    outside = np.zeros(shape(grid), bool)
    for k in range(3 if fs[2] > 1 else 2):
        outside |= (g[..., k] < 0) | (g[..., k] > hi[k])
    return f, fgrid, g, ref, outside


@pytest.mark.parametrize("f_shape", [None, (9, 12, 7)], ids=["same", "other"])
@pytest.mark.parametrize("mem", MEMS)
def test_compose_hh_border_matches_scipy_outside_the_grid(mem, grid, rng, f_shape):
    """ComposeHHBorder against SciPy's 'nearest' extension of f - id, with a tenth or more of the
    points beyond f's grid (up to 5 voxels); ComposeHH (the identity extension) differs there by the
    border's displacement. f of another size than g: g holds voxel coordinates of f's grid. out may
    be g."""
    if f_shape is not None and is2d(grid):
        f_shape = f_shape[:2] + (1,)
    f, fgrid, g, ref, outside = _border_map_case(grid, rng, f_shape)
    assert outside.mean() > 0.1
    out = field(mem, grid)
    ca.ComposeHHBorder(out, make(mem, f, fgrid), make(mem, g, grid))
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=2e-4)
    G = make(mem, g, grid)
    ca.ComposeHHBorder(G, make(mem, f, fgrid), G)  # in place on g
    np.testing.assert_array_equal(G.numpy(), out.numpy())
    if f_shape is None:
        pid = field(mem, grid)
        ca.ComposeHH(pid, make(mem, f, fgrid), make(mem, g, grid))
        # (the border displacement is 1.2-3.3 voxels a component; a point just outside takes part of it)
        assert np.median(np.abs(pid.numpy() - ref)[outside].max(-1)) > 1.0
        np.testing.assert_allclose(pid.numpy()[~outside], ref[~outside], rtol=0, atol=2e-4)


@needs_gpu
@pytest.mark.parametrize("f_shape", [None, (9, 12, 7)], ids=["same", "other"])
def test_compose_hh_border_gpu_matches_cpu(grid, f_shape):
    """The CUDA kernel and the CPU loop call one per-voxel function (math::composeBorderVoxel, i.e.
    math::sampleMapBorder): the same maps to rounding, beyond the grid included."""
    if f_shape is not None and is2d(grid):
        f_shape = f_shape[:2] + (1,)
    f, fgrid, g, _, _ = _border_map_case(grid, np.random.default_rng(11), f_shape)
    res = []
    for mem in (ca.MEM_HOST, ca.MEM_DEVICE):
        out = field(mem, grid)
        ca.ComposeHHBorder(out, make(mem, f, fgrid), make(mem, g, grid))
        res.append(out.numpy())
    np.testing.assert_allclose(res[1], res[0], rtol=1e-6, atol=2e-5)


@pytest.mark.parametrize("mem", MEMS)
def test_compose_hh_border_refuses_bad_arguments(mem, grid, rng):
    f, fgrid, g, _, _ = _border_map_case(grid, rng)
    F, G = make(mem, f, fgrid), make(mem, g, grid)
    with pytest.raises(ValueError, match=r"ComposeHHBorder.*must not share memory"):
        ca.ComposeHHBorder(F, F, G)
    with pytest.raises(ValueError, match=r"ComposeHHBorder.*'g'"):
        ca.ComposeHHBorder(field(mem, grid), F, ca.Field3D(ca.GridInfo(ca.Vec3Di(5, 4, 3)), mem))
    np.testing.assert_array_equal(F.numpy(), f)
    np.testing.assert_array_equal(G.numpy(), g)
