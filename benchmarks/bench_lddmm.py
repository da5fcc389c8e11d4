"""LDDMM wall time: `pyca.apps.lddmm.register` on the built-in pair (one scale, T time steps, a fixed
number of iterations), the fused solver next to the unfused one (today's chain of single operations,
`Level.fused = False`), next to peers and the bandwidth limit, all in one process.

- CPU (128^3): pyca fused vs unfused, and the same Beg iteration written with NumPy/SciPy.
- GPU (--gpu; 128^3 and 256^3): pyca fused vs unfused, a PyTorch peer written as a PyTorch user
  would (grid_sample for the flow and the image, autograd for the match gradient, torch.fft for the
  kernel K), and the bandwidth limit: the fewest bytes one iteration must move (docs/performance.md,
  "LDDMM: the bandwidth limit") at the card's copy rate, measured in the same run.

    python benchmarks/bench_lddmm.py [--gpu] [--skip-cpu] [--iterations 100] [--cpu-iterations N]
                                     [--time-steps 10] [--size 128] [--peer-iterations 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import Table, gpu_available, machine_line, optional_import, pyca_sync, timeit_median  # noqa: E402

import numpy as np  # noqa: E402

# Fewest bytes per voxel and time step (docs/performance.md): forward step 44 (read v, h, I0;
# write h, J0), backward step 68 (read v, h, I1, J0, m; write h, m), kernel K 48 (read m, one round
# trip of the spectrum, write v), energies fused into those passes.
MIN_BYTES_PER_VOXEL_STEP = 44 + 68 + 48
# What this implementation moves at least: forward 44, backward ComposeHV 36 + LDDMMGradStep 44,
# K 73 (R2C, symbol, C2R counted as one pass each; the regularisation energy is read off the
# spectra in the symbol's pass: FluidKernelFFT.applyInverseOperatorDot).
IMPL_BYTES_PER_VOXEL_STEP = 44 + 36 + 44 + 73

# The run (issue 18), as measured from the start: pyca's SSD solver with alpha 1, gamma 0.04,
# lpow 2, per-image percentile scaling, no bias correction and no fixed blur, whatever lddmm's defaults for T1 brain
# images are; the peers implement the same.
# sigma 0.002: the run's 0.05 in the units of K normalised to gain 1 (0.05 gamma^(lpow / 2); docs/lddmm.md,
# 'The kernel's scale'), the same registration.
RUN = dict(metric="ssd", alpha=1.0, gamma=0.04, lpow=2, sigma=0.002, normalize="percentiles", bias_sigma=0.0,
           fixed_blur=0.0)


def synthetic_pair(n, mem):
    from pyca.apps import data

    # The built-in shapes on an n^3 grid covering the same 64^3 world-unit box.
    return data.builtin_pair(size=(n, n, n), spacing=(64.0 / n,) * 3, mem=mem)


def time_pyca(n, iterations, device, T, fused=True):
    import pyca as ca
    from pyca.apps import _lddmm_solver, lddmm

    mem = ca.MEM_DEVICE if device == "gpu" else ca.MEM_HOST
    fixed, moving = synthetic_pair(n, mem)
    old = getattr(_lddmm_solver.Level, "fused", True)  # (a pyca without the fused path ignores it)
    _lddmm_solver.Level.fused = fused
    try:
        # Warm-up (FFT plans, kernel caches) on a short run.
        # tol=0: every iteration runs (no stop rule); no linear stage: the LDDMM loop alone is timed;
        # the SSD match, the one the peers implement.
        kw = dict(scales=(1,), time_steps=T, device=device, tol=0.0, affine="none", **RUN)
        lddmm.register(fixed, moving, iterations=2, **kw)
        res = lddmm.register(fixed, moving, iterations=iterations, **kw)
    finally:
        _lddmm_solver.Level.fused = old
    return res.timings["registration_s"], len(res.energies), res


# ------------------------------------------------------------------------------------------------
# The NumPy/SciPy peer (CPU): the same iteration with an array module and scipy.ndimage
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
        # K normalised to gain 1 at the zero frequency, as pyca's (docs/lddmm.md, 'The kernel's scale')
        self.Ksym = ((p["gamma"] / (p["alpha"] * c + p["gamma"])) ** p["lpow"]).astype(xp.float32)
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


def _peer_params(T):
    """pyca's parameters of this run (RUN), as the peers implement them."""
    from pyca.apps.lddmm import DEFAULTS

    return dict(DEFAULTS, time_steps=T, **RUN)


def time_numpy_peer(n, iterations, T):
    import scipy.ndimage as ndi

    from pyca.apps import data
    f, m = data.builtin_arrays(size=(n, n, n), spacing=(64.0 / n,) * 3)
    peer = PeerBeg(np, ndi, f, m, (64.0 / n,) * 3, _peer_params(T))
    peer.iteration(1e-3)  # warm-up
    t0 = time.perf_counter()
    for _ in range(iterations):
        peer.iteration(1e-3)
    return (time.perf_counter() - t0) / iterations


