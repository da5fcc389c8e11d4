"""The fixed image plus the bias trilinear interpolation gives the warped moving image (lddmm's
interp_blur='matched', pyca.registration.interpolation.InterpTarget; docs/lddmm.md, 'Interpolation blur'): against
SciPy's trilinear interpolation of a quadratic image, where the second-order bias is the whole error; an
image registered onto itself is the identity (with lddmm's ssd and lncc and with syn); the known-map brain pair
keeps its accuracy. ca.ApplyHUnblurred (syn's sampling with the bias removed, in one pass): against SciPy and
with the bits of the chain of ops it replaces."""
import numpy as np
import pytest

import pyca as ca
from pyca.apps import data, lddmm, syn
from pyca.registration.interpolation import InterpTarget

ndimage = pytest.importorskip("scipy.ndimage")


def _quadratic(pts):
    """A quadratic with every square and cross term (trilinear interpolation is exact on x y terms and
    off by t (1 - t) q_kk / 2 on x_k^2: the bias the target models)."""
    x, y, z = pts[..., 0], pts[..., 1], pts[..., 2]
    return 0.05 * x**2 - 0.03 * y**2 + 0.04 * z**2 + 0.02 * x * y - 0.015 * y * z + 0.01 * x * z + 0.1 * x - 0.2 * z


def _index(shape):
    return np.stack(np.meshgrid(*[np.arange(n, dtype=float) for n in shape], indexing="ij"), -1)


def _field(a, grid):
    f = ca.Field3D(grid, ca.MEM_HOST)
    for k in range(3):
        ca.Copy(f, ca.Image3D.from_array(np.asfortranarray(a[..., k], np.float32), grid), k)
    return f


def _scipy_linear(M, pts):
    return ndimage.map_coordinates(M, np.moveaxis(pts, -1, 0), order=1, mode="nearest")


def _inside(pts, shape, margin=1.0):
    """Points whose trilinear taps and their second differences stay off the border (CLAMP there)."""
    return np.all((pts >= margin) & (pts <= np.array(shape) - 1 - margin), axis=-1)


def test_target_through_an_oblique_linear_stage_is_scipys_trilinear_sample():
    # fixed voxel x -> moving voxel y = A x + t, A oblique (rotation, scaling, shear); M = q on the moving
    # voxels, F(x) = q(A x + t) exactly. The target of F at the identity map is then M's trilinear sample at
    # A x + t (the warped moving image): F plus interpolation's bias, whole for a quadratic.
    c, s = np.cos(0.4), np.sin(0.4)
    A = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ np.diag([1.3, 0.8, 1.1])
    A[2, 0] = 0.2
    t = np.array([9.3, 3.6, 2.45])
    fshape, mshape = (14, 13, 12), (30, 28, 20)
    y = _index(fshape) @ A.T + t
    M = _quadratic(_index(mshape)).astype(np.float32)
    F = _quadratic(y).astype(np.float32)
    fg, mg = ca.GridInfo(fshape), ca.GridInfo(mshape)
    Mim, Fim = ca.Image3D.from_array(np.asfortranarray(M), mg), ca.Image3D.from_array(np.asfortranarray(F), fg)
    Mmat = np.eye(4)
    Mmat[:3, :3], Mmat[:3, 3] = A, t
    h = ca.Field3D(fg, ca.MEM_HOST)
    ca.SetToIdentity(h)
    target = InterpTarget(fg, ca.MEM_HOST, Fim, Mim, Mmat).update(h).numpy()
    want = _scipy_linear(M.astype(np.float64), y)
    inner = _inside(y, mshape)
    assert inner.sum() > 0.5 * inner.size
    err = np.abs(target - want)[inner].max()
    bias = np.abs(F - want)[inner].max()  # what the target adds: interpolation's bias
    assert err < 2e-4 and bias > 50 * err, (err, bias)


