"""The ``pyca`` command (also ``python -m pyca``).

    pyca [--version] [-v | -q] COMMAND ...
    pyca lddmm [--fixed F --moving M] [--out DIR [--overwrite]] [--device auto|cpu|gpu] [options]
    pyca register --fixed F --moving M [--out DIR] [--method syn|lddmm] [options]
    pyca demo  [--device auto|cpu|gpu] [--size N]
    pyca info

``pyca lddmm`` with no input registers a built-in pair of 3-D images (pyca.apps.data) and writes the
deformed image, the deformation fields, the Jacobian determinant (NIfTI), a PNG report and a JSON
summary into the output folder. Documentation: pyca._docs.DOCS_URL (docs/ in the source tree).

Errors are one line on stderr (``pyca COMMAND: error: ...``) and exit code 2 for a bad command line or
input (found before any work), 1 for a failure while working; Ctrl-C ends with one line and exit
code 130. A registration that ran but failed (folds, collapsed structures, a match worse than the
linear stage's, a single-modality metric on images of different contrasts) says so in one line and
exits with 3 unless --allow-folds (pyca.registration.quality). No output file ever appears half-written under its final name (pyca/_files.py).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
import time

from ._docs import DOCS_URL, page
from .distributed import Terminated  # at import, inside the console entry's guard (_pyca_console)
from ._files import check_out_dir, claim_out_dir, clear_previous

_EPILOG_LDDMM = """\
outputs (in --out): deformed.nii.gz (moving deformed onto fixed), phiinv.nii.gz and phi.nii.gz
(H-fields, voxel coordinates), jacdet.nii.gz (det D phiinv), affine.mat (.txt), warp.nii.gz and
inverse_warp.nii.gz (the transforms for ANTs/ITK and `pyca apply`, listed in summary.json in
ants.apply_transforms' order; see the transforms page below), report.png, summary.json; with the
built-in data also fixed.nii.gz and moving.nii.gz (.nii with --no-compress). Each file appears only
when complete; summary.json is written last. Exit status: 0 done, 1 failed while working, 2 bad
command line or input (nothing done), 3 the registration ran but failed (folds, collapsed structures,
a match worse than the linear stage's, ssd/lncc on images of different contrasts: one line on stderr,
"quality" in summary.json, outputs written; 0 with --allow-folds), 130 interrupted (Ctrl-C).
Documentation (outputs, parameters, algorithm): """ + page("lddmm") + "\nTransforms: " + page("transforms")


# Bounds of the built-in pair's size, checked while parsing (before any work). The registration
# parameters' options, their bounds and help come from pyca.registration.parameters.
_MAX_AXIS = 4096  # voxels per axis of the built-in pair
_MAX_VOXELS = 1 << 28  # voxels of the built-in pair (a Field3D of them is 3 GiB)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: `pyca lddmm: error: ... (see pyca lddmm --help)`, exit 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _version():
    try:
        from . import __version__ as v  # dist keeps it in one place
    except ImportError:
        from importlib.metadata import version

        v = version("pyca")
    return v


def _bounded(name, lo, hi):
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not lo <= v <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer in [{lo}, {hi}], got {v}")
        return v

    parse.__name__ = name
    return parse


def _size(text):
    s = _ints(text)
    if len(s) != 3:
        raise argparse.ArgumentTypeError(f"expected 3 integers x,y,z, got {text!r}")
    if min(s[:2]) < 4 or not (s[2] == 1 or s[2] >= 4) or max(s) > _MAX_AXIS:
        raise argparse.ArgumentTypeError(f"each of x, y must be in [4, {_MAX_AXIS}] and z in [4, {_MAX_AXIS}] or 1 "
                                         f"(a 2-D pair), got {text!r}")
    if s[0] * s[1] * s[2] > _MAX_VOXELS:
        raise argparse.ArgumentTypeError(f"at most {_MAX_VOXELS} voxels (2^28), got {s[0] * s[1] * s[2]} ({text})")
    return s


def _ints(text):
    try:
        vals = [int(t) for t in str(text).replace(" ", "").split(",") if t]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected integers separated by commas, got {text!r}") from None
    if not vals:
        raise argparse.ArgumentTypeError("expected at least one integer")
    return vals


def add_verbosity(p, top=False):
    """-v/--verbose and -q/--quiet on parser p. Every command's parser calls this (top=False), so that
    both are accepted before and after the command (`pyca -q atlas`, `pyca atlas -q`): a subcommand's
    copy has no default of its own (argparse.SUPPRESS), so it cannot undo the top level's."""
    dflt = {} if top else {"default": argparse.SUPPRESS}
    g = p.add_mutually_exclusive_group()
    g.add_argument("-v", "--verbose", action="count", help="say more (-vv: a traceback with an error)",
                   **({"default": 0} if top else dflt))
    g.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors", **dflt)


_EPILOG_TOP = f"""first steps:
  pyca lddmm                                    register a built-in pair in seconds (writes pyca-lddmm-out/)
  pyca register --fixed F --moving M --out R    register two brains (symmetric; pyca lddmm for LDDMM)
  pyca info                                     the version and the GPU pyca would use
  pyca COMMAND --help                           a command's options
documentation: {DOCS_URL}"""


def _parser():
    from .apps._register_cli import add_output_options
    from .apps.data import DEFAULT_SIZE
    from .registration import parameters

    common = add_verbosity
    ap = _Parser(prog="pyca", description="pyca: 3-D imaging for computational anatomy, on CPU and GPU.",
                 epilog=_EPILOG_TOP, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--version", action="version", version=f"pyca {_version()}")
    common(ap, True)
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    lp = sub.add_parser("lddmm", help="register two 3-D images with LDDMM (built-in data by default)",
                        description="Register --moving onto --fixed with LDDMM (Beg et al.), on the GPU when "
                        "there is one. Without --fixed/--moving, a built-in pair of 3-D images is used.",
                        epilog=_EPILOG_LDDMM, formatter_class=argparse.RawDescriptionHelpFormatter)
    lp.add_argument("--fixed", help="fixed (target) image: NIfTI (.nii, .nii.gz) or MetaImage (.mha, .mhd); "
                    "NRRD, DICOM, MINC and pictures with SimpleITK")
    lp.add_argument("--moving", help="moving (template) image, deformed onto the fixed one")
    lp.add_argument("--out", default="pyca-lddmm-out", help="output folder (default: %(default)s); an existing, "
                    "non-empty one is refused unless --overwrite")
    lp.add_argument("--overwrite", action="store_true", help="replace the outputs of a previous run in --out (its "
                    "files are removed before the new ones are written; other files are kept)")
    parameters.add_arguments(lp)  # --device and the registration parameters, in their groups
    g = lp.add_argument_group("built-in data (without --fixed/--moving)")
    g.add_argument("--size", type=_size, default=None, help="grid size x,y,z of the built-in pair (default "
                   f"{','.join(map(str, DEFAULT_SIZE))})")
    add_output_options(lp)
    common(lp, False)

    dp = sub.add_parser("demo", help="build an image on the best device, run a few operations, say what happened")
    dp.add_argument("--device", default="auto", choices=parameters.DEVICES, help="default %(default)s")
    dp.add_argument("--size", type=_bounded("size", 4, 1024), default=64, help="grid size per axis (default "
                    "%(default)s)")
    common(dp, False)
    common(sub.add_parser("info", help="version, CUDA availability and the GPU pyca uses"), False)
    from .apps import apply, atlas, batch, regress, shoot, syn  # their parsers and bodies live in the app modules

    atlas.add_parser(sub)
    batch.add_parser(sub)
    apply.add_parser(sub)
    syn.add_parser(sub)
    shoot.add_parser(sub)
    regress.add_parser(sub)
    return ap


# ------------------------------------------------------------------------------------------------
def _fail(cmd, e, code=2):
    print(f"pyca {cmd}: error: {e}", file=sys.stderr)
    return code


def input_errors():
    """The exceptions a command reports as a bad input (one line, exit 2)."""
    from . import core
    from .io import ImageFileError

    return (ValueError, TypeError, OverflowError, OSError, ImageFileError, core.CudaError)


def importable(name):
    """Whether module `name` can be imported (without importing it)."""
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # ValueError: a module set to None in sys.modules
        return False


def _say(a):
    return (lambda *x: None) if a.quiet else (lambda *x: print(*x, flush=True))


def cmd_lddmm(a):
    import pyca as ca
    from .apps import data, lddmm
    from .apps._lddmm_outputs import output_names
    from .io import prepare_writing

    prepare_writing()  # nibabel imported, and the compression threads started, while this one registers
    if not a.no_report:
        from .apps._lddmm_report import prepare

        prepare()  # Pillow imported and a first report drawn, meanwhile too

    say = _say(a)
    verbose = (lambda *x: None) if a.quiet or a.verbose < 1 else say
    if (a.fixed is None) != (a.moving is None):
        return _fail("lddmm", "give both --fixed and --moving, or neither (built-in data)")
    if a.fixed is not None and a.size:
        return _fail("lddmm", "--size is the built-in pair's grid; with --fixed and --moving the files' grids are used")
    from .registration import parameters

    params = parameters.from_args(a)
    extra = parameters.files_of(a)
    # Everything that can be wrong with the inputs is found here, before any work.
    if not importable("nibabel"):
        return _fail("lddmm", "nibabel, which writes the outputs, cannot be imported: pip install nibabel")
    claim = contextlib.ExitStack()  # --out, locked for this run (pyca/_files.py, claim_out_dir)
    try:
        check_out_dir(a.out, a.overwrite)
        # (fills the metric's sigma and alpha; refuses an option given that the run would not use)
        checked = parameters.check({**lddmm.DEFAULTS, **params}, given=parameters.given_of(a), options=True)
        parameters.schedule(checked["scales"], checked["iterations"])
        _, device = lddmm.resolve_device(a.device)
        if a.fixed is None:
            size = tuple(a.size) if a.size else data.DEFAULT_SIZE
            fixed, moving = data.builtin_pair(size=size)
            sp = ", ".join(f"{s:.4g}" for s in fixed.grid().spacing())
            source = f"built-in pair ({'x'.join(map(str, size))} voxels, spacing ({sp}))"
        else:
            fixed = ca.io.load_image(a.fixed)
            moving = ca.io.load_image(a.moving)
            source = f"fixed {a.fixed}, moving {a.moving}"
        names = {"fixed": a.fixed, "moving": a.moving, **extra}
        inputs = list(names.values())
        from .registration.inputs import LabelImage  # labels read as integers, whatever their magnitude

        extra = {k: LabelImage.load(v) if k == "moving_labels" else ca.io.load_image(v) for k, v in extra.items()}
        note = lddmm.check_inputs(fixed, moving, names=names, **extra)
        # every output is a float per voxel of the fixed grid (fields: 3), written beside its final name
        claim.enter_context(claim_out_dir(a.out, a.overwrite, outputs=output_names(), inputs=inputs,
                                          need_bytes=16 * 4 * int(fixed.grid().nVox())))
    except input_errors() as e:
        claim.close()
        return _fail("lddmm", e)
    with claim:
        return _lddmm_run(a, fixed, moving, names, extra, params, checked, source, device, note, say, verbose)


def _listed(v):
    """A schedule as the progress line prints scales: [10, 150, 150] (one int: as is)."""
    return list(v) if isinstance(v, (list, tuple)) else v


def _lddmm_run(a, fixed, moving, names, extra, params, checked, source, device, note, say, verbose):
    from .apps import lddmm
    from .apps._lddmm_outputs import output_names
    from .apps._lddmm_report import ReportError

    say(f"pyca lddmm: {source}")
    say(f"  device: {device}; {note}")
    say(f"  metric={a.metric} alpha={checked['alpha']:g} beta={a.beta} gamma={a.gamma} lpow={a.lpow} "
        f"sigma={checked['sigma']:g} step={a.step} T={a.time_steps} scales={a.scales} "
        f"iterations={_listed(checked['iterations'])}")
    if device.startswith("cpu"):
        verbose(f"  CPU threads: at most {os.environ.get('OMP_NUM_THREADS') or os.cpu_count()} (one per 32768 voxels; "
                f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '-')})")
    try:  # what can only be found after the linear stage (fields of view that do not overlap)
        res = lddmm.register(fixed, moving, progress=not (a.no_progress or a.quiet), names=names, **extra, **params)
    except ValueError as e:
        return _fail("lddmm", e)
    for sc in res.timings["scales"]:
        verbose(f"  scale 1/{sc['scale']}: grid {'x'.join(map(str, sc['grid']))}, {sc['seconds']:.2f} s")
    verbose(f"  writing outputs to {os.path.abspath(a.out)}")
    kept = clear_previous(a.out, output_names())  # only now: an interrupted run leaves the old outputs whole
    if kept:
        verbose(f"  kept in --out (not pyca's outputs): {', '.join(kept)}")
    try:
        paths = lddmm.write_outputs(res, fixed, moving, a.out, report=not a.no_report, save_inputs=a.fixed is None,
                                    compress=not a.no_compress,
                                    inputs=names if a.fixed else {"fixed and moving": source})
    except ReportError as e:
        return _fail("lddmm", e, 1)
    tm = res.timings
    verbose(f"  writing: host copies {tm['write_host_s']:.3f} s, then the files side by side "
            f"{tm['write_files_s']:.3f} s (registration {tm['registration_s']:.3f} s)")
    s = res.summary()
    say(f"  mismatch (sum of squared differences): {res.initial_mismatch:.6g} -> {res.final_mismatch:.6g} "
        f"(-{100 * res.mismatch_reduction:.1f}%)")
    say(f"  det D phiinv in [{s['jacobian_min']:.4g}, {s['jacobian_max']:.4g}]; final energy {res.final_energy:.6g}")
    say(f"  time: registration {res.timings['registration_s']:.2f} s, total {res.timings['total_s']:.2f} s, "
        f"writing {res.timings.get('write_s', 0):.2f} s")
    say(f"  wrote {len(paths)} files to {os.path.abspath(a.out)}: " + ", ".join(os.path.basename(p) for p in paths))
    return _judged(res, a)


