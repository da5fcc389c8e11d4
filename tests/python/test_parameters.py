"""Every registration parameter of `pyca lddmm` does what its --help says (issue 40): for each, a
change in the documented direction moves the result that way, on a small synthetic pair (the
built-in shapes on a 24 x 24 x 16 grid, two scales, a few iterations: about a second per run on the
CPU). `--sigma` 0.005, 0.05 and 0.5 once gave the same registration (K's gain, gamma^-lpow = 4e13,
made the regulariser ~1e-7 of the energy); each test here failed or could not be written then."""
import numpy as np
import pytest

from pyca.apps import data, lddmm
from pyca.apps._lddmm_solver import kernel_band

BASE = dict(device="cpu", scales=(2, 1), iterations=(15, 15), time_steps=3, affine="none", tol=0.0)


@pytest.fixture(scope="module")
def pair():
    return data.builtin_pair(size=(24, 24, 16))


def run(pair, **kw):
    return lddmm.register(*pair, **{**BASE, **kw})


def log_jac_spread(res):
    """max |log det D phiinv|: 0 for no deformation, larger for a rougher or larger one."""
    s = res.summary()
    return max(abs(np.log(s["jacobian_min"])), abs(np.log(s["jacobian_max"])))


def test_sigma_smaller_is_a_closer_match_larger_a_smoother_map(pair):
    r = {s: run(pair, sigma=s) for s in (0.005, 0.05, 0.5)}
    m = [r[s].final_mismatch for s in (0.005, 0.05, 0.5)]
    j = [log_jac_spread(r[s]) for s in (0.005, 0.05, 0.5)]
    assert m[0] < m[1] < m[2], m  # --help: smaller, a closer match
    assert j[0] > j[1] > j[2], j  # larger, a smoother (smaller) deformation
    assert m[0] < 0.5 * m[2]  # not a rounding difference


def test_alpha_larger_is_smoother(pair):
    j = [log_jac_spread(run(pair, alpha=a, sigma=0.01)) for a in (0.05, 0.5, 5.0)]
    assert j[0] > j[1] > j[2], j


def test_gamma_larger_is_a_narrower_kernel(pair):
    # K's width is sqrt(2 lpow alpha / gamma): a larger gamma, a narrower kernel, a less smooth map
    # that matches more closely. The match is the solver's (final_match: the warped image against the fixed
    # image plus the warped image's interpolation bias, interp_blur='matched'); final_mismatch, against the
    # fixed image itself, also counts that bias, which a rougher map raises (gamma 0.05 / 0.5: 5.94 / 6.02).
    r = [run(pair, gamma=g, sigma=0.01) for g in (0.005, 0.05, 0.5)]
    m = [x.final_match for x in r]
    assert m[0] > m[1] > m[2], m
    j = [log_jac_spread(x) for x in r]
    assert j[0] < j[1] < j[2], j


def test_lpow_higher_is_smoother(pair):
    j = [log_jac_spread(run(pair, lpow=p, sigma=0.01)) for p in (2, 8)]
    assert j[0] > j[1], j


def test_beta_penalises_compression_and_expansion(pair):
    # beta weighs -grad div: the divergence, so the volume change, costs more
    j = [log_jac_spread(run(pair, beta=b, sigma=0.01)) for b in (0.0, 1.0)]
    assert j[0] > j[1], j


def test_more_iterations_lower_the_energy(pair):
    e = [run(pair, iterations=(n, n), sigma=0.01).final_energy for n in (2, 8, 30)]
    assert e[0] > e[1] > e[2], e


def test_tol_larger_stops_sooner(pair):
    its = [sum(s["iterations"] for s in run(pair, tol=t, iterations=(60, 60)).timings["scales"])
           for t in (0.0, 2e-3, 5e-2)]
    assert its[0] >= its[1] > its[2], its


def test_max_step_is_the_first_step_in_voxels(pair):
    # --max-step: each scale's first step moves a velocity by at most this many voxels (eps is also
    # capped at 0.25, which a strong match term never reaches)
    for ms in (0.1, 0.5):
        res = run(pair, max_step=ms, iterations=(1, 1), sigma=0.005)
        first = [e for e in res.energies if e["iteration"] == 0]
        assert len(first) == 2 and all(e["step_vox"] == pytest.approx(ms, rel=1e-6) for e in first), first


