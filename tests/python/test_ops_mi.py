"""JointHistogram and MutualInformation (docs/operations/similarity.md) against an independent NumPy
reference: the Parzen histogram evaluated densely (every voxel against every bin, no 4-bin support
logic), MI from it in float64, the gradient against central finite differences of that MI; the same
bits for 1, 2 and 3 threads in separate processes; on both memory types (the device ones skip
without a GPU)."""
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.ndimage as ndi

import pyca as ca

from memory_helpers import MEMS


def image(arr, mem):
    return ca.Image3D.from_array(np.asfortranarray(arr, np.float32), ca.GridInfo(arr.shape)).to(mem)


def bspline3(u):
    a = np.abs(u)
    return np.where(a < 1, 2 / 3 - a**2 + a**3 / 2, np.where(a < 2, (2 - a) ** 3 / 6, 0.0))


def parzen(v, lo, hi, n):
    """Dense Parzen weights (voxels x bins) of intensities v on n bins over [lo, hi]."""
    t = 1 + (np.clip(np.asarray(v, np.float64).ravel(), lo, hi) - lo) / (hi - lo) * (n - 3)
    return bspline3(t[:, None] - np.arange(n)[None, :])


def hist_ref(I, J, nI, nJ, rI, rJ, w=None):
    m = np.ones(I.size) if w is None else np.clip(np.asarray(w, np.float64).ravel(), 0, 1)
    return (parzen(I, *rI, nI) * m[:, None]).T @ parzen(J, *rJ, nJ)


def mi_ref(I, J, bins, rI, rJ, w=None):
    H = hist_ref(I, J, bins, bins, rI, rJ, w)
    p = H / H.sum()
    pI, pJ = p.sum(1, keepdims=True), p.sum(0, keepdims=True)
    nz = p > 0
    return float(np.sum(p[nz] * np.log(p[nz] / (pI * pJ)[nz])))


def pair(shape, seed=0):
    """A smooth image and a non-monotonic contrast of it with noise (a T1 / T2-like pair)."""
    rng = np.random.default_rng(seed)
    I = ndi.gaussian_filter(rng.random(shape), 1.2)
    I = (I - I.min()) / (I.max() - I.min())
    J = np.sin(3.0 * I) ** 2 + 0.05 * rng.standard_normal(shape)
    I[:2], J[:2] = 0.0, 0.0  # a background: runs of equal voxels (added once, times their length)
    return I.astype(np.float32), J.astype(np.float32)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("masked", [False, True])
def test_joint_histogram_matches_dense_parzen_reference(mem, masked):
    shape = (13, 11, 7)
    I, J = pair(shape)
    I[0, 0, 0], I[1, 0, 0], J[2, 0, 0] = -0.5, 1.7, np.nan  # outside the range: clamped (NaN: lo)
    rI, rJ = (0.0, 1.0), (-0.1, 1.2)
    w = np.random.default_rng(2).uniform(-0.2, 1.3, shape).astype(np.float32) if masked else None
    h = image(np.zeros((12, 9, 1)), mem)
    args = (image(I, mem), image(J, mem)) + ((image(w, mem),) if masked else ()) + (*rI, *rJ)
    ca.JointHistogram(h, *args)
    Jr = np.where(np.isnan(J), rJ[0], J)
    ref = hist_ref(I, Jr, 12, 9, rI, rJ, w)
    np.testing.assert_allclose(h.numpy()[:, :, 0], ref, rtol=1e-6, atol=1e-6)
    assert h.numpy().sum() == pytest.approx(np.clip(w, 0, 1).sum() if masked else I.size, rel=1e-6)


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("shape", [(9, 8, 7), (15, 12, 1)])
def test_mutual_information_value_and_gradient(mem, masked, shape):
    I, J = pair(shape, seed=1)
    bins, rI, rJ = 12, (0.0, 1.0), (float(J.min()) - 0.01, float(J.max()) + 0.01)
    w = (np.random.default_rng(3).random(shape) > 0.3).astype(np.float32) if masked else None
    g = image(np.zeros(shape), mem)
    args = (image(I, mem), image(J, mem)) + ((image(w, mem),) if masked else ()) + (bins, *rI, *rJ)
    mi = ca.MutualInformation(g, *args)
    assert mi == pytest.approx(mi_ref(I, J, bins, rI, rJ, w), rel=1e-7, abs=1e-9)
    assert mi > 0.1  # the pair shares information
    grad = g.numpy()
    scale = float(np.abs(grad).max())
    assert scale > 0
    h = 1e-4
    rng = np.random.default_rng(4)
    idx = [tuple(int(rng.integers(0, s)) for s in shape) for _ in range(8)]
    for k in idx:
        if not (0.0 + 2 * h < I[k] < 1.0 - 2 * h):
            continue
        Ip, Im = I.astype(np.float64), I.astype(np.float64)
        Ip[k] += h
        Im[k] -= h
        fd = (mi_ref(Ip, J, bins, rI, rJ, w) - mi_ref(Im, J, bins, rI, rJ, w)) / (2 * h)
        assert grad[k] == pytest.approx(fd, rel=1e-3, abs=1e-4 * scale), k
    # Outside the range the derivative of the clamp is 0.
    I2 = I.copy()
    I2[0, 0, 0] = 1.5
    ca.MutualInformation(g, image(I2, mem), *args[1:])
    assert g.numpy()[0, 0, 0] == 0.0


