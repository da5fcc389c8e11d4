"""Options that the configured run would not use are refused, in one line, before any work
(pyca.registration.parameters.check_applies): --bins without --metric mi, --radius without lncc,
--max-step with a numeric --step, ... Defaults never are; what a run uses still runs."""
from __future__ import annotations

import numpy as np
import pytest

from pyca.apps import affine, atlas, batch, lddmm, regress, shoot, syn
from pyca.registration import parameters as P
from pyca.registration.inputs import as_image

from cli_helpers import SMALL, assert_one_line_error, run

# (pyca lddmm's options, the refusal's words): each an option the run those options configure ignores
LDDMM_REFUSED = [
    (["--bins", "40"], "--bins applies to --metric mi, not ssd"),
    (["--metric", "lncc", "--bins", "24"], "--bins applies to --metric mi, not lncc"),
    (["--radius", "5"], "--radius applies to --metric lncc, not ssd"),
    (["--metric", "ssd", "--radius", "3"], "--radius applies to --metric lncc, not ssd"),  # given as its default
    (["--metric", "mi", "--radius", "2"], "--radius applies to --metric lncc, not mi"),
    (["--step", "0.1", "--max-step", "1"], "--max-step applies to --step auto, not 0.1"),
    (["--metric", "mi", "--bias-sigma", "5"], "--bias-sigma applies to --metric ssd or lncc, not mi"),
    (["--metric", "mi", "--normalize", "histogram"], "--normalize histogram applies to --metric ssd or lncc, not mi"),
    (["--metric", "mi", "--fixed-blur", "0.2"], "--fixed-blur 0.2 applies to --interp-blur none, not matched (with "
     "metric mi, 'matched' smooths the fixed image by at least sqrt(1/6) = 0.408)"),
]
REGISTER_REFUSED = [
    (["--bins", "40"], "syn: --bins applies to --metric mi, not lncc"),
    (["--metric", "mi", "--radius", "4"], "syn: --radius applies to --metric lncc, not mi"),
    (["--metric", "mi", "--lncc-eps", "1e-5"], "syn: --lncc-eps applies to --metric lncc, not mi"),
    (["--max-log-det", "0", "--det-stiffness", "3"], "syn: --det-stiffness applies to --max-log-det > 0, not 0"),
    (["--method", "lddmm", "--bins", "40"], "lddmm: --bins applies to --metric mi, not ssd"),
    (["--method", "lddmm", "--metric", "mi", "--radius", "2"], "lddmm: --radius applies to --metric lncc, not mi"),
]


@pytest.mark.parametrize("args,words", LDDMM_REFUSED, ids=[" ".join(a) for a, _ in LDDMM_REFUSED])
def test_pyca_lddmm_refuses_an_option_the_run_ignores(tmp_path, args, words):
    out = tmp_path / "out"
    p = run("lddmm", *SMALL, "--out", str(out), *args)
    assert_one_line_error(p, 2, words)
    assert not out.exists() and p.stdout == ""


@pytest.mark.parametrize("args,words", REGISTER_REFUSED, ids=[" ".join(a) for a, _ in REGISTER_REFUSED])
def test_pyca_register_refuses_an_option_the_run_ignores(tmp_path, args, words):
    import nibabel as nib

    for name in ("f", "m"):  # (refused before they are read)
        nib.save(nib.Nifti1Image(np.random.default_rng(0).random((12, 12, 8), np.float32), np.eye(4)),
                 str(tmp_path / f"{name}.nii.gz"))
    out = tmp_path / "out"
    p = run("register", "--fixed", str(tmp_path / "f.nii.gz"), "--moving", str(tmp_path / "m.nii.gz"),
            "--out", str(out), *args)
    assert_one_line_error(p, 2, words)
    assert not out.exists() and p.stdout == ""

SHOOT_REFUSED = [
    (["--step", "0.1", "--max-step", "1"], "shoot: --max-step applies to --step auto, not 0.1"),
    (["--step", "0.1", "--max-step", "0.5"], "shoot: --max-step applies to --step auto, not 0.1"),  # as its default
    (["--folding-steps", "accept", "--min-jacobian", "0.1"],
     "shoot: --min-jacobian applies to --folding-steps reject, not accept"),
]


def _files(tmp_path):
    import nibabel as nib

    for name in ("f", "m"):  # (refused before they are read)
        nib.save(nib.Nifti1Image(np.random.default_rng(0).random((12, 12, 8), np.float32), np.eye(4)),
                 str(tmp_path / f"{name}.nii.gz"))
    return str(tmp_path / "f.nii.gz"), str(tmp_path / "m.nii.gz")


