"""pyca.apps.lddmm and the `pyca` command.

- The built-in pair: the image mismatch falls by at least 80% and det D phiinv stays positive.
- The energies register() reports are checked against an independent NumPy/SciPy evaluation of the
  same discretised energy (semi-Lagrangian flow with scipy.ndimage.map_coordinates, the fluid
  operator's Fourier symbol with numpy.fft) for the velocities it returns.
- CPU and GPU runs of one configuration agree on the final energy within FINAL_ENERGY_RTOL.
- Bad inputs fail before any work with errors naming the problem.
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import pyca as ca
from pyca.apps import data, lddmm
from pyca import cli

ndimage = pytest.importorskip("scipy.ndimage")

needs_gpu = pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")

# CPU and GPU runs of the same configuration end within this relative difference of final energy
# (float32 kernels, reductions in another order, FFT libraries: FFTW vs cuFFT).
FINAL_ENERGY_RTOL = 1e-3

# The SSD match: the checks below compare with an independent SSD-LDDMM reference.
# (the solver against independent references: percentile scaling, no bias correction, the fixed image as
# it is: no blur, none matched to the interpolation)
SMALL = dict(scales=(2, 1), iterations=(12, 6), time_steps=4, affine="none", metric="ssd", normalize="percentiles",
             bias_sigma=0.0, fixed_blur=0.0, interp_blur="none")


@pytest.fixture(scope="module")
def small_pair():
    return data.builtin_pair(size=(32, 32, 24), spacing=(2.0, 2.0, 8.0 / 3.0))


@pytest.fixture(scope="module")
def small_result(small_pair):
    return lddmm.register(*small_pair, **SMALL)


# ------------------------------------------------------------------------------------------------
# An independent evaluation of the energy (NumPy/SciPy, float64)
def _normalised(fixed, moving):
    # Each image by its own 0.5 / 99.5 percentiles, clamped to [0, 1] (register's normalize='percentiles').
    out = []
    for im in (fixed, moving):
        a = im.numpy().astype(np.float64)
        lo, hi = np.percentile(a.astype(np.float32), [0.5, 99.5])
        out.append(np.clip((a - lo) / (hi - lo), 0.0, 1.0))
    return tuple(out)


def _identity(shape):
    return np.stack(np.meshgrid(*[np.arange(n, dtype=np.float64) for n in shape], indexing="ij"), axis=-1)


def _compose_hv_inv(g, v, delta, spacing):
    # out(x) = g(x - delta v(x) / spacing), trilinear; outside the grid g is extended by the identity.
    ident = _identity(g.shape[:3])
    pos = ident - delta * v / np.asarray(spacing)
    coords = [pos[..., d] for d in range(3)]
    disp = g - ident
    out = np.empty_like(g)
    for c in range(3):
        out[..., c] = ndimage.map_coordinates(disp[..., c], coords, order=1, mode="grid-constant", cval=0.0)
    return out + pos


def _apply_h(im, h):
    return ndimage.map_coordinates(im, [h[..., d] for d in range(3)], order=1, mode="nearest")


def _fluid_symbol(shape, spacing, alpha, gamma, lpow):
    c = 0.0
    for d, (n, h) in enumerate(zip(shape, spacing)):
        k = np.arange(n).reshape([-1 if i == d else 1 for i in range(3)])
        c = c + (2.0 - 2.0 * np.cos(2.0 * np.pi * k / n)) / h**2
    return (alpha * c + gamma) ** lpow


def reference_energy(fixed, moving, velocities, p):
    """(total, match, reg) of register()'s energy for velocities v_j (NumPy arrays, world units)."""
    I1, I0 = _normalised(fixed, moving)
    sp = tuple(fixed.grid().spacing())
    T = len(velocities)
    h = _identity(I0.shape)
    for v in velocities:
        h = _compose_hv_inv(h, v, 1.0 / T, sp)
    match = np.sum((_apply_h(I0, h) - I1) ** 2) / p["sigma"] ** 2
    # L normalised so that K = L^-1 has gain 1 at the zero frequency (docs/lddmm.md, 'The kernel's scale')
    sym = _fluid_symbol(I0.shape, sp, p["alpha"], p["gamma"], p["lpow"]) / (p["gamma"] ** p["lpow"] if p["gamma"] > 0
                                                                           else 1.0)
    reg = 0.0
    for v in velocities:
        for c in range(3):
            Lv = np.real(np.fft.ifftn(sym * np.fft.fftn(v[..., c])))
            reg += np.sum(Lv * v[..., c]) / T
    return match + reg, match, reg