def test_target_through_a_map_on_one_grid_is_scipys_trilinear_sample():
    # The coarse scales: I0 on the fixed grid, sampled through phi_{1,0} itself. A smooth map with every
    # fraction: F(x) = q(h(x)), M = q.
    shape = (16, 15, 14)
    x = _index(shape)
    pts = x + np.stack([1.3 + 0.4 * np.sin(x[..., 1] / 3.0), -0.55 + 0.3 * np.cos(x[..., 2] / 2.0),
                        0.8 + 0.5 * np.sin(x[..., 0] / 4.0)], -1)
    M = _quadratic(x).astype(np.float32)
    F = _quadratic(pts).astype(np.float32)
    g = ca.GridInfo(shape, (1.5, 1.0, 2.0))  # spacing plays no part: all in voxels
    Mim = ca.Image3D.from_array(np.asfortranarray(M), g)
    target = InterpTarget(g, ca.MEM_HOST, ca.Image3D.from_array(np.asfortranarray(F), g), Mim).update(_field(pts, g))
    want = _scipy_linear(M.astype(np.float64), pts)
    inner = _inside(pts, shape)
    assert inner.sum() > 0.3 * inner.size
    err = np.abs(target.numpy() - want)[inner].max()
    assert err < 2e-4 and np.abs(F - want)[inner].max() > 50 * err, err
    # whole-voxel points: the target is F itself, bit for bit
    whole = x + np.array([1.0, -2.0, 0.0])
    t2 = InterpTarget(g, ca.MEM_HOST, ca.Image3D.from_array(np.asfortranarray(F), g), Mim).update(_field(whole, g))
    np.testing.assert_array_equal(t2.numpy(), F)


def _unblurred_inputs(shape, mshape, seed=0):
    """A quadratic moving image M on mshape, its half second differences (BC: border repeated) and a smooth
    map from shape into mshape's voxels with every fraction (some points past the border)."""
    x = _index(shape)
    pts = x * (np.array(mshape) / np.array(shape)) + np.stack(
        [0.7 + 0.4 * np.sin(x[..., 1] / 3.0 + seed), -0.35 + 0.3 * np.cos(x[..., 2] / 2.0),
         0.4 + 0.5 * np.sin(x[..., 0] / 4.0)], -1)
    M = _quadratic(_index(mshape)).astype(np.float32)
    curv = np.stack([(np.take(M, np.clip(np.arange(n) + 1, 0, n - 1), k) + np.take(M, np.clip(np.arange(n) - 1, 0, n - 1), k)
                      - 2 * M.astype(np.float64)) / 2 for k, n in enumerate(mshape)], -1)
    return M, curv, pts


def test_apply_h_unblurred_is_the_exact_sample_of_a_quadratic():
    # ApplyHUnblurred(M, curv, h): M's trilinear sample minus its interpolation bias, which for a quadratic is
    # the exact value q(h) wherever the taps and their second differences stay off the border; SciPy's
    # trilinear sample (mode 'nearest', CLAMP) there is off by the bias. Past the border: SciPy's sample minus
    # t (1 - t) times the (clamped) second difference sampled by SciPy, component by component.
    shape, mshape = (15, 14, 13), (18, 16, 15)
    M, curv, pts = _unblurred_inputs(shape, mshape)
    g, mg = ca.GridInfo(shape, (1.5, 1.0, 2.0)), ca.GridInfo(mshape)
    out = ca.Image3D(g, ca.MEM_HOST)
    ca.ApplyHUnblurred(out, ca.Image3D.from_array(np.asfortranarray(M), mg), _field(curv, mg), _field(pts, g))
    got = out.numpy()
    exact = _quadratic(pts)
    inner = _inside(pts, mshape)
    assert inner.sum() > 0.3 * inner.size
    lin = _scipy_linear(M.astype(np.float64), pts)
    err = np.abs(got - exact)[inner].max()
    assert err < 2e-4 and np.abs(lin - exact)[inner].max() > 50 * err, err
    t = pts - np.floor(pts)
    ref = lin - sum(t[..., k] * (1 - t[..., k]) * _scipy_linear(curv[..., k], pts) for k in range(3))
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=2e-5)