def nmi_ref(I, J, bins, rI, rJ, w=None):
    """Studholme's (H(I) + H(J)) / H(I, J) of the dense Parzen histogram, in float64."""
    H = hist_ref(I, J, bins, bins, rI, rJ, w)
    p = H / H.sum()

    def ent(q):
        q = q[q > 0]
        return float(-np.sum(q * np.log(q)))

    return (ent(p.sum(1)) + ent(p.sum(0))) / ent(p.ravel())


@pytest.mark.parametrize("mem", MEMS)
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("normalized", [False, True])
def test_mutual_information_gradients_of_both_images(mem, masked, normalized):
    """MutualInformationGradients: the value (MI, or NMI with normalized) against the dense reference, each
    image's derivative against central finite differences of it; without normalized, gradI has
    MutualInformation's bits and gradJ MutualInformation(J, I)'s values (its histogram the transpose)."""
    shape = (9, 8, 7)
    I, J = pair(shape, seed=6)
    bins, rI, rJ = 12, (0.0, 1.0), (float(J.min()) - 0.01, float(J.max()) + 0.01)
    w = (np.random.default_rng(7).random(shape) > 0.3).astype(np.float32) if masked else None
    gI, gJ = image(np.zeros(shape), mem), image(np.zeros(shape), mem)
    m = (image(w, mem),) if masked else ()
    v = ca.MutualInformationGradients(gI, gJ, image(I, mem), image(J, mem), *m, bins, *rI, *rJ, normalized)
    ref = nmi_ref if normalized else mi_ref
    assert v == pytest.approx(ref(I, J, bins, rI, rJ, w), rel=1e-7, abs=1e-9)
    assert (1.0 < v < 2.0) if normalized else v > 0.1
    if not normalized:  # the two-call form
        g1, g2 = image(np.zeros(shape), mem), image(np.zeros(shape), mem)
        assert ca.MutualInformation(g1, image(I, mem), image(J, mem), *m, bins, *rI, *rJ) == v
        assert np.array_equal(g1.numpy(), gI.numpy())
        ca.MutualInformation(g2, image(J, mem), image(I, mem), *m, bins, *rJ, *rI)
        np.testing.assert_allclose(gJ.numpy(), g2.numpy(), rtol=1e-5, atol=1e-6 * float(np.abs(g2.numpy()).max()))
    h = 1e-4
    rng = np.random.default_rng(8)
    for grad, which, (lo, hi) in ((gI.numpy(), 0, rI), (gJ.numpy(), 1, rJ)):
        scale = float(np.abs(grad).max())
        assert scale > 0
        checked = 0
        for _ in range(10):
            k = tuple(int(rng.integers(0, s)) for s in shape)
            X = (I, J)[which]
            if not (lo + 2 * h < X[k] < hi - 2 * h):
                continue
            Xp, Xm = X.astype(np.float64), X.astype(np.float64)
            Xp[k] += h
            Xm[k] -= h
            args_p, args_m = ((Xp, J), (Xm, J)) if which == 0 else ((I, Xp), (I, Xm))
            fd = (ref(*args_p, bins, rI, rJ, w) - ref(*args_m, bins, rI, rJ, w)) / (2 * h)
            assert grad[k] == pytest.approx(fd, rel=2e-3, abs=1e-4 * scale), (which, k)
            checked += 1
        assert checked >= 3


