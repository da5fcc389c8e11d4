"""`pyca register --metric mi` (pyca.apps.syn with the mutual information, issue 37) against independent
references: each side's force against central differences of the MI of the two warped images, both
computed with NumPy/SciPy (a dense Parzen histogram, trilinear resampling); an image registered onto
itself stays at the identity; a FLAIR-like contrast of a real T1 brain (the MNI template warped by a
known map, pyca.apps.data) registers with mi almost as well as its T1 does, and not with lncc; the same
bits on 1, 2 and 16 threads and without the SIMD rows; the GPU against the CPU (skipped without one); the parameter through the CLI."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import ndimage

import pyca as ca
from pyca.apps import data, syn

from cli_helpers import console_script

needs_mni = pytest.mark.skipif(data.mni_dir() is None, reason="needs nilearn's MNI152 template (pip install nilearn)")
needs_gpu = pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU (the CPU is the reference)")
SHAPE = (22, 20, 16)
BINS = 16


def _bspline3(u):
    a = np.abs(u)
    return np.where(a < 1, 2 / 3 - a**2 + a**3 / 2, np.where(a < 2, (2 - a) ** 3 / 6, 0.0))


def _mi(I, J, rI, rJ, bins=BINS):
    """MI of the Parzen-windowed joint histogram (docs/operations/similarity.md), evaluated densely in
    float64: every voxel against every bin."""
    def parzen(v, r):
        t = 1 + (np.clip(np.asarray(v, np.float64).ravel(), *r) - r[0]) / (r[1] - r[0]) * (bins - 3)
        return _bspline3(t[:, None] - np.arange(bins)[None, :])

    H = parzen(I, rI).T @ parzen(J, rJ)
    p = H / H.sum()
    pI, pJ = p.sum(1, keepdims=True), p.sum(0, keepdims=True)
    nz = p > 0
    return float(np.sum(p[nz] * np.log(p[nz] / (pI * pJ)[nz])))


def _smooth(shape, seed, sigma=2.0):
    t = ndimage.gaussian_filter(np.random.default_rng(seed).standard_normal(shape), sigma)
    return (t - t.min()) / (t.max() - t.min())


def _image(a, g=None):
    a = np.asfortranarray(a, np.float32)
    return ca.Image3D.from_array(a, g if g is not None else ca.GridInfo(a.shape))


@pytest.mark.parametrize("side", ["fixed", "moving"])
def test_each_sides_force_is_the_derivative_of_mi(side):
    """The force syn moves one side's map by, G * (dMI/dW grad W), against central differences of
    MI(F o A, M o B) along that force, A (or B) = id + e v: F o A resampled by SciPy (trilinear) and MI
    evaluated densely by NumPy. At the identity a central difference of a trilinear resampling is the
    central-difference gradient syn takes, so the two agree to the curvature of MI in e."""
    F = _smooth(SHAPE, 0)
    M = np.cos(3.5 * _smooth(SHAPE, 0)) ** 2 + 0.3 * _smooth(SHAPE, 1, 3.0)  # another contrast, shifted anatomy
    g = ca.GridInfo(SHAPE, (1.5, 1.5, 1.5), (0.0, 0.0, 0.0))
    rF, rM = (-0.1, 1.1), (float(M.min()) - 0.1, float(M.max()) + 0.1)
    Fs, Ms = syn._Side(g, ca.MEM_HOST, _image(F, g)), syn._Side(g, ca.MEM_HOST, _image(M, g))
    Fs.warp()
    Ms.warp()
    S = syn._MI(BINS, (rF, rM))(Fs.dS, Ms.dS, Fs.W, Ms.W)
    assert S == pytest.approx(_mi(F, M, rF, rM), rel=1e-6)
    me = Fs if side == "fixed" else Ms
    me.force(ca.Vec3Df(1.5, 1.5, 1.5))  # u = G * (dS/dW grad W), world units
    idx = np.moveaxis(np.indices(SHAPE), 0, -1).astype(float)
    window = np.prod([np.sin(np.pi * idx[..., k] / (SHAPE[k] - 1)) ** 2 for k in range(3)], axis=0)  # 0 at the border
    v = me.u.numpy() * window[..., None]  # a direction (world units)
    v /= np.abs(v).max()
    # the predicted change of S along v: sum_x dS/dW(x) grad W(x) . v(x), grad by central differences
    grad = np.stack(np.gradient(me.W.numpy().astype(np.float64), 1.5), -1)
    predicted = float(np.sum(me.dS.numpy()[..., None] * grad * v))
    eps = 1e-2  # world units
    pts = lambda s: np.moveaxis(idx + s * eps * v / 1.5, -1, 0)  # noqa: E731 (voxels)
    img = F if side == "fixed" else M
    other = M if side == "fixed" else F
    Sp, Sm = (_mi(*((w, other) if side == "fixed" else (other, w)), rF, rM)
              for w in (ndimage.map_coordinates(img.astype(np.float64), pts(s), order=1, mode="nearest")
                        for s in (1, -1)))
    fd = (Sp - Sm) / (2 * eps)
    assert predicted > 0  # the force raises MI
    assert fd == pytest.approx(predicted, rel=2e-3), (fd, predicted)


def test_an_image_registered_onto_itself_stays_put():
    """mi: MI(I, I) is the largest MI of I with any image of it, so the maps stay at the identity."""
    f = _image(_smooth((28, 26, 20), 3) * (_smooth((28, 26, 20), 4) > 0.3), ca.GridInfo((28, 26, 20)))
    r = syn.register(f, f, metric="mi", scales=(2, 1), iterations=(20, 15), affine="none", device="cpu")
    d = np.linalg.norm(r.phiinv.numpy() - np.stack(np.indices((28, 26, 20)), -1), axis=-1)
    assert d.mean() < 0.02 and d.max() < 0.15, (d.mean(), d.max())
    assert r.quality["ok"], r.quality["problems"]


RES = 6  # mm: 30 x 36 x 30 voxels, about a second per registration


def _dice(a, b):
    return float(np.mean([2 * np.sum((a == k) & (b == k)) / (np.sum(a == k) + np.sum(b == k)) for k in (1, 2, 3)
                          if np.sum(a == k) + np.sum(b == k)]))


def _wimage(a, aff):
    sp = np.linalg.norm(aff[:3, :3], axis=0)
    return _image(a, ca.GridInfo(ca.Vec3Di(*a.shape), ca.Vec3Df(*sp), ca.Vec3Df(*aff[:3, 3])))


@needs_mni
def test_a_flair_like_contrast_registers_with_mi_as_its_t1_does_and_not_with_lncc():
    """The MNI template warped by a known map (pyca.apps.data.brain_pair), and a FLAIR-like contrast of
    the warped image (grey matter brightest, CSF dark: a non-monotonic map of the T1 intensity, a bias
    field, noise): with mi the FLAIR image's tissue labels land within 0.03 Dice of the T1 image's
    registered with syn's defaults (lncc); with lncc they do not (and the run says why)."""
    pair = data.brain_pair(seed=0, resolution=RES)
    F = _wimage(pair["fixed"], pair["fixed_affine"])
    L = _wimage(pair["moving_labels"].astype(np.float32), pair["moving_affine"])
    flair = _wimage(data.other_contrast(pair["moving"], "flair", spacing=(RES,) * 3), pair["moving_affine"])
    before = _dice(np.round(syn.register(F, flair, moving_labels=L, metric="mi", iterations=0, device="cpu")
                            .labels.numpy()), pair["fixed_labels"])
    out = {}
    for name, mov, metric in (("t1", _wimage(pair["moving"], pair["moving_affine"]), "lncc"), ("flair", flair, "mi"),
                              ("flair", flair, "lncc")):
        r = syn.register(F, mov, moving_labels=L, metric=metric, device="cpu")
        out[name, metric] = (_dice(np.round(r.labels.numpy()), pair["fixed_labels"]), r.quality)
    t1, q = out["t1", "lncc"]
    mi, q_mi = out["flair", "mi"]
    assert q["ok"] and q_mi["ok"], (q["problems"], q_mi["problems"])
    assert mi > before + 0.05, (mi, before)  # the deformable stage did the work, not the linear one
    assert mi > t1 - 0.03, (mi, t1)
    lncc, q_lncc = out["flair", "lncc"]
    assert lncc < t1 - 0.2, (lncc, t1)
    assert "contrast" in [p["code"] for p in q_lncc["problems"]], q_lncc["problems"]
    assert "metric mi" in "; ".join(p["message"] for p in q_lncc["problems"])