def _judged(res, a):
    """0, or EXIT_FAILED_REGISTRATION after one line on stderr when the registration failed its checks
    (pyca.registration.quality; 0 with --allow-folds, the line still printed)."""
    from .registration import quality

    return quality.verdict(res, a.allow_folds, "pyca lddmm", a.out)


def cmd_demo(a):
    import numpy as np

    import pyca as ca
    from .apps import lddmm
    from .apps._device import wait

    try:
        mem, device = lddmm.resolve_device(a.device)
    except input_errors() as e:
        return _fail("demo", e)
    say = _say(a)
    n = a.size
    say(f"pyca {ca.__version__} demo on {device}")

    def step(what, fn):
        t0 = time.perf_counter()
        out = fn()
        wait(mem)
        say(f"  {what:<64s} {1e3 * (time.perf_counter() - t0):8.2f} ms  {out if out is not None else ''}")

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
    # JacDetH differentiates per world unit (PyCA's convention); an H-field holds voxel coordinates,
    # so times the voxel volume the identity's determinant is 1 on any spacing (1: volume kept).
    step("JacDetH of the deformation, times the voxel volume (1: no change)",
         lambda: (ca.JacDetH(jac, h), ca.MulC_I(jac, 1.0 * 1.0 * 1.5))[0])
    step("  det range", lambda: "= [{:.4f}, {:.4f}]".format(*ca.MinMax(jac)))
    k = ca.FluidKernelFFT()
    k.setAlpha(1.0)
    k.setGamma(0.1)
    k.setGrid(grid)
    sv = ca.Field3D(grid, mem)
    step("FluidKernelFFT: smooth the gradient field, K = (-Lap + 0.1)^-1", lambda: k.applyInverseOperator(sv, grad))
    step("Sum of the ball / sum of the deformed ball", lambda: f"= {ca.Sum(im):.1f} / {ca.Sum(out):.1f}")
    say("done: every call above ran on the " + ("GPU (MEM_DEVICE)." if mem == ca.MEM_DEVICE else "CPU (MEM_HOST)."))
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
    print(f"  CPU vectors (LDDMM steps): {ca.cpu_vector_info()}")
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
    """The console script: returns the exit code (0, 1 failure while working, 2 bad command line or
    input, 130 interrupted)."""
    import signal

    main_thread = threading.current_thread() is threading.main_thread()
    old = signal.signal(signal.SIGTERM, _terminated) if main_thread else None  # discards files being written,
    old_hook = sys.unraisablehook  # as Ctrl-C does
    redeliver = _Redelivery(old_hook)
    if main_thread:
        sys.unraisablehook = redeliver.hook
    try:
        rc = _run(argv)
    finally:
        redeliver.close()  # a signal the command's end overtook is not raised in the caller's code later
        if main_thread:
            signal.signal(signal.SIGTERM, old)
            sys.unraisablehook = old_hook
    if argv is None:  # the console script: nothing after the command's last line (Dask's objects
        _seal_stderr()  # may still report their shutdown while the interpreter exits)
    return rc


