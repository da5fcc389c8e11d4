"""Geodesic shooting (`pyca shoot`) side by side with `pyca lddmm` and with the vector-momentum client
(quicksilver's CAvmMatching on pyca through the PyCA package), in one process on one device.

- time per iteration: pyca shoot (fixed step, T steps) and pyca lddmm (one scale, its T, fixed
  iterations), and the client's matching (RK4, 5 steps, nInv 5: quicksilver's settings);
- the energy after the same iterations with the same fixed step: pyca shoot against the client;
- --big N: a shooting registration on an N^3 synthetic pair (keep='maps'), its peak GPU memory
  (pyca.device_memory_peak()).

    python benchmarks/bench_shoot.py [--gpu] [--size 128] [--iterations 10] [--client DIR]
                                     [--client-iterations 3] [--big 512 --big-iterations 2]

--client: a folder holding the ported client (vm/Configs, vm/Libraries, vm/CAvmMatching.py: what
tests/compat/test_public_clients.py's stage() writes; scripts/fetch-pyca-clients.sh fetches it).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys
import time
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)  # (_brains; pyca itself is the installed one, or PYTHONPATH's)


def pair(n, nz=None):
    """Two smooth blobs of different shapes on an n^3 grid (float32, values in [0, 1])."""
    from scipy import ndimage

    nz = nz or n
    x, y, z = np.meshgrid(np.arange(n), np.arange(n), np.arange(nz), indexing="ij")
    c, cz = n / 2, nz / 2

    def blob(r):
        a = (((x - c) / r[0]) ** 2 + ((y - c) / r[1]) ** 2 + ((z - cz) / r[2]) ** 2 <= 1).astype(np.float32)
        return ndimage.gaussian_filter(a, max(1.0, n / 48)).astype(np.float32)

    return blob((0.2 * n, 0.3 * n, 0.25 * nz)), blob((0.27 * n, 0.23 * n, 0.25 * nz))


def big_pair(n):
    """pair()'s blobs without SciPy's filter (a large grid in seconds): ellipsoids with a linear edge."""
    x = (np.arange(n, dtype=np.float32) - n / 2).reshape(-1, 1, 1)
    y, z = x.reshape(1, -1, 1), x.reshape(1, 1, -1)
    out = []
    for r in ((0.2, 0.3, 0.25), (0.27, 0.23, 0.25)):
        q = (x / (r[0] * n)) ** 2 + (y / (r[1] * n)) ** 2 + (z / (r[2] * n)) ** 2
        out.append(np.clip((1.0 - q) * 8.0, 0.0, 1.0).astype(np.float32))
    return out


# the vector-momentum clients' operator (quicksilver's settings), which every comparison with the client uses
CLIENT_KERNEL = dict(alpha=0.01, beta=0.01, gamma=0.001, lpow=1)


def sync(mem):
    import pyca as ca

    if int(mem) == int(ca.MEM_DEVICE):
        ca.synchronize()


def shoot_run(ca, I0, I1, mem, its, step, T, sigma, keep="auto", fused=None, band=0, out=None):
    from pyca.apps import shoot

    grid = I0.grid()
    p = dict(shoot.DEFAULTS, time_steps=T, keep=keep, band=band, sigma=sigma, folding_steps="accept", **CLIENT_KERNEL)
    geo, fit = shoot.level_fit(grid, I0, I1, p, mem)  # (band > 0: the band-limited geodesic on its coarse grid)
    if fused is not None:
        geo.fused = fused
    energies = []
    for _ in range(2 if getattr(fit, "graphs", False) else 1):  # warm-up (plans, first allocations; graphs)
        m, _ = fit.forward()
        fit.gradients()
    sync(mem)
    ca.SetMem(fit.m0, 0.0)
    t0 = time.perf_counter()
    for _ in range(its):
        m, _ = fit.forward()
        energies.append(m + fit.reg_energy())
        fit.gradients()
        fit.update(step)
    sync(mem)
    dt = (time.perf_counter() - t0) / its
    m, _ = fit.forward()
    energies.append(m + fit.reg_energy())
    if out is not None:
        out["fit"] = fit
    return dt, energies, geo.keep


def full_model_energy(ca, I0, I1, mem, fit, T, sigma, band):
    """The energy of a band-limited fit's m0 (L_B of its initial velocity on the images' grid) in the full
    model (pyca shoot's default, the client's within 0.2% at 128^3)."""
    from pyca.apps import shoot
    from pyca.registration import band as _band

    grid = I0.grid()
    p = dict(shoot.DEFAULTS, time_steps=T, sigma=sigma, **CLIENT_KERNEL)
    m0 = _band.to_fine_momentum(ca.Field3D(grid, mem), fit.geo.velocity(0), shoot.kernel_of(grid, dict(p, band=band)))
    full = shoot.level_fit(grid, I0, I1, dict(p, band=0), mem, m0=m0)[1]
    m, _ = full.forward()
    return m + full.reg_energy()


def lddmm_run(ca, I0, I1, mem, its):
    from pyca.apps import lddmm

    kw = dict(device=mem, scales=[1], iterations=its, affine="none", tol=0.0, normalize="none", bias_sigma=0.0,
              fixed_blur=0.0)
    lddmm.register(I1, I0, **dict(kw, iterations=2))  # warm-up
    r = lddmm.register(I1, I0, **kw)
    sc = r.timings["scales"][0]
    return sc["seconds"] / max(1, sc["iterations"]), r.params["time_steps"]


def client_run(ca, I0, I1, mem, its, step, sigma, client_dir):
    if "mpi4py" not in sys.modules:
        try:
            import mpi4py  # noqa: F401
        except ImportError:  # Configs/Compute.py imports it for an MPI mode matching does not use
            sys.modules["mpi4py"] = types.SimpleNamespace(MPI=types.SimpleNamespace(SUM="sum", MAX="max",
                                                                                    COMM_WORLD=None))
    try:
        import yaml  # noqa: F401
    except ImportError:  # Configs/Config.py imports it to read configs, which this run does not
        sys.modules["yaml"] = types.ModuleType("yaml")
    sys.path.insert(0, os.path.join(client_dir, "vm"))
    import CAvmMatching as M

    grid = I0.grid()
    ca.ThreadMemoryManager.init(grid, mem, 1)
    nT = 5
    t = [k * 1.0 / nT for k in range(nT + 1)]
    cpi = list(range(1, len(t)))
    cps = [(ca.Field3D(grid, mem), ca.Field3D(grid, mem)) for _ in cpi]
    with contextlib.redirect_stdout(io.StringIO()):
        ck = CLIENT_KERNEL
        p = M.MatchingVariables(I0, I1, sigma, t, cpi, cps, ck["alpha"], ck["beta"], ck["gamma"], its, step, None, nT,
                                integMethod="RK4", optMethod="FIXEDGD", nInv=5, plotEvery=-1, plotSlice=None,
                                quiverEvery=1, outputPrefix=None)
        sync(mem)
        t0 = time.perf_counter()
        M.RunMatching(p)
        sync(mem)
        dt = (time.perf_counter() - t0) / its
        g = M.MatchingGradient(p)  # the energy after the last step (the client reports it before each)
    ca.ThreadMemoryManager.destroy()
    return dt, [float(a + b) for a, b in p.Energy] + [float(g[1] + g[2])]


def _client_library(client_dir):
    if "mpi4py" not in sys.modules:
        try:
            import mpi4py  # noqa: F401
        except ImportError:
            sys.modules["mpi4py"] = types.SimpleNamespace(MPI=types.SimpleNamespace(SUM="sum", MAX="max",
                                                                                    COMM_WORLD=None))
    sys.path.insert(0, os.path.join(client_dir, "vm"))
    from Libraries import CAvmCommon

    return CAvmCommon


def client_regression_run(ca, I0, meas, nT, mem, its, step, sigma, client_dir):
    """Geodesic regression's gradient descent in m0 (base image fixed) written with the client
    library's own functions, as CAvmMatching's MatchingGradient but with several measurements:
    IntegrateGeodesic (RK4) and IntegrateAdjoints with one image gradient per measurement. meas: [(time
    index 1 .. nT, image)]. Returns the energies (per voxel) before each step and after the last."""
    C = _client_library(client_dir)
    grid = I0.grid()
    K = ca.FluidKernelFFT()
    K.setAlpha(CLIENT_KERNEL["alpha"])
    K.setBeta(CLIENT_KERNEL["beta"])
    K.setGamma(CLIENT_KERNEL["gamma"])
    K.setGrid(grid)
    F = lambda: ca.Field3D(grid, mem)  # noqa: E731
    Im = lambda: ca.Image3D(grid, mem)  # noqa: E731
    t = [k * 1.0 / nT for k in range(nT + 1)]
    cpi = list(range(1, nT + 1))
    cps = [(F(), F()) for _ in cpi]
    msmt = [cpi.index(i) for i, _ in meas]
    m0 = F()
    ca.SetMem(m0, 0.0)
    m, g, ginv, Iadj, madj, Ivar, Iadjt, madjt, v = F(), F(), F(), Im(), F(), Im(), Im(), F(), F()
    S = [F() for _ in range(13)]
    res = [Im() for _ in meas]
    N = float(grid.nVox())
    energies = []
    for it in range(its + 1):
        C.IntegrateGeodesic(m0, t, K, m, g, ginv, S[0], S[1], S[2], cps, cpi, Ninv=5, integMethod="RK4", RK4=S[3],
                            scratchG=S[4])
        e = 0.0
        for (i, J), r in zip(meas, res):
            ca.ApplyH(r, I0, cps[cpi.index(i)][1])
            ca.Sub_I(r, J)
            e += ca.Sum2(r) / (2 * sigma ** 2 * N)
            ca.DivC_I(r, sigma ** 2)
        grad = S[5]
        ca.Copy(grad, m0)
        K.applyInverseOperator(grad)
        energies.append(float(e + 0.5 * ca.Dot(m0, grad) / N))
        if it == its:
            break
        with contextlib.redirect_stdout(io.StringIO()):
            C.IntegrateAdjoints(Iadj, madj, Ivar, m, Iadjt, madjt, v, S[0], S[1], I0, m0, t, cps, cpi, res, msmt, K,
                                "RK4", 5, scratchV3=S[6], scratchV4=S[7], scratchV5=S[8], scratchV6=S[9],
                                scratchV7=S[10], scratchV8=S[11], scratchV9=S[12], RK4=S[3], scratchG=S[4],
                                scratchGinv=S[2], scratchI=Im())
        ca.Copy(grad, m0)
        K.applyInverseOperator(grad)
        ca.Sub_I(grad, madj)
        ca.Add_MulC_I(m0, grad, -step)
    return energies


def regression_run(ca, I0, meas, T, mem, its, step, sigma):
    """pyca's regression (base image fixed) with a fixed step; meas: [(time step 0 .. T, image)]."""
    from pyca.registration.geodesic import Geodesic, GeodesicFit, epdiff_kernel

    grid = I0.grid()
    fit = GeodesicFit(Geodesic(grid, mem, T, epdiff_kernel(grid, **CLIENT_KERNEL)), I0, meas, sigma)
    out = []
    for it in range(its + 1):
        m, _ = fit.forward()
        out.append(m + fit.reg_energy())
        if it < its:
            fit.gradients()
            fit.update(step)
    return out


