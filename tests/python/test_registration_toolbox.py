"""pyca.registration's public parts (docs/design/registration.md): the parameter declaration and what
is built from it (checks, the command line's options and --help, -p KEY=VALUE), the transforms
against NumPy/SciPy references, the optimisers against NumPy references and closed forms, and the
metrics' public interface."""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np
import pytest

import pyca as ca
from pyca import cli
from pyca.apps import affine, atlas, lddmm
from pyca.registration import metrics, optimisers, parameters, transforms

needs_gpu = pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
MEMS = ["cpu", pytest.param("gpu", marks=needs_gpu)]


def _mem(name):
    return ca.MEM_DEVICE if name == "gpu" else ca.MEM_HOST


# ------------------------------------------------------------------------------------------------
# Parameters: one declaration
def test_one_declaration_gives_the_programs_defaults():
    assert lddmm.DEFAULTS == parameters.DEFAULTS
    assert [q.name for q in parameters.DECLARED] == list(parameters.DEFAULTS)
    assert set(atlas.DEFAULTS) == set(parameters.DEFAULTS)  # atlas overrides values, not keys
    assert parameters.get("affine").choices == ("auto",) + affine.KINDS
    assert parameters.get("metric").choices == metrics.METRICS
    assert set(metrics.DEFAULT_SIGMA) == set(metrics.DEFAULT_ALPHA) == set(metrics.METRICS)  # check() fills them
    for q in parameters.DECLARED:
        assert q.kind in ("real", "int", "choice", "ints", "reals", "step", "file", "device", "any"), q
        assert q.help or q.group, q  # every option says what it is (or 'default ...')


def _help():
    ap = cli._parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    lp = sub.choices["lddmm"]
    return lp, lp.format_help()


def test_every_declared_option_is_in_help_with_its_default():
    lp, text = _help()
    flat = " ".join(text.split())
    opts = {o: a for a in lp._actions for o in a.option_strings}
    for q in parameters.DECLARED:
        if q.group is None:
            assert q.option not in opts, q.name
            continue
        assert q.option in opts, q.name
        a = opts[q.option]
        want = list(q.default) if isinstance(q.default, tuple) else q.default
        assert a.default == want, q.name
        if q.choices:
            assert list(a.choices) == list(q.choices), q.name
        expanded = " ".join((a.help % dict(vars(a), prog="pyca lddmm")).split())
        assert "".join(expanded.split()) in "".join(flat.split()), q.name  # as given (wrapped anywhere)
        if q.default is not None and q.kind != "file":
            fmt = {"band_tol": "{:g}", "fixed_blur": "{:.3g}"}.get(q.name, "{}")
            shown = fmt.format(want)
            assert f"default {shown}" in expanded or f"default: {shown}" in expanded, (q.name, expanded)
    # the per-metric defaults of sigma, from the metrics' table
    assert ", ".join(f"{v:g} for {k}" for k, v in sorted(metrics.DEFAULT_SIGMA.items())) in flat
    assert "0.003 for ssd" in flat  # (K of gain 1: docs/lddmm.md, "The kernel's scale")


def test_the_command_line_gives_the_declared_parameters():
    lp, _ = _help()
    a = lp.parse_args(["--alpha", "0.5", "--iterations", "7", "--scales", "2,1", "--step", "0.1", "--no-normalize",
                       "--fixed-mask", "m.nii"])
    p = parameters.from_args(a)
    assert set(p) == {q.name for q in parameters.DECLARED if q.group is not None and q.kind != "file"}
    assert p["alpha"] == 0.5 and p["iterations"] == 7 and p["scales"] == [2, 1] and p["step"] == 0.1
    assert p["normalize"] == "none" and p["lpow"] == parameters.DEFAULTS["lpow"]
    assert parameters.files_of(a) == {"fixed_mask": "m.nii"}


