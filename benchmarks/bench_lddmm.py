"""LDDMM wall time: `pyca.apps.lddmm.register` on the built-in pair at 128^3 (100 iterations, one
scale), on the CPU and, with --gpu, on the GPU (128^3 and 256^3), next to the same Beg iteration
written with NumPy/SciPy (CPU) and CuPy (GPU, when installed).

The peers implement the same discretisation (semi-Lagrangian flows with trilinear interpolation
through map_coordinates, the fluid operator's symbol through FFTs); they are timed on a few
iterations and the per-iteration time is compared. Run:

    python benchmarks/bench_lddmm.py [--gpu] [--iterations 100] [--size 128] [--peer-iterations 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import Table, gpu_available, machine_line, optional_import  # noqa: E402

import numpy as np  # noqa: E402


def _pair(n, mem):
    from pyca.apps import data

    # The built-in shapes on an n^3 grid covering the same 64^3 world-unit box.
    return data.builtin_pair(size=(n, n, n), spacing=(64.0 / n,) * 3, mem=mem)


def time_pyca(n, iterations, device):
    import pyca as ca
    from pyca.apps import lddmm

    mem = ca.MEM_DEVICE if device == "gpu" else ca.MEM_HOST
    fixed, moving = _pair(n, mem)
    # Warm-up (FFT plans, kernel caches) on a short run.
    lddmm.register(fixed, moving, scales=(1,), iterations=2, device=device)
    res = lddmm.register(fixed, moving, scales=(1,), iterations=iterations, device=device)
    done = len(res.energies)
    return res.timings["registration_s"], done, res


# ------------------------------------------------------------------------------------------------
# The peer: the same iteration with an array module (NumPy + scipy.ndimage, or CuPy + cupyx)
class PeerBeg:
    def __init__(self, xp, ndi, fixed, moving, spacing, p):
        self.xp, self.ndi = xp, ndi
        f, m = xp.asarray(fixed, dtype=xp.float32), xp.asarray(moving, dtype=xp.float32)
        lo, hi = float(min(f.min(), m.min())), float(max(f.max(), m.max()))
        self.I1, self.I0 = (f - lo) / (hi - lo), (m - lo) / (hi - lo)
        self.sp = xp.asarray(spacing, dtype=xp.float32).reshape(3, 1, 1, 1)
        self.T, self.p = int(p["time_steps"]), p
        shape = self.I0.shape
        self.ident = xp.stack(xp.meshgrid(*[xp.arange(k, dtype=xp.float32) for k in shape], indexing="ij"))
        c = 0.0
        for d, (k, h) in enumerate(zip(shape, spacing)):
            w = xp.arange(k, dtype=xp.float32).reshape([-1 if i == d else 1 for i in range(3)])
            c = c + (2.0 - 2.0 * xp.cos(2.0 * np.pi * w / k)) / h**2
        self.Ksym = (1.0 / (p["alpha"] * c + p["gamma"]) ** p["lpow"]).astype(xp.float32)
        self.v = [xp.zeros((3,) + shape, xp.float32) for _ in range(self.T)]
        self.m = [xp.zeros((3,) + shape, xp.float32) for _ in range(self.T)]

    def _interp(self, a, pos, mode):
        return self.ndi.map_coordinates(a, pos, order=1, mode=mode)

    def _compose(self, h, v, sign):  # h(x + sign dt v / sp), identity outside
        pos = self.ident + sign * v / (self.T * self.sp)
        return pos + self.xp.stack([self._interp(h[c] - self.ident[c], pos, "grid-constant") for c in range(3)])

    def _K(self, f):
        xp = self.xp
        return xp.stack([xp.real(xp.fft.ifftn(self.Ksym * xp.fft.fftn(f[c]))).astype(xp.float32) for c in range(3)])

    def _grad(self, im):
        return self.xp.stack([g / float(s) for g, s in zip(self.xp.gradient(im), self.sp.ravel().tolist())])

    def _jacdet(self, h):
        xp = self.xp
        D = [xp.gradient(h[c]) for c in range(3)]
        return (D[0][0] * (D[1][1] * D[2][2] - D[1][2] * D[2][1]) - D[0][1] * (D[1][0] * D[2][2] - D[1][2] * D[2][0])
                + D[0][2] * (D[1][0] * D[2][1] - D[1][1] * D[2][0]))

    def iteration(self, eps):
        xp, T = self.xp, self.T
        h = self.ident
        J0 = [self.I0]
        for j in range(T):
            h = self._compose(h, self.v[j], -1.0)
            J0.append(self._interp(self.I0, h, "nearest"))
        match = float(xp.sum((J0[T] - self.I1) ** 2)) / self.p["sigma"] ** 2
        c = 2.0 / self.p["sigma"] ** 2
        h = self.ident
        for j in range(T - 1, -1, -1):
            h = self._compose(h, self.v[j], 1.0)
            J1 = self._interp(self.I1, h, "nearest")
            b = self._grad(J0[j]) * (self._jacdet(h) * (J0[j] - J1))
            self.m[j] = (1.0 - 2.0 * eps) * self.m[j] + eps * c * b
            self.v[j] = self._K(self.m[j])
        return match


def time_peer(xp, ndi, n, iterations, sync=None):
    from pyca.apps import data

    f, m = data.builtin_arrays(size=(n, n, n), spacing=(64.0 / n,) * 3)
    from pyca.apps.lddmm import DEFAULTS

    peer = PeerBeg(xp, ndi, f, m, (64.0 / n,) * 3, DEFAULTS)
    peer.iteration(1e-3)  # warm-up
    if sync:
        sync()
    t0 = time.perf_counter()
    for _ in range(iterations):
        peer.iteration(1e-3)
    if sync:
        sync()
    return (time.perf_counter() - t0) / iterations


def run(table, gpu=False, iterations=100, size=128, peer_iterations=2, cpu=True):
    n = size
    if cpu:
        _run_cpu(table, n, iterations, peer_iterations)
    if gpu:
        _run_gpu(table, n, iterations, peer_iterations)


def _run_cpu(table, n, iterations, peer_iterations):
    t, done, res = time_pyca(n, iterations, "cpu")
    per_it = t / max(done, 1)
    scipy_nd = optional_import("scipy.ndimage")
    if scipy_nd is not None:
        import scipy.ndimage as ndi

        tp = time_peer(np, ndi, n, peer_iterations)
        table.add("LDDMM iteration (CPU)", f"{n}^3", per_it, "NumPy/SciPy", tp, f"T={res.params['time_steps']}")
        table.add(f"LDDMM {done} iterations (CPU)", f"{n}^3", t, "NumPy/SciPy", tp * done,
                  f"peer estimated from {peer_iterations} iterations")
    else:
        table.add(f"LDDMM {done} iterations (CPU)", f"{n}^3", t, "-", None, "SciPy not installed")


def _run_gpu(table, n, iterations, peer_iterations):
    if not gpu_available():
        table.skip("LDDMM (GPU)", f"{n}^3", "-", "no usable CUDA GPU")
        return
    import pyca as ca

    cp = optional_import("cupy")
    for ng in sorted({n, 256}):
        t, done, res = time_pyca(ng, iterations, "gpu")
        per_it = t / max(done, 1)
        if cp is not None:
            import cupyx.scipy.ndimage as cndi

            tp = time_peer(cp, cndi, ng, max(peer_iterations, 5), sync=cp.cuda.Device().synchronize)
            table.add("LDDMM iteration (GPU)", f"{ng}^3", per_it, "CuPy", tp, f"T={res.params['time_steps']}")
            table.add(f"LDDMM {done} iterations (GPU)", f"{ng}^3", t, "CuPy", tp * done, "peer per-iteration x count")
        else:
            table.add(f"LDDMM {done} iterations (GPU)", f"{ng}^3", t, "-", None, "CuPy not installed")
        ca.synchronize()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="store_true", help="also run on the GPU (needs one)")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--peer-iterations", type=int, default=2)
    ap.add_argument("--skip-cpu", action="store_true", help="only the GPU part")
    a = ap.parse_args(argv)
    t = Table("LDDMM (pyca.apps.lddmm.register, built-in pair, one scale)")
    run(t, gpu=a.gpu, iterations=a.iterations, size=a.size, peer_iterations=a.peer_iterations, cpu=not a.skip_cpu)
    print(machine_line())
    t.print()


if __name__ == "__main__":
    main()
