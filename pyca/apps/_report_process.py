"""The helper process that draws pyca lddmm's report.png off the command's critical path.

`pyca lddmm` starts a ReportProcess first, before it reads its inputs. The helper imports matplotlib
and builds the empty figure while the registration runs; then, on a machine of 4 cores or more, it
forks a process per further part of the figure (pyca/apps/_lddmm_report.py, PARTS), which shares
what it imported, and they draw the parts side by side when sent the data. The helper adds the parts
up and sends the pixels back; this process writes the PNG. The design (start method, Ctrl-C, failures, no
orphan): docs/design/report-process.md.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
import warnings

__all__ = ["ReportProcess", "ReportError"]


class ReportError(RuntimeError):
    """report.png could not be drawn (the message says why, in one line)."""


def _default_parts():
    from ._lddmm_report import PARTS

    return len(PARTS) if (os.cpu_count() or 1) >= 4 and hasattr(os, "fork") else 1


class ReportProcess:
    """A helper process (forked while this one has a single Python thread, else spawned) that
    imports matplotlib at once, then draws report.png when sent the data:

        with ReportProcess() as rp:      # before the long work
            ...                          # matplotlib loads meanwhile, in the helper
            rp.submit(report_data(res, fixed), "out/report.png")
            ...                          # other outputs, on this process's threads
            rp.result()                  # writes the PNG; ReportError when the drawing failed or the helper died

    parts: 1 (the helper draws the whole figure) or len(PARTS) (it forks a process per further part
    once matplotlib is loaded, and the parts are drawn side by side); default: the parts on a
    machine of 4 cores or more with os.fork. The PNG is the same either way. Leaving the block ends
    the helper: by asking it to exit once the drawing came back; else (an exception, Ctrl-C's
    KeyboardInterrupt included, or no drawing asked for) by SIGTERM, then SIGKILL if it does not
    exit. No helper receives Ctrl-C itself (SIGINT is ignored there) or writes a file, and each
    exits when the pipe it reads closes, whatever way the process at its other end ends: no orphan
    is left."""

    def __init__(self, parts=None):
        import multiprocessing as mp

        from ._lddmm_report import PARTS

        n = _default_parts() if parts is None else parts
        if n not in (1, len(PARTS)):
            raise ValueError(f"ReportProcess: parts must be 1 or {len(PARTS)}, got {n}")
        method = _start_method()
        ctx = mp.get_context(method)
        self._t0 = time.time()
        self._path = None
        self.timings = {}  # seconds since the start: ready (matplotlib loaded), asked (submit), drawn
        self.part_pids = []  # the processes the helper forked for the other parts (known once ready)
        self._conn, child = ctx.Pipe()
        # A forked helper also holds this end of the pipe: it closes it first, so that it sees the
        # pipe close (and exits) when this process ends, whatever way.
        ours = (self._conn,) if method == "fork" else ()
        self._proc = ctx.Process(target=_serve, args=(child, self._t0, n, ours), name="pyca-report", daemon=True)
        # SIGINT ignored while the helper starts: a fresh interpreter keeps an ignored SIGINT
        # ignored, so Ctrl-C at a terminal (sent to the whole process group) never reaches the
        # helper, not even while it boots; this process ends it instead (close()).
        main = threading.current_thread() is threading.main_thread()
        old = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            with warnings.catch_warnings():  # Python >= 3.12 warns of any native thread (see _start_method)
                warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
                self._proc.start()
        finally:
            if main:
                signal.signal(signal.SIGINT, old)
            child.close()

    @property
    def pid(self):
        return self._proc.pid

    def wait_ready(self, timeout=60.0):
        """Waits until the helper has loaded matplotlib (and forked its part processes); for tests."""
        self._answer(timeout, until_ready=True)

    def submit(self, data, path):
        """Sends report_data()'s dict; result() then writes the PNG to `path`."""
        self._path = os.fspath(path)
        self.timings["asked"] = time.time() - self._t0
        try:
            self._conn.send(("draw", data))
        except OSError:  # the helper is gone: result() says so, once the caller's other files are written
            pass

    def result(self, timeout=300.0):
        """Waits for the drawing sent by submit() and writes the PNG (whole or not at all); raises
        ReportError if the drawing failed, if the helper died, or if it did not answer within
        `timeout` seconds (a drawing takes a fraction of one)."""
        from ._lddmm_report import write_png

        write_png(self._answer(timeout), self._path)
        self.timings["drawn"] = time.time() - self._t0

    def _answer(self, timeout, until_ready=False):
        t0 = time.perf_counter()
        status = "ready"
        try:
            while status == "ready":
                if until_ready and "ready" in self.timings:
                    return None
                while not self._conn.poll(0.5):
                    if not self._proc.is_alive():
                        self._died()
                    if time.perf_counter() - t0 > timeout:
                        raise ReportError(f"the process drawing {os.path.basename(self._path or 'report.png')} did "
                                          f"not answer within {timeout:g} s")
                status, message = self._conn.recv()
                if status == "ready":
                    self.timings["ready"], self.part_pids = message
        except (EOFError, OSError):
            self._died()
        if status != "ok":
            raise ReportError(f"{os.path.basename(self._path or 'report.png')} could not be drawn: {message}")
        return message

    def _died(self):
        self._proc.join(timeout=5)
        code = self._proc.exitcode
        why = f"was killed by signal {-code}" if code is not None and code < 0 else f"ended (exit code {code})"
        raise ReportError(f"the process drawing {os.path.basename(self._path or 'report.png')} {why} before it "
                          f"was done") from None

    def close(self, abort=False):
        """Ends the helper: asks it to exit once its drawing was received, else (abort, an error
        before any drawing) SIGTERM at once; SIGKILL if it is still there a few seconds later. Its
        part processes exit when it does (their pipes close)."""
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