@pytest.mark.parametrize("name, value, words", [
    ("alpha", -1.0, "alpha (per world unit) must be a number > 0"),
    ("sigma", float("nan"), "sigma must be a number > 0"),
    ("gamma", -0.5, "gamma must be a number >= 0"),
    ("lpow", 65, "lpow must be an integer in [1, 64]"),
    ("lpow", 2.5, "lpow must be an integer"),
    ("time_steps", True, "time_steps must be an integer"),
    ("step", 0.5, "step must be 'auto' or a number in (0, 0.5)"),
    ("band_tol", 1.0, "band_tol must be a number in [0, 1)"),
    ("fixed_blur", 11, "fixed_blur (moving-image voxels) must be a number in [0, 10]"),
    ("radius", 0, "radius (voxels) must be an integer >= 1"),
    ("metric", "ncc", "metric must be one of " + ", ".join(metrics.METRICS)),
    ("normalize", "zscore", "normalize must be one of percentiles, histogram, none"),
    ("affine", "elastic", "affine must be one of auto, none, rigid, affine"),
    ("percentiles", (50, 10), "percentiles must satisfy"),
])
def test_a_bad_value_is_one_line_naming_the_parameter(name, value, words):
    p = dict(parameters.DEFAULTS, **{name: value})
    with pytest.raises(ValueError) as e:
        parameters.check(p, "prog")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("prog: ") and words in msg, msg


def test_check_fills_the_metrics_defaults_and_old_spellings():
    p = parameters.check(dict(parameters.DEFAULTS, metric="LNCC", sigma=None, alpha=None, normalize=False))
    assert (p["sigma"], p["alpha"]) == (metrics.DEFAULT_SIGMA["lncc"], metrics.DEFAULT_ALPHA["lncc"])
    assert p["normalize"] == "none"
    assert parameters.schedule((4, 2, 1), 5) == ([4, 2, 1], [5, 5, 5])
    for bad, words in [(((2, 4), 1), "decrease"), (((4, 2), 1), "end with 1"), (((2, 1), (3,)), "iteration counts"),
                       (((2, 1), (3, -1)), ">= 0")]:
        with pytest.raises(ValueError, match=words):
            parameters.schedule(*bad)


def test_p_assignments_are_read_as_their_declared_kind():
    got = parameters.parse_assignments(["alpha=2", "lpow=3", "scales=4,2,1", "iterations=9", "step=auto",
                                        "step=0.1", "metric=lncc", "percentiles=1,99", "time-steps=6"])
    assert got == dict(alpha=2.0, lpow=3, scales=(4, 2, 1), iterations=9, step=0.1, metric="lncc",
                       percentiles=(1.0, 99.0), time_steps=6)
    assert type(got["alpha"]) is float and type(got["lpow"]) is int
    for item, words in [("alpha=x", "-p alpha: cannot read 'x'"), ("lpow=2.5", "-p lpow: cannot read"),
                        ("speed=3", "KEY one of"), ("alpha", "KEY one of"), ("names=a", "-p names: not settable")]:
        with pytest.raises(ValueError) as e:
            parameters.parse_assignments([item])
        assert words in str(e.value) and "\n" not in str(e.value), str(e.value)


def _console():
    exe = os.path.join(os.path.dirname(sys.executable), "pyca")
    return [exe] if os.path.exists(exe) else [sys.executable, "-m", "pyca"]


@pytest.mark.parametrize("args, words", [
    (["--lpow", "17"], "argument --lpow: must be an integer in [1, 16], got 17"),
    (["--radius", "0"], "argument --radius: must be an integer >= 1, got 0"),
    (["--gamma", "-1"], "lddmm: gamma must be a number >= 0, got -1.0"),
])
def test_cli_refuses_a_bound_in_one_line(tmp_path, args, words):
    p = subprocess.run([*_console(), "lddmm", *args, "--out", str(tmp_path / "o")], capture_output=True, text=True,
                       timeout=120)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and words in lines[0], p.stderr
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------------------------------------------
# Transforms against NumPy
def _grid(size=(10, 12, 8), spacing=(1.5, 2.0, 2.5), origin=(3.0, -4.0, 5.0), direction=None):
    kw = {} if direction is None else {"direction": direction}
    return ca.GridInfo(size, spacing, origin, **kw)


