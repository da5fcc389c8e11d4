"""Atlas building on Dask: time per template iteration for 8, 16 and 32 subjects of the built-in
cohort at 64^3, on 1 and 2 CPU worker processes (and, with --gpu, on one worker per visible GPU),
with the per-subject registration cost, the time outside registration (scheduling, reduction, file
writing: the overhead) and the bytes the workers sent (to each other and to the client).

The physical limit beside each row: N x (registration time per subject) / W, the iteration's time
if the workers did nothing but register (efficiency = that / measured). One atlas run per (W, N):
iteration 0 (the mean) and one registration iteration, which is the one timed. Registration is kept
short (--scales / --iterations) so that the whole sweep fits a shared 2-core machine; the ratio of
overhead to registration is the quantity of interest, and it only improves with longer registrations.

    python benchmarks/bench_atlas.py [--gpu] [--subjects 8,16,32] [--size 64] [--workers 1,2]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import machine_line  # noqa: E402


def _ints(t):
    return [int(x) for x in t.split(",") if x]


def run_one(client, n, size, params, root):
    from pyca.apps import atlas

    out = os.path.join(root, f"w{len(client.scheduler_info(n_workers=-1)['workers'])}-n{n}")
    t0 = time.perf_counter()
    res = atlas.build(out=out, template_iterations=1, client=client, quiet=True, report=False, cohort=n,
                      cohort_size=(size,) * 3, seed=0, **params)
    e = res.summary["iterations"][1]
    return {"subjects": n, "wall_s": e["wall_s"], "reg_per_subject_s": e["registration_s_per_subject"],
            "outside_s": e["outside_registration_s"], "bytes_moved": e["bytes_sent_by_workers"],
            "spread_reduction": res.summary.get("spread_reduction"), "total_s": time.perf_counter() - t0,
            "device": next(iter(e["records"].values()))["device"]}


def sweep(kind, workers, subjects, size, params, rows, threads=None):
    from distributed import Client

    from pyca.distributed import local_cluster

    for w in workers:
        with local_cluster(n_workers=w, device=kind, dashboard=False, threads=threads) as cl, Client(cl) as c:
            c.wait_for_workers(w)
            with tempfile.TemporaryDirectory() as root:
                for n in subjects:
                    r = run_one(c, n, size, params, root)
                    r.update(kind=kind, workers=w, ideal_s=n * r["reg_per_subject_s"] / w)
                    rows.append(r)
                    print(f"{kind:>4} W={w} N={n:3d}: iteration {r['wall_s']:7.2f} s, registration "
                          f"{r['reg_per_subject_s']:.3f} s/subject, outside registration {r['outside_s']:.2f} s, "
                          f"ideal {r['ideal_s']:.2f} s (efficiency {r['ideal_s'] / r['wall_s']:.0%}), "
                          f"{(r['bytes_moved'] or 0) / 2**10:.0f} KiB sent by workers", flush=True)


# ------------------------------------------------------------------------------------------------
# The task graph of one atlas iteration at scale, with dummy tasks (docs/design/distributed.md).
def _dummy_register(i, voxels):
    import numpy as np

    return {"ok": True, "num": np.full(voxels, float(i), np.float32), "den": np.ones(voxels, np.float32),
            "record": {"name": str(i), "ok": True}}


def _dummy_record(r):
    return r["record"]


def _dummy_combine(a, b):
    return {"num": a["num"] + b["num"], "den": a["den"] + b["den"]}


def _dummy_finish(t):
    return t["num"] / t["den"]


def _dummy_spread(r, t):
    return float(((r["num"] - t) ** 2).mean())


def simulate(n, workers, voxels=512):
    """One atlas iteration's graph for n subjects (register, record, tree reduction, finish, spread per
    subject) of dummy tasks on `workers` single-thread worker processes: scheduler time per task."""
    from distributed import Client, wait

    from pyca.distributed import local_cluster, tree_reduce, worker_addresses

    with local_cluster(n_workers=workers, device="cpu", dashboard=False, threads=1) as cl, Client(cl) as c:
        c.wait_for_workers(workers)
        w = worker_addresses(c)
        t0 = time.perf_counter()
        pins = [w[i % len(w)] for i in range(n)]
        regs = [c.submit(_dummy_register, i, voxels, key=f"reg-{i}", workers=[p], allow_other_workers=True)
                for i, p in enumerate(pins)]
        recs = [c.submit(_dummy_record, r, key=f"rec-{i}") for i, r in enumerate(regs)]
        total = tree_reduce(c, regs, _dummy_combine, pins, key="sum")
        tmpl = c.submit(_dummy_finish, total, key="template")
        wait(recs)
        t = tmpl.result()
        spreads = c.gather([c.submit(_dummy_spread, r, tmpl, key=f"spread-{i}") for i, r in enumerate(regs)])
        wall = time.perf_counter() - t0
        assert abs(float(t.mean()) - (n - 1) / 2.0) < 1e-3 * n and len(spreads) == n
        tasks = 3 * n + (n - 1) + 1
        print(f"simulated iteration: {n} subjects, {workers} workers, {tasks} tasks: {wall:.2f} s "
              f"({1e3 * wall / tasks:.2f} ms per task)", flush=True)
        return {"subjects": n, "workers": workers, "tasks": tasks, "wall_s": wall}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", action="store_true", help="also on one worker per visible GPU")
    ap.add_argument("--no-cpu", action="store_true", help="skip the CPU workers")
    ap.add_argument("--subjects", type=_ints, default=[8, 16, 32])
    ap.add_argument("--workers", type=_ints, default=[1, 2], help="CPU worker processes (default 1,2)")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--scales", type=_ints, default=[2, 1])
    ap.add_argument("--iterations", type=_ints, default=[3, 1], help="registration iterations per scale")
    ap.add_argument("--time-steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1,
                    help="OpenMP threads per CPU worker (default 1: the sweep compares worker processes)")
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("--simulate", type=_ints, default=None, metavar="N,...",
                    help="only simulate the task graph of one iteration for N subjects with dummy tasks")
    a = ap.parse_args(argv)
    print(machine_line())
    if a.simulate:
        for n in a.simulate:
            simulate(n, max(a.workers))
        return
    params = dict(scales=tuple(a.scales), iterations=tuple(a.iterations), time_steps=a.time_steps)
    print(f"atlas at {a.size}^3, one template iteration timed; registration {params}")
    rows = []
    if not a.no_cpu:
        sweep("cpu", a.workers, a.subjects, a.size, dict(params, device="cpu"), rows, a.threads)
    if a.gpu:
        from pyca.distributed import visible_gpus

        if visible_gpus():
            sweep("gpu", [len(visible_gpus())], a.subjects, a.size, dict(params, device="gpu"), rows)
        else:
            print("gpu: skipped (no GPU visible)")
    print()
    print("| workers | subjects | s / iteration | registration s / subject | outside registration s | "
          "ideal s (N x reg / W) | efficiency | KiB sent by workers |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workers']} {r['kind']} | {r['subjects']} | {r['wall_s']:.2f} | {r['reg_per_subject_s']:.3f} | "
              f"{r['outside_s']:.2f} | {r['ideal_s']:.2f} | {r['ideal_s'] / r['wall_s']:.0%} | "
              f"{(r['bytes_moved'] or 0) / 2**10:.0f} |")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


def run(table, gpu=False):  # noqa: ARG001 - run_all.py's interface; this benchmark prints its own table
    """A short sweep for run_all.py (8 subjects at 32^3); the full sweep is `python bench_atlas.py`."""
    main(["--subjects", "8", "--size", "32"] + (["--gpu"] if gpu else []))


if __name__ == "__main__":
    main()
