"""Options that the configured run would not use are refused, in one line, before any work
(pyca.registration.parameters.check_applies): --bins without --metric mi, --radius without lncc,
--max-step with a numeric --step, ... Defaults never are; what a run uses still runs."""
from __future__ import annotations

import numpy as np
import pytest

from pyca.apps import atlas, batch, lddmm, syn
from pyca.registration import parameters as P

from test_cli import SMALL, _assert_one_line_error, run

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
    _assert_one_line_error(p, 2, words)
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
    _assert_one_line_error(p, 2, words)
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
])
def test_api_refuses_a_keyword_the_run_ignores(register, kw, words):
    fixed, moving = _pair()
    with pytest.raises(ValueError) as e:
        register(fixed, moving, device="cpu", **kw)
    assert words in str(e.value) and "\n" not in str(e.value)


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
        "percentiles": ({"normalize": "none"}, {"normalize": "foreground"}),
    }
    # the survey is complete: the cases are exactly the declared conditional parameters
    assert set(cases) == {q.name for q in P.DECLARED if q.applies is not None}
    assert set(syn_cases) == {q.name for q in P.SYN_DECLARED if q.applies is not None}
    for declared, defaults, table, check in (
            (P.DECLARED, P.DEFAULTS, cases, lambda p, g: P.check(p, given=g)),
            (P.SYN_DECLARED, P.SYN_DEFAULTS, syn_cases, lambda p, g: P.check_declared(p, P.SYN_DECLARED, "syn", g))):
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


def test_given_options_are_told_from_defaults():
    import argparse

    ap = P.add_arguments(argparse.ArgumentParser())
    assert P.given_of(ap.parse_args([])) == set()
    a = ap.parse_args(["--radius", "3", "--no-normalize", "--metric", "lncc"])
    assert P.given_of(a) == {"radius", "normalize", "metric"} and a.normalize == "none" and a.radius == 3