def phases(ca, I0, I1, mem, T, sigma, reps=5):
    """Where an iteration's time goes: the shooting, the adjoint sweep, and one kernel application K
    (ms each, medians of reps)."""
    from pyca.apps import shoot
    from pyca.registration.geodesic import Geodesic, GeodesicFit

    grid = I0.grid()
    geo = Geodesic(grid, mem, T, shoot.kernel_of(grid, CLIENT_KERNEL))
    fit = GeodesicFit(geo, I0, [(T, I1)], sigma)
    fit.forward()
    fit.gradients()
    fit.update(2e-5)

    def med(fn):
        out = []
        for _ in range(reps):
            sync(mem)
            t0 = time.perf_counter()
            fn()
            sync(mem)
            out.append(time.perf_counter() - t0)
        return 1e3 * float(np.median(out))

    f_ms = med(fit.forward)
    a_ms = med(fit.gradients)
    u, w = geo.scratch[0], geo.scratch[1]
    k_ms = med(lambda: geo.K.applyInverseOperator(u, w))
    nk = T + len(geo.sweep_steps({T: None}))
    return (f"phases: shoot {f_ms:.2f} ms, adjoint sweep {a_ms:.2f} ms, one K {k_ms:.3f} ms ({nk} K per "
            f"iteration: {nk * k_ms:.2f} ms)")


