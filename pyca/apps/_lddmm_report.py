"""report.png of pyca lddmm, and the helper process that draws it off the command's critical path.

report_data() gathers what the report shows (mid z-slices as small NumPy arrays, the energies) on the
calling thread; draw_report() draws and writes it (matplotlib, about 1 s to import, 0.3-0.5 s to draw).
`pyca lddmm` starts a ReportProcess before the registration: a spawned process that imports matplotlib
and builds the empty figure while the registration runs, then draws report.png from the arrays it is sent.
The design (Ctrl-C, failures, no orphan): docs/design/report-process.md.
"""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np

__all__ = ["report_data", "draw_report", "ReportProcess", "ReportError"]


def report_data(res, fixed):
    """What the report shows, as host NumPy arrays (mid z-slices) and numbers: gathered on the
    calling thread, so that the drawing can run on another one."""
    fx = fixed.numpy()
    z = fx.shape[2] // 2
    jac = res.jacobian.numpy()
    acc = [e for e in res.energies if e["accepted"]]
    parts = res.device.split(" (")  # "gpu (NAME (details...)...)" -> "gpu (NAME)"
    short = f"{parts[0]} ({parts[1].rstrip(')')})" if len(parts) > 1 else res.device
    sp = tuple(res.deformed.grid().spacing())
    mov = res.moving.numpy()
    return dict(z=z, fixed=fx[:, :, z], moving=mov[:, :, z], deformed=res.deformed.numpy()[:, :, z],
                hinv=res.phiinv.numpy()[:, :, z, :2], jac=jac[:, :, z], jac_range=(float(jac.min()), float(jac.max())),
                lo=float(min(fx.min(), mov.min())), hi=float(max(fx.max(), mov.max())),
                diff_max=float(max(np.abs(fx - mov).max(), 1e-12)), aspect=sp[1] / sp[0], accepted=acc,
                nvox={s["scale"]: float(np.prod(s["grid"])) for s in res.timings.get("scales", [])},
                title=f"pyca lddmm on {short}: mismatch -{100 * res.mismatch_reduction:.1f}%, "
                f"{res.timings.get('registration_s', 0):.1f} s")


def draw_report(d, path, frame=None):
    """Draws report.png from report_data's dict, written whole or not at all. frame: an unused
    _frame(), built ahead of time (by the helper process)."""
    from .._files import atomic_path

    fig = _figure(d, frame)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")


