"""A/B of the LDDMM solver: another version of pyca/apps/_lddmm_solver.py (a file, e.g. from
`git show REV:pyca/apps/_lddmm_solver.py > old.py`) against the installed one, in one process, on the
built-in pair (one scale, T = 10, tol = 0, no linear stage), with the library underneath the same.

    python benchmarks/lab/solver_ab.py old.py [--device gpu] [--sizes 128:100,256:20] [--repeat 2] [--old-unfused]

--old-unfused runs the old solver's chain of single operations (its `fused = False`). An old solver
whose undo() recomputes the state gets the forward pass its loop used to run after it, and one
without halve() the new gradients and update(eps / 2) its loop ran after a rejected step.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import pyca as ca  # noqa: E402
from bench_lddmm import RUN, synthetic_pair  # noqa: E402
from pyca.apps import _lddmm_solver, lddmm  # noqa: E402


def _load_old(path):
    src = open(path).read().replace("from .. import core as ca", "from pyca import core as ca")
    mod = type(sys)("old_solver")
    exec(compile(src, path, "exec"), mod.__dict__)  # noqa: S102 - a lab script running a given file
    base = getattr(mod, "Level", None) or mod._Level  # (older solvers named it _Level)
    if "J0_prev" in src and "source=None" in src and "def halve" in src:
        return base

    class Old(base):
        def __init__(self, *args, source=None, **kw):
            # solvers older than the linear stage's fused path take no source: it runs without one
            if source is not None:
                raise SystemExit("solver_ab: this old solver cannot run a registration with a linear stage")
            super().__init__(*args, **kw)

        def undo(self):
            super().undo()
            if "J0_prev" not in src:
                self.forward()  # what pyca.apps.lddmm's loop did after undo() then

        def update(self, eps):
            self.last_eps = eps
            super().update(eps)

        def halve(self):  # what the loop did before Level.halve: new gradients, half the step
            self.gradients()
            self.update(0.5 * self.last_eps)

    return Old


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("old")
    ap.add_argument("--device", default="gpu", choices=["cpu", "gpu"])
    ap.add_argument("--sizes", default="128:100,256:20", help="size:iterations,...")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--old-unfused", action="store_true")
    a = ap.parse_args(argv)
    old, new = _load_old(a.old), _lddmm_solver.Level
    old.fused = not a.old_unfused
    mem = ca.MEM_DEVICE if a.device == "gpu" else ca.MEM_HOST
    for spec in a.sizes.split(","):
        n, its = (int(x) for x in spec.split(":"))
        f, m = synthetic_pair(n, mem)
        kw = dict(scales=(1,), time_steps=10, device=a.device, tol=0.0, affine="none", **RUN)
        per_it = {"old": [], "new": []}
        for rep in range(a.repeat):
            for name, cls in (("old", old), ("new", new)):
                lddmm.Level = cls
                try:
                    lddmm.register(f, m, iterations=2, **kw)
                    r = lddmm.register(f, m, iterations=its, **kw)
                finally:
                    lddmm.Level = new
                t = r.timings["scales"][0]["seconds"]
                k = len(r.energies)
                rej = sum(not e["accepted"] for e in r.energies)
                per_it[name].append(t / k)
                print(f"{n}^3 {a.device} {name} rep {rep}: {k} iterations, {rej} rejected, {t:.4f} s = "
                      f"{1e3 * t / k:.3f} ms per iteration, final energy {r.energies[-1]['energy']:.6g}", flush=True)
        print(f"{n}^3 {a.device}: new / old per iteration, best of {a.repeat}: "
              f"{min(per_it['new']) / min(per_it['old']):.3f}", flush=True)


if __name__ == "__main__":
    main()