class _OpTimer:
    """Wraps every operation of pyca.core, the geodesic's fused kernels and the kernel K's applications
    with a timer that synchronises the device before and after (the outermost call only): what each
    costs, launch and Python call included, and how often it runs."""

    def __init__(self, ca, mem):
        import pyca.core as core
        from pyca.registration import _geodesic_kernels as gk

        self.mem, self.rows, self._depth, self._undo = mem, {}, 0, []
        for mod, prefix in ((core, ""), (gk, "fused ")):
            for name in dir(mod):
                fn = getattr(mod, name)
                if name[:1].isupper() and callable(fn) and not isinstance(fn, type) or (mod is gk and name in gk.__all__):
                    self._wrap(mod, name, prefix + name)
        for name in ("applyInverseOperator", "applyOperator", "applyInverseOperatorDot"):
            if hasattr(core.FluidKernelFFT, name):
                self._wrap(core.FluidKernelFFT, name, "K." + name)

    def _wrap(self, owner, name, label):
        fn = getattr(owner, name)

        def timed(*args, **kw):
            if self._depth:
                return fn(*args, **kw)
            self._depth += 1
            try:
                sync(self.mem)
                t0 = time.perf_counter()
                r = fn(*args, **kw)
                sync(self.mem)
                c, t = self.rows.get(label, (0, 0.0))
                self.rows[label] = (c + 1, t + time.perf_counter() - t0)
                return r
            finally:
                self._depth -= 1

        setattr(owner, name, timed)
        self._undo.append((owner, name, fn))

    def restore(self):
        for owner, name, fn in reversed(self._undo):
            setattr(owner, name, fn)

    def table(self, per):
        tot = sum(t for _, t in self.rows.values())
        lines = [f"    {tot / per * 1e3:8.3f} ms  {sum(c for c, _ in self.rows.values()) / per:6.1f} calls  (all)"]
        for label, (c, t) in sorted(self.rows.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"    {t / per * 1e3:8.3f} ms  {c / per:6.1f} calls  {label}")
        return "\n".join(lines)


