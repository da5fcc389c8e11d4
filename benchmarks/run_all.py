"""Run every benchmark module (benchmarks/bench_*.py) in one process and print their tables.

    python benchmarks/run_all.py            # CPU comparisons (pyca vs NumPy/SciPy)
    python benchmarks/run_all.py --gpu      # also GPU comparisons (pyca vs PyTorch/CuPy)
    python benchmarks/run_all.py --only deformation,filters
"""
from __future__ import annotations

import argparse
import importlib.util
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import Table, machine_line  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated module suffixes (bench_<name>.py)")
    a = ap.parse_args()
    only = {s for s in a.only.split(",") if s}
    print(machine_line(), flush=True)
    failed = []
    for path in sorted(HERE.glob("bench_*.py")):
        name = path.stem[len("bench_"):]
        if only and name not in only:
            continue
        spec = importlib.util.spec_from_file_location(path.stem, path)
        mod = importlib.util.module_from_spec(spec)
        table = Table(name)
        try:
            spec.loader.exec_module(mod)
            mod.run(table, gpu=a.gpu)
        except Exception:  # noqa: BLE001 - report and go on with the other benchmarks
            traceback.print_exc()
            failed.append(name)
        table.print()
    if failed:
        print("benchmarks that failed:", ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