def _frame():
    """The report's empty figure and its 2 x 4 axes (a fifth of the drawing's time)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(16, 8.5), dpi=80)
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 4, gridspec_kw=dict(left=0.02, right=0.96, bottom=0.07, top=0.9, wspace=0.2,
                                               hspace=0.18))
    return fig, axes


def _figure(d, frame=None):
    # matplotlib's object interface (no pyplot: usable from any thread), fixed margins (no
    # tight_layout: it draws the figure twice), titles at a given height (else each is placed by
    # measuring its axes' tick labels), no ticks on the image panels; the deformed grid is one
    # LineCollection. About 5x faster than pyplot + tight_layout (docs/performance.md).
    from matplotlib.collections import LineCollection

    fig, axes = frame or _frame()
    z, aspect = d["z"], d["aspect"]
    kw = dict(origin="lower", cmap="gray", vmin=d["lo"], vmax=d["hi"], aspect=aspect)
    m = d["diff_max"]
    dkw = dict(origin="lower", cmap="RdBu_r", vmin=-m, vmax=m, aspect=aspect)
    panels = ((axes[0, 0], d["fixed"], kw, f"fixed (z = {z})"), (axes[0, 1], d["moving"], kw, f"moving (z = {z})"),
              (axes[0, 2], d["deformed"], kw, f"deformed moving (z = {z})"),
              (axes[0, 3], d["fixed"] - d["deformed"], dkw, "fixed - deformed"),
              (axes[1, 0], d["fixed"] - d["moving"], dkw, "fixed - moving (before)"),
              (axes[1, 1], d["moving"], kw, "fixed grid mapped by phiinv, on moving"))
    for ax, img, style, title in panels:
        ax.imshow(img.T, **style)
        ax.set_title(title, y=1.0)
        ax.set_axis_off()
    ax = axes[1, 1]
    hx, hy = d["hinv"][..., 0], d["hinv"][..., 1]
    step = max(1, min(hx.shape) // 24)
    lines = [np.column_stack([hx[i, :], hy[i, :]]) for i in range(0, hx.shape[0], step)]
    lines += [np.column_stack([hx[:, j], hy[:, j]]) for j in range(0, hx.shape[1], step)]
    ax.add_collection(LineCollection(lines, colors="orange", linewidths=0.6))
    ax.set_xlim(-0.5, hx.shape[0] - 0.5)
    ax.set_ylim(-0.5, hx.shape[1] - 0.5)
    ax = axes[1, 2]
    jm = ax.imshow(d["jac"].T, origin="lower", cmap="viridis", aspect=aspect)
    fig.colorbar(jm, ax=ax, fraction=0.046)
    ax.set_axis_off()
    ax.set_title("det D phiinv (min {:.3g}, max {:.3g})".format(*d["jac_range"]), y=1.0)
    ax = axes[1, 3]
    acc = d["accepted"]
    if acc:
        # Per voxel, so that the scales (with 8x fewer voxels each) share one curve.
        x = np.arange(len(acc))
        for key, label in (("energy", "total"), ("match", "match"), ("reg", "regularisation")):
            ax.semilogy(x, [max(e[key], 1e-30) / d["nvox"].get(e["scale"], 1.0) for e in acc], label=label)
        for s in (i for i in range(1, len(acc)) if acc[i]["scale"] != acc[i - 1]["scale"]):
            ax.axvline(s, color="gray", lw=0.5, ls="--")
        ax.legend()
    ax.yaxis.tick_right()  # clear of the colorbar on its left
    ax.set_xlabel("accepted iteration (dashed: next scale)")
    ax.set_title("energy per voxel", y=1.0)
    fig.suptitle(d["title"])
    return fig


# ------------------------------------------------------------------------------------------------
class ReportError(RuntimeError):
    """report.png could not be drawn (the message says why, in one line)."""


class ReportProcess:
    """A spawned process that imports matplotlib at once, then draws report.png when sent the data:

        with ReportProcess() as rp:      # before the long work
            ...                          # matplotlib loads meanwhile, in the other process
            rp.submit(report_data(res, fixed), "out/report.png")
            ...                          # other outputs, on this process's threads
            rp.result()                  # raises ReportError when the drawing failed or the process died

    Leaving the block ends the process: by asking it to exit once the drawing came back; else (an
    exception, Ctrl-C's KeyboardInterrupt included, or no drawing asked for) by SIGTERM, on which it removes its temporary file and exits (a file
    it was writing never appears under its final name), then SIGKILL if it does not. The process
    never receives Ctrl-C itself (SIGINT is ignored there), and it exits when this process's end of
    the pipe closes, whatever way this process ends: no orphan is left drawing."""

    def __init__(self):
        import multiprocessing as mp

        ctx = mp.get_context("spawn")  # a fresh interpreter: no copy of this process's threads or GPU state
        self._conn, child = ctx.Pipe()
        self._t0 = time.time()
        self._proc = ctx.Process(target=_serve, args=(child, self._t0), name="pyca-report", daemon=True)
        self._path = None
        self.timings = {}  # seconds since the start: ready (matplotlib loaded), asked (submit), drawn
        # SIGINT ignored while the process starts: a fresh interpreter keeps an ignored SIGINT
        # ignored, so Ctrl-C at a terminal (sent to the whole process group) never reaches the
        # helper, not even while it boots; this process ends it instead (close()).
        main = threading.current_thread() is threading.main_thread()
        old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            self._proc.start()
        finally:
            if main:
                signal.signal(signal.SIGINT, old)
            child.close()

    @property
    def pid(self):
        return self._proc.pid

    def submit(self, data, path):
        """Sends report_data()'s dict; the process draws it into `path` (atomically)."""
        self._path = os.fspath(path)
        self.timings["asked"] = time.time() - self._t0
        try:
            self._conn.send(("draw", data, self._path))
        except OSError:  # the process is gone: result() says so, once the caller's other files are written
            pass

    def result(self, timeout=300.0):
        """Waits for the drawing sent by submit(); raises ReportError if it failed, if the process
        died, or if it did not answer within `timeout` seconds (a drawing takes about one)."""
        t0 = time.perf_counter()
        status = "ready"
        try:
            while status == "ready":
                while not self._conn.poll(0.5):
                    if not self._proc.is_alive():
                        self._died()
                    if time.perf_counter() - t0 > timeout:
                        raise ReportError(f"the process drawing {os.path.basename(self._path)} did not answer within "
                                          f"{timeout:g} s")
                status, message = self._conn.recv()
                if status == "ready":
                    self.timings["ready"] = message
        except (EOFError, OSError):
            self._died()
        self.timings["drawn"] = time.time() - self._t0
        if status != "ok":
            raise ReportError(f"{os.path.basename(self._path)} could not be drawn: {message}")

    def _died(self):
        self._proc.join(timeout=5)
        code = self._proc.exitcode
        why = f"was killed by signal {-code}" if code is not None and code < 0 else f"ended (exit code {code})"
        raise ReportError(f"the process drawing {os.path.basename(self._path or 'report.png')} {why} before it "
                          f"was done") from None

    def close(self, abort=False):
        """Ends the process: asks it to exit once its drawing was received, else (abort, an error
        before any drawing) SIGTERM at once; SIGKILL if it is still there a few seconds later."""
        proc = self._proc
        try:
            if not abort and "drawn" in self.timings and proc.is_alive():
                try:
                    self._conn.send(("exit",))
                    proc.join(timeout=5)
                except OSError:
                    pass
        finally:
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
            self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        self.close(abort=exc_type is not None)


def _on_sigterm(signum, frame):  # noqa: ARG001 - a signal handler's signature
    raise SystemExit(128 + signum)  # unwinds atomic_path: the temporary file is removed


def _serve(conn, t0):
    """The helper process: import matplotlib and build the empty figure, then draw what is sent until told to exit or the pipe closes.
    It ends with os._exit: nothing is left to flush, and the interpreter's teardown with matplotlib
    loaded takes longer than the drawing."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    code = 0
    try:
        _loop(conn, t0)
    except SystemExit as e:  # SIGTERM: the temporary file was removed on the way here
        code = e.code if isinstance(e.code, int) else 1
    os._exit(code)


def _loop(conn, t0):
    frame = None
    try:  # matplotlib's import: the cost of a process's first report (a first drawing costs no more than later ones)
        frame = _frame()
    except Exception:  # noqa: BLE001, S110 - the drawing asked for raises it again, and says so
        pass
    conn.send(("ready", time.time() - t0))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # the command ended: nothing more to draw
            return
        if msg[0] != "draw":
            return
        try:
            ready, frame = frame, None  # a frame is drawn into once
            draw_report(msg[1], msg[2], ready)
            conn.send(("ok", ""))
        except Exception as e:  # noqa: BLE001 - sent back, raised there as one line
            conn.send(("error", f"{type(e).__name__}: {' '.join(str(e).split())}"))