def _seal_stderr():
    import signal

    try:
        sys.stderr.flush()
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 2)
        os.close(fd)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a late Ctrl-C changes nothing now
    except (OSError, ValueError):
        pass


def _terminated(signum, frame):
    raise Terminated()


class _Redelivery:
    """An unraisable-exception hook: a Ctrl-C or SIGTERM whose exception was raised where Python can only
    ignore it (a gc callback, such as Dask's GCDiagnosis, or a __del__) is delivered again to the main
    thread while the command runs, so that it ends the command as anywhere else; any other unraisable
    exception goes to `previous`."""

    def __init__(self, previous):
        self._previous = previous
        self._lock = threading.Lock()
        self._open = True

    def hook(self, unraisable):
        import signal

        exc = unraisable.exc_value
        if not isinstance(exc, KeyboardInterrupt):
            self._previous(unraisable)
            return
        # From another thread, once this hook has returned: raised inside the hook, it would be ignored
        # again. Raised again where it can only be ignored, it comes back here.
        sig = signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGINT
        threading.Timer(0.01, self._deliver, (sig,)).start()

    def _deliver(self, sig):
        import _thread

        with self._lock:
            if self._open:
                _thread.interrupt_main(sig)

    def close(self):
        with self._lock:
            self._open = False


def _run(argv):
    words = sys.argv[1:] if argv is None else list(argv)  # the command's name before its arguments are parsed,
    cmd = f"pyca {words[0]}" if words and words[0][:1].isalpha() else "pyca"  # for a signal while they are
    a = None
    try:
        ap = _parser()
        a = ap.parse_args(argv)
        if a.command is None:
            ap.print_help()
            return 0
        cmd = f"pyca {a.command}"
        if hasattr(a, "func"):  # subcommands defined by app modules (atlas, register-batch)
            return a.func(a)
        return {"lddmm": cmd_lddmm, "demo": cmd_demo, "info": cmd_info}[a.command](a)
    except Terminated:
        print(f"{cmd}: terminated (SIGTERM)", file=sys.stderr, flush=True)
        return 143
    except KeyboardInterrupt:
        # Files being written are discarded (pyca/_files.py): none is left half-written.
        print(f"{cmd}: interrupted", file=sys.stderr, flush=True)
        return 130
    except MemoryError as e:
        print(f"{cmd}: error: out of memory{': ' + str(e) if str(e) else ''}", file=sys.stderr, flush=True)
        return 1
    except Exception as e:  # noqa: BLE001 - a CLI error is one line, not a traceback
        if a is not None and getattr(a, "verbose", 0) >= 2:
            import traceback

            traceback.print_exc()
        msg = " ".join(str(e).split()) or "(no message)"
        print(f"{cmd}: error: {type(e).__name__}: {msg} (-vv shows the traceback)", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