@pytest.mark.parametrize("args,words", SHOOT_REFUSED, ids=[" ".join(a) for a, _ in SHOOT_REFUSED])
def test_pyca_shoot_refuses_an_option_the_run_ignores(tmp_path, args, words):
    f, m = _files(tmp_path)
    out = tmp_path / "out"
    p = run("shoot", "--fixed", f, "--moving", m, "--out", str(out), *args)
    assert_one_line_error(p, 2, words)
    assert not out.exists() and p.stdout == ""


def test_pyca_regress_refuses_an_option_the_run_ignores(tmp_path):
    f, m = _files(tmp_path)
    out = tmp_path / "out"
    p = run("regress", f"{f}:0", f"{m}:1", "--out", str(out), "--folding-steps", "accept", "--min-jacobian", "0")
    assert_one_line_error(p, 2, "regress: --min-jacobian applies to --folding-steps reject, not accept")
    assert not out.exists() and p.stdout == ""


def test_pyca_lddmm_runs_with_the_options_its_run_uses(tmp_path):
    """Each conditional option where it applies (lncc's radius, mi's bins with bias correction off, a
    numeric step): the runs complete (0, or 3 for a verdict on a 16x16x8 pair, never 2)."""
    for i, args in enumerate((["--metric", "lncc", "--radius", "2", "--bias-sigma", "5"],
                              ["--metric", "mi", "--bins", "16", "--bias-sigma", "0", "--normalize", "percentiles"],
                              ["--step", "0.05", "--sigma", "0.05", "--normalize", "none"])):
        out = tmp_path / f"out{i}"
        p = run("lddmm", *SMALL, "--out", str(out), "--no-report", "-q", *args)
        assert p.returncode in (0, 3), (args, p.stderr)
        assert (out / "summary.json").exists()


def _pair():
    z = np.zeros((12, 12, 8), np.float32)
    z[3:9, 3:9, 2:6] = 1
    return z, np.roll(z, 1, axis=0)


@pytest.mark.parametrize("register,kw,words", [
    (lddmm.register, dict(bins=40), "lddmm: bins applies to metric mi, not ssd"),
    (lddmm.register, dict(metric="lncc", step=0.1, max_step=2.0), "lddmm: max_step applies to step auto, not 0.1"),
    (lddmm.register, dict(normalize="none", percentiles=(1, 99)),
     "lddmm: percentiles applies to normalize percentiles or histogram, not none"),
    (lddmm.register, dict(normalize=False, percentiles=(1, 99)), "not none"),
    (lddmm.register, dict(metric="MI", bias_sigma=5.0), "lddmm: bias_sigma applies to metric ssd or lncc, not mi"),
    (syn.register, dict(metric="mi", lncc_eps=1e-4), "syn: lncc_eps applies to metric lncc, not mi"),
    (syn.register, dict(optimiser="greedy", adam_eps=0.5), "syn: adam_eps applies to optimiser adam, not greedy"),
    (syn.register, dict(normalize="none", percentiles=(1, 99)),
     "syn: percentiles applies to normalize foreground or percentiles, not none"),
    # foreground's low end is the minimum: a low percentile is used only inside masks
    (syn.register, dict(percentiles=(2, 98)), "syn: percentiles (2, 98) applies to normalize percentiles, not "
     "foreground (with 'foreground' the low end is the image's minimum where it has no mask: give "
     "percentiles=(0, 98) for the high end alone"),
    (syn.register, dict(normalize="foreground", percentiles=(0.5, 98)), "not foreground"),
    (shoot.register, dict(step=0.1, max_step=2.0), "shoot: max_step applies to step auto, not 0.1"),
    (shoot.register, dict(folding_steps="accept", min_jacobian=0.1),
     "shoot: min_jacobian applies to folding_steps reject, not accept"),
    (shoot.register, dict(normalize="none", percentiles=(1, 99)),
     "shoot: percentiles applies to normalize percentiles, not none"),
    (lambda f, m, **kw: regress.fit([(0, f), (1, m)], **kw), dict(step=0.2, max_step=1.0),
     "regress: max_step applies to step auto, not 0.2"),
    (lambda f, m, **kw: regress.atlas([f, m], **kw), dict(folding_steps="accept", min_jacobian=0.2),
     "atlas: min_jacobian applies to folding_steps reject, not accept"),
])
def test_api_refuses_a_keyword_the_run_ignores(register, kw, words):
    fixed, moving = _pair()
    with pytest.raises(ValueError) as e:
        register(fixed, moving, device="cpu", **kw)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_syn_foreground_takes_the_high_percentile_it_is_given():
    """normalize 'foreground' with percentiles=(0, high): the image's minimum and the high percentile of its
    voxels above 1% of its range (NumPy's), the range the run scales by; without masks a low percentile
    other than 0 is refused (above), with both masks both percentiles are used inside them."""
    rng = np.random.default_rng(1)
    a = np.zeros((20, 20, 10), np.float32)
    a[4:16, 4:16, 2:8] = rng.random((12, 12, 6)) * 100 + 10
    im = as_image(a, "fixed")
    for hi in (99.5, 90.0):
        p = dict(syn.DEFAULTS, percentiles=(0.0, hi))
        fg = a[a > 0.01 * a.max()]
        assert syn.intensity_range(im, p) == (0.0, pytest.approx(float(np.percentile(fg, hi)), rel=1e-6))
    both = dict(syn.DEFAULTS, percentiles=(2.0, 98.0), fixed_mask="f", moving_mask="m")
    P.check_declared(both, P.SYN_DECLARED, "syn", {"percentiles"})
    with pytest.raises(ValueError, match="applies to normalize percentiles, not foreground"):
        P.check_declared(dict(both, moving_mask=None), P.SYN_DECLARED, "syn", {"percentiles"})
    mask = as_image((a > 50).astype(np.float32), "mask")
    inside = a[a > 50]
    assert syn.intensity_range(im, both, mask) == pytest.approx(tuple(np.percentile(inside, [2.0, 98.0])), rel=1e-6)