# ------------------------------------------------------------------------------------------------
# The PyTorch peer (GPU), as a PyTorch user writes LDDMM: the flow phi_{t,0} by semi-Lagrangian
# composition with grid_sample (normalised coordinates, align_corners=True), the deformed image by
# grid_sample, the match gradient with respect to all velocities by autograd, the kernel K as its
# Fourier symbol through torch.fft.rfftn / irfftn (all T x 3 components in one call), and the
# regularisation energy through the same FFTs.
class TorchLDDMM:
    def __init__(self, torch, fixed, moving, spacing, p):
        self.torch = torch
        dev = torch.device("cuda")
        # pyca arrays are (x, y, z), x fastest; torch's volumes are (D, H, W) = (z, y, x), W fastest.
        f = torch.from_numpy(np.ascontiguousarray(fixed.T)).to(dev)
        m = torch.from_numpy(np.ascontiguousarray(moving.T)).to(dev)
        lo, hi = min(f.min(), m.min()), max(f.max(), m.max())
        self.I1 = ((f - lo) / (hi - lo))[None, None]
        self.I0 = ((m - lo) / (hi - lo))[None, None]
        self.T, self.dt = int(p["time_steps"]), 1.0 / int(p["time_steps"])
        self.sigma2 = float(p["sigma"]) ** 2
        D, H, W = self.I0.shape[2:]
        sx, sy, sz = spacing
        # world units -> normalised grid units, per grid_sample's (x, y, z) channel order
        self.to_norm = torch.tensor([2.0 / (W - 1) / sx, 2.0 / (H - 1) / sy, 2.0 / (D - 1) / sz], device=dev)
        axes = [torch.linspace(-1.0, 1.0, k, device=dev) for k in (D, H, W)]
        zz, yy, xx = torch.meshgrid(*axes, indexing="ij")
        self.ident = torch.stack([xx, yy, zz], dim=-1)[None]  # (1, D, H, W, 3)
        fz, fy = torch.fft.fftfreq(D, device=dev), torch.fft.fftfreq(H, device=dev)
        fx = torch.fft.rfftfreq(W, device=dev)
        lap = ((2 - 2 * torch.cos(2 * np.pi * fz))[:, None, None] / sz**2
               + (2 - 2 * torch.cos(2 * np.pi * fy))[None, :, None] / sy**2
               + (2 - 2 * torch.cos(2 * np.pi * fx))[None, None, :] / sx**2)
        self.L = ((p["alpha"] * lap + p["gamma"]) / p["gamma"]) ** p["lpow"]  # K = 1 / L of gain 1, as pyca's
        self.K = 1.0 / self.L
        self.v = torch.zeros((self.T, 3, D, H, W), device=dev)  # world units, channels (x, y, z)

    def _warp(self, phi, v):  # phi(x - dt v(x)) for phi in normalised coordinates
        F = self.torch.nn.functional
        pos = self.ident - self.dt * v.permute(1, 2, 3, 0)[None] * self.to_norm
        disp = (phi - self.ident).permute(0, 4, 1, 2, 3)
        moved = F.grid_sample(disp, pos, mode="bilinear", padding_mode="zeros", align_corners=True)
        return pos + moved.permute(0, 2, 3, 4, 1)

    def iteration(self, eps):
        torch = self.torch
        F = torch.nn.functional
        v = self.v.detach().requires_grad_(True)
        phi = self.ident
        for j in range(self.T):
            phi = self._warp(phi, v[j])
        J = F.grid_sample(self.I0, phi, mode="bilinear", padding_mode="border", align_corners=True)
        match = ((J - self.I1) ** 2).sum() / self.sigma2
        (g,) = torch.autograd.grad(match, v)
        with torch.no_grad():
            vh = torch.fft.rfftn(self.v, dim=(-3, -2, -1))
            reg = self.dt * (self.L * vh.abs() ** 2).sum() / self.v[0, 0].numel()
            Kg = torch.fft.irfftn(self.K * torch.fft.rfftn(g, dim=(-3, -2, -1)), s=self.v.shape[-3:],
                                  dim=(-3, -2, -1))
            # V-gradient of the energy: 2 v + K (dE_match/dv) / dt
            self.v -= eps * (2.0 * self.v + Kg / self.dt)
        return match.item() + reg.item()


def time_torch_peer(torch, n, iterations, T):
    from pyca.apps import data
    f, m = data.builtin_arrays(size=(n, n, n), spacing=(64.0 / n,) * 3)
    peer = TorchLDDMM(torch, f.astype(np.float32), m.astype(np.float32), (64.0 / n,) * 3, _peer_params(T))
    for _ in range(2):
        peer.iteration(1e-4)  # warm-up
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iterations):
        peer.iteration(1e-4)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iterations