def profile(ca, I0, I1, mem, T, sigma, its=3):
    """Per-operation time of one iteration of pyca shoot (forward, gradients, update) and of pyca lddmm
    (its defaults, one scale, no affine), each operation synchronised (_OpTimer); and pyca shoot's
    time per iteration on a 16^3 grid, where the voxels cost nothing: the launches and Python calls."""
    from pyca.apps import shoot
    from pyca.registration.geodesic import Geodesic, GeodesicFit

    grid = I0.grid()
    fit = GeodesicFit(Geodesic(grid, mem, T, shoot.kernel_of(grid, CLIENT_KERNEL)), I0, [(T, I1)], sigma)
    fit.forward()
    fit.gradients()
    timer = _OpTimer(ca, mem)
    try:
        for _ in range(its):
            fit.forward()
            fit.gradients()
            fit.update(2e-5)
        print(f"profile pyca shoot (T {T}), per iteration, each operation synchronised:\n" + timer.table(its))
        from pyca.apps import lddmm

        kw = dict(device=mem, scales=[1], affine="none", tol=0.0, normalize="none", bias_sigma=0.0, fixed_blur=0.0)
        timer.rows.clear()
        r = lddmm.register(I1, I0, iterations=4 * its, **kw)
        n = max(1, r.timings["scales"][0]["iterations"])
        print(f"profile pyca lddmm (T {r.params['time_steps']}), per iteration ({n} iterations, its setup "
              f"included):\n" + timer.table(n))
    finally:
        timer.restore()
    small = [ca.Image3D.from_array(np.asfortranarray(x)).clone(mem) for x in pair(16)]
    t16 = shoot_run(ca, *small, mem, 10, 2e-5, T, sigma)[0]
    print(f"profile pyca shoot at 16^3 (launches and Python calls only): {t16 * 1e3:.2f} ms/iteration")