def _rot(w):
    from scipy.spatial.transform import Rotation

    return Rotation.from_rotvec(w).as_matrix()


def test_vox2world_and_coarse_grids_keep_the_box():
    D = _rot([0.3, -0.2, 0.5])
    g = _grid(direction=D)
    M = transforms.vox2world(g)
    np.testing.assert_allclose(M[:3, :3], D @ np.diag([1.5, 2.0, 2.5]), atol=1e-12)
    np.testing.assert_allclose(M[:3, 3], [3.0, -4.0, 5.0])
    for f in (2, 3):
        c = transforms.coarse_grid(g, f)
        n = np.array([10, 12, 8])
        want = np.maximum(np.round(n / f), np.minimum(n, transforms.COARSE_MIN)).astype(int)
        assert tuple(c.size()) == tuple(want)
        # the outer faces of the box are where they were: voxel -0.5 and n - 0.5 map to the same points
        Mc = transforms.vox2world(c)
        for corner in (-0.5 * np.ones(3), n - 0.5):
            cc = corner if corner[0] < 0 else want - 0.5
            np.testing.assert_allclose(Mc @ np.append(cc, 1), M @ np.append(corner, 1), atol=1e-9)
    assert transforms.coarse_grid(g, 1) is g
    assert [tuple(x.size()) for x in transforms.pyramid(g, (4, 2, 1))] == [
        tuple(transforms.coarse_grid(g, f).size()) for f in (4, 2, 1)]
    assert tuple(transforms.coarse_grid(_grid((40, 40, 1)), 4).size()) == (10, 10, 1)  # z = 1 stays
    assert transforms.same_grid(g, _grid(direction=D)) and not transforms.same_grid(g, _grid())
    # the same box stored in another order (x reversed: a LAS copy of a RAS grid) is the same field of view
    flip = transforms.vox2world(g) @ np.array([[-1, 0, 0, 9], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1.0]])
    las = ca.GridInfo((10, 12, 8), (1.5, 2.0, 2.5), tuple(flip[:3, 3]), direction=flip[:3, :3] / [1.5, 2.0, 2.5])
    assert transforms.same_field_of_view(g, las) and not transforms.same_grid(g, las)
    assert not transforms.same_field_of_view(g, _grid(direction=D, origin=(30.0, -4.0, 5.0)))
    assert transforms.voxel_volume(g) == pytest.approx(1.5 * 2.0 * 2.5)
    assert transforms.voxel_volume(_grid((8, 8, 1))) == pytest.approx(1.5 * 2.0)


@pytest.mark.parametrize("device", MEMS)
def test_affine_hfield_is_the_matrix_applied_to_voxel_indices(rng, device):
    g = _grid((9, 7, 5))
    M = np.eye(4)
    M[:3, :3] = rng.normal(size=(3, 3))
    M[:3, 3] = rng.normal(size=3)
    h = transforms.affine_hfield(ca.Field3D(g, _mem(device)), M)
    idx = np.stack(np.meshgrid(*[np.arange(n) for n in (9, 7, 5)], indexing="ij"), -1).astype(float)
    want = idx @ M[:3, :3].T + M[:3, 3]
    np.testing.assert_allclose(h.numpy(), want, rtol=1e-5, atol=1e-4)
    # after a source field: M applied to the source's values
    M2 = np.eye(4)
    M2[:3, 3] = [1.0, -2.0, 0.5]
    h2 = transforms.affine_hfield(ca.Field3D(g, _mem(device)), M2, src=h)
    np.testing.assert_allclose(h2.numpy(), want + M2[:3, 3], rtol=1e-5, atol=1e-4)