def test_affine_register_refuses_a_match_option_its_metric_ignores():
    import pyca as ca

    z = np.zeros((16, 16, 8), np.float32)
    z[4:12, 4:12, 2:6] = 1
    g = ca.GridInfo(ca.Vec3Di(16, 16, 8))
    F, M = (ca.Image3D.from_array(np.asfortranarray(x), g) for x in (z, np.roll(z, 1, 0)))
    for kw, words in ((dict(metric="ssd", bins=32), "affine: bins applies to metric mi, not ssd"),
                      (dict(metric="lncc", bins=16), "affine: bins applies to metric mi, not lncc"),
                      (dict(metric="mi", radius=3), "affine: radius applies to metric lncc, not mi"),
                      (dict(metric="ssd", radius=2), "affine: radius applies to metric lncc, not ssd")):
        with pytest.raises(ValueError) as e:
            affine.register(F, M, **kw)
        assert words in str(e.value) and "\n" not in str(e.value)
    # where they apply, they are used: mi's bins and lncc's radius change the energies
    kw = dict(scales=(1,), iterations=(1,))
    e = lambda **k: affine.register(F, M, **kw, **k).scales[0]["energy_start"]  # noqa: E731
    assert e(metric="mi", bins=8) != e(metric="mi", bins=32) and e(metric="lncc", radius=1) != e(metric="lncc")


def test_cohort_commands_refuse_before_their_cluster(tmp_path):
    """pyca atlas / register-batch (-p KEY=VALUE, or their keywords): refused where their parameters are
    checked, before any subject is registered."""
    with pytest.raises(ValueError, match="atlas: radius applies to metric lncc, not ssd"):
        atlas._check_params({"radius": 5})
    with pytest.raises(ValueError, match="register-batch: bins applies to metric mi, not lncc"):
        batch.register_batch(str(tmp_path / "none.nii"), [], out=str(tmp_path / "o"), metric="lncc", bins=16)
    assert not (tmp_path / "o").exists()


