"""The ``pyca`` command.

    pyca lddmm [--fixed F --moving M] [--out DIR] [--device auto|cpu|gpu] [options]
    pyca demo  [--device auto|cpu|gpu] [--size N]
    pyca info

``pyca lddmm`` with no input registers a built-in pair of 3-D images (pyca.apps.data) and writes the
deformed image, the deformation fields, the Jacobian determinant (NIfTI), a PNG report and a JSON
summary into the output folder. See docs/lddmm.md.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

_EPILOG_LDDMM = """\
outputs (in --out): deformed.nii.gz (moving deformed onto fixed), affine.txt (the linear stage, ITK text
format), phiinv.nii.gz and phi.nii.gz (LDDMM H-fields, voxel coordinates), phiinv_full.nii.gz (the whole
map: moving voxel coordinates of each fixed voxel), jacdet.nii.gz (det D phiinv), labels.nii.gz (with
--moving-labels), report.png, summary.json; with the built-in data also fixed.nii.gz and moving.nii.gz.
Algorithm and parameters: docs/lddmm.md."""


def _ints(text):
    try:
        vals = [int(t) for t in str(text).replace(" ", "").split(",") if t]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None
    if not vals:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return vals


def _step(text):
    if text == "auto":
        return "auto"
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 'auto' or a number, got {text!r}") from None


def _parser():
    from .apps.lddmm import DEFAULTS as D

    ap = argparse.ArgumentParser(prog="pyca",
                                 description="pyca: 3-D imaging for computational anatomy, on CPU and GPU.")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    lp = sub.add_parser("lddmm", help="register two 3-D images with LDDMM (built-in data by default)",
                        description="Register --moving onto --fixed with LDDMM (Beg et al.), on the GPU when "
                        "there is one. Without --fixed/--moving, a built-in pair of 3-D images is used.",
                        epilog=_EPILOG_LDDMM, formatter_class=argparse.RawDescriptionHelpFormatter)
    lp.add_argument("--fixed", help="fixed (target) image: .nii, .nii.gz (.mha, .mhd, .nrrd with SimpleITK)")
    lp.add_argument("--moving", help="moving (template) image, deformed onto the fixed one")
    lp.add_argument("--out", default="pyca-lddmm-out", help="output folder (default: %(default)s)")
    lp.add_argument("--device", default=D["device"], choices=["auto", "cpu", "gpu"],
                    help="where to run (default: %(default)s: the GPU when one can be used)")
    g = lp.add_argument_group("regularisation: L = (-alpha Laplacian - beta grad div + gamma)^lpow")
    g.add_argument("--alpha", type=float, default=D["alpha"], help="default %(default)s")
    g.add_argument("--beta", type=float, default=D["beta"], help="default %(default)s")
    g.add_argument("--gamma", type=float, default=D["gamma"], help="default %(default)s")
    g.add_argument("--lpow", type=int, default=D["lpow"], help="default %(default)s")
    g = lp.add_argument_group("optimisation")
    g.add_argument("--sigma", type=float, default=D["sigma"],
                   help="sigma of the image match term (normalised intensities; default: 0.05 for ssd, 0.25 for lncc)")
    g.add_argument("--step", type=_step, default=D["step"],
                   help="gradient step eps in (0, 0.5), or 'auto' (default %(default)s)")
    g.add_argument("--max-step", type=float, default=D["max_step"],
                   help="with --step auto: largest velocity change of a scale's first step, in voxels "
                   "(default %(default)s)")
    g.add_argument("--iterations", type=_ints, default=list(D["iterations"]),
                   help="iterations per scale, e.g. 60,40,20 (default %(default)s)")
    g.add_argument("--scales", type=_ints, default=list(D["scales"]),
                   help="downsampling factors, coarse to fine, ending with 1 (default %(default)s)")
    g.add_argument("--time-steps", type=int, default=D["time_steps"], help="time steps T (default %(default)s)")
    g.add_argument("--no-normalize", action="store_true",
                   help="do not scale each image's 0.5-99.5 percentile range to [0, 1]")
    g.add_argument("--tol", type=float, default=D["tol"],
                   help="a scale stops when its last 5 iterations gained less than 5 x this of its gain so far "
                   "(default %(default)s)")
    g = lp.add_argument_group("match term, linear stage, masks and labels (docs/lddmm.md)")
    g.add_argument("--metric", default=D["metric"], choices=["ssd", "lncc"], help="default %(default)s")
    g.add_argument("--radius", type=int, default=D["radius"], help="LNCC window radius in voxels (default %(default)s)")
    g.add_argument("--affine", default=D["affine"], choices=["auto", "none", "rigid", "affine"],
                   help="linear stage before LDDMM (default %(default)s: affine when the grids or the centres of "
                   "mass differ)")
    g.add_argument("--fixed-mask", help="0/1 image on the fixed grid: the match term counts only its voxels")
    g.add_argument("--moving-mask", help="0/1 image on the moving grid")
    g.add_argument("--moving-labels", help="integer label image on the moving grid, warped by nearest neighbour "
                   "into labels.nii.gz")
    g = lp.add_argument_group("built-in data (without --fixed/--moving)")
    g.add_argument("--size", type=_ints, default=None, help="grid size x,y,z of the built-in pair (default 64,64,48)")
    g = lp.add_argument_group("output")
    g.add_argument("--no-report", action="store_true", help="skip report.png")
    g.add_argument("--no-progress", action="store_true", help="no progress bar")
    g.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")

    dp = sub.add_parser("demo", help="build an image on the best device, run a few operations, say what happened")
    dp.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"], help="default %(default)s")
    dp.add_argument("--size", type=int, default=64, help="grid size per axis (default %(default)s)")

    sub.add_parser("info", help="version, CUDA availability and the GPU pyca uses")
    return ap


# ------------------------------------------------------------------------------------------------
def _fail(cmd, e, code=2):
    print(f"pyca {cmd}: error: {e}", file=sys.stderr)
    return code


def _input_errors():
    from . import core
    from .io import ImageFileError

    return (ValueError, TypeError, FileNotFoundError, ImageFileError, core.CudaError)


def cmd_lddmm(a):
    import pyca as ca
    from .apps import data, lddmm

    say = (lambda *x: None) if a.quiet else (lambda *x: print(*x, flush=True))
    if (a.fixed is None) != (a.moving is None):
        return _fail("lddmm", "give both --fixed and --moving, or neither (built-in data)")
    params = dict(alpha=a.alpha, beta=a.beta, gamma=a.gamma, lpow=a.lpow, sigma=a.sigma, step=a.step,
                  max_step=a.max_step, iterations=a.iterations if len(a.iterations) > 1 else a.iterations[0],
                  scales=a.scales, time_steps=a.time_steps, normalize=not a.no_normalize, device=a.device,
                  tol=a.tol, metric=a.metric, radius=a.radius, affine=a.affine)
    extra = {k: getattr(a, k) for k in ("fixed_mask", "moving_mask", "moving_labels") if getattr(a, k)}
    # Everything that can be wrong with the inputs is found here, before any work.
    try:
        if a.fixed is None:
            size = tuple(a.size) if a.size else data.DEFAULT_SIZE
            if len(size) != 3:
                raise ValueError(f"--size needs 3 integers x,y,z, got {a.size}")
            fixed, moving = data.builtin_pair(size=size)
            sp = ", ".join(f"{s:.4g}" for s in fixed.grid().spacing())
            source = f"built-in pair ({'x'.join(map(str, size))} voxels, spacing ({sp}))"
        else:
            fixed = ca.io.load_image(a.fixed)
            moving = ca.io.load_image(a.moving)
            source = f"fixed {a.fixed}, moving {a.moving}"
        lddmm._check_params({**lddmm.DEFAULTS, **params})
        lddmm._schedule(params["scales"], params["iterations"])
        _, device = lddmm.resolve_device(a.device)
        names = {"fixed": a.fixed, "moving": a.moving, **extra}
        extra = {k: ca.io.load_image(v) for k, v in extra.items()}
        note = lddmm.check_inputs(fixed, moving, names=names, **extra)
        out_parent = os.path.dirname(os.path.abspath(a.out))
        if not os.path.isdir(out_parent):
            raise FileNotFoundError(f"the parent folder of --out ({out_parent}) does not exist")
        if os.path.exists(a.out) and not os.path.isdir(a.out):
            raise ValueError(f"--out {a.out!r} exists and is not a folder")
    except _input_errors() as e:
        return _fail("lddmm", e)
    say(f"pyca lddmm: {source}")
    say(f"  device: {device}; {note}")
    say(f"  alpha={a.alpha} beta={a.beta} gamma={a.gamma} lpow={a.lpow} sigma={a.sigma} step={a.step} "
        f"T={a.time_steps} scales={a.scales} iterations={a.iterations} metric={a.metric} affine={a.affine}")
    try:  # what can only be found after the linear stage (fields of view that do not overlap)
        res = lddmm.register(fixed, moving, progress=not (a.no_progress or a.quiet), names=names, **extra, **params)
    except ValueError as e:
        return _fail("lddmm", e)
    paths = lddmm.write_outputs(res, fixed, moving, a.out, report=not a.no_report, save_inputs=a.fixed is None)
    s = res.summary()
    say(f"  mismatch (sum of squared differences): {res.initial_mismatch:.6g} -> {res.final_mismatch:.6g} "
        f"(-{100 * res.mismatch_reduction:.1f}%)")
    say(f"  det D phiinv in [{s['jacobian_min']:.4g}, {s['jacobian_max']:.4g}]; final energy {res.final_energy:.6g}")
    say(f"  time: registration {res.timings['registration_s']:.2f} s, total {res.timings['total_s']:.2f} s, "
        f"writing {res.timings.get('write_s', 0):.2f} s")
    say(f"  wrote {len(paths)} files to {os.path.abspath(a.out)}: " + ", ".join(os.path.basename(p) for p in paths))
    return 0


def cmd_demo(a):
    import numpy as np

    import pyca as ca
    from .apps import lddmm

    try:
        mem, device = lddmm.resolve_device(a.device)
        if a.size < 4:
            raise ValueError(f"--size must be >= 4, got {a.size}")
    except _input_errors() as e:
        return _fail("demo", e)
    n = a.size
    print(f"pyca {ca.__version__} demo on {device}")

    def step(what, fn):
        t0 = time.perf_counter()
        out = fn()
        ca.synchronize()
        print(f"  {what:<64s} {1e3 * (time.perf_counter() - t0):8.2f} ms  {out if out is not None else ''}")

    grid = ca.GridInfo((n, n, n), (1.0, 1.0, 1.5))
    c = (n - 1) / 2.0
    x, y, z = np.meshgrid(*[np.arange(n) - c] * 3, indexing="ij")
    ball = np.asfortranarray((x ** 2 + y ** 2 + (1.5 * z) ** 2 < (n / 3.0) ** 2), dtype=np.float32)
    im = ca.Image3D.from_array(ball, grid)
    step(f"ball image {n}x{n}x{n}, spacing (1, 1, 1.5), moved to {'GPU' if mem == ca.MEM_DEVICE else 'host'}",
         lambda: im.toType(mem))
    sm = ca.Image3D(grid, mem)
    step("GaussianBlur, sigma 2 world units", lambda: ca.GaussianBlur(sm, im, ca.Vec3Df(2.0, 2.0, 2.0)))
    grad = ca.Field3D(grid, mem)
    step("Gradient (central differences, per world unit)", lambda: ca.Gradient(grad, sm))
    step("  |grad| max", lambda: f"= {ca.LInf(grad):.4f}")
    h = ca.Field3D(grid, mem)
    v = ca.Field3D(grid, mem)
    step("SetToIdentity, and a V-field v = 4 * gradient", lambda: (ca.SetToIdentity(h), ca.MulC(v, grad, 4.0))[0])
    step("ComposeHV: h = id o (x + v)", lambda: ca.ComposeHV(h, h.clone(), v))
    out = ca.Image3D(grid, mem)
    step("ApplyH: deform the blurred ball", lambda: ca.ApplyH(out, sm, h))
    jac = ca.Image3D(grid, mem)
    step("JacDetH of the deformation", lambda: ca.JacDetH(jac, h))
    step("  det range", lambda: "= [{:.4f}, {:.4f}]".format(*ca.MinMax(jac)))
    k = ca.FluidKernelFFT()
    k.setAlpha(1.0)
    k.setGamma(0.1)
    k.setGrid(grid)
    sv = ca.Field3D(grid, mem)
    step("FluidKernelFFT: smooth the gradient field, K = (-Lap + 0.1)^-1", lambda: k.applyInverseOperator(sv, grad))
    step("Sum of the ball / sum of the deformed ball", lambda: f"= {ca.Sum(im):.1f} / {ca.Sum(out):.1f}")
    print("done: every call above ran on the " + ("GPU (MEM_DEVICE)." if mem == ca.MEM_DEVICE else "CPU (MEM_HOST)."))
    return 0


def cmd_info(_a):
    import importlib

    import pyca as ca

    print(f"pyca {ca.__version__} ({os.path.dirname(ca.__file__)})")
    print(f"  Python {sys.version.split()[0]}, {os.cpu_count()} CPU cores"
          + (f", OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}" if "OMP_NUM_THREADS" in os.environ else ""))
    built = getattr(ca.core, "built_with_cuda", lambda: None)()
    print(f"  built with CUDA: {built}")
    avail = ca.cuda_available()
    print(f"  CUDA available: {avail}")
    print(f"  device: {ca.device_info()}")
    why = ca.core.cuda_unavailable_reason() if not avail else ""
    if why and why != ca.device_info():
        print(f"  why not: {why}")
    opt = []
    for name in ("numpy", "nibabel", "SimpleITK", "tqdm", "matplotlib", "scipy", "cupy", "torch"):
        try:
            mod = importlib.import_module(name)
            opt.append(f"{name} {getattr(mod, '__version__', '?')}")
        except Exception:  # noqa: BLE001 - a broken optional package is a missing one
            opt.append(f"{name} -")
    print("  packages: " + ", ".join(opt))
    return 0


def main(argv=None):
    ap = _parser()
    a = ap.parse_args(argv)
    if a.command is None:
        ap.print_help()
        return 0
    return {"lddmm": cmd_lddmm, "demo": cmd_demo, "info": cmd_info}[a.command](a)


if __name__ == "__main__":
    sys.exit(main())
