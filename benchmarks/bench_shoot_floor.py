"""Where a `pyca shoot` iteration's GPU time goes, against the physical floor of each pass.

For each pass of an iteration (the kernel K, cuFFT's own transforms, the fused geodesic passes, the
operations between them) on an N^3 grid:

- its GPU time per call: CUDA events on pyca's stream around `--reps` calls queued while a spin
  kernel holds the stream, so that the launches' Python and driver time does not show (CuPy);
- its wall time per call in a loop synchronised once at the end (launches included);
- the bytes it must move at least (each array it reads once, each array it writes once) and that
  floor's time at the copy rate measured by a device-to-device copy of a field (ca.Copy);

then the iteration's calls (counted by bench_shoot's operation timer) times the GPU time per call,
beside the iteration's wall time and the sum of the floors. K is also set beside cuFFT's own
batched R2C + C2R of the three components (the 3-D transforms, and the 2-D transforms of every z-plane
that K's z pass completes) through CuPy on the same stream.

    python benchmarks/bench_shoot_floor.py [--size 128] [--reps 50] [--time-steps 10]

GPU only (a CUDA build of pyca and CuPy; without CuPy only the wall times).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


class Clock:
    """GPU time per call of fn (CUDA events, the stream held by a spin kernel while the calls are
    queued), and wall time per call."""

    def __init__(self, ca, gpu):
        self.ca, self.gpu_mem = ca, gpu
        cp = None
        if gpu:
            try:
                import cupy as cp
            except ImportError:
                pass
        self.cp = cp
        if cp is not None:
            handle = int(ca.current_stream() or 0)
            self.stream = cp.cuda.ExternalStream(handle) if handle else cp.cuda.Stream.null
            self.spin = cp.RawKernel(r'''extern "C" __global__ void spin(long long cycles) {
                long long t0 = clock64(); while (clock64() - t0 < cycles) {} }''', "spin")
            self.cycles_per_ms = 2.0e6  # (at most 2 GHz: the hold lasts at least as long as asked)

    def sync(self):
        if self.gpu_mem:
            self.ca.synchronize()

    def gpu(self, fn, reps):
        if self.cp is None:
            return float("nan")
        cp = self.cp
        fn()
        self.sync()
        cp.cuda.runtime.deviceSynchronize()
        hold_ms = 2.0 + 0.05 * reps  # longer than queueing the calls takes
        e0, e1 = cp.cuda.Event(), cp.cuda.Event()
        with self.stream:
            self.spin((1,), (1,), (np.int64(hold_ms * self.cycles_per_ms),))
            e0.record(self.stream)
            for _ in range(reps):
                fn()
            e1.record(self.stream)
        e1.synchronize()
        return cp.cuda.get_elapsed_time(e0, e1) / reps

    def wall(self, fn, reps):
        fn()
        self.sync()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        self.sync()
        if self.cp is not None:
            self.cp.cuda.runtime.deviceSynchronize()
        return 1e3 * (time.perf_counter() - t0) / reps


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--time-steps", type=int, default=10)
    ap.add_argument("--sigma", type=float, default=0.5)
    ap.add_argument("--blocks", default="32x8x1,64x4x1,128x2x1,32x4x2,16x4x4,32x2x4,32x4x1,64x2x2",
                    help="thread blocks to time the fused passes with (empty: none)")
    ap.add_argument("--cpu", action="store_true", help="on the CPU (wall times only: a smoke test of the script)")
    a = ap.parse_args()
    import bench_shoot as bs
    import pyca as ca
    from pyca.apps import shoot
    from pyca.registration import _geodesic_kernels as gk
    from pyca.registration.geodesic import Geodesic, GeodesicFit

    mem, n, T = ca.MEM_HOST if a.cpu else ca.MEM_DEVICE, a.size, a.time_steps
    clock = Clock(ca, not a.cpu)
    print(f"# bench_shoot_floor: {'cpu' if a.cpu else ca.device_info()}; {n}^3, T {T}, {a.reps} calls a measurement"
          + ("" if clock.cp is not None else " (no CuPy: wall times only)"))
    i0, i1 = bs.pair(n)
    I0 = ca.Image3D.from_array(np.asfortranarray(i0)).clone(mem)
    I1 = ca.Image3D.from_array(np.asfortranarray(i1)).clone(mem)
    grid = I0.grid()
    geo = Geodesic(grid, mem, T, shoot.kernel_of(grid, bs.CLIENT_KERNEL))
    geo.fused = True
    fit = GeodesicFit(geo, I0, [(T, I1)], a.sigma)
    for _ in range(2):
        fit.forward()
        fit.gradients()
        fit.update(2e-5)
    fit.forward()
    fit.gradients()
    F = lambda: ca.Field3D(grid, mem)  # noqa: E731
    Im = lambda: ca.Image3D(grid, mem)  # noqa: E731
    f1, f2, f3, f4 = F(), F(), F(), F()
    for f in (f1, f2, f3, f4):
        ca.Copy(f, geo.velocity(3))
    im1, im2, im3 = Im(), Im(), Im()
    for im in (im1, im2, im3):
        ca.Copy(im, I0)
    fb, ib = 12.0 * grid.nVox(), 4.0 * grid.nVox()  # bytes of a field, of an image
    sp = tuple(float(x) for x in grid.spacing())
    dt = 1.0 / T
    h3, m, v, vk = geo.h(3), geo.momentum(3), geo.velocity(3), geo.velocity(2)
    K = geo.K
    # the same K with a band that drops only the Nyquist plane along z (so that K takes the band's passes:
    # x and y together in fft_xy.cuh's kernels where they fit), and on lddmm's band at 128^3 (21 of 64)
    Kxy, Kb = shoot.kernel_of(grid, bs.CLIENT_KERNEL), shoot.kernel_of(grid, bs.CLIENT_KERNEL)
    Kxy.setBand(ca.Vec3Di(n // 2, n // 2, n // 2 - 1))
    Kb.setBand(ca.Vec3Di(n // 6, n // 6, n // 6))
    s = f4
    ca.Copy(s, h3)

    copy_ms = clock.gpu(lambda: ca.Copy(f2, f1), a.reps) if clock.cp else clock.wall(lambda: ca.Copy(f2, f1), a.reps)
    rate = 2 * fb / (copy_ms * 1e-3)
    print(f"copy rate (ca.Copy of a {n}^3 field, read + write {2 * fb / 1e6:.1f} MB): {rate / 1e12:.2f} TB/s "
          f"({copy_ms * 1e3:.1f} us a call)")

    # (label as bench_shoot's operation timer names it, call, bytes it must move at least)
    passes = [
        ("K.applyInverseOperator", "K = L^-1 (3 components, R2C, symbol, C2R)", lambda: K.applyInverseOperator(f2, f1),
         2 * fb),
        ("K xy", "K, the kz = n/2 plane dropped (x, y in fft_xy.cuh)",
         lambda: Kxy.applyInverseOperator(f2, f1), 2 * fb),
        ("K band", "K on the band |k| <= n/6 (as pyca lddmm's at 128^3)", lambda: Kb.applyInverseOperator(f2, f1),
         2 * fb),
        ("CoAd", "CoAd(h_j, m0): m_j", lambda: ca.CoAd(f2, h3, f1), 3 * fb),
        ("fused step", "fused step, compose (h_{j+1} from h_j, v_j, v_{j-1})",
         lambda **kw: gk.step(f2, h3, v, vk, 1.5, -0.5, dt, -1.0, *sp, True, **kw), 4 * fb),
        ("fused step back", "fused step back (s from v_{j+1})",
         lambda **kw: gk.step(f2, v, v, v, 1.0, 0.0, 2 * dt, 1.0, *sp, False, **kw), 2 * fb),
        ("fused transport", "fused transport (I^, m^ along s, |D s|)",
         lambda **kw: gk.transport(im2, f2, im1, f1, s, True, **kw), 3 * fb + 2 * ib),
        ("ApplyH", "ApplyH(I0, h_j): I_j", lambda: ca.ApplyH(im2, I0, h3), fb + 2 * ib),
        ("fused force", "fused force (I^ grad I_j - ad*_m~ m_j)",
         lambda **kw: gk.force(f2, im1, m, im3, f3, m, m, *sp, False, True, False, **kw), 3 * fb + 2 * ib),
        ("fused momentum_update", "fused momentum update",
         lambda **kw: gk.momentum_update(f2, f3, f1, v, dt, *sp, **kw), 4 * fb),
        ("MulC_Add_MulC", "MulC_Add_MulC (fields)", lambda: ca.MulC_Add_MulC(f2, f1, 1.5, f3, -0.5), 3 * fb),
        ("Sub", "Sub (images)", lambda: ca.Sub(im2, im1, im3), 3 * ib),
    ]
    rows = {}
    print(f"{'pass':58s} {'GPU us':>8s} {'wall us':>8s} {'MB':>7s} {'floor us':>9s} {'GPU / floor':>11s}")
    for label, what, fn, nbytes in passes:
        w = clock.wall(fn, a.reps)
        g = clock.gpu(fn, a.reps) if clock.cp else w
        fl = nbytes / rate * 1e3
        rows[label] = (g, nbytes)
        print(f"{what:58s} {g * 1e3:8.1f} {w * 1e3:8.1f} {nbytes / 1e6:7.1f} {fl * 1e3:9.1f} {g / fl:10.2f}x")

    if clock.cp is not None and a.blocks:  # the fused passes with other thread blocks (the same arithmetic)
        try:
            _blocks(ca, clock, a, passes, rows, f2, im2)
        except Exception as e:  # noqa: BLE001 - the rest still runs
            print(f"block shapes: failed: {type(e).__name__}: {e}")
    if clock.cp is not None:
        try:
            _cufft(clock, a, i0, fb, rate, rows)
        except Exception as e:  # noqa: BLE001
            print(f"cuFFT: failed: {type(e).__name__}: {e}")
    _iteration(ca, bs, clock, fit, geo, rows, rate, mem, T)


def _blocks(ca, clock, a, passes, rows, f2, im2):
    if True:
        shapes = [tuple(int(x) for x in b.split("x")) for b in a.blocks.split(",")]
        print("fused passes, GPU us a call with the block (threads along x, y, z; '!': an output differs from the "
              "default launch's); default: pyca's launch")
        print(f"{'pass':58s} {'default':>8s} " + " ".join(f"{'x'.join(map(str, b)):>8s}" for b in shapes))
        for label, what, fn, _ in passes:
            if not label.startswith("fused"):
                continue
            cells = []
            fn()
            ref = [x.clone(ca.MEM_HOST).numpy().copy() for x in (f2, im2)]
            for b in shapes:
                try:
                    fn(block=b)
                    same = all(np.array_equal(r, x.clone(ca.MEM_HOST).numpy()) for r, x in zip(ref, (f2, im2)))
                    cells.append(f"{clock.gpu(lambda: fn(block=b), a.reps) * 1e3:7.1f}{'' if same else '!'}")
                except Exception as e:  # noqa: BLE001 - a shape the kernel refuses: say so, go on
                    cells.append(f"{type(e).__name__[:8]:>8s}")
            print(f"{what:58s} {rows[label][0] * 1e3:8.1f} " + " ".join(cells))



def _cufft(clock, a, i0, fb, rate, rows):
    """cuFFT's own transforms of the three components, on pyca's stream (CuPy)."""
    n = a.size
    if True:
        cp = clock.cp
        with clock.stream:
            x4 = cp.asarray(np.stack([i0] * 3)).astype(cp.float32)  # (3, n, n, n): z-planes contiguous
            x3 = x4.reshape(3 * n, n, n)
            for what, fn in (
                    ("cuFFT R2C + C2R 3-D, batch of 3 (CuPy rfftn/irfftn)",
                     lambda: cp.fft.irfftn(cp.fft.rfftn(x4, axes=(1, 2, 3)), s=(n, n, n), axes=(1, 2, 3))),
                    ("cuFFT R2C 3-D, batch of 3", lambda: cp.fft.rfftn(x4, axes=(1, 2, 3))),
                    ("cuFFT R2C + C2R 2-D of the 3 n z-planes (K's cuFFT part)",
                     lambda: cp.fft.irfft2(cp.fft.rfft2(x3), s=(n, n))),
                    ("cuFFT C2C along z of the half spectra (K's z pass's transform, one way)",
                     lambda: cp.fft.fft(y4, axis=1))):
                y4 = cp.fft.rfftn(x4, axes=(1, 2, 3))
                g = clock.gpu(fn, a.reps)
                nbytes = 2 * fb if "+" in what else (fb + 3 * 8.0 * (n // 2 + 1) * n * n if "R2C 3-D" in what
                                                     else 2 * 3 * 8.0 * (n // 2 + 1) * n * n)
                fl = nbytes / rate * 1e3
                print(f"{what:58s} {g * 1e3:8.1f} {'':>8s} {nbytes / 1e6:7.1f} {fl * 1e3:9.1f} {g / fl:10.2f}x")
        print("(K's own GPU time beside cuFFT's R2C + C2R of the same three components: "
              f"{rows['K.applyInverseOperator'][0] * 1e3:.1f} us)")



def _iteration(ca, bs, clock, fit, geo, rows, rate, mem, T):
    """The iteration: its calls (bench_shoot's operation timer), times the GPU time per call."""
    timer = bs._OpTimer(ca, mem)
    try:
        its = 3
        for _ in range(its):
            fit.forward()
            fit.gradients()
            fit.update(2e-5)
    finally:
        timer.restore()
    gpu_sum = floor_sum = 0.0
    print(f"one iteration (T {T}, adjoint stride {geo.adjoint_stride}), calls from bench_shoot's operation timer:")
    for label, (c, t) in sorted(timer.rows.items(), key=lambda kv: -kv[1][1]):
        per = c / its
        key = "fused step" if label == "fused step" else label
        if key in rows:
            g, nbytes = rows[key]
            if label == "fused step":  # 10 shooting steps (compose or from the identity) and 5 steps back
                nb = geo.T
                g = (nb * rows["fused step"][0] + (per - nb) * rows["fused step back"][0]) / per
                nbytes = (nb * rows["fused step"][1] + (per - nb) * rows["fused step back"][1]) / per
            gpu_sum += per * g
            floor_sum += per * nbytes / rate * 1e3
            print(f"    {per:5.1f} x {label:28s} GPU {per * g:7.3f} ms  floor {per * nbytes / rate * 1e3:7.3f} ms  "
                  f"(synchronised {t / its * 1e3:7.3f} ms)")
        else:
            print(f"    {per:5.1f} x {label:28s} synchronised {t / its * 1e3:7.3f} ms")
    fit.forward()
    fit.gradients()

    def iteration():
        fit.forward()
        fit.gradients()
        fit.update(2e-5)

    wall = clock.wall(iteration, 10)
    print(f"iteration: wall {wall:.3f} ms; GPU time of the passes above {gpu_sum:.3f} ms; their floor at "
          f"{rate / 1e12:.2f} TB/s {floor_sum:.3f} ms")


if __name__ == "__main__":
    main()