def band_run(ca, I0, I1, mem, a, spec, t_shoot, t_lddmm, client):
    """pyca shoot's band-limited geodesic (spec 'B' or 'B:R'): its time per iteration beside the full model's,
    lddmm's and the client's, and its energy after the same iterations beside theirs."""
    from pyca.registration import band as _band

    b, r, interp, fmap, graph = (spec.split(":") + [""] * 4)[:5]
    keep_r, keep_c, keep_m, keep_g = (_band.OVERSAMPLE, _band.BandGeodesic.cubic, _band.BandFit.fine_map,
                                      _band.BandFit.graphs)
    if r:
        _band.OVERSAMPLE = int(r)
    if interp:
        _band.BandGeodesic.cubic = interp == "cubic"
    keep_s = _band.BandFit.trace_stride
    if fmap:  # coarse, linear, cubic; linear2, cubic2: traced two time steps at once
        _band.BandFit.fine_map = None if fmap == "coarse" else fmap.rstrip("2")
        _band.BandFit.trace_stride = 2 if fmap.endswith("2") else 1
    stream = contextlib.nullcontext()
    if graph == "graph" and int(mem) == int(ca.MEM_DEVICE):
        from pyca import cuda_graph

        _band.BandFit.graphs = True
        stream = cuda_graph.Stream()
    try:
        gc, f = _band.band_grid(I0.grid(), int(b))
        got = {}
        with stream:
            t_b, e_b, _ = shoot_run(ca, I0, I1, mem, a.iterations, a.step, a.time_steps, a.sigma, band=int(b),
                                    out=got)
        e_full = full_model_energy(ca, I0, I1, mem, got["fit"], a.time_steps, a.sigma, int(b))
        line = (f"pyca shoot --band {b} (coarse grid {tuple(gc.size())}, 1/{f}; oversampling {_band.OVERSAMPLE}; "
                f"{'cubic' if _band.BandGeodesic.cubic else 'trilinear'} samples; map "
                f"{'traced on the images grid, ' + fmap if _band.BandFit.fine_map else 'coarse, cubic upsample'}"
                f"{'; CUDA graphs (' + str(got['fit'].graph_nodes) + ' nodes)' if _band.BandFit.graphs else ''}): "
                f"{t_b * 1e3:.2f} ms/iteration ({t_shoot / t_b:.1f}x faster than the full model")
        line += f", {t_b / t_lddmm:.2f}x lddmm's time" if t_lddmm else ""
        if client:
            t_c, e_c, e_s2 = client
            n = a.client_iterations
            if n != a.iterations:
                with stream:
                    e_n = shoot_run(ca, I0, I1, mem, n, a.step, a.time_steps, a.sigma, band=int(b))[1]
            else:
                e_n = e_b
            line += (f", client / band = {t_c / t_b:.1f}x); energy after {n} iterations {e_n[-1]:.6g}: "
                     f"{(e_n[-1] - e_c[-1]) / e_c[-1]:+.4f} from the client's, {(e_n[-1] - e_s2[-1]) / e_s2[-1]:+.4f} "
                     f"from the full model's; {[round(x, 6) for x in e_n]}")
        else:
            line += f"); energy {e_b[0]:.6g} -> {e_b[-1]:.6g}"
        print(line + f"; its m0 in the full model after {a.iterations} iterations: energy {e_full:.6g} (its own "
              f"{e_b[-1]:.6g})", flush=True)
        if a.profile:  # each operation of an iteration, synchronised
            from pyca.apps import shoot

            p = dict(shoot.DEFAULTS, time_steps=a.time_steps, band=int(b), sigma=a.sigma, **CLIENT_KERNEL)
            fit = shoot.level_fit(I0.grid(), I0, I1, p, mem)[1]
            fit.forward()
            fit.gradients()
            timer = _OpTimer(ca, mem)
            try:
                for _ in range(3):
                    fit.forward()
                    fit.gradients()
                    fit.update(2e-5)
            finally:
                timer.restore()
            print(f"profile pyca shoot --band {b}, per iteration, each operation synchronised:\n" + timer.table(3))
    finally:
        _band.OVERSAMPLE, _band.BandGeodesic.cubic, _band.BandFit.fine_map, _band.BandFit.graphs = (keep_r, keep_c,
                                                                                                    keep_m, keep_g)
        _band.BandFit.trace_stride = keep_s


def _dice(lab_a, lab_b):
    return [float(2 * np.sum((lab_a == c) & (lab_b == c)) / max(1, np.sum(lab_a == c) + np.sum(lab_b == c)))
            for c in (1, 2, 3)]


