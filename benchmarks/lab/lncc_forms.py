"""Forms of LNCC's per-window score, measured (review MED of session 20: a flat window scored as a
perfect match against any window). With the window means, variances vI, vJ and covariance c:

    A   cc = (c^2 + e) / (vI vJ + e)                    (pyca until this lab)
    B   cc = (c + e)^2 / ((vI + e) (vJ + e))            (the reviewer's proposal)
    C   cc = (|c| + e)^2 / ((vI + e) (vJ + e))          (B, blind to the sign of c as c^2 is)

Each is 1 exactly, with a zero gradient, for two equal windows (flat ones included) and at most 1. A
counts a window that is flat in one image as matched; B and C count it as about e / (vJ + e). B scores
an anti-correlated window below a correlated one of the same strength; A and C score both alike.

    python benchmarks/lab/lncc_forms.py --table                  # the scores of canonical windows (NumPy)
    python benchmarks/lab/lncc_forms.py --form C --runs syn-real,syn-synth [--eps 1e-6]

--form replaces pyca register's (syn's) own LNCC (pyca.apps.syn._LNCC, Python) by the form's, same
forces structure ((2 / DI) ((q / DJ) (J - mJ) - cc (I - mI)), q = dcc/dc * DI DJ / 2); `pyca lddmm
--metric lncc` (ca.LNCC, C++) runs whatever form the build has: the script prints which it is. Runs:
syn-real / lddmm-real (bench_brain.py --pairs real --resolution 2 --raw no --no-hd95, both
directions), syn-synth / lddmm-synth (the synthetic pair of seed 0 at 2 mm, scored by bench_brain's
evaluate). Results: docs/performance.md, "LNCC's flat windows".
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

FORMS = ("A", "B", "C")


def score(form, c, vI, vJ, e):
    """cc of each window (NumPy)."""
    vI, vJ = np.maximum(vI, 0), np.maximum(vJ, 0)
    if form == "A":
        return (c * c + e) / (vI * vJ + e)
    q = c + e if form == "B" else np.abs(c) + e
    return q * q / ((vI + e) * (vJ + e))


def table():
    from scipy import ndimage as ndi

    rng = np.random.default_rng(0)

    def stats(I, J, r=2):
        f = lambda a: ndi.uniform_filter(a, 2 * r + 1, mode="nearest")  # noqa: E731
        mI, mJ = f(I), f(J)
        return f(I * J) - mI * mJ, f(I * I) - mI * mI, f(J * J) - mJ * mJ

    s = (16, 16, 16)
    tex = ndi.gaussian_filter(rng.random(s), 1.0)  # window variance ~2e-3 (r = 2)
    flat, weak = np.full(s, 0.3), 0.5 + 0.003 * rng.standard_normal(s)
    other = ndi.gaussian_filter(rng.random(s), 1.0)
    cases = (("itself", tex, tex), ("flat vs texture", flat, tex), ("flat vs flat (another level)", flat, flat + 0.2),
             ("noise sd 0.003 vs texture", weak, tex), ("noise sd 0.003 vs itself", weak, weak),
             ("unrelated textures", other, tex), ("2 tex + 0.1 vs tex", 2 * tex + 0.1, tex),
             ("1 - tex (anti) vs tex", 1 - tex, tex), ("0.5 + 0.1 tex vs tex", 0.5 + 0.1 * tex, tex),
             ("0.5 - 0.1 tex vs tex", 0.5 - 0.1 * tex, tex), ("0.5 + 0.01 tex vs tex", 0.5 + 0.01 * tex, tex),
             ("0.5 - 0.01 tex vs tex", 0.5 - 0.01 * tex, tex))
    for e in (1e-5, 1e-6):
        print(f"mean cc, 16^3, r = 2, e = {e:g}")
        print(f"| case | {' | '.join(FORMS)} |\n|---|{'---|' * len(FORMS)}")
        for name, I, J in cases:
            c, vI, vJ = stats(I, J)
            print(f"| {name} | " + " | ".join(f"{score(f, c, vI, vJ, e).mean():.4f}" for f in FORMS) + " |")


def lab_lncc(form):
    """syn's _LNCC with the form's score and forces (ca operations, both backends; A: syn's own)."""
    import pyca.core as ca
    from pyca.apps import syn

    class LabLNCC(syn._LNCC):
        def __call__(self, gI, gJ, I, J):
            if form == "A":  # syn's own (pyca's form)
                return super().__call__(gI, gJ, I, J)
            eps = self.eps
            self.window_stats(I, J)
            DI, DJ, q, t, cc = self.vI, self.vJ, self.c, self.t, self.cc
            for v in (DI, DJ):
                ca.MaxC_I(v, 0.0)
                ca.AddC_I(v, eps)
            if form == "B":
                ca.AddC_I(q, eps)
                ca.Mul(cc, q, q)
            else:
                ca.LTC(t, q, 0.0)  # 1 where c < 0
                ca.Abs_I(q)
                ca.AddC_I(q, eps)
                ca.Mul(cc, q, q)
                ca.MulC_I(t, -2.0)
                ca.AddC_I(t, 1.0)  # sign(c), +1 at 0
                ca.Mul_I(q, t)
            ca.Mul(t, DI, DJ)
            ca.Div_I(cc, t)
            S = float(ca.Dot(cc, self.mask)) if self.mask is not None else float(ca.Sum(cc))
            ca.Sub(self.mI, I, self.mI)
            ca.Sub(self.mJ, J, self.mJ)
            # gI = (2 / DI) ((q / DJ) (J - mJ) - cc (I - mI)), gJ alike with I, J swapped
            for out, Down, Doth, own, other in ((gI, DI, DJ, self.mI, self.mJ), (gJ, DJ, DI, self.mJ, self.mI)):
                ca.Div(t, q, Doth)
                ca.Mul_I(t, other)
                ca.Mul(out, cc, own)
                ca.Sub(out, t, out)
                ca.Div_I(out, Down)
                ca.MulC_I(out, 2.0)
                if self.mask is not None:
                    ca.Mul_I(out, self.mask)
            return S

    syn._LNCC = LabLNCC


def built_form():
    """Which form ca.LNCC (C++) computes: flat against texture (1: A), anti-correlated windows (B < C)."""
    import pyca.core as ca

    g = ca.GridInfo(ca.Vec3Di(12, 12, 12))
    rng = np.random.default_rng(1)
    tex = rng.random((12, 12, 12)).astype(np.float32)

    def s(a, b):
        A = ca.Image3D.from_array(np.asfortranarray(a.astype(np.float32)), g)
        B = ca.Image3D.from_array(np.asfortranarray(b.astype(np.float32)), g)
        return float(ca.LNCC(ca.Image3D(g, ca.MEM_HOST), A, B, ca.Vec3Di(2, 2, 2), 1e-2)) / g.nVox()

    if s(np.full(tex.shape, 0.3), tex) > 0.99:
        return "A"
    return "B" if s(1 - tex, tex) < s(tex, tex) - 1e-6 else "C"


def synthetic(method, params):
    import pyca as ca
    from bench_brain import evaluate, image
    from pyca.apps import data, lddmm, syn

    pair = data.brain_pair(seed=0, resolution=2)
    mod = syn if method == "syn" else lddmm
    fixed, moving = image(pair["fixed"], pair["fixed_affine"]), image(pair["moving"], pair["moving_affine"])
    labels = image(pair["moving_labels"].astype(np.float32), pair["moving_affine"])
    t0 = time.perf_counter()
    res = mod.register(fixed, moving, moving_labels=labels, device="cpu", **params)
    ca.synchronize()
    r = evaluate(method, res.full_map.numpy().astype(float), res.labels.numpy(), time.perf_counter() - t0, pair,
                 pair["fixed_labels"] > 0)
    print(f"synthetic seed 0, 2 mm, {method} {params}: GM {r['dice_gm']:.4f} WM {r['dice_wm']:.4f} TRE "
          f"{r['tre_mean']:.3f} mm det {r['jac_min']:.3f} / {r['jac_max']:.2f} folds {r['folds']:.4f} "
          f"{r['seconds']:.1f} s", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--table", action="store_true")
    ap.add_argument("--form", choices=FORMS, default="A", help="syn's form (lddmm: the build's)")
    ap.add_argument("--eps", type=float, help="syn's lncc_eps (default: syn's)")
    ap.add_argument("--lddmm-eps", type=float, help="lddmm's lncc eps (default: metrics.LNCC's)")
    ap.add_argument("--runs", default="syn-real,syn-synth")
    ap.add_argument("--moving", default="colin,mni")
    a = ap.parse_args(argv)
    if a.table:
        table()
        return 0
    lab_lncc(a.form)
    if a.lddmm_eps is not None:
        from pyca.registration import metrics

        init = metrics.LNCC.__init__
        metrics.LNCC.__init__ = lambda self, *p, eps=None, **k: init(self, *p, eps=a.lddmm_eps, **k)
    print(f"syn: form {a.form}, eps {a.eps if a.eps is not None else 'default'}; lddmm (ca.LNCC, the build): form "
          f"{built_form()}, eps {a.lddmm_eps if a.lddmm_eps is not None else 'default'}", flush=True)
    syn_p = {} if a.eps is None else {"lncc_eps": a.eps}
    for run in a.runs.split(","):
        method, kind = run.split("-")
        prm = syn_p if method == "syn" else {"metric": "lncc"}
        if kind == "synth":
            synthetic(method, prm)
            continue
        import json

        import bench_brain

        bench_brain.main(["--pairs", "real", "--resolution", "2", "--device", "cpu", "--peers", "none", "--methods",
                          method, "--raw", "no", "--no-hd95", "--moving", a.moving, "--params",
                          json.dumps({method: prm})])
    return 0


if __name__ == "__main__":
    sys.exit(main())
