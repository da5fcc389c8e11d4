"""The benchmark scripts run end to end (on the CPU, at a toy size): a benchmark that breaks when the
library's defaults change is found here, not on the next GPU lease. The numbers are not checked."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _run(script, *args):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", script), *args], capture_output=True,
                       text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return r.stdout


def test_bench_lddmm_runs_pyca_and_its_numpy_peer():
    pytest.importorskip("scipy")
    out = _run("bench_lddmm.py", "--size", "12", "--iterations", "3", "--peer-iterations", "1", "--time-steps", "3")
    assert "LDDMM 3 iterations (CPU, fused)" in out  # tol=0: exactly the iterations asked for
    assert "NumPy/SciPy" in out


def test_bench_apply_runs_pyca_and_ants():
    out = _run("bench_apply.py", "--size", "16,18,14", "--repeat", "1", "--formats", ".nii", "--device", "cpu")
    assert "pyca.apply_transforms" in out


def test_bench_outputs_reads_the_commands_own_timings():
    # whole `pyca lddmm -v` runs, parsed from their -v lines: a changed line breaks this script
    out = _run("bench_outputs.py", "--size", "16,16,8", "--runs", "1", "--repeat", "1", "--device", "cpu")
    assert "writing shorter than the registration in" in out
    assert "peer: nib.save" in out


def test_bench_shoot_runs_the_band_limited_geodesic():
    out = _run("bench_shoot.py", "--size", "16", "--iterations", "2", "--bands", "2,2::linear:linear", "--skip-lddmm")
    assert ("pyca shoot --band 2 (coarse grid (8, 8, 8), 1/2; oversampling 3; trilinear samples; map coarse, cubic "
            "upsample)") in out
    assert "oversampling 3; trilinear samples; map traced on the images grid, linear)" in out
    assert "failed" not in out


def test_bench_shoot_floor_counts_an_iteration_s_passes():
    # the CPU smoke run (wall times only): the passes it names are the ones the iteration calls
    out = _run("bench_shoot_floor.py", "--cpu", "--size", "12", "--reps", "1")
    assert "15.0 x K.applyInverseOperator" in out and "15.0 x fused step" in out
    assert "iteration: wall" in out


def test_sitk_stand_in_serves_more_than_one_call(monkeypatch):
    """bench_brain.py hands FireANTs in-memory images through the SimpleITK stand-in once per pair:
    a second install() must still report the stand-in (it used to take itself for SimpleITK)."""
    try:
        import SimpleITK  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("the real SimpleITK is installed: the stand-in is not used")
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))
    monkeypatch.delitem(sys.modules, "SimpleITK", raising=False)
    import _sitk_stub

    try:
        assert _sitk_stub.install() is True
        assert _sitk_stub.install() is True
        import SimpleITK as stub

        im = stub.Image([[[1.0]]], (1.0, 1.0, 1.0), (0.0, 0.0, 0.0), (1, 0, 0, 0, 1, 0, 0, 0, 1))
        assert stub.GetArrayFromImage(im).shape == (1, 1, 1)
        with pytest.raises(NotImplementedError):
            stub.GetImageFromArray(im.a)
    finally:
        sys.modules.pop("SimpleITK", None)  # other tests must see no SimpleITK again


def test_brain_lab_runs_a_setting_with_a_bias_field():
    from pyca.apps import data

    if data.mni_dir() is None:
        pytest.skip("needs the MNI152 template (nilearn)")
    out = _run("lab/brain_lab.py", "--seeds", "1L", "--resolution", "2", "--device", "cpu", "--params",
               '[{"iterations": [1, 1, 1], "_bias": 0.15}]')
    assert "seed 1 LAS" in out and "iterations 3" in out


def test_brain_probe_compares_the_match_at_the_exact_map():
    from pyca.apps import data

    if data.mni_dir() is None:
        pytest.skip("needs the MNI152 template (nilearn)")
    out = _run("lab/brain_probe.py", "ssd", "--seed", "1", "--params", '{"iterations": [1, 1, 1]}')
    rows = [ln for ln in out.splitlines() if "sum of squared differences" in ln]
    assert len(rows) == 4, out
    # The exact map brings the moving image closer to the fixed one than the identity-like map of three
    # iterations does, at the solver's own blur.
    exact, pyca = (float(x.split()[-1]) for x in rows[0].split(": ", 1)[1].split(", "))
    assert 0 < exact < pyca, rows[0]