def test_rotation_centred_affine_and_centre_of_mass(rng):
    for w in ([0.0, 0.0, 0.0], [1e-13, 0, 0], [0.2, -0.7, 1.1], [np.pi - 1e-3, 0.1, 0]):
        np.testing.assert_allclose(transforms.rotation(np.array(w)), _rot(w), atol=1e-12)
    A, t, c = rng.normal(size=(3, 3)), rng.normal(size=3), rng.normal(size=3)
    T = transforms.centred_affine(A, t, c)
    x = rng.normal(size=3)
    np.testing.assert_allclose(T @ np.append(x, 1), np.append(A @ (x - c) + c + t, 1), atol=1e-12)
    g = _grid((6, 5, 4), direction=_rot([0.1, 0.2, 0.3]))
    a = rng.random((6, 5, 4)).astype(np.float32)
    idx = np.stack(np.meshgrid(*[np.arange(n) for n in (6, 5, 4)], indexing="ij"), -1).reshape(-1, 3)
    world = idx @ transforms.vox2world(g)[:3, :3].T + transforms.vox2world(g)[:3, 3]
    want = (world * a.reshape(-1, 1, order="C")).sum(0) / a.sum()
    got = transforms.center_of_mass(ca.Image3D.from_array(np.asfortranarray(a), g))
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("device", MEMS)
def test_jacobian_det_of_an_affine_map_is_its_determinant_on_any_spacing(rng, device):
    g = _grid((12, 10, 9), spacing=(0.7, 1.3, 2.1))
    A = np.eye(3) + 0.2 * rng.normal(size=(3, 3))
    M = np.eye(4)
    M[:3, :3] = A
    h = transforms.affine_hfield(ca.Field3D(g, _mem(device)), M)
    jac = transforms.jacobian_det(ca.Image3D(g, _mem(device)), h).numpy()
    np.testing.assert_allclose(jac[1:-1, 1:-1, 1:-1], np.linalg.det(A), rtol=1e-4)
    # a smooth nonlinear map against NumPy's central differences (interior)
    idx = np.stack(np.meshgrid(*[np.arange(n, dtype=float) for n in (12, 10, 9)], indexing="ij"), -1)
    H = idx + 0.3 * np.sin(idx[..., [1, 2, 0]] / 3.0)
    hf = ca.Field3D.from_array(np.asfortranarray(H.astype(np.float32)), g).clone(_mem(device))
    J = np.stack([np.stack(np.gradient(H[..., i], axis=(0, 1, 2)), -1) for i in range(3)], -2)
    jac = transforms.jacobian_det(ca.Image3D(g, _mem(device)), hf).numpy()
    np.testing.assert_allclose(jac[1:-1, 1:-1, 1:-1], np.linalg.det(J)[1:-1, 1:-1, 1:-1], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", MEMS)
def test_flow_of_a_constant_velocity_is_the_translation(device):
    g = _grid((16, 14, 12), spacing=(1.0, 2.0, 0.5))
    c = np.array([0.5, -1.0, 0.25])  # world units
    v = [ca.Field3D.from_array(np.asfortranarray(np.broadcast_to(c, (16, 14, 12, 3)).astype(np.float32)),
                               g).clone(_mem(device)) for _ in range(4)]
    h, hn = ca.Field3D(g, _mem(device)), ca.Field3D(g, _mem(device))
    out = transforms.flow_forward(h, hn, v, 0.25).numpy()
    idx = np.stack(np.meshgrid(*[np.arange(n, dtype=float) for n in (16, 14, 12)], indexing="ij"), -1)
    want = idx + c / np.array([1.0, 2.0, 0.5])  # phi_{0,1}(x) = x + v (voxels)
    inner = (slice(3, -3),) * 3
    np.testing.assert_allclose(out[inner], want[inner], atol=1e-4)


# ------------------------------------------------------------------------------------------------
# Optimisers
class _Quadratic:
    """descend()'s protocol on E(x) = |x - a|^2 / 2 (match) + r |x|^2 / 2 (reg), NumPy."""

    def __init__(self, a, r=0.1):
        self.a, self.r = np.asarray(a, float), r
        self.x = np.zeros_like(self.a)
        self.prev = self.x.copy()
        self.eps = None
        self.forwards = 0

    def forward(self):
        self.forwards += 1
        return 0.5 * float(np.sum((self.x - self.a) ** 2)), None

    def match(self):
        return 0.5 * float(np.sum((self.x - self.a) ** 2))

    def reg_energy(self):
        return 0.5 * self.r * float(np.sum(self.x ** 2))

    def gradients(self):
        self.d = -((self.x - self.a) + self.r * self.x)

    def direction_max(self):
        return float(np.max(np.abs(self.d)))

    def update(self, eps):
        self.prev, self.eps = self.x.copy(), eps
        self.x = self.x + eps * self.d

    def undo(self):
        self.x, self.rejected = self.prev, self.x

    def halve(self):
        self.x = self.prev + 0.5 * self.eps * self.d
        self.eps *= 0.5


def test_descend_reaches_the_minimum_of_a_quadratic():
    a = np.array([1.0, -2.0, 0.5])
    prob, rec = _Quadratic(a), []
    rep = optimisers.descend(prob, 200, step="auto", max_step=0.5, tol=0.0, records=rec, tag={"scale": 1})
    np.testing.assert_allclose(prob.x, a / 1.1, atol=1e-6)  # the closed-form minimiser
    acc = [e["energy"] for e in rec if e["accepted"]]
    assert all(x >= y for x, y in zip(acc, acc[1:]))  # accepted energies never rise
    assert rec[0]["step"] == pytest.approx(0.5 / 2.0)  # max_step / the largest component of the direction
    assert rep["scale"] == 1 and rep["iterations"] <= 200


def test_descend_halves_and_undoes_a_step_that_overshoots():
    prob, rec = _Quadratic([4.0]), []
    optimisers.descend(prob, 3, step=0.45, tol=0.0, records=rec)  # fine: eps (1 + r) < 2
    assert all(e["accepted"] for e in rec)
    prob, rec = _Quadratic([4.0], r=3.0), []  # eps (1 + r) = 1.8 < 2: still descends
    optimisers.descend(prob, 3, step=0.45, tol=0.0, records=rec)
    assert all(e["accepted"] for e in rec)
    prob, rec = _Quadratic([4.0], r=5.0), []  # eps (1 + r) = 2.7: overshoots, halved once, then accepted
    optimisers.descend(prob, 2, step=0.45, tol=0.0, records=rec)
    assert [e["accepted"] for e in rec] == [False, True] and rec[1]["step"] == pytest.approx(0.225)
    assert prob.x[0] == pytest.approx(0.225 * 4.0)


def test_descend_rejects_a_step_its_problem_declares_inadmissible():
    """A problem with admissible() (here: x[0] <= 1, the quadratic's minimum lying at 4 / 1.1 beyond it):
    the steps that would leave the region are undone and halved like steps that raised the energy, so
    the descent ends inside it, at most 1 and near it; the records mark those steps inadmissible."""

    class Bounded(_Quadratic):
        def admissible(self):
            return bool(self.x[0] <= 1.0)

    prob, rec = Bounded([4.0]), []
    optimisers.descend(prob, 200, step="auto", max_step=0.5, tol=0.0, records=rec)
    assert 0.95 < prob.x[0] <= 1.0
    assert all(e["accepted"] == (not e["inadmissible"]) for e in rec)  # the energy falls at every step here
    assert sum(e["inadmissible"] for e in rec) >= 1
    plain, rec2 = _Quadratic([4.0]), []
    optimisers.descend(plain, 100, step=0.45, tol=0.0, records=rec2)
    assert plain.x[0] > 3.5 and "inadmissible" not in rec2[0]


def test_descend_stops_at_a_zero_direction_and_fills_the_progress_bar_once():
    class Bar:
        n = 0

        def update(self, k):
            self.n += k

        def set_postfix_str(self, *a, **k):
            pass

    prob, bar = _Quadratic([0.0, 0.0]), Bar()  # x = a = 0: the minimum itself, the direction exactly 0
    rep = optimisers.descend(prob, 7, step="auto", tol=0.0, pbar=bar)
    assert rep["iterations"] == 0 and rep["stop"] == "converged (the update direction is zero)"
    assert bar.n == 7  # the scale's 7 iterations counted, not 8
    assert not prob.x.any()


def test_a_fixed_step_that_lowers_nothing_raises():
    class Never(_Quadratic):
        def forward(self):
            return 1e9 if self.x.any() else 0.0, None

    with pytest.raises(optimisers.NoDescent) as e:
        optimisers.descend(Never([1.0]), 4, step=0.4, tol=0.0)
    assert e.value.tries == 4 and e.value.eps == pytest.approx(0.4 / 16)


def test_stop_rule_closed_form():
    assert not optimisers.stop_rule([10, 9, 8, 7, 6], 0.01)  # too short
    assert not optimisers.stop_rule([10, 5, 4, 3, 2, 1], 0.1)  # the window gained 9, not < 5 * 0.1 * 9
    assert optimisers.stop_rule([10, 1, 0.99, 0.98, 0.97, 0.96, 0.95], 0.01)  # 0.05 < 5 * 0.01 * 9.05
    assert not optimisers.stop_rule([10, 1, 0.99, 0.98, 0.97, 0.96, 0.95], 0.001)  # 0.05 > 5 * 0.001 * 9.05


def _fields(rng, n, g, mem=ca.MEM_HOST):
    return [ca.Field3D.from_array(np.asfortranarray(rng.normal(size=tuple(g.size()) + (3,)).astype(np.float32)),
                                  g).clone(mem) for _ in range(n)]


@pytest.mark.parametrize("device", MEMS)
def test_adam_and_gradient_descent_match_numpy(rng, device):
    g = ca.GridInfo((6, 5, 4))
    xs = _fields(rng, 2, g, _mem(device))
    xs_ref = [x.numpy().astype(np.float64) for x in xs]
    opt = optimisers.Adam(xs, lr=0.05, betas=(0.8, 0.95), eps=1e-6)
    m = [np.zeros_like(x) for x in xs_ref]
    v = [np.zeros_like(x) for x in xs_ref]
    for t in range(1, 6):
        gs = _fields(rng, 2, g, _mem(device))
        opt.step(gs)
        for k in range(2):
            gk = gs[k].numpy().astype(np.float64)
            m[k] = 0.8 * m[k] + 0.2 * gk
            v[k] = 0.95 * v[k] + 0.05 * gk ** 2
            xs_ref[k] -= 0.05 * (m[k] / (1 - 0.8 ** t)) / (np.sqrt(v[k] / (1 - 0.95 ** t)) + 1e-6)
    for x, want in zip(xs, xs_ref):
        np.testing.assert_allclose(x.numpy(), want, rtol=1e-4, atol=1e-5)
    opt.reset()
    assert opt.t == 0 and not opt.m[0].numpy().any()
    ims = [ca.Image3D.from_array(np.asfortranarray(rng.normal(size=(6, 5, 4)).astype(np.float32))).clone(_mem(device))]
    ref = ims[0].numpy().astype(np.float64)
    grad = ca.Image3D.from_array(np.asfortranarray(rng.normal(size=(6, 5, 4)).astype(np.float32))).clone(_mem(device))
    optimisers.GradientDescent(ims, 0.3).step([grad])
    np.testing.assert_allclose(ims[0].numpy(), ref - 0.3 * grad.numpy(), rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="Adam"):
        optimisers.Adam(ims, lr=0.0)


# ------------------------------------------------------------------------------------------------
# Metrics: the public interface the solver uses
def test_plain_difference_is_the_ssd_without_a_mask(rng):
    g = ca.GridInfo((8, 7, 6))
    I, J = (ca.Image3D.from_array(np.asfortranarray(rng.random((8, 7, 6)).astype(np.float32)), g) for _ in range(2))
    mask = ca.Image3D.from_array(np.asfortranarray((rng.random((8, 7, 6)) > 0.5).astype(np.float32)), g)
    ssd = metrics.make_metric("ssd", g, ca.MEM_HOST, 0.5)
    assert ssd.plain_difference and isinstance(ssd, metrics.Metric)
    out = ca.Image3D(g, ca.MEM_HOST)
    E = ssd.gradient(out, I, J)
    np.testing.assert_allclose(out.numpy(), I.numpy() - J.numpy(), atol=1e-7)
    assert E == pytest.approx(np.sum((I.numpy().astype(float) - J.numpy()) ** 2) / 0.25, rel=1e-5)
    assert ssd.energy(I, J) == pytest.approx(E, rel=1e-6)
    assert not metrics.make_metric("ssd", g, ca.MEM_HOST, 0.5, mask).plain_difference
    assert not metrics.make_metric("lncc", g, ca.MEM_HOST, 1.0).plain_difference
    # the class says it before an instance is built (lddmm's pad asks it): each metric without a mask agrees
    for name in metrics.METRICS:
        m = metrics.make_metric(name, g, ca.MEM_HOST, 1.0)
        assert metrics.metric_class(name).plain_without_mask is m.plain_difference, name


def test_the_facts_programs_choose_by_are_the_metric_classes():
    assert list(metrics.CLASSES) == list(metrics.METRICS)
    assert [n for n in metrics.METRICS if metrics.metric_class(n).multimodal] == ["mi"]
    assert [n for n in metrics.METRICS if metrics.metric_class(n).quadratic] == ["ssd"]
    assert metrics.metric_class("LNCC") is metrics.LNCC
    from pyca.registration import quality

    assert quality.SINGLE_MODALITY == ("ssd", "lncc")
    with pytest.raises(ValueError, match="metric must be one of"):
        metrics.metric_class("ncc")


# ------------------------------------------------------------------------------------------------
# Inputs: the pair's checks and placement, shared by lddmm and syn
def test_inputs_binary_linear_kind_and_overlap(rng):
    from pyca.registration import inputs

    a = rng.random((12, 10, 8)).astype(np.float32) - 0.3
    im = ca.Image3D.from_array(np.asfortranarray(a))
    np.testing.assert_array_equal(inputs.binary(im, ca.MEM_HOST).numpy(), (a > 0).astype(np.float32))
    assert inputs.binary(None, ca.MEM_HOST) is None
    blob = np.zeros((12, 10, 8), np.float32)
    blob[3:7, 3:7, 2:5] = 1
    moved = np.roll(blob, 3, axis=0)
    A, B = (ca.Image3D.from_array(np.asfortranarray(x)) for x in (blob, moved))
    assert inputs.linear_kind("auto", A, A) == "none"  # one grid, one centre of mass
    assert inputs.linear_kind("auto", A, B) == "affine"  # centres 3 voxels apart
    assert inputs.linear_kind("rigid", A, A) == "rigid"  # a choice is kept
    other = ca.Image3D.from_array(np.asfortranarray(blob), ca.GridInfo((12, 10, 8), (2.0, 2.0, 2.0)))
    assert inputs.linear_kind("auto", A, other) == "affine"  # other grids
    H = ca.Field3D(A.grid(), ca.MEM_HOST)
    ca.SetToIdentity(H)
    inputs.check_overlap(H, A.grid(), {})
    ca.AddC_I(H, 100.0)  # every fixed voxel maps 100 voxels outside the moving grid
    with pytest.raises(ValueError, match="do not overlap"):
        inputs.check_overlap(H, A.grid(), {"fixed": "f.nii", "moving": "m.nii"})