def test_mutual_information_gradients_refuses_shared_outputs():
    I, J = pair((6, 5, 4))
    a, b, c = image(np.zeros(I.shape), ca.MEM_HOST), image(I, ca.MEM_HOST), image(J, ca.MEM_HOST)
    with pytest.raises(ValueError, match="MutualInformationGradients.*gradI"):
        ca.MutualInformationGradients(a, a, b, c, 8, 0.0, 1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match="MutualInformationGradients.*gradJ"):
        ca.MutualInformationGradients(a, c, b, c, 8, 0.0, 1.0, 0.0, 1.0)


def test_mutual_information_is_largest_for_aligned_images():
    I, J = pair((24, 22, 1), seed=5)
    g = image(np.zeros(I.shape), ca.MEM_HOST)
    r = (float(J.min()), float(J.max()))
    aligned = ca.MutualInformation(g, image(I, ca.MEM_HOST), image(J, ca.MEM_HOST), 16, 0.0, 1.0, *r)
    shifted = ca.MutualInformation(g, image(np.roll(I, 3, 0), ca.MEM_HOST), image(J, ca.MEM_HOST), 16, 0.0, 1.0, *r)
    assert aligned > shifted + 0.1


def test_parzen_mi_of_an_image_with_itself_is_not_largest_at_the_identity():
    """A property of the Parzen-windowed MI, not of the op: MI(I o psi, I) exceeds MI(I, I) for a small
    warp psi = id + e v along the op's own force (v: dMI/dI grad I, smoothed), by the first order e sum
    dMI/dI grad I . v > 0. NumPy's dense MI of SciPy's trilinear resampling shows it (central slope
    within 20% of the op's prediction); a registration that follows this MI alone (pyca lddmm --metric
    mi) moves an image registered onto itself (docs/operations/similarity.md, 'Mutual information')."""
    shape, bins, r = (24, 22, 18), 16, (0.0, 1.0)
    I = ndi.gaussian_filter(np.random.default_rng(0).random(shape), 2.0)
    I = ((I - I.min()) / (I.max() - I.min())).astype(np.float32)
    g = image(np.zeros(shape), ca.MEM_HOST)
    ca.MutualInformation(g, image(I, ca.MEM_HOST), image(I, ca.MEM_HOST), bins, *r, *r)
    b = np.stack(np.gradient(I.astype(np.float64)), -1) * g.numpy()[..., None]
    v = np.stack([ndi.gaussian_filter(b[..., k], 2.0) for k in range(3)], -1)
    v /= np.abs(v).max()  # at most 1 voxel
    idx = np.indices(shape, np.float64)

    def mi(e):
        warped = ndi.map_coordinates(I.astype(np.float64), idx + e * np.moveaxis(v, -1, 0), order=1, mode="nearest")
        return mi_ref(warped, I, bins, r, r)

    e, m0 = 0.02, mi_ref(I, I, bins, r, r)
    up, down = mi(e), mi(-e)
    assert up > m0 + 1e-4 and down < m0 - 1e-4, (up - m0, down - m0)  # (rounding: about 1e-12)
    predicted = float((b * v).sum())
    assert predicted > 0 and abs((up - down) / (2 * e) / predicted - 1) < 0.2, ((up - down) / (2 * e), predicted)


def test_errors():
    g = ca.GridInfo((6, 5, 4))
    a, b, out = ca.Image3D(g), ca.Image3D(g), ca.Image3D(g)
    with pytest.raises(ValueError, match=r"MutualInformation.*bins"):
        ca.MutualInformation(out, a, b, 3, 0.0, 1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"MutualInformation.*'iMin' < 'iMax'"):
        ca.MutualInformation(out, a, b, 8, 1.0, 1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"MutualInformation.*'jMin' < 'jMax'"):
        ca.MutualInformation(out, a, b, 8, 0.0, 1.0, 0.0, float("nan"))
    with pytest.raises(ValueError, match=r"MutualInformation.*'grad'.*'I'"):
        ca.MutualInformation(a, a, b, 8, 0.0, 1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"MutualInformation.*'J'"):
        ca.MutualInformation(out, a, ca.Image3D(ca.GridInfo((6, 5, 3))), 8, 0.0, 1.0, 0.0, 1.0)
    with pytest.raises(ValueError, match=r"JointHistogram.*'hist'.*x 1"):
        ca.JointHistogram(ca.Image3D(ca.GridInfo((8, 8, 2))), a, b, 0.0, 1.0, 0.0, 1.0)