def test_apply_h_unblurred_has_the_bits_of_the_chain_it_replaces():
    # ApplyH of M and of each curvature, Floor, Sub, Mul, Add_Mul (InterpTarget with a zero base), then Sub:
    # the same bits on the CPU (the SIMD rows and the scalar loop alike), a 2-D grid included.
    for shape, mshape in (((37, 19, 11), (40, 21, 12)), ((33, 17, 1), (35, 20, 1))):
        M, curv, pts = _unblurred_inputs(shape, mshape, seed=1)
        if mshape[2] == 1:
            pts[..., 2], curv[..., 2] = 0.0, 0.0
        g, mg = ca.GridInfo(shape), ca.GridInfo(mshape)
        Mi, h = ca.Image3D.from_array(np.asfortranarray(M), mg), _field(pts, g)
        zero = ca.Image3D(g, ca.MEM_HOST)
        ca.SetMem(zero, 0.0)
        it = InterpTarget(g, ca.MEM_HOST, zero, Mi, np.eye(4))
        want = ca.Image3D(g, ca.MEM_HOST)
        ca.ApplyH(want, Mi, h)
        ca.Sub_I(want, it.update(h))
        got = ca.Image3D(g, ca.MEM_HOST)
        ca.ApplyHUnblurred(got, Mi, it.curvature_field(), h)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    with pytest.raises(ValueError, match="ApplyHUnblurred.*curv"):
        ca.ApplyHUnblurred(got, Mi, ca.Field3D(g, ca.MEM_HOST), h)


def _assert_identity(res, want_map, what):
    # exactly: every scale starts at a stationary point of the match and takes no step
    j = res.jacobian.numpy()
    d = np.abs(res.full_map.numpy() - want_map).max()
    assert j.min() == 1.0 and j.max() == 1.0 and d == 0.0, (what, j.min(), j.max(), d)


# An image registered onto itself: lddmm with either single-contrast match (the ssd through interp_blur
# 'matched', the lncc through its exact stationary point at I = J: docs/operations/similarity.md) and
# greedy SyN (pyca register's default, lncc).
METHODS = {"lddmm ssd": (lddmm.register, {}), "lddmm lncc": (lddmm.register, {"metric": "lncc"}),
           "syn": (syn.register, {})}
# what each method's scales report when the match's direction is exactly zero at the start
ZERO_STOP = {"lddmm ssd": "converged (the update direction is zero)", "lddmm lncc": "converged (the update direction "
             "is zero)", "syn": "zero gradient"}


@pytest.mark.parametrize("method", list(METHODS))
def test_an_image_registered_onto_itself_is_the_identity(method):
    register, params = METHODS[method]
    im, _ = data.builtin_pair()
    res = register(im, im, device="cpu", **params)
    _assert_identity(res, _index(tuple(im.grid().size())), f"phantom, {method}")
    # every scale starts at a stationary point: the update direction is exactly 0, and no step is taken
    assert all(s["stop"] == ZERO_STOP[method] for s in res.timings["scales"]), res.timings["scales"]
    if method.startswith("lddmm"):
        assert [s["iterations"] for s in res.timings["scales"]] == [0, 0, 0], res.timings["scales"]
    # the same image stored LAS (x reversed, the affine saying so): the identity in the world, x reversed
    # in voxels (the moving image sampled through the linear stage's map)
    a = im.numpy()
    g = im.grid()
    n = tuple(g.size())
    sp, org = tuple(g.spacing()), tuple(g.origin())
    D = np.asarray(g.direction(), float).reshape(3, 3)
    org_las = tuple(np.asarray(org) + D[:, 0] * sp[0] * (n[0] - 1))
    las = ca.Image3D.from_array(np.asfortranarray(a[::-1]),
                                ca.GridInfo(n, sp, org_las, direction=(D @ np.diag([-1.0, 1.0, 1.0])).tolist()))
    want = _index(n)
    want[..., 0] = n[0] - 1 - want[..., 0]
    _assert_identity(register(im, las, device="cpu", **params), want, f"phantom stored LAS, {method}")


@pytest.mark.skipif(data.mni_dir() is None, reason="needs nilearn (ships the MNI152 template)")
@pytest.mark.parametrize("method", list(METHODS))
def test_a_brain_registered_onto_itself_is_the_identity(method):
    from pyca.io import split_affine

    register, params = METHODS[method]
    t1, _, aff = data.mni_template(4)
    sp, org, direction = split_affine(aff, "test", "image")
    im = ca.Image3D.from_array(t1, ca.GridInfo(t1.shape, tuple(sp), tuple(org), direction=direction))
    _assert_identity(register(im, im, device="cpu", **params), _index(t1.shape), f"MNI 4 mm, {method}")


