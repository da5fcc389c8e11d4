"""A/B of how pyca lddmm's outputs are written (pyca/apps/_lddmm_outputs.py): variants of
write_outputs with the report, in one process, each call into a fresh folder, interleaved, after the
warm-ups `pyca lddmm` does while it registers (pyca.io.prepare_writing, _lddmm_report.prepare).

    N=15 python benchmarks/lab/writing_ab.py [gpu|cpu]

Prints the median, min and max of each variant in ms: the current code, the report's job last, 4 and
2 writer threads, the PNG deflated on its writer thread (zlib.compress) instead of on all cores, no
report, and the report drawn before the files (serially).
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import zlib

import pyca._files as files
import pyca.apps._lddmm_outputs as outputs
import pyca.apps._lddmm_report as report
from pyca.apps import data, lddmm
from pyca.io import prepare_writing


def main():
    warm = [prepare_writing(), report.prepare()]
    fixed, moving = data.builtin_pair(size=(64, 64, 48))
    res = lddmm.register(fixed, moving, device=sys.argv[1] if len(sys.argv) > 1 else "auto", progress=False)
    for t in warm:
        t.join()
    write_parallel, zlib_compress = outputs.write_parallel, files.zlib_compress

    def report_last(jobs, workers=None):
        jobs = list(jobs)
        return write_parallel(jobs[1:] + jobs[:1], workers)

    def serial(d):
        report.draw_report(report.report_data(res, fixed), os.path.join(d, "report.png"))
        outputs.write_outputs(res, fixed, moving, d, save_inputs=True, report=False)

    variants = {
        "current": {},
        "report's job last": dict(write_parallel=report_last),
        "4 writer threads": dict(workers=4),
        "2 writer threads": dict(workers=2),
        "PNG on its writer thread": dict(zlib_compress=lambda d, level=1, strategy=0: zlib.compress(bytes(d), 1)),
        "no report": dict(report=False),
        "report, then the files": dict(serial=True),
    }
    n = int(os.environ.get("N", "15"))
    times = {k: [] for k in variants}
    try:
        for _ in range(n):
            for name, v in variants.items():
                outputs.write_parallel = v.get("write_parallel", write_parallel)
                files.zlib_compress = v.get("zlib_compress", zlib_compress)
                d = tempfile.mkdtemp()
                t0 = time.perf_counter()
                if v.get("serial"):
                    serial(d)
                else:
                    outputs.write_outputs(res, fixed, moving, d, save_inputs=True, report=v.get("report", True),
                                          workers=v.get("workers"))
                times[name].append(1e3 * (time.perf_counter() - t0))
    finally:
        outputs.write_parallel, files.zlib_compress = write_parallel, zlib_compress
    print(f"write_outputs of the default run on {res.device.split(' (')[0]}, {os.cpu_count()} cores, "
          f"{n} calls each (ms): median, min, max")
    for name, ts in times.items():
        print(f"  {name:28s} {statistics.median(ts):7.1f} {min(ts):7.1f} {max(ts):7.1f}")


if __name__ == "__main__":
    main()