def _brain_params(text):
    """'alpha=0.05,sigma=0.2' -> {'alpha': 0.05, 'sigma': 0.2} (pyca shoot's parameters; folding_steps=accept
    a word)."""
    out = {}
    for item in filter(None, text.split(",")):
        k, _, v = item.partition("=")
        k = k.strip()
        out[k] = int(v) if k in ("time_steps", "lpow", "band") else (v.strip() if k in ("folding_steps", "samples", "map")
                                                                     else float(v))
    return out


def brains(ca, mem, res, iterations, lddmm_iterations=None, scales=(1,), param_sets=({},), with_lddmm=True):
    """Two different brains (benchmarks/_brains.py's prepared pairs, both directions): pyca shoot (its
    defaults, or each of param_sets) and pyca lddmm (its defaults), the moving labels warped by nearest
    neighbour."""
    import _brains
    from pyca.apps import lddmm, shoot

    why = _brains.available()
    if why:
        print(f"brains: skipped ({why})")
        return
    for moving in ("colin", "mni"):
        pr = _brains.prepared(moving, res)
        f = ca.Image3D.from_array(np.asfortranarray(pr["fixed"]))
        m = ca.Image3D.from_array(np.asfortranarray(pr["moving"]))
        lab = ca.Image3D.from_array(np.asfortranarray(pr["moving_labels"].astype(np.float32))).clone(mem)
        before = np.mean(_dice(pr["fixed_labels"], pr["moving_labels"]))
        runs = [("shoot", ps) for ps in param_sets] + ([("lddmm", {})] if with_lddmm else [])
        for name, ps in runs:
            t0 = time.perf_counter()
            if name == "shoot":  # (samples=linear|cubic: the band-limited geodesic's, BandGeodesic.cubic;
                # map=coarse|linear|linear2|cubic: BandFit.fine_map and trace_stride)
                from pyca.registration.band import BandFit, BandGeodesic

                keep_c, keep_m, keep_s = BandGeodesic.cubic, BandFit.fine_map, BandFit.trace_stride
                BandGeodesic.cubic = ps.get("samples", "cubic" if keep_c else "linear") == "cubic"
                fmap = ps.get("map", "coarse")
                BandFit.fine_map = None if fmap == "coarse" else fmap.rstrip("2")
                BandFit.trace_stride = 2 if fmap.endswith("2") else 1
                try:
                    r = shoot.register(f, m, device=mem, normalize="none", iterations=iterations, scales=scales,
                                       **{k: v for k, v in ps.items() if k not in ("samples", "map")})
                finally:
                    BandGeodesic.cubic, BandFit.fine_map, BandFit.trace_stride = keep_c, keep_m, keep_s
                its = f"{r.report['iterations']} iterations ({r.report['folding_steps_rejected']} steps rejected for folding; " \
                      f"stop: {r.report['stop']})"
            else:
                kw = {} if lddmm_iterations is None else {"iterations": lddmm_iterations}
                r = lddmm.register(f, m, device=mem, normalize="none", affine="none", **kw)
                its = f"{sum(s['iterations'] for s in r.timings['scales'])} iterations"
            dt = time.perf_counter() - t0
            w = ca.Image3D(f.grid(), mem)
            ca.ApplyH(w, lab, r.phiinv, ca.BACKGROUND_STRATEGY_CLAMP, ca.INTERP_NN)
            d = _dice(pr["fixed_labels"], np.rint(w.numpy() if mem == ca.MEM_HOST else w.clone(ca.MEM_HOST).numpy()))
            jmin, jmax = ca.MinMax(r.jacobian)
            tag = (f"shoot scales {','.join(map(str, scales))}" + "".join(f" {k} {v}" for k, v in ps.items())
                   if name == "shoot" else name)
            print(f"brains {pr['name']} {res} mm {tag}: Dice CSF/GM/WM {d[0]:.3f}/{d[1]:.3f}/{d[2]:.3f} (mean "
                  f"{np.mean(d):.3f}, before {before:.3f}), mismatch {r.final_mismatch / r.initial_mismatch:.3f} of "
                  f"before, det D phiinv [{jmin:.3g}, {jmax:.3g}], {its}, {dt:.2f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--size", type=int, default=128)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--time-steps", type=int, default=10)
    ap.add_argument("--step", type=float, default=2e-5)
    ap.add_argument("--sigma", type=float, default=0.5)
    ap.add_argument("--client", default=None)
    ap.add_argument("--client-iterations", type=int, default=3)
    ap.add_argument("--big", type=int, default=0)
    ap.add_argument("--big-iterations", type=int, default=2)
    ap.add_argument("--big-time-steps", type=int, default=8)
    ap.add_argument("--skip-lddmm", action="store_true")
    ap.add_argument("--bands", default="", help="also pyca shoot's band-limited geodesic (--band B) with each band, "
                    "e.g. 8,16 (B:R: with its coarse grid at least R B + 1 voxels per axis, band.OVERSAMPLE; B:R:linear or "
                    "B:R:cubic: the coarse geodesic's samples, BandGeodesic.cubic; B:R:I:M with M coarse, linear or cubic: "
                    "the map on the images' grid, BandFit.fine_map, linear2 or cubic2 two time steps at once; "
                    "B:R:I:M:graph: with CUDA graphs, BandFit.graphs)")
    ap.add_argument("--parity", action="store_true", help="also the same 32^3 run on the CPU and the GPU")
    ap.add_argument("--brains", type=int, default=0, help="also Colin27 <-> MNI152 at this resolution (1 or 2 mm): "
                    "pyca shoot beside pyca lddmm (tissue Dice, mismatch, time)")
    ap.add_argument("--brain-iterations", type=int, default=100)
    ap.add_argument("--brain-scales", default="1", help="pyca shoot's scales on the brains, e.g. 2,1")
    ap.add_argument("--brain-params", nargs="*", type=_brain_params, default=[{}],
                    help="pyca shoot's parameters on the brains, one run each, e.g. alpha=0.05,sigma=0.2 alpha=0.1")
    ap.add_argument("--brain-skip-lddmm", action="store_true")
    ap.add_argument("--profile", action="store_true", help="also each operation's time in one iteration of "
                    "shoot and of lddmm, and shoot's time per iteration at 16^3")
    ap.add_argument("--sample", choices=["default", "apart", "inside"], default="default",
                    help="fused passes: the image I0 o h_j sampled by ApplyH before the force pass (apart, pyca's "
                    "default) or inside it (Geodesic.fuse_sample)")
    ap.add_argument("--fused", choices=["default", "gpu", "on", "off"], default="default",
                    help="the fused passes (Geodesic.fused): default (pyca's: the GPU only), gpu (on the GPU only), on, off")
    ap.add_argument("--adjoint-stride", type=int, choices=[1, 2], default=None,
                    help="the adjoint sweep's time steps per step back (Geodesic.adjoint_stride; default pyca's)")
    a = ap.parse_args()
    failed = []  # band rows that raised (printed where they ran; the exit status is 1)
    import pyca as ca

    mem = ca.MEM_DEVICE if a.gpu else ca.MEM_HOST
    from pyca.registration.geodesic import Geodesic

    if a.fused != "default":
        Geodesic.fused = {"gpu": None, "on": True, "off": False}[a.fused]
    if a.sample != "default":
        Geodesic.fuse_sample = a.sample == "inside"
    if a.adjoint_stride:
        Geodesic.adjoint_stride = a.adjoint_stride
    dev = ca.device_info() if a.gpu else f"cpu ({os.cpu_count()} cores)"
    print(f"# bench_shoot: {dev}; size {a.size}^3, {a.iterations} iterations, T {a.time_steps}, step {a.step:g}, "
          f"sigma {a.sigma:g}, adjoint stride {Geodesic.adjoint_stride}")
    if a.size:
        i0, i1 = pair(a.size)
        I0 = ca.Image3D.from_array(np.asfortranarray(i0)).clone(mem)
        I1 = ca.Image3D.from_array(np.asfortranarray(i1)).clone(mem)
        t_shoot, e_shoot, keep = shoot_run(ca, I0, I1, mem, a.iterations, a.step, a.time_steps, a.sigma)
        print(f"pyca shoot: {t_shoot * 1e3:.1f} ms/iteration (T {a.time_steps}, keep {keep}); energy "
              f"{e_shoot[0]:.6g} -> {e_shoot[-1]:.6g}")
        print("  " + phases(ca, I0, I1, mem, a.time_steps, a.sigma))
        if a.gpu:  # the other way: the fused passes against the chains of operations
            fused = bool(Geodesic.fused if Geodesic.fused is not None else a.gpu)
            t_u, e_u, _ = shoot_run(ca, I0, I1, mem, a.iterations, a.step, a.time_steps, a.sigma, fused=not fused)
            t_f, t_c = (t_shoot, t_u) if fused else (t_u, t_shoot)
            print(f"pyca shoot, {'chains of operations' if fused else 'fused passes'}: {t_u * 1e3:.1f} ms/iteration "
                  f"(fused / chains: {t_f / t_c:.2f}x the time); energy {e_u[-1]:.6g} (the first run {e_shoot[-1]:.6g})")
        if not a.skip_lddmm:
            try:
                t_l, T_l = lddmm_run(ca, I0, I1, mem, a.iterations)
            except Exception as e:  # noqa: BLE001 - the other measurements still run
                print(f"pyca lddmm: failed: {type(e).__name__}: {e}")
                t_l = None
        if not a.skip_lddmm and t_l:
            print(f"pyca lddmm: {t_l * 1e3:.1f} ms/iteration (T {T_l}); shoot / lddmm = {t_shoot / t_l:.2f}; "
                  f"per time step {t_shoot / a.time_steps * 1e3:.2f} vs {t_l / T_l * 1e3:.2f} ms")
        if a.client:
            t_c, e_c = client_run(ca, I0, I1, mem, a.client_iterations, a.step, a.sigma, a.client)
            n = a.client_iterations
            t_s2, e_s2, _ = shoot_run(ca, I0, I1, mem, n, a.step, a.time_steps, a.sigma)
            print(f"client (CAvmMatching, RK4 5 steps): {t_c * 1e3:.1f} ms/iteration; client / pyca shoot = "
                  f"{t_c / t_s2:.1f}x")
            print(f"energies after {n} iterations of step {a.step:g}: client {e_c[-1]:.6g}, pyca {e_s2[-1]:.6g} "
                  f"(relative difference {(e_s2[-1] - e_c[-1]) / e_c[-1]:+.4f}); client {[round(x, 6) for x in e_c]} "
                  f"pyca {[round(x, 6) for x in e_s2]}")
        for spec in filter(None, a.bands.split(",")):
            try:
                band_run(ca, I0, I1, mem, a, spec, t_shoot, None if a.skip_lddmm else t_l,
                         (t_c, e_c, e_s2) if a.client else None)
            except Exception as e:  # noqa: BLE001 - the other rows still run; the exit status says so
                print(f"pyca shoot --band {spec}: failed: {type(e).__name__}: {e}", flush=True)
                failed.append(spec)
    if a.profile and a.size:
        profile(ca, I0, I1, mem, a.time_steps, a.sigma)
    if a.parity:
        i0, i1 = pair(32)
        out = {}
        for m in (ca.MEM_HOST, ca.MEM_DEVICE):
            J0 = ca.Image3D.from_array(np.asfortranarray(i0)).clone(m)
            J1 = ca.Image3D.from_array(np.asfortranarray(i1)).clone(m)
            out[int(m)] = shoot_run(ca, J0, J1, m, 10, a.step, a.time_steps, a.sigma)[1]
        c, g = np.array(out[int(ca.MEM_HOST)]), np.array(out[int(ca.MEM_DEVICE)])
        print(f"parity 32^3, 10 iterations: CPU {c[-1]:.8g} GPU {g[-1]:.8g}, largest relative difference "
              f"{np.abs(g / c - 1).max():.2e}")
    if a.brains:
        brains(ca, mem, a.brains, a.brain_iterations, scales=tuple(int(x) for x in a.brain_scales.split(",")),
               param_sets=a.brain_params or [{}], with_lddmm=not a.brain_skip_lddmm)
    if a.big:
        I0 = I1 = None
        if a.gpu:
            ca.reset_device_memory_peak()
        I0, I1 = (ca.Image3D.from_array(np.asfortranarray(x)).clone(mem) for x in big_pair(a.big))
        t_b, e_b, keep = shoot_run(ca, I0, I1, mem, a.big_iterations, a.step, a.big_time_steps, a.sigma, keep="maps")
        peak = ca.device_memory_peak() if a.gpu else 0
        print(f"big {a.big}^3: {t_b:.2f} s/iteration (T {a.big_time_steps}, keep {keep}), energy {e_b[0]:.6g} -> "
              f"{e_b[-1]:.6g}; peak GPU memory {peak / 2**30:.2f} GiB")
    if failed:
        sys.exit(f"bench_shoot: band rows failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
