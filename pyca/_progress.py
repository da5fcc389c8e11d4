"""Progress output of the applications: a tqdm bar on a terminal (or in a notebook), a few plain
lines elsewhere (a log file, a pipe, CI), never carriage-return redraws in a file.

    bar = progress_bar(total=120, desc="lddmm [cpu]")
    bar.set_postfix_str("E=1.2", refresh=False); bar.update(1); ...; bar.close()
    bar.write("a message", file=sys.stderr)   # a line above the bar (tqdm.write)

Used by pyca lddmm (per iteration) and by pyca atlas / register-batch (per registration).
"""
from __future__ import annotations

import sys
import time

__all__ = ["progress_bar", "PlainProgress"]


class PlainProgress:
    """tqdm's update / set_postfix_str / write / close, printed as one line at each quarter of the
    work (and at the end): `desc: 30/120 it (25%), 4.1 s, <postfix>` (steps=0: no line). A bar
    closed before its total (an error, Ctrl-C) prints nothing more."""

    def __init__(self, total, desc="", file=None, steps=4, unit="it"):
        self.total = max(int(total), 0)
        self.desc = desc
        self.file = file
        self.unit = unit
        self.n = 0
        self.postfix = ""
        self._marks = sorted({(self.total * k + steps - 1) // steps for k in range(1, steps + 1)} - {0})
        self._t0 = time.perf_counter()
        self._closed = False

    def set_postfix_str(self, s="", refresh=True):  # noqa: ARG002 - tqdm's signature
        self.postfix = str(s)

    def update(self, n=1):
        before = self.n
        self.n = min(self.n + int(n), self.total) if self.total else self.n + int(n)
        if any(before < m <= self.n for m in self._marks):
            self._line()

    def _line(self):
        pct = f" ({100 * self.n // self.total}%)" if self.total else ""
        post = f", {self.postfix}" if self.postfix else ""
        f = self.file if self.file is not None else sys.stderr
        print(f"{self.desc}: {self.n}/{self.total} {self.unit}{pct}, {time.perf_counter() - self._t0:.1f} s{post}",
              file=f, flush=True)

    @staticmethod
    def write(s, file=None):
        """A line of its own (tqdm.write's signature: stdout unless `file`)."""
        print(s, file=file if file is not None else sys.stdout, flush=True)

    def close(self):
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _interactive(stream):
    if "ipykernel" in sys.modules:  # a notebook: tqdm.auto draws a widget
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def progress_bar(total, desc="", file=None, unit="it", disable=False):
    """A tqdm bar when `file` (default stderr) is a terminal or a notebook, else a PlainProgress;
    disable: neither bar nor lines (write() still prints)."""
    stream = file if file is not None else sys.stderr
    if disable:
        return PlainProgress(total, desc, file=file, steps=0, unit=unit)
    if _interactive(stream):
        from tqdm.auto import tqdm

        return tqdm(total=total, desc=desc, unit=unit, dynamic_ncols=True, file=file)
    return PlainProgress(total, desc, file=file, unit=unit)
