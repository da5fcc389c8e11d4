"""Where a dispatched call's time goes (benchmarks/bench_dispatch.py measures the whole call against
cupy.RawKernel): per call on an 8^3 volume, over 2000 back-to-back calls (best of 5), the dispatched
call, the plan's C function called directly (argument checks + launch, no Python frame of pyca),
the launch loop with arguments packed once, and on the host the same without a launch.

    python benchmarks/lab/dispatch_lab.py
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pyca as ca  # noqa: E402
from _harness import pyca_sync  # noqa: E402
from bench_dispatch import CALLS, per_call as seconds_per_call  # noqa: E402


def per_call(fn, sync=None):
    """Microseconds per call (bench_dispatch's measure: 2000 back-to-back calls, one sync, best of 5)."""
    return 1e6 * seconds_per_call(fn, sync=sync)


def main():
    op = ca.ext.squared_diff
    rows = []
    for mem, sync in ((ca.MEM_HOST, None), (ca.MEM_DEVICE, pyca_sync)):
        if mem == ca.MEM_DEVICE and not ca.cuda_available():
            continue
        g = ca.GridInfo((8, 8, 8))
        a, b, o = (ca.Image3D(g, mem) for _ in range(3))
        args = (o, a, b)
        op(*args)
        tag = "device" if mem == ca.MEM_DEVICE else "host"
        rows.append((f"{tag}: dispatched call op(o, a, b)", per_call(lambda: op(o, a, b), sync)))
        rows.append((f"{tag}: plan C function (checks{' + launch' if tag == 'device' else ''})",
                     per_call(lambda: op._ccall(op._this, args, None, None, None, 0), sync)))
        if mem == ca.MEM_DEVICE:
            loop = seconds_per_call(lambda: op.launch_repeated(o, a, b, n=CALLS), n=1, sync=sync) / CALLS
            rows.append(("device: cudaLaunchKernel loop, arguments packed once", 1e6 * loop))
        else:
            rows.append(("host: CPU function alone", per_call(lambda: op.cpu(o, a, b))))
        rows.append((f"{tag}: empty Python call (floor of any Python-level call)", per_call(lambda: None)))
    for name, us in rows:
        print(f"| {name:<60} | {us:6.2f} us |")


if __name__ == "__main__":
    main()