def test_check_applies_every_conditional_parameter():
    """Every declared parameter that only some runs use: refused given where it does not apply, accepted
    given where it does, and never refused by default (given nothing)."""
    cases = {  # name -> (parameters where it does not apply, where it does)
        "max_step": ({"step": 0.1}, {"step": "auto"}),
        "normalize": ({"metric": "mi", "normalize": "histogram"}, {"metric": "lncc", "normalize": "histogram"}),
        "bias_sigma": ({"metric": "mi", "bias_sigma": 5.0}, {"metric": "ssd", "bias_sigma": 5.0}),
        "radius": ({"metric": "mi"}, {"metric": "lncc"}),
        "bins": ({"metric": "lncc"}, {"metric": "mi"}),
        "percentiles": ({"normalize": "none"}, {"normalize": "percentiles"}),
        "fixed_blur": ({"metric": "mi", "fixed_blur": 0.0}, {"metric": "mi", "fixed_blur": 0.5}),
    }
    syn_cases = {
        "bins": ({"metric": "lncc"}, {"metric": "mi"}),
        "radius": ({"metric": "mi"}, {"metric": "lncc"}),
        "lncc_eps": ({"metric": "mi"}, {"metric": "lncc"}),
        "det_stiffness": ({"max_log_det": 0.0}, {"max_log_det": 0.5}),
        "adam_eps": ({"optimiser": "greedy"}, {"optimiser": "adam"}),
        "percentiles": ({"normalize": "none"}, {"normalize": "foreground", "percentiles": (0.0, 99.5)}),
    }
    shoot_cases = {
        "max_step": ({"step": 0.1}, {"step": "auto"}),
        "min_jacobian": ({"folding_steps": "accept"}, {"folding_steps": "reject"}),
        "percentiles": ({"normalize": "none"}, {"normalize": "percentiles"}),
    }
    # the survey is complete: the cases are exactly the declared conditional parameters
    assert set(cases) == {q.name for q in P.DECLARED if q.applies is not None}
    assert set(syn_cases) == {q.name for q in P.SYN_DECLARED if q.applies is not None}
    assert set(shoot_cases) == {q.name for q in P.SHOOT_DECLARED if q.applies is not None}
    for declared, defaults, table, check in (
            (P.DECLARED, P.DEFAULTS, cases, lambda p, g: P.check(p, given=g)),
            (P.SYN_DECLARED, P.SYN_DEFAULTS, syn_cases, lambda p, g: P.check_declared(p, P.SYN_DECLARED, "syn", g)),
            (P.SHOOT_DECLARED, P.SHOOT_DEFAULTS, shoot_cases, lambda p, g: shoot.check(p, given=g))):
        for name, (off, on) in table.items():
            with pytest.raises(ValueError, match=f": {name}.* applies to "):
                check({**defaults, **off}, {name})
            check({**defaults, **on}, {name})
            check({**defaults, **off}, set())  # not given: its default, never refused
            check({**defaults, **off}, {"alpha", "device"} & set(defaults))  # others given
    # bias correction off is what an mi run does: accepted; mi's own blur or more, or no matched blur: accepted
    P.check({**P.DEFAULTS, "metric": "mi", "bias_sigma": 0.0}, given={"bias_sigma"})
    P.check({**P.DEFAULTS, "metric": "mi", "fixed_blur": P.INTERP_BLUR}, given={"fixed_blur"})
    P.check({**P.DEFAULTS, "metric": "mi", "fixed_blur": 0.2, "interp_blur": "none"}, given={"fixed_blur"})
    P.check({**P.DEFAULTS, "metric": "ssd", "fixed_blur": 0.2}, given={"fixed_blur"})
    # explicit(): a keyword given as its default is not counted (whole parameter sets passed on)
    assert P.explicit({"radius": 3, "bins": 40, "percentiles": [0.5, 99.5]}, P.DEFAULTS) == {"bins"}
    # ... nor a NumPy array equal to a tuple default; one that differs is
    assert P.explicit({"percentiles": np.array([0.5, 99.5])}, P.DEFAULTS) == set()
    assert P.explicit({"percentiles": np.array([1.0, 99.5])}, P.DEFAULTS) == {"percentiles"}


def test_shoots_bounds_are_its_declarations():
    """shoot.check applies SHOOT_DECLARED's bounds (one place): each bound refused just outside, accepted on it;
    integers must be integers; percentiles ordered (they were not checked before)."""
    D = dict(shoot.DEFAULTS)
    for q in P.SHOOT_DECLARED:
        if q.kind not in ("real", "int") or q.lo is None:
            continue
        bad = [q.lo if q.lo_open else q.lo - 1] + ([q.hi if q.hi_open else q.hi + 1] if q.hi is not None else [])
        for v in bad:
            with pytest.raises(ValueError, match=f"shoot: {q.name}.* must be "):
                shoot.check(dict(D, **{q.name: v}))
        if not q.lo_open:
            shoot.check(dict(D, **{q.name: q.lo}))
    for name in ("lpow", "time_steps", "iterations", "band"):
        with pytest.raises(ValueError, match=f"shoot: {name} must be an integer"):
            shoot.check(dict(D, **{name: 2.0}))
    with pytest.raises(ValueError, match="shoot: percentiles must satisfy"):
        shoot.register(np.zeros((8, 8, 8)), np.zeros((8, 8, 8)), percentiles=(60, 40))


def test_given_options_are_told_from_defaults():
    import argparse

    ap = P.add_arguments(argparse.ArgumentParser())
    assert P.given_of(ap.parse_args([])) == set()
    a = ap.parse_args(["--radius", "3", "--no-normalize", "--metric", "lncc"])
    assert P.given_of(a) == {"radius", "normalize", "metric"} and a.normalize == "none" and a.radius == 3
