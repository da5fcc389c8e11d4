"""Shared benchmark helpers: median timing with warm-up, GPU synchronisation, peer detection, and a
table that prints pyca's time next to its peer's and their ratio (pyca / peer: < 1 means pyca is faster).

Benchmarks are not tests: they measure, print and never assert. Each bench_*.py module has
`run(table, gpu=False)` and can be run alone (`python benchmarks/bench_x.py [--gpu]`) or through
`python benchmarks/run_all.py [--gpu]`.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time


def timeit_median(fn, sync=None, repeat=15, warmup=3, min_time=0.0, batch=None):
    """Median time of one fn() call in seconds.

    Without `sync` (CPU work): the median over `repeat` single calls. With `sync` (asynchronous GPU
    work, e.g. torch.cuda.synchronize): each sample is `batch` back-to-back calls (default 10) and one
    sync, divided by `batch`, so launch and synchronisation latency are shared as in a real pipeline
    and every peer is timed the same way; calls that return host values (reductions) wait inside
    each call anyway. Warm-up calls keep compilation and plan creation out."""
    if batch is None:
        batch = 10 if sync else 1
    for _ in range(warmup):
        fn()
    if sync:
        sync()
    times = []
    t_end = time.perf_counter() + min_time
    while len(times) < repeat or time.perf_counter() < t_end:
        t0 = time.perf_counter()
        for _ in range(batch):
            fn()
        if sync:
            sync()
        times.append((time.perf_counter() - t0) / batch)
    return statistics.median(times)


def pyca_env(**extra):
    """The environment for a benchmark's child Python process: it imports the pyca this process
    imported (a build's folder, not the checkout's sources, which have no compiled module)."""
    import pyca

    env = dict(os.environ, **extra)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(os.path.dirname(pyca.__file__)),
                                                    env.get("PYTHONPATH")) if p)
    return env


def optional_import(name):
    try:
        return __import__(name)
    except Exception:  # noqa: BLE001 - a broken optional peer is a missing one
        return None


def gpu_available():
    import pyca

    return pyca.cuda_available()


def run_gpu_part(table, gpu, size, run_gpu):
    """Runs `run_gpu(table)` when GPU comparisons were asked for (`--gpu`) and a GPU can be used;
    otherwise records why they were skipped."""
    if not gpu:
        return
    if not gpu_available():
        import pyca

        table.skip("GPU comparisons", size, "-", "no usable GPU: " + pyca.device_info())
        return
    run_gpu(table)


def pyca_sync():
    import pyca

    pyca.synchronize()


class Table:
    """Rows of (operation, size, pyca seconds, peer name, peer seconds); printed with ratios."""

    def __init__(self, title):
        self.title = title
        self.rows = []

    def add(self, op, size, t_pyca, peer, t_peer, note=""):
        self.rows.append((op, size, t_pyca, peer, t_peer, note))

    def skip(self, op, size, peer, why):
        self.rows.append((op, size, None, peer, None, why))

    def render(self):
        head = "| operation | size | pyca ms | peer | peer ms | pyca/peer | note |\n|---|---|---|---|---|---|---|\n"
        lines = []
        for op, size, tp, peer, tq, note in self.rows:
            f = (lambda t: f"{t * 1e3:.3f}" if t is not None else "-")
            ratio = f"{tp / tq:.2f}" if tp and tq else "-"
            lines.append(f"| {op} | {size} | {f(tp)} | {peer} | {f(tq)} | {ratio} | {note} |")
        return f"### {self.title}\n\n" + head + "\n".join(lines) + "\n"

    def print(self):
        print(self.render(), flush=True)


def machine_line():
    import platform

    import pyca

    cpu = platform.processor() or platform.machine()
    return f"{platform.node()} ({cpu}, {os.cpu_count()} cores); GPU: {pyca.device_info()}"


def main_for(run, title):
    ap = argparse.ArgumentParser(description=title)
    ap.add_argument("--gpu", action="store_true", help="also run the GPU comparisons (needs a GPU)")
    a = ap.parse_args()
    t = Table(title)
    run(t, gpu=a.gpu)
    print(machine_line())
    t.print()