def test_energy_matches_independent_reference(small_pair, small_result):
    res = small_result
    assert res.params["beta"] == 0.0
    vs = [v.numpy().astype(np.float64) for v in res.velocity]
    total, match, reg = reference_energy(*small_pair, vs, res.params)
    last = [e for e in res.energies if e["accepted"] and e["scale"] == 1][-1]
    assert last["match"] == pytest.approx(match, rel=2e-3)
    assert last["reg"] == pytest.approx(reg, rel=2e-3)
    assert res.final_energy == pytest.approx(total, rel=2e-3)
    assert res.final_mismatch == pytest.approx(match * res.params["sigma"] ** 2, rel=2e-3)


def test_initial_mismatch_is_the_ssd_of_the_inputs(small_pair, small_result):
    I1, I0 = _normalised(*small_pair)
    assert small_result.initial_mismatch == pytest.approx(np.sum((I0 - I1) ** 2), rel=1e-5)


def test_deformed_is_moving_through_phiinv(small_pair, small_result):
    fixed, moving = small_pair
    ref = _apply_h(moving.numpy().astype(np.float64), small_result.phiinv.numpy().astype(np.float64))
    np.testing.assert_allclose(small_result.deformed.numpy(), ref, atol=1e-4)


def test_phi_inverts_phiinv(small_result):
    # phi o phiinv = id inside the grid (both from the same velocities; discretisation error only).
    g = small_result.phi.grid()
    out = ca.Field3D(g, small_result.mem)
    ca.ComposeHH(out, small_result.phi, small_result.phiinv)
    err = np.abs(out.numpy() - _identity(tuple(g.size())))[3:-3, 3:-3, 3:-3]
    assert err.max() < 0.5


def test_accepted_energies_decrease(small_result):
    for s in (2, 1):
        acc = [e["energy"] for e in small_result.energies if e["accepted"] and e["scale"] == s]
        assert acc, f"no accepted step at scale {s}"
        assert all(b <= a for a, b in zip(acc, acc[1:]))


def test_inputs_unchanged(small_pair):
    fixed, moving = small_pair
    f0, m0 = fixed.numpy(), moving.numpy()
    lddmm.register(fixed, moving, scales=(1,), iterations=2, time_steps=2)
    np.testing.assert_array_equal(fixed.numpy(), f0)
    np.testing.assert_array_equal(moving.numpy(), m0)


def test_cpu_run_never_waits_on_the_gpu(small_pair, monkeypatch):
    # A CPU run (the linear stage too, and pyca demo) must not start a CUDA context: on a GPU whose memory others hold
    # it would fail with "out of memory" (pyca lddmm --device cpu in the GPU suite did).
    def refuse():
        raise AssertionError("ca.synchronize() called by a CPU run")

    monkeypatch.setattr(ca.core, "synchronize", refuse)  # what pyca.apps call
    monkeypatch.setattr(ca, "synchronize", refuse)
    res = lddmm.register(*small_pair, scales=(1,), iterations=2, time_steps=2, affine="rigid", device="cpu")
    assert res.deformed.memType() == ca.MEM_HOST
    assert cli.main(["demo", "--device", "cpu", "--size", "8", "-q"]) == 0  # the demo times each step


