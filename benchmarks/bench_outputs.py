"""Writing the outputs of `pyca lddmm` (pyca/apps/_lddmm_outputs.py): where the time goes.

    python benchmarks/bench_outputs.py [--size 64,64,48] [--device auto|cpu|gpu] [--repeat 3]

Registers the built-in pair briefly (the outputs' sizes are those of the default run), then times
write_outputs as `pyca lddmm` calls it (all files, in parallel threads), on one thread, without the
report, uncompressed (.nii), and each part alone: the device->host copies, each NIfTI file, the
report. The limit beside them: zlib level 1 (nibabel's level) on the same bytes, one core.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
import zlib

import numpy as np

import pyca as ca
from pyca import io as pio
from pyca.apps import data, lddmm
from pyca.apps._lddmm_outputs import _draw_report, _report_data


def best(fn, repeat):
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return min(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="64,64,48")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    size = tuple(int(s) for s in a.size.split(","))
    fixed, moving = data.builtin_pair(size=size)
    res = lddmm.register(fixed, moving, iterations=(2, 2, 2), device=a.device)
    print(f"pyca {ca.__version__}, outputs of a {'x'.join(map(str, size))} run on {res.device}, "
          f"{os.cpu_count()} CPU cores; best of {a.repeat}")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        def out(name):
            p = os.path.join(d, name)
            os.makedirs(p, exist_ok=True)
            return p

        rows.append(("write_outputs (pyca lddmm: threads, .nii.gz, report)",
                     best(lambda: lddmm.write_outputs(res, fixed, moving, out("a"), save_inputs=True), a.repeat)))
        rows.append(("  ... on one thread", best(lambda: lddmm.write_outputs(res, fixed, moving, out("b"),
                                                                            save_inputs=True, workers=1), a.repeat)))
        rows.append(("  ... without the report", best(lambda: lddmm.write_outputs(
            res, fixed, moving, out("c"), save_inputs=True, report=False), a.repeat)))
        rows.append(("  ... uncompressed .nii (--no-compress)", best(lambda: lddmm.write_outputs(
            res, fixed, moving, out("e"), save_inputs=True, compress=False), a.repeat)))
        rows.append(("device->host copies of the 4 results", best(
            lambda: [x.clone(ca.MEM_HOST) for x in (res.deformed, res.phiinv, res.phi, res.jacobian)], a.repeat)))
        rows.append(("report.png (data + drawing)", best(
            lambda: _draw_report(_report_data(res, fixed), os.path.join(d, "r.png")), a.repeat)))
        for name, obj in (("phiinv.nii.gz (a field)", res.phiinv), ("deformed.nii.gz (an image)", res.deformed)):
            save = pio.save_field if isinstance(obj, ca.Field3D) else pio.save_image
            rows.append((name, best(lambda: save(obj, os.path.join(d, "x.nii.gz")), a.repeat)))
        raw = np.ascontiguousarray(res.phiinv.numpy()).tobytes()
        t = best(lambda: zlib.compress(raw, 1), a.repeat)
        nbytes = sum(x.numpy().nbytes for x in (fixed, moving, res.deformed, res.phiinv, res.phi, res.jacobian))
        rows.append((f"limit: zlib level 1 of all {nbytes / 2**20:.1f} MiB on one core",
                     t * nbytes / len(raw)))
    for name, t in rows:
        print(f"  {name:<58s} {t:8.3f} s")
    print("registration of the default run: see `pyca lddmm -v` (timings per scale)")


if __name__ == "__main__":
    main()