@pytest.mark.skipif(data.mni_dir() is None, reason="needs nilearn (ships the MNI152 template)")
def test_the_known_map_brain_pair_keeps_its_accuracy(tmp_path, monkeypatch):
    # data.brain_pair's exact map psi^-1 (seed 1, 4 mm, the cubic B-spline generator) with lddmm's defaults.
    # Measured (CPU, 2026-11-28, sigma 0.003): mean map error 0.1410 voxels, Dice GM 0.9651, WM 0.9452 (sigma
    # 0.002: 0.1425, 0.9649, 0.9452; sigma 0.007: 0.1527, 0.9634, 0.9421; the fixed image blurred by sqrt(1/6)
    # moving voxels instead, fixed_blur 0.41 and interp_blur 'none', at sigma 0.007: 0.1565, 0.9608, 0.9383:
    # docs/lddmm.md, 'Interpolation blur').
    from pyca.io import split_affine

    monkeypatch.setenv("PYCA_CACHE", str(tmp_path))
    p = data.brain_pair(seed=1, resolution=4)
    true = data.brain_pair_true_map(seed=1, resolution=4)

    def image(a, aff):
        sp, org, direction = split_affine(aff, "test", "image")
        return ca.Image3D.from_array(np.asfortranarray(a, np.float32),
                                     ca.GridInfo(a.shape, tuple(sp), tuple(org), direction=direction))

    res = lddmm.register(image(p["fixed"], p["fixed_affine"]), image(p["moving"], p["moving_affine"]),
                         moving_labels=image(p["moving_labels"].astype(np.float32), p["moving_affine"]), device="cpu")
    inside = p["fixed"] > 0.1 * p["fixed"].max()
    err = np.linalg.norm(res.full_map.numpy() - true, axis=-1)[inside].mean()
    lab, ref = np.asarray(res.labels.numpy()), p["fixed_labels"]
    dice = [2 * np.sum((lab == k) & (ref == k)) / (np.sum(lab == k) + np.sum(ref == k)) for k in (1, 2)]
    assert err < 0.15 and dice[0] > 0.961 and dice[1] > 0.941, (err, dice)


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
def test_apply_h_unblurred_on_the_gpu():
    shape, mshape = (41, 37, 29), (44, 40, 31)
    M, curv, pts = _unblurred_inputs(shape, mshape, seed=2)
    g, mg = ca.GridInfo(shape), ca.GridInfo(mshape)
    out = []
    for mem in (ca.MEM_HOST, ca.MEM_DEVICE):
        o = ca.Image3D(g, mem)
        ca.ApplyHUnblurred(o, ca.Image3D.from_array(np.asfortranarray(M), mg).clone(mem), _field(curv, mg).clone(mem),
                           _field(pts, g).clone(mem))
        out.append(o.clone(ca.MEM_HOST).numpy())
    np.testing.assert_allclose(out[1], out[0], rtol=1e-5, atol=2e-5)


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
def test_the_target_and_the_identity_on_the_gpu():
    # The same target on both backends (an oblique linear stage, a random map; H100: 2.5e-6 of values up to
    # 1.2), and an image onto itself is the identity on the GPU too.
    rng = np.random.default_rng(0)
    fs, ms = (40, 44, 36), (50, 48, 40)
    F, M = rng.random(fs).astype(np.float32), rng.random(ms).astype(np.float32)
    A = np.eye(4)
    A[:3, :3] = [[1.1, 0.2, 0.0], [-0.15, 0.9, 0.05], [0.1, 0.0, 1.05]]
    A[:3, 3] = [3.3, 2.7, 1.4]
    g, mg = ca.GridInfo(fs), ca.GridInfo(ms)
    h = _field(_index(fs) + rng.uniform(-2, 2, fs + (3,)), g)
    out = []
    for mem in (ca.MEM_HOST, ca.MEM_DEVICE):
        Fi = ca.Image3D.from_array(np.asfortranarray(F), g).clone(mem)
        Mi = ca.Image3D.from_array(np.asfortranarray(M), mg).clone(mem)
        out.append(InterpTarget(g, mem, Fi, Mi, A).update(h.clone(mem)).clone(ca.MEM_HOST).numpy())
    np.testing.assert_allclose(out[1], out[0], atol=2e-5)
    im, _ = data.builtin_pair()
    for method, (register, params) in METHODS.items():
        res = register(im, im, device="gpu", **params)
        j, m = res.jacobian.clone(ca.MEM_HOST).numpy(), res.full_map.clone(ca.MEM_HOST).numpy()
        d = np.abs(m - _index(tuple(im.grid().size()))).max()
        assert j.min() == 1.0 and j.max() == 1.0 and d == 0.0, (method, j.min(), j.max(), d)