def test_cpu_vector_info_names_the_path():
    info = ca.cpu_vector_info()
    assert info.startswith("AVX-512") or info.startswith("scalar: "), info
    r = subprocess.run([sys.executable, "-c", "import pyca; print(pyca.cpu_vector_info())"],
                       env={**os.environ, "PYCA_CPU_SIMD": "0"}, capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "scalar: PYCA_CPU_SIMD=0"


_REGISTER_AND_SAVE = """
import sys, numpy as np
from pyca.apps import data, lddmm
f, m = data.builtin_pair(size=(37, 29, 21), spacing=(2.0, 2.0, 8.0 / 3.0))
r = lddmm.register(f, m, scales=(2, 1), iterations=(8, 5), time_steps=4, affine="rigid", device="cpu")
np.savez(sys.argv[1], phiinv=r.phiinv.numpy(), deformed=r.deformed.numpy(),
         energies=np.array([e["energy"] for e in r.energies]))
"""


@pytest.mark.skipif(not ca.cpu_vector_info().startswith("AVX-512"), reason=f"the CPU's SIMD rows do not run here "
                    f"({ca.cpu_vector_info()})")
def test_cpu_vectors_give_the_same_registration_to_the_bit(tmp_path):
    # The whole CPU registration (the linear stage, three scales' fused steps) with the SIMD rows and with
    # the scalar loops (PYCA_CPU_SIMD=0), each in a process of its own: the same bits.
    out = {}
    for simd in ("1", "0"):
        path = tmp_path / f"simd{simd}.npz"
        subprocess.run([sys.executable, "-c", _REGISTER_AND_SAVE, str(path)], env={**os.environ, "PYCA_CPU_SIMD": simd},
                       check=True, capture_output=True, text=True, timeout=300)
        out[simd] = np.load(path)
    for k in ("phiinv", "deformed", "energies"):
        np.testing.assert_array_equal(out["1"][k], out["0"][k], err_msg=k)


def test_numpy_inputs_and_2d():
    # A 2-D pair (z = 1): a disk and a shifted, stretched disk.
    x, y = np.meshgrid(np.arange(40.0), np.arange(36.0), indexing="ij")
    f = 1.0 / (1.0 + np.exp(((x - 20) ** 2 + (y - 18) ** 2) ** 0.5 - 9.0))
    m = 1.0 / (1.0 + np.exp((((x - 23) / 1.2) ** 2 + (y - 17) ** 2) ** 0.5 - 9.0))
    res = lddmm.register(f[:, :, None], m[:, :, None], scales=(2, 1), iterations=(30, 15), time_steps=4, metric="ssd")
    assert tuple(res.deformed.grid().size()) == (40, 36, 1)
    assert res.mismatch_reduction > 0.8
    assert ca.MinMax(res.jacobian)[0] > 0
    assert np.all(res.phiinv.numpy()[..., 2] == 0)


# ------------------------------------------------------------------------------------------------
# The built-in pair, default parameters (what `pyca lddmm` runs)
def test_builtin_pair_is_deterministic():
    a1, b1 = data.builtin_arrays()
    a2, b2 = data.builtin_arrays()
    np.testing.assert_array_equal(a1, a2)
    np.testing.assert_array_equal(b1, b2)
    assert a1.shape == data.DEFAULT_SIZE
    # The pair needs a large deformation: moving is far from fixed.
    assert np.sum((a1 - b1) ** 2) > 0.15 * np.sum(a1**2)


def test_cli_builtin_registration(tmp_path, capsys):
    out = tmp_path / "out"
    rc = cli.main(["lddmm", "--out", str(out), "--no-progress", "--device", "cpu"])
    assert rc == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["mismatch_reduction"] >= 0.8
    assert s["jacobian_min"] > 0
    assert s["device"].startswith("cpu")
    assert set(s["timings"]) >= {"registration_s", "total_s", "scales"}
    assert len(s["energies"]) > 0 and all(math.isfinite(e["energy"]) for e in s["energies"])
    for name in ("deformed.nii.gz", "phiinv.nii.gz", "phi.nii.gz", "jacdet.nii.gz", "report.png", "fixed.nii.gz",
                 "moving.nii.gz"):
        assert (out / name).stat().st_size > 0, name
    assert (out / "report.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # The files hold what the summary says (read back with nibabel, independently of pyca.io).
    nib = pytest.importorskip("nibabel")
    fixed = np.asarray(nib.load(str(out / "fixed.nii.gz")).dataobj)
    moving = np.asarray(nib.load(str(out / "moving.nii.gz")).dataobj)
    deformed = np.asarray(nib.load(str(out / "deformed.nii.gz")).dataobj)
    jac = np.asarray(nib.load(str(out / "jacdet.nii.gz")).dataobj)
    before, after = np.sum((moving - fixed) ** 2), np.sum((deformed - fixed) ** 2)
    assert after <= 0.2 * before
    assert jac.min() > 0
    assert nib.load(str(out / "phiinv.nii.gz")).shape == data.DEFAULT_SIZE + (1, 3)
    np.testing.assert_allclose(nib.load(str(out / "deformed.nii.gz")).header.get_zooms()[:3], data.DEFAULT_SPACING,
                               rtol=1e-6)
    text = capsys.readouterr().out
    assert "mismatch" in text and "wrote" in text


def test_cli_registers_user_files(tmp_path, small_pair):
    fixed, moving = small_pair
    ca.io.save_image(fixed, tmp_path / "f.nii.gz")
    ca.io.save_image(moving, tmp_path / "m.nii.gz")
    out = tmp_path / "out"
    rc = cli.main(["lddmm", "--fixed", str(tmp_path / "f.nii.gz"), "--moving", str(tmp_path / "m.nii.gz"), "--out",
                   str(out), "--scales", "2,1", "--iterations", "10,5", "--time-steps", "4", "--no-report", "-q",
                   "--device", "cpu"])
    assert rc == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["mismatch_reduction"] > 0.5
    assert not (out / "report.png").exists() and not (out / "fixed.nii.gz").exists()
    d = ca.io.load_image(out / "deformed.nii.gz")
    assert tuple(d.grid().size()) == tuple(fixed.grid().size())


# ------------------------------------------------------------------------------------------------
# CPU / GPU agreement
@needs_gpu
def test_cpu_and_gpu_agree(small_pair):
    cpu = lddmm.register(*small_pair, device="cpu", **SMALL)
    gpu = lddmm.register(*small_pair, device="gpu", **SMALL)
    assert cpu.device.startswith("cpu") and gpu.device.startswith("gpu")
    assert gpu.deformed.memType() == ca.MEM_DEVICE
    assert gpu.final_energy == pytest.approx(cpu.final_energy, rel=FINAL_ENERGY_RTOL)
    assert gpu.final_mismatch == pytest.approx(cpu.final_mismatch, rel=10 * FINAL_ENERGY_RTOL)
    assert ca.MinMax(gpu.jacobian)[0] > 0


@needs_gpu
def test_gpu_builtin_pair():
    res = lddmm.register(*data.builtin_pair(), device="gpu")
    assert res.mismatch_reduction >= 0.8
    assert ca.MinMax(res.jacobian)[0] > 0


# ------------------------------------------------------------------------------------------------
# Bad inputs: clear errors before any work
def _img(shape, value=None, spacing=(1.0, 1.0, 1.0), origin=(0.0, 0.0, 0.0), seed=0):
    rng = np.random.default_rng(seed)
    a = rng.random(shape).astype(np.float32) if value is None else np.full(shape, value, np.float32)
    return ca.Image3D.from_array(np.asfortranarray(a), ca.GridInfo(shape, spacing, origin))


@pytest.mark.parametrize(
    "fixed, moving, match",
    [
        (lambda: _img((16, 16, 16)), lambda: _img((16, 16, 1)), "2-D image with a 3-D"),
        (lambda: _img((16, 16, 16)), lambda: _img((16, 16, 16), 1.0), "constant"),
        (lambda: _img((16, 16, 16)), lambda: _img((3, 16, 16)), "too small"),
        (lambda: _img((16, 16, 16)), lambda: _img((16, 16, 16), origin=(100.0, 0.0, 0.0), spacing=(2, 2, 2)),
         "do not overlap"),
    ],
    ids=["2d-vs-3d", "constant", "too-small", "no-overlap"],
)
def test_grids_that_cannot_be_registered(fixed, moving, match):
    with pytest.raises(ValueError, match=match):
        lddmm.register(fixed(), moving(), iterations=1, scales=(1,), affine="none")


def test_nan_refused():
    a = np.random.default_rng(0).random((16, 16, 16)).astype(np.float32)
    a[3, 4, 5] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        lddmm.register(_img((16, 16, 16)), a, scales=(1,), iterations=1)


def test_different_grids_are_resampled():
    fixed = _img((20, 20, 20), spacing=(1, 1, 1))
    moving = _img((10, 10, 10), spacing=(2, 2, 2), seed=1)
    res = lddmm.register(fixed, moving, scales=(1,), iterations=1, time_steps=1)
    assert "resampled" in res.notes[0]
    assert tuple(res.deformed.grid().size()) == (20, 20, 20)


@pytest.mark.parametrize(
    "params, exc, match",
    [
        (dict(sigma=0.0), ValueError, "sigma"),
        (dict(alpha=-1.0), ValueError, "alpha"),
        (dict(gamma=-0.1), ValueError, "gamma"),
        (dict(time_steps=0), ValueError, "time_steps"),
        (dict(step=0.7), ValueError, "step"),
        (dict(scales=(1, 2)), ValueError, "decrease"),
        (dict(scales=(4, 2)), ValueError, "end with 1"),
        (dict(scales=(2, 1), iterations=(3,)), ValueError, "iteration counts"),
        (dict(device="tpu"), ValueError, "device"),
        (dict(speed=3), TypeError, "unknown parameter"),
    ],
)
def test_bad_parameters(small_pair, params, exc, match):
    with pytest.raises(exc, match=match):
        lddmm.register(*small_pair, **params)


@pytest.mark.skipif(ca.cuda_available(), reason="checks the error given without a GPU")
def test_gpu_requested_without_gpu(small_pair):
    with pytest.raises(ca.CudaError, match="gpu"):
        lddmm.register(*small_pair, device="gpu")


def test_wrong_types():
    with pytest.raises(TypeError, match="Image3D"):
        lddmm.register(ca.Field3D(ca.GridInfo((8, 8, 8))), _img((8, 8, 8)))
    with pytest.raises(TypeError):
        lddmm.register(42, _img((8, 8, 8)))


def test_cli_errors_before_work(tmp_path, capsys):
    out = tmp_path / "out"
    missing = str(tmp_path / "missing.nii.gz")
    junk = tmp_path / "junk.nii.gz"
    junk.write_bytes(b"not an image" * 10)
    ca.io.save_image(_img((16, 16, 16)), tmp_path / "a.nii.gz")
    ca.io.save_image(_img((16, 16, 16), 2.0), tmp_path / "flat.nii.gz")
    cases = [
        (["--fixed", missing, "--moving", missing], "no such file"),
        (["--fixed", str(junk), "--moving", str(junk)], "cannot read"),
        (["--fixed", str(tmp_path / "a.nii.gz")], "both --fixed and --moving"),
        (["--fixed", str(tmp_path / "a.nii.gz"), "--moving", str(tmp_path / "flat.nii.gz")], "constant"),
        (["--sigma", "-1"], "sigma"),
        (["--scales", "2,4"], "decrease"),
    ]
    for args, match in cases:
        rc = cli.main(["lddmm", "--out", str(out), "--no-progress", *args])
        err = capsys.readouterr().err
        assert rc == 2, args
        assert match in err and err.startswith("pyca lddmm: error:"), (args, err)
        assert not out.exists(), args  # nothing was written


def test_cli_info_and_demo(capsys):
    assert cli.main(["info"]) == 0
    text = capsys.readouterr().out
    assert ca.__version__ in text and "CUDA available" in text
    assert cli.main(["demo", "--size", "24", "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert "ApplyH" in text and "done" in text


def test_console_script_entry_point():
    # pyproject.toml's pyca = "_pyca_console:main" loads pyca, then returns cli.main()'s exit status.
    assert callable(cli.main)
    assert cli.main([]) == 0


def test_cli_help_lists_options(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["lddmm", "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    for opt in ("--alpha", "--beta", "--gamma", "--sigma", "--step", "--iterations", "--scales", "--time-steps",
                "--device", "--fixed", "--moving", "--out"):
        assert opt in text


def test_output_folder_in_missing_parent(tmp_path, capsys):
    rc = cli.main(["lddmm", "--out", str(tmp_path / "a" / "b"), "--no-progress"])
    assert rc == 2 and "does not exist" in capsys.readouterr().err



def test_fixed_step_refusal_names_why():
    # K has gain 1 (gamma > 0): the refusal names the match term's weight 2 / sigma^2; without gamma,
    # K's unbounded gain. Neither computes a power that could overflow.
    assert "2 / sigma^2 = 2e+12" in lddmm._step_refused(dict(step=0.1, gamma=0.02, lpow=8, sigma=1e-6), 1, 1e-5, 8)
    assert "unbounded" in lddmm._step_refused(dict(step=1e-4, gamma=0.0, lpow=2, sigma=0.05), 2, 1e-5, 8)
    assert "step='auto'" in lddmm._step_refused(dict(step=0.1, gamma=1e-10, lpow=64, sigma=1e-3), 1, 1e-3, 3)


def test_fixed_step_that_lowers_nothing_is_refused_before_any_output():
    # A step of 0.1 with a match term weighted 2 / sigma^2 = 2e12 overshoots in every halving: an error
    # naming step='auto', not an identity map reported as a registration.
    with pytest.raises(ValueError, match="none of 6 tries.*step='auto'"):
        lddmm.register(*data.builtin_pair(size=(24, 24, 16)), scales=(1,), iterations=6, step=0.1, sigma=1e-6,
                       affine="none", device="cpu")