_BITS = """
import hashlib, numpy as np, pyca as ca
from pyca.apps import data, syn
f, m = data.builtin_pair(size=(64, 64, 48), spacing=(2.0, 2.0, 2.0))
t2 = ca.Image3D.from_array(np.asfortranarray(data.other_contrast(m.numpy(), "t2")), m.grid())
r = syn.register(f, t2, metric="mi", scales=(2, 1), iterations=(10, 8), device="cpu")
h = hashlib.sha1()
for a in (r.deformed, r.phiinv, r.phi, r.jacobian):
    h.update(np.ascontiguousarray(a.numpy()).tobytes())
print(h.hexdigest(), len(r.energies))
"""


def test_mi_registration_has_the_same_bits_on_1_2_and_16_threads():
    """A whole syn mi registration (linear stage, both scales, outputs) gives the same SHA-1 in processes
    with 1, 2 and 16 threads, and with the CPU's SIMD rows off (the histogram in integers; every other op
    writes each voxel once; sums in a fixed order; the vector loops compute the scalar ones' bits). The
    grid (64 x 64 x 48) is large enough for the ops to split it among up to 6 threads."""
    out = set()
    for threads, simd in ((1, "1"), (2, "1"), (16, "1"), (2, "0")):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYCA_CPU_SIMD=simd)
        r = subprocess.run([sys.executable, "-c", _BITS], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        out.add(r.stdout.strip().split("\n")[-1])
    assert len(out) == 1, out
    assert int(next(iter(out)).split()[1]) >= 10  # it iterated


@needs_gpu
def test_gpu_forces_match_the_cpu():
    """One evaluation of _MI on the GPU: the same MI bits (the integer histogram), forces to float rounding."""
    F = _smooth(SHAPE, 0)
    M = np.cos(3.5 * F) ** 2 + 0.3 * _smooth(SHAPE, 1, 3.0)
    rng = ((0.0, 1.0), (float(M.min()), float(M.max())))
    res = {}
    for mem in (ca.MEM_HOST, ca.MEM_DEVICE):
        g = ca.GridInfo(SHAPE)
        gI, gJ = ca.Image3D(g, mem), ca.Image3D(g, mem)
        S = syn._MI(BINS, rng)(gI, gJ, _image(F).to(mem), _image(M).to(mem))
        res[mem] = (S, gI.numpy(), gJ.numpy())
    (s0, a0, b0), (s1, a1, b1) = res[ca.MEM_HOST], res[ca.MEM_DEVICE]
    assert s0 == s1
    for x, y in ((a0, a1), (b0, b1)):
        np.testing.assert_allclose(y, x, rtol=1e-4, atol=1e-6 * float(np.abs(x).max()))


@needs_gpu
@needs_mni
def test_gpu_registration_matches_the_cpu():
    """The same mi registration on the GPU: the maps agree with the CPU's to a small fraction of a voxel."""
    pair = data.brain_pair(seed=0, resolution=RES)
    F = _wimage(pair["fixed"], pair["fixed_affine"])
    flair = _wimage(data.other_contrast(pair["moving"], "flair", spacing=(RES,) * 3), pair["moving_affine"])
    kw = dict(metric="mi", scales=(2, 1), iterations=(30, 20))
    c, g = syn.register(F, flair, device="cpu", **kw), syn.register(F, flair, device="gpu", **kw)
    d = np.linalg.norm(g.phiinv.numpy() - c.phiinv.numpy(), axis=-1)
    assert d.mean() < 0.02 and d.max() < 0.3, (d.mean(), d.max())


def test_metric_is_refused_or_taken_in_any_case():
    f = _image(_smooth((12, 12, 10), 0))
    with pytest.raises(ValueError, match="metric"):
        syn.register(f, f, metric="ssd", iterations=0, device="cpu")
    with pytest.raises(ValueError, match="bins"):
        syn.register(f, f, metric="mi", bins=2, iterations=0, device="cpu")
    r = syn.register(f, f, metric="MI", scales=(1,), iterations=(2,), device="cpu", affine="none")
    assert r.params["metric"] == "mi" and r.summary()["params"]["metric"] == "mi"
    # mi's own defaults (parameters.SYN_METRIC_DEFAULTS) where not given; a given value wins
    assert r.params["smooth_update"] == 1.5 and r.params["smooth_field"] == 0.42
    r = syn.register(f, f, metric="mi", smooth_update=1.0, scales=(1,), iterations=(1,), device="cpu", affine="none")
    assert r.params["smooth_update"] == 1.0
    r = syn.register(f, f, scales=(1,), iterations=(1,), device="cpu", affine="none")
    assert r.params["metric"] == "lncc" and r.params["smooth_update"] == 1.0


def test_cli_metric_mi(tmp_path):
    """`pyca register --metric mi` on two files of different contrasts: it runs, summary.json says mi (and
    with --method lddmm); `--metric ssd` is refused in one line before any work."""
    import nibabel as nib

    f, m = data.builtin_pair(size=(29, 30, 23), spacing=(2.0, 2.0, 2.0))
    aff = np.diag([2.0, 2.0, 2.0, 1.0])
    nib.save(nib.Nifti1Image(f.numpy(), aff), tmp_path / "f.nii.gz")
    nib.save(nib.Nifti1Image(data.other_contrast(m.numpy(), "t2").astype(np.float32), aff), tmp_path / "m.nii.gz")
    exe = console_script()
    base = [exe, "register", "--fixed", str(tmp_path / "f.nii.gz"), "--moving", str(tmp_path / "m.nii.gz"),
            "--device", "cpu", "--scales", "2,1", "--iterations", "10,5", "--no-report"]
    r = subprocess.run(base + ["--out", str(tmp_path / "o"), "--metric", "mi"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["method"] == "syn" and s["params"]["metric"] == "mi" and s["params"]["smooth_update"] == 1.5
    r = subprocess.run(base + ["--out", str(tmp_path / "l"), "--method", "lddmm", "--metric", "mi"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr  # --metric is taken by --method lddmm too
    assert json.loads((tmp_path / "l" / "summary.json").read_text())["params"]["metric"] == "mi"
    # the syn group's options: --bins reaches lddmm, also given as syn's own default (32; lddmm's is 24); one
    # lddmm does not take is refused before any work
    for bins in ("48", "32"):
        r = subprocess.run(base + ["--out", str(tmp_path / f"l{bins}"), "--method", "lddmm", "--metric", "mi",
                                   "--bins", bins], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        assert json.loads((tmp_path / f"l{bins}" / "summary.json").read_text())["params"]["bins"] == int(bins)
    bad = subprocess.run(base + ["--out", str(tmp_path / "ls"), "--method", "lddmm", "--smooth-field", "1"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--smooth-field" in bad.stderr and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and not (tmp_path / "ls").exists()
    bad = subprocess.run(base + ["--out", str(tmp_path / "b"), "--metric", "ssd"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "metric" in bad.stderr and "Traceback" not in bad.stderr
    assert not (tmp_path / "b").exists()


def test_worse_than_linear_needs_more_than_a_rounding():
    """quality: an end energy above the linear stage's by less than WORSE_TOL of it (an image registered
    onto itself) is no failure; by more, it is."""
    from pyca.registration import quality

    jac = _image(np.ones((6, 6, 4)))
    assert quality.assess("mi", jac, None, 100.0, 100.0 * (1 + quality.WORSE_TOL["mi"] / 2))["ok"]
    q = quality.assess("mi", jac, None, 100.0, 100.0 * (1 + 2 * quality.WORSE_TOL["mi"]))
    assert [p["code"] for p in q["problems"]] == ["worse_than_linear"]