def test_a_smaller_fixed_step_moves_less(pair):
    # eps in (0, 0.5): with the kernel of gain 1 a fixed step means what it says
    m = [run(pair, step=s, iterations=(5, 5), sigma=0.05).final_mismatch for s in (0.001, 0.01)]
    assert m[0] > m[1], m


def test_scales_run_coarse_to_fine(pair):
    res = run(pair, scales=(4, 2, 1), iterations=(3, 3, 3))
    grids = [tuple(s["grid"]) for s in res.timings["scales"]]
    assert [s["scale"] for s in res.timings["scales"]] == [4, 2, 1]
    assert grids[-1] == (24, 24, 16) and all(np.prod(a) < np.prod(b) for a, b in zip(grids, grids[1:])), grids


def test_band_tol_larger_keeps_fewer_frequencies(pair):
    g = pair[0].grid()
    p = dict(lddmm.DEFAULTS, alpha=0.15, gamma=0.02, lpow=8)
    kept = [kernel_band(g, {**p, "band_tol": t}) for t in (0.0, 1e-4, 1e-1)]
    assert kept[0] == [-1, -1, -1]  # 0: every frequency
    wide = [k if k >= 0 else 10 ** 6 for k in kept[1]]  # (-1: every frequency of that axis)
    assert all(a > b for a, b in zip(wide, kept[2])), kept


def test_normalize_histogram_undoes_a_change_of_contrast(pair):
    # 'histogram' maps the moving image's quantiles onto the fixed image's: the same anatomy in
    # another contrast registers as the original does; 'none' compares the raw intensities
    fixed, moving = pair
    m2 = moving.clone()
    a = m2.numpy()
    a[:] = 3.0 * a + 0.5
    kw = {**BASE, "bias_sigma": 0.0}
    orig = lddmm.register(fixed, moving, **kw, normalize="histogram")
    hist = lddmm.register(fixed, m2, **kw, normalize="histogram")
    none = lddmm.register(fixed, m2, **kw, normalize="none")
    assert hist.final_mismatch == pytest.approx(orig.final_mismatch, rel=1e-4)
    assert none.final_mismatch != pytest.approx(orig.final_mismatch, rel=1e-2)


def test_time_steps_are_the_velocity_fields(pair):
    for T in (2, 5):
        res = run(pair, time_steps=T, iterations=(2, 2))
        assert len(res.velocity) == T


def test_iterations_and_bins_default_to_the_metrics(pair):
    # iterations not given: the metric's caps (pyca.registration.metrics.DEFAULT_ITERATIONS), in the
    # result's parameters and in --help; bins (mi's joint histogram) reaches the metric of every scale
    from pyca.registration import metrics, parameters

    for m in metrics.METRICS:
        p = parameters.check(parameters.merged(parameters.DEFAULTS, {"metric": m}, "t"))
        assert p["iterations"] == metrics.DEFAULT_ITERATIONS[m]
        assert ",".join(map(str, metrics.DEFAULT_ITERATIONS[m])) in parameters.get("iterations").help
    res = lddmm.register(*pair, device="cpu", metric="mi", affine="none", scales=(4, 2, 1), tol=0.5)
    assert res.params["iterations"] == metrics.DEFAULT_ITERATIONS["mi"]
    seen = []
    real = metrics.MI.__init__

    def spy(self, *a, **kw):
        real(self, *a, **kw)
        seen.append(self.bins)

    try:
        metrics.MI.__init__ = spy
        lddmm.register(*pair, **{**BASE, "metric": "mi", "bins": 12, "iterations": (1, 1)})
    finally:
        metrics.MI.__init__ = real
    assert seen and set(seen) == {12}
    with pytest.raises(ValueError, match="bins"):
        lddmm.register(*pair, **{**BASE, "metric": "mi", "bins": 2})


def test_scales_without_iterations_say_what_to_give():
    # --scales 2,1 alone keeps the metric's three caps: the refusal names both lists and what to give
    from pyca.registration import parameters

    with pytest.raises(ValueError, match=r"3 iteration counts \(\[10, 150, 150\]\) for 2 scales \(\[2, 1\]\): give "
                                         r"the iterations too"):
        parameters.schedule((2, 1), (10, 150, 150))
    assert parameters.schedule((2, 1), 7) == ([2, 1], [7, 7])
