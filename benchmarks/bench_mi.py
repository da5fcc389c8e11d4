"""Mutual information (ca.JointHistogram / ca.MutualInformation, docs/design/mutual-information.md):
speed beside LNCC and the copy rate, and determinism, on one device, in one run.

- histogram: the time of JointHistogram (reads I and J, 8 bytes a voxel) against ca.Copy's rate; on the
  GPU also the pass itself, without the call's fixed costs (launch, the histogram's copy to the host,
  the wait): the slope t(2 V) - t(V) of JointHistogram on the volume stacked twice along z against
  Copy's slope, for each histogram kernel in --variants (PYCA_MI_HIST: "legacy" or
  "copies,block,kind", kind plain, magic, always, compact or compact-grouped: cuda/src/ops/mutual_information.cu;
  every variant's histogram must equal the CPU's);
- op: the time of MutualInformation (histogram + gradient), of MutualInformationGradients (one histogram, both
  images' gradients: syn's call) and of LNCC (radius 3) on a grid of
  --size voxels (default 192 x 224 x 192, a 1 mm brain), with the bytes MI moves (the histogram pass
  reads I and J, 8 bytes a voxel; the gradient pass reads them again and writes grad, 12) against
  ca.Copy's rate (8 bytes a voxel: read and write);
- iteration: pyca lddmm's time per iteration at full resolution with metric mi and with lncc (the
  built-in pair at --size, one scale, --iterations iterations; for mi the moving image in a T2-like
  contrast, pyca.apps.data.other_contrast);
- determinism: --reruns runs of MutualInformation give the same bits (value, gradient, histogram);
  on the CPU, processes with OMP_NUM_THREADS 1, 2 and --threads give the same bits; on the GPU the
  histogram equals the CPU's; two lddmm runs with metric mi give the same deformed image, bit for bit.

    python benchmarks/bench_mi.py --device cpu --size 96,112,96
    python benchmarks/bench_mi.py --device gpu --threads 16        # 1 mm on the GPU host
    python benchmarks/bench_mi.py --device gpu --images mni --variants legacy 32,1024,compact 32,1024,magic

--images mni: the MNI152 T1 at 1 mm and its FLAIR-like contrast (pyca.apps.data.other_contrast), a
brain with its background, in place of the built-in phantom and its T2-like contrast.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import machine_line, pyca_env  # noqa: E402

_PROBE = """
import hashlib, sys
import numpy as np
import pyca as ca
s = tuple(int(x) for x in sys.argv[1].split(","))
g = ca.GridInfo(s)
r = np.random.default_rng(7)
a = ca.Image3D.from_array(np.asfortranarray(r.random(s).astype(np.float32)), g)
b = ca.Image3D.from_array(np.asfortranarray((r.random(s) * 300).astype(np.float32)), g)
gr = ca.Image3D(g)
mi = ca.MutualInformation(gr, a, b, 32, 0.0, 1.0, 0.0, 300.0)
print(float(mi).hex(), hashlib.sha256(gr.numpy().tobytes()).hexdigest())
"""


def best(fn, repeat, clock=time.perf_counter):
    """The shortest of `repeat` timed calls of fn (after one untimed); clock: time.process_time for the
    CPU time of the process (all its threads), which other processes on a shared machine do not inflate."""
    import pyca as ca

    fn()
    ca.synchronize()
    out = []
    for _ in range(repeat):
        t0 = clock()
        fn()
        ca.synchronize()
        out.append(clock() - t0)
    return min(out)


def digest(im):
    return hashlib.sha256(im.numpy().tobytes()).hexdigest()[:16]


def hist_slopes(ca, a, I, J, lo, hi, jlo, jhi, mem):
    """The histogram pass per kernel variant, without the call's fixed costs: the slope t(2 V) - t(V) of
    JointHistogram (the volume stacked twice along z) against Copy's slope; each variant's histogram
    against the CPU's, bit for bit."""
    s = I.grid().size()
    size = (int(s.x), int(s.y), int(s.z))
    nv = size[0] * size[1] * size[2]
    g2 = ca.GridInfo((size[0], size[1], 2 * size[2]))
    I2 = ca.Image3D.from_array(np.concatenate([I.numpy()] * 2, axis=2), g2).clone(mem)
    J2 = ca.Image3D.from_array(np.concatenate([J.numpy()] * 2, axis=2), g2).clone(mem)
    t1, t2 = ca.Image3D(I.grid(), mem), ca.Image3D(g2, mem)
    reps = max(a.repeat, 10)
    c_slope = best(lambda: ca.Copy(t2, I2), reps) - best(lambda: ca.Copy(t1, I), reps)
    print(f"Copy slope: {1e6 * c_slope:.1f} us per {nv} voxels ({8 * nv / c_slope / 1e9:.0f} GB/s of 8 bytes/voxel)",
          flush=True)
    hist = ca.Image3D(ca.GridInfo(ca.Vec3Di(a.bins, a.bins, 1)), mem)
    ref = ca.Image3D(hist.grid())
    ca.JointHistogram(ref, I.clone(ca.MEM_HOST), J.clone(ca.MEM_HOST), lo, hi, jlo, jhi)
    saved = os.environ.get("PYCA_MI_HIST")
    try:
        for v in [None] + list(a.variants):
            if v is None:
                os.environ.pop("PYCA_MI_HIST", None)
            else:
                os.environ["PYCA_MI_HIST"] = v
            try:
                ca.JointHistogram(hist, I, J, lo, hi, jlo, jhi)
            except Exception as e:  # a variant that cannot run here: say so, time the others
                print(f"histogram kernel {v}: {type(e).__name__}: {e}", flush=True)
                continue
            t_1 = best(lambda: ca.JointHistogram(hist, I, J, lo, hi, jlo, jhi), reps)
            t_2 = best(lambda: ca.JointHistogram(hist, I2, J2, lo, hi, jlo, jhi), reps)
            slope = t_2 - t_1
            ca.JointHistogram(hist, I, J, lo, hi, jlo, jhi)
            same = np.array_equal(hist.numpy(), ref.numpy())
            runs = set()
            for _ in range(3):
                ca.JointHistogram(hist, I2, J2, lo, hi, jlo, jhi)
                runs.add(digest(hist))
            print(f"histogram kernel {v or 'default'}: call {1e3 * t_1:.3f} ms, pass (slope) {1e6 * slope:.1f} us "
                  f"({8 * nv / slope / 1e9:.0f} GB/s of 8 bytes/voxel: {c_slope / slope:.2f} of the copy slope); "
                  f"== CPU {same}; reruns {len(runs)} distinct", flush=True)
    finally:
        if saved is None:
            os.environ.pop("PYCA_MI_HIST", None)
        else:
            os.environ["PYCA_MI_HIST"] = saved


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--size", default="192,224,192")
    ap.add_argument("--bins", type=int, default=32)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--reruns", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--skip-lddmm", action="store_true")
    ap.add_argument("--images", default="builtin", choices=["builtin", "mni"])
    ap.add_argument("--variants", nargs="*", default=[],
                    help="GPU histogram kernels to time (PYCA_MI_HIST values; the default kernel always)")
    a = ap.parse_args(argv)
    import pyca as ca
    from pyca.apps import data, lddmm

    print(machine_line(), flush=True)
    mem = ca.MEM_DEVICE if a.device == "gpu" else ca.MEM_HOST
    size = tuple(int(x) for x in a.size.split(","))
    g = ca.GridInfo(size)
    nv = g.nVox()
    if a.images == "mni":
        t1, _, _ = data.mni_template(1)
        size = t1.shape
        g = ca.GridInfo(size)
        nv = g.nVox()
        fixed = ca.Image3D.from_array(t1, g)
        J = ca.Image3D.from_array(data.other_contrast(t1, "flair"), g).clone(mem)
        moving = fixed
    else:
        fixed, moving = data.builtin_pair(size=size)
        J = ca.Image3D.from_array(data.other_contrast(fixed.numpy(), "t2", spacing=tuple(fixed.grid().spacing())),
                                  fixed.grid()).clone(mem)
    I = fixed.clone(mem)
    grad, tmp = ca.Image3D(g, mem), ca.Image3D(g, mem)
    lo, hi = (float(x) for x in ca.MinMax(I))
    jlo, jhi = (float(x) for x in ca.MinMax(J))
    t_mi = best(lambda: ca.MutualInformation(grad, I, J, a.bins, lo, hi, jlo, jhi), a.repeat)
    grad2 = ca.Image3D(g, mem)
    t_both = best(lambda: ca.MutualInformationGradients(grad, grad2, I, J, a.bins, lo, hi, jlo, jhi), a.repeat)
    t_lncc = best(lambda: ca.LNCC(grad, I, J, ca.Vec3Di(3, 3, 3)), a.repeat)
    t_copy = best(lambda: ca.Copy(tmp, I), a.repeat)
    copy_rate = 8 * nv / t_copy
    hist = ca.Image3D(ca.GridInfo(ca.Vec3Di(a.bins, a.bins, 1)), mem)
    t_hist = best(lambda: ca.JointHistogram(hist, I, J, lo, hi, jlo, jhi), a.repeat)
    fg = float(np.mean(I.numpy() > lo))
    if mem == ca.MEM_HOST:  # CPU time (all threads): the cost on a machine shared with other jobs
        c_hist = best(lambda: ca.JointHistogram(hist, I, J, lo, hi, jlo, jhi), a.repeat, time.process_time)
        c_mi = best(lambda: ca.MutualInformation(grad, I, J, a.bins, lo, hi, jlo, jhi), a.repeat, time.process_time)
        print(f"CPU time ({ca.cpu_vector_info()}; OMP_NUM_THREADS {os.environ.get('OMP_NUM_THREADS', 'unset')}): "
              f"JointHistogram {1e3 * c_hist:.1f} ms, MutualInformation {1e3 * c_mi:.1f} ms", flush=True)
    print(f"JointHistogram at {'x'.join(map(str, size))} ({a.device}, {a.bins} bins, {100 * fg:.0f}% of the voxels "
          f"above I's minimum): {1e3 * t_hist:.3f} ms ({8 * nv / t_hist / 1e9:.1f} GB/s of its 8 bytes/voxel; copy "
          f"{copy_rate / 1e9:.1f} GB/s: {8 * nv / copy_rate / t_hist:.2f} of the copy rate)", flush=True)
    print(f"op at {'x'.join(map(str, size))} ({a.device}, {a.bins} bins): MutualInformation {1e3 * t_mi:.2f} ms "
          f"({20 * nv / t_mi / 1e9:.1f} GB/s of its 20 bytes/voxel; copy {copy_rate / 1e9:.1f} GB/s: "
          f"{20 * nv / copy_rate / t_mi:.2f} of the copy rate), LNCC r3 {1e3 * t_lncc:.2f} ms "
          f"(MI / LNCC {t_mi / t_lncc:.2f})", flush=True)
    print(f"MutualInformationGradients (one histogram, both images' gradients: 32 bytes/voxel) {1e3 * t_both:.2f} ms "
          f"({32 * nv / t_both / 1e9:.1f} GB/s: {32 * nv / copy_rate / t_both:.2f} of the copy rate); two "
          f"MutualInformation calls {2e3 * t_mi:.2f} ms", flush=True)
    if mem == ca.MEM_DEVICE or os.environ.get("PYCA_BENCH_MI_SLOPES_ON_CPU"):  # the latter: a smoke test
        hist_slopes(ca, a, I, J, lo, hi, jlo, jhi, mem)
    # determinism of the op
    h = ca.Image3D(ca.GridInfo(ca.Vec3Di(a.bins, a.bins, 1)), mem)
    runs = set()
    for _ in range(a.reruns):
        v = ca.MutualInformation(grad, I, J, a.bins, lo, hi, jlo, jhi)
        ca.JointHistogram(h, I, J, lo, hi, jlo, jhi)
        runs.add((float(v).hex(), digest(grad), digest(h)))
    print(f"reruns of MutualInformation + JointHistogram: {len(runs)} distinct result(s) in {a.reruns}", flush=True)
    if mem == ca.MEM_DEVICE:
        hc = ca.Image3D(h.grid())
        ca.JointHistogram(hc, I.clone(ca.MEM_HOST), J.clone(ca.MEM_HOST), lo, hi, jlo, jhi)
        same = np.array_equal(hc.numpy(), h.numpy())
        diff = float(np.abs(hc.numpy() - h.numpy()).max())
        print(f"GPU histogram == CPU histogram: {same} (largest difference {diff:.3g} voxels)", flush=True)
    else:
        out = {}
        for n in sorted({1, 2, a.threads}):
            env = pyca_env(OMP_NUM_THREADS=str(n), OMP_DYNAMIC="false")
            out[n] = subprocess.run([sys.executable, "-c", _PROBE, ",".join(map(str, size))], env=env,
                                    cwd=tempfile.gettempdir(), capture_output=True, text=True,
                                    check=True).stdout.split()
        print(f"CPU threads {sorted(out)}: same bits {len({tuple(v) for v in out.values()}) == 1}", flush=True)
    if a.skip_lddmm:
        return
    # per iteration at full resolution, and two lddmm runs' bits
    Fi = fixed.clone(mem)
    M1 = moving.clone(mem)
    M2 = ca.Image3D.from_array(data.other_contrast(moving.numpy(), "t2", spacing=tuple(moving.grid().spacing())),
                               moving.grid()).clone(mem)
    per = {}
    for metric, M in (("lncc", M1), ("mi", M2)):
        kw = dict(metric=metric, scales=(1,), iterations=(a.iterations,), tol=0.0, affine="none",
                  device=a.device, normalize="percentiles", bias_sigma=0.0)
        lddmm.register(Fi, M, **{**kw, "iterations": (2,)})
        r = lddmm.register(Fi, M, **kw)
        sc = r.timings["scales"][0]
        per[metric] = sc["seconds"] / sc["iterations"]
        if metric == "mi":
            r2 = lddmm.register(Fi, M, **kw)
            print(f"two lddmm runs with metric mi: deformed images identical "
                  f"{np.array_equal(r.deformed.numpy(), r2.deformed.numpy())}", flush=True)
    print(f"lddmm per iteration at {'x'.join(map(str, size))}: mi {1e3 * per['mi']:.1f} ms, lncc "
          f"{1e3 * per['lncc']:.1f} ms (mi / lncc {per['mi'] / per['lncc']:.2f})", flush=True)


if __name__ == "__main__":
    main()