# The histogram and MI of a large pair, printed to the bit, in a process with OMP_NUM_THREADS threads.
_PROBE = """
import hashlib
import numpy as np
import pyca as ca
g = ca.GridInfo((67, 61, 59))
r = np.random.default_rng(5)
aa = r.uniform(-0.1, 1.1, g.size()).astype(np.float32)
aa[:, :20] = 0.0  # a background slab in both: runs of equal voxels
a = ca.Image3D.from_array(np.asfortranarray(aa), g)
bb = r.uniform(0, 300, g.size()).astype(np.float32)
bb[:, :20] = 0.0
b = ca.Image3D.from_array(np.asfortranarray(bb), g)
m = ca.Image3D.from_array(np.asfortranarray((r.random(g.size()) > 0.2).astype(np.float32)), g)
h = ca.Image3D(ca.GridInfo((32, 32, 1)))
ca.JointHistogram(h, a, b, m, 0.0, 1.0, 0.0, 300.0)
gr = ca.Image3D(g)
mi = ca.MutualInformation(gr, a, b, m, 32, 0.0, 1.0, 0.0, 300.0)
print(float(mi).hex(), hashlib.sha256(h.numpy().tobytes()).hexdigest(), hashlib.sha256(gr.numpy().tobytes()).hexdigest())
"""


def _probe(src, **env):
    """The words `src` prints, run in a new process with `env` added to this one's environment."""
    return subprocess.run([sys.executable, "-c", src], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=300, check=True).stdout.split()


def test_cpu_mutual_information_has_the_same_bits_for_1_2_and_3_threads():
    ref = _probe(_PROBE, OMP_NUM_THREADS="1", OMP_DYNAMIC="false")
    assert len(ref) == 3
    assert _probe(_PROBE, OMP_NUM_THREADS="2", OMP_DYNAMIC="false") == ref
    assert _probe(_PROBE, OMP_NUM_THREADS="3", OMP_DYNAMIC="false") == ref


# Histograms, MI and gradients of pairs with a background, NaN and infinite voxels, values outside the
# ranges, fractional mask weights and grids whose rows are no multiple of 8 voxels, hashed to the bit.
_PROBE_EDGES = """
import hashlib
import numpy as np
import pyca as ca
rng = np.random.default_rng(3)
out = []
for shape, bins in [((37, 29, 23), 24), ((64, 48, 40), 7), ((16, 15, 9), 200)]:
    g = ca.GridInfo(shape)
    a = rng.random(shape, dtype=np.float32) * 1.4 - 0.2
    b = (a * 0.7 + rng.normal(0, 0.1, shape)).astype(np.float32)
    a[:5], b[:5] = 0.0, 0.0
    a.flat[::97], b.flat[::89] = np.nan, np.inf
    m = (rng.random(shape) > 0.3).astype(np.float32)
    m.flat[::13] = 0.5
    I, J, M = (ca.Image3D.from_array(np.asfortranarray(x), g) for x in (a, b, m))
    G, H = ca.Image3D(g), ca.Image3D(ca.GridInfo((bins, bins, 1)))
    for extra in ((), (M,)):
        ca.JointHistogram(H, I, J, *extra, 0.0, 1.0, -0.1, 0.9)
        mi = ca.MutualInformation(G, I, J, *extra, bins, 0.0, 1.0, -0.1, 0.9)
        out += [H.numpy().tobytes(), float(mi).hex().encode(), G.numpy().tobytes()]
print(hashlib.sha256(b"".join(out)).hexdigest())
"""


@pytest.mark.skipif(not ca.cpu_vector_info().startswith("AVX-512"), reason=f"the CPU's SIMD loops do not run here "
                    f"({ca.cpu_vector_info()})")
def test_cpu_simd_mutual_information_has_the_scalar_bits():
    """The AVX-512 loops (eight voxels at once: core/src/ops/similarity_simd.cpp) give the scalar loops'
    histogram, MI and gradient bit for bit (PYCA_CPU_SIMD=0 runs the scalar ones), each in a process."""
    ref = _probe(_PROBE_EDGES, PYCA_CPU_SIMD="0", OMP_NUM_THREADS="2")
    assert len(ref) == 1
    assert _probe(_PROBE_EDGES, PYCA_CPU_SIMD="1", OMP_NUM_THREADS="2") == ref