def _start_method():
    """fork on Linux while this process runs one Python thread: a helper then starts with this
    process's modules (numpy, pyca) loaded and only imports matplotlib, about 0.3 s sooner than a
    fresh interpreter. It never uses CUDA and ends with os._exit, so a CUDA context, if this process
    had one, is never touched there; the native threads a process may hold by then (OpenBLAS's,
    OpenMP's: idle, and fork-aware) are not copied. Else spawn: a fresh interpreter."""
    return "fork" if sys.platform.startswith("linux") and threading.active_count() == 1 else "spawn"


def _on_sigterm(signum, frame):  # noqa: ARG001 - a signal handler's signature
    raise SystemExit(128 + signum)


def _serve(conn, t0, parts, parent_ends=()):
    """The helper process: imports matplotlib and builds the empty figure, forks the processes of
    the other parts, then draws what it is sent until told to exit or the pipe closes. It ends with
    os._exit: nothing is left to flush, and the interpreter's teardown with matplotlib loaded takes
    longer than the drawing."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_sigterm)
    for end in parent_ends:
        end.close()
    code = 0
    try:
        _loop(conn, t0, parts)
    except SystemExit as e:  # SIGTERM
        code = e.code if isinstance(e.code, int) else 1
    os._exit(code)


def _loop(conn, t0, parts):
    from ._lddmm_report import _frame, compose, render

    frame = None
    try:  # matplotlib's import: the cost of a process's first report (a first drawing costs no more than later ones)
        frame = _frame()
    except Exception:  # noqa: BLE001, S110 - the drawing asked for raises it again, and says so
        parts = 1
    others = []  # (pid, pipe) of the processes drawing the other parts: they share what this one imported
    for k in range(1, parts):
        others.append(_fork_part(k, frame, [conn] + [c for _, c in others]))
    conn.send(("ready", (time.time() - t0, [pid for pid, _ in others])))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # the command ended: nothing more to draw
            return
        if msg[0] != "draw":
            return
        try:
            for _, c in others:
                c.send(msg[1])
            ready, frame = frame, None  # a frame is drawn into once
            pixels = [render(msg[1], 0 if others else None, ready)]
            for _, c in others:
                status, px = c.recv()
                if status != "ok":
                    raise RuntimeError(px)
                pixels.append(px)
            conn.send(("ok", compose(pixels)))
        except Exception as e:  # noqa: BLE001 - sent back, raised there as one line
            conn.send(("error", f"{type(e).__name__}: {' '.join(str(e).split())}"))


def _fork_part(part, frame, inherited):
    """Forks a process that draws PARTS[part] of each dict it is sent (into its copy of `frame`
    first); returns (pid, pipe). It closes the pipes it inherits (`inherited`: this helper's own)
    and reads only its pipe, so it exits when this process ends (the pipe closes), whatever way."""
    import multiprocessing as mp

    ours, theirs = mp.Pipe()
    with warnings.catch_warnings():  # see _start_method
        warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
        pid = os.fork()
    if pid:
        theirs.close()
        return pid, ours
    code = 0
    try:  # the part's process: this helper's memory (matplotlib loaded, an unused frame), one thread
        for c in (ours, *inherited):
            c.close()
        from ._lddmm_report import _frame, render

        while True:
            try:
                d = theirs.recv()
            except (EOFError, OSError):
                break
            try:
                ready, frame = frame or _frame(), None
                theirs.send(("ok", render(d, part, ready)))
            except Exception as e:  # noqa: BLE001 - sent back
                theirs.send(("error", f"{type(e).__name__}: {' '.join(str(e).split())}"))
    except SystemExit as e:  # SIGTERM
        code = e.code if isinstance(e.code, int) else 1
    finally:
        os._exit(code)