def copy_rate():
    """The card's copy rate (bytes read + written per second): a device-to-device Copy of a 256^3 field."""
    import pyca as ca

    g = ca.GridInfo((256, 256, 256))
    a, b = ca.Field3D(g, ca.MEM_DEVICE), ca.Field3D(g, ca.MEM_DEVICE)
    ca.SetMem(a, 1.0)
    t = timeit_median(lambda: ca.Copy(b, a), sync=pyca_sync, repeat=30)
    return 6 * 256**3 * 4 / t


# ------------------------------------------------------------------------------------------------
def _run_cpu(table, n, iterations, peer_iterations, T):
    t_f, done_f, res = time_pyca(n, iterations, "cpu", T, fused=True)
    t_u, done_u, _ = time_pyca(n, iterations, "cpu", T, fused=False)
    table.add(f"LDDMM {done_f} iterations (CPU, fused)", f"{n}^3", t_f, "pyca unfused (chain of ops)", t_u, f"T={T}")
    if peer_iterations > 0 and optional_import("scipy.ndimage") is not None:
        tp = time_numpy_peer(n, peer_iterations, T)
        table.add("LDDMM iteration (CPU, fused)", f"{n}^3", t_f / max(done_f, 1), "NumPy/SciPy", tp,
                  f"T={T}, peer timed on {peer_iterations} iterations")


def _run_gpu(table, n, iterations, peer_iterations, T):
    if not gpu_available():
        table.skip("LDDMM (GPU)", f"{n}^3", "-", "no usable CUDA GPU")
        return
    import pyca as ca

    rate = copy_rate()
    table.add("Copy (field): copy rate", "256^3 GPU", 6 * 256**3 * 4 / rate, "-", None, f"{rate / 1e9:.0f} GB/s")
    torch = optional_import("torch")
    for ng in sorted({n, 256}):
        size = f"{ng}^3"
        t_f, done, _ = time_pyca(ng, iterations, "gpu", T, fused=True)
        t_u, done_u, _ = time_pyca(ng, iterations, "gpu", T, fused=False)
        per_f, per_u = t_f / max(done, 1), t_u / max(done_u, 1)
        vox = ng**3
        limit = MIN_BYTES_PER_VOXEL_STEP * vox * T / rate
        impl = IMPL_BYTES_PER_VOXEL_STEP * vox * T / rate
        table.add(f"LDDMM {done} iterations (GPU, fused)", size, t_f, "pyca unfused (chain of ops)", t_u,
                  f"T={T}; {1e3 * per_f:.2f} vs {1e3 * per_u:.2f} ms/iteration")
        table.add("LDDMM iteration (GPU, fused)", size, per_f, "bandwidth limit", limit,
                  f"{MIN_BYTES_PER_VOXEL_STEP} B/voxel/step at {rate / 1e12:.2f} TB/s; "
                  f"this design's floor {1e3 * impl:.2f} ms ({IMPL_BYTES_PER_VOXEL_STEP} B)")
        if torch is not None and torch.cuda.is_available():
            tp = time_torch_peer(torch, ng, max(peer_iterations, 5), T)
            table.add("LDDMM iteration (GPU, fused)", size, per_f, "torch (grid_sample, autograd, fft)", tp,
                      f"torch x {done} = {tp * done:.3f} s")
        else:
            table.skip("LDDMM iteration (GPU)", size, "torch", "PyTorch with CUDA not installed")
        ca.synchronize()


def run(table, gpu=False, iterations=100, size=128, peer_iterations=2, cpu=True, time_steps=10, cpu_iterations=None):
    if cpu:
        _run_cpu(table, size, iterations if cpu_iterations is None else cpu_iterations, peer_iterations, time_steps)
    if gpu:
        _run_gpu(table, size, iterations, peer_iterations, time_steps)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", action="store_true", help="also run on the GPU (needs one)")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--cpu-iterations", type=int, default=None, help="CPU iterations (default: --iterations)")
    ap.add_argument("--time-steps", type=int, default=10)
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--peer-iterations", type=int, default=2, help="peer iterations timed (0: no NumPy peer)")
    ap.add_argument("--skip-cpu", action="store_true", help="only the GPU part")
    a = ap.parse_args(argv)
    t = Table("LDDMM (pyca.apps.lddmm.register, built-in pair, one scale)")
    run(t, gpu=a.gpu, iterations=a.iterations, size=a.size, peer_iterations=a.peer_iterations, cpu=not a.skip_cpu,
        time_steps=a.time_steps, cpu_iterations=a.cpu_iterations)
    print(machine_line())
    t.print()


if __name__ == "__main__":
    main()