def _background_case(seed):
    """A pair on 67 x 53 x 41 voxels (not a multiple of the GPU's chunk of voxels) with a background of 0 in
    both images, a mask of fractional weights, and the intensity ranges."""
    shape = (67, 53, 41)
    I, J = pair(shape, seed=seed)
    I[:, :9], J[:, :9] = 0.0, 0.0
    w = np.clip(np.random.default_rng(seed + 1).uniform(-0.3, 1.5, shape), 0, 1).astype(np.float32)
    return shape, I, J, w, (0.0, 1.0), (float(J.min()), float(J.max()))


def _inputs(I, J, w, masked, mem):
    """JointHistogram's images in mem: I, J and (masked) the weights w."""
    return (image(I, mem), image(J, mem)) + ((image(w, mem),) if masked else ())


def _joint_histogram(args, bins, rI, rJ):
    """ca.JointHistogram of args (_inputs) with bins x bins bins over the ranges rI, rJ, where args live."""
    h = ca.Image3D(ca.GridInfo((bins, bins, 1)), args[0].memType())
    ca.JointHistogram(h, *args, *rI, *rJ)
    return h


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("kind", ["legacy", "32,1024,plain", "16,512,magic", "8,256,always", "4,256,compact",
                                  "32,1024,compact-grouped"])
def test_every_gpu_histogram_kind_has_the_cpu_bits(kind, monkeypatch):
    """Each kernel PYCA_MI_HIST selects (kept for measurement: benchmarks/bench_mi.py) gives the CPU's
    histogram bit for bit, with a background, a fractional mask, 32 bins (the compile-time path) and 50;
    a malformed choice is refused by name."""
    _, I, J, w, rI, rJ = _background_case(7)
    monkeypatch.setenv("PYCA_MI_HIST", kind)
    for bins in (32, 50):
        for masked in (False, True):
            out = [_joint_histogram(_inputs(I, J, w, masked, mem), bins, rI, rJ).numpy().tobytes()
                   for mem in (ca.MEM_HOST, ca.MEM_DEVICE)]
            assert out[0] == out[1], (kind, bins, masked)
    monkeypatch.setenv("PYCA_MI_HIST", "33,1024,plain")
    h = ca.Image3D(ca.GridInfo((32, 32, 1)), ca.MEM_DEVICE)
    with pytest.raises(ValueError, match="PYCA_MI_HIST"):
        ca.JointHistogram(h, image(I, ca.MEM_DEVICE), image(J, ca.MEM_DEVICE), *rI, *rJ)


@pytest.mark.skipif(not ca.cuda_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("bins", [32, 64, 200])
def test_gpu_histogram_has_the_cpu_bits(bins):
    """The GPU's integer histogram (per-lane shared-memory tables of 32-bit words, runs of background)
    equals the CPU's bit for bit: the same MI (a double computed from the integers in a fixed order) and
    the same histogram, with a background, a mask of fractional weights, and bins past the shared-memory
    path (200: atomics into global memory); and the same gradients, of MutualInformation and of
    MutualInformationGradients (one pass for both images on the GPU), every product rounded on its own."""
    shape, I, J, w, rI, rJ = _background_case(5)
    w[:4] = 1.0
    for masked in (False, True):
        out = []
        for mem in (ca.MEM_HOST, ca.MEM_DEVICE):
            args = _inputs(I, J, w, masked, mem)
            h = _joint_histogram(args, bins, rI, rJ)
            g = image(np.zeros(shape), mem)
            mi = ca.MutualInformation(g, *args, bins, *rI, *rJ)
            gI, gJ = image(np.zeros(shape), mem), image(np.zeros(shape), mem)
            ca.MutualInformationGradients(gI, gJ, *args, bins, *rI, *rJ)
            out.append((float(mi).hex(), h.numpy().tobytes(), g.numpy().tobytes(), gI.numpy().tobytes(),
                        gJ.numpy().tobytes()))
        for k, what in enumerate(("MI", "histogram", "gradient", "gradI", "gradJ")):
            assert out[0][k] == out[1][k], (what, masked)
