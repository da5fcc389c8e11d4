"""Arithmetic and reductions: pyca vs NumPy on the CPU (128^3) and vs PyTorch / CuPy on the GPU (256^3).

    python benchmarks/bench_arithmetic.py [--gpu]

The note column gives pyca's effective memory bandwidth (bytes read + written / time) for the
elementwise operations and reductions.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import Table, gpu_available, main_for, optional_import, pyca_sync, timeit_median  # noqa: E402

CPU_N = 128
GPU_N = 256


def _gbps(nbytes, t, ref=None):
    """pyca's effective bandwidth, and its share of the reference copy rate `ref` (bytes/s) if given."""
    if not t:
        return ""
    share = f" = {100 * nbytes / t / ref:.0f}% of copy" if ref else ""
    return f"pyca {nbytes / t / 1e9:.0f} GB/s{share}"


def _cpu(table, ca):
    from pyca.testing import ArrayFactory

    n = CPU_N
    g = ca.GridInfo(ca.Vec3Di(n, n, n))
    fac = ArrayFactory(ca.MEM_HOST, seed=1)
    a, b, c = fac.random_image(g), fac.random_image(g), fac.random_image(g, 0.5, 2.0)
    out = fac.image(g)
    mask = fac.image(g, lambda s, rng: (rng.uniform(size=s) > 0.5))
    fa, fb, fo = fac.random_field(g), fac.random_field(g), fac.field(g)
    A, B, C, O, M = (np.asarray(x) for x in (a, b, c, out, mask))
    FA, FB, FO = (np.asarray(x) for x in (fa, fb, fo))
    Mb = M != 0
    size = f"{n}^3"
    nb = 4 * n**3
    tmp = np.empty_like(A)

    def row(name, fp, fq, peer, nbytes=None):
        tp, tq = timeit_median(fp), timeit_median(fq)
        table.add(name, size, tp, peer, tq, _gbps(nbytes, tp) if nbytes else "")

    row("Add (image)", lambda: ca.Add(out, a, b), lambda: np.add(A, B, out=O), "numpy", 3 * nb)
    row("MulC_I (image)", lambda: ca.MulC_I(out, 1.0001), lambda: np.multiply(O, 1.0001, out=O), "numpy", 2 * nb)
    row("Add_MulC a+b*c", lambda: ca.Add_MulC(out, a, b, 0.5),
        lambda: (np.multiply(B, 0.5, out=tmp), np.add(A, tmp, out=O)), "numpy (2 ops)", 3 * nb)
    row("Add masked", lambda: ca.Add(out, a, b, mask), lambda: np.add(A, B, out=O, where=Mb), "numpy where=", 4 * nb)
    row("Div (image)", lambda: ca.Div(out, a, c), lambda: np.divide(A, C, out=O), "numpy", 3 * nb)
    row("Sqrt", lambda: ca.Sqrt(out, c), lambda: np.sqrt(C, out=O), "numpy", 2 * nb)
    row("Exp", lambda: ca.Exp(out, a), lambda: np.exp(A, out=O), "numpy", 2 * nb)
    row("Add (field)", lambda: ca.Add(fo, fa, fb), lambda: np.add(FA, FB, out=FO), "numpy", 9 * nb)
    row("Mul field*image", lambda: ca.Mul(fo, fa, a), lambda: np.multiply(FA, A[..., None], out=FO), "numpy", 7 * nb)
    row("Magnitude", lambda: ca.Magnitude(out, fa),
        lambda: np.sqrt(np.einsum("...i,...i->...", FA, FA), out=O), "numpy einsum+sqrt", 4 * nb)
    row("Sum", lambda: ca.Sum(a), lambda: A.sum(dtype=np.float64), "numpy float64", nb)
    row("Max", lambda: ca.Max(a), lambda: A.max(), "numpy", nb)
    row("MinMax", lambda: ca.MinMax(a), lambda: (A.min(), A.max()), "numpy (2 passes)", nb)
    row("Dot", lambda: ca.Dot(a, b), lambda: np.dot(A.ravel(order="K"), B.ravel(order="K")), "numpy (float32 acc.)",
        2 * nb)


def _gpu(table, ca):
    from pyca.testing import ArrayFactory

    n = GPU_N
    size = f"{n}^3"
    if not gpu_available():
        table.skip("GPU comparisons", size, "torch/cupy", "no GPU")
        return
    g = ca.GridInfo(ca.Vec3Di(n, n, n))
    fac = ArrayFactory(ca.MEM_DEVICE, seed=2)
    a, b, c = fac.random_image(g), fac.random_image(g), fac.random_image(g, 0.5, 2.0)
    out = fac.image(g)
    mask = fac.image(g, lambda s, rng: (rng.uniform(size=s) > 0.5))
    fa, fb, fo = fac.random_field(g), fac.random_field(g), fac.field(g)
    nb = 4 * n**3
    ops = [
        ("Add (image)", lambda: ca.Add(out, a, b), 3 * nb),
        ("MulC_I (image)", lambda: ca.MulC_I(out, 1.0001), 2 * nb),
        ("Add_MulC a+b*c", lambda: ca.Add_MulC(out, a, b, 0.5), 3 * nb),
        ("Add masked", lambda: ca.Add(out, a, b, mask), 5 * nb),  # reads a, b, mask and the old out
        ("Sqrt", lambda: ca.Sqrt(out, c), 2 * nb),
        ("Exp", lambda: ca.Exp(out, a), 2 * nb),
        ("Add (field)", lambda: ca.Add(fo, fa, fb), 9 * nb),
        ("Mul field*image", lambda: ca.Mul(fo, fa, a), 7 * nb),
        ("Magnitude", lambda: ca.Magnitude(out, fa), 4 * nb),
        ("Sum", lambda: ca.Sum(a), nb),
        ("Max", lambda: ca.Max(a), nb),
        ("MinMax", lambda: ca.MinMax(a), nb),
        ("Dot", lambda: ca.Dot(a, b), 2 * nb),
    ]
    t_pyca = {name: (timeit_median(fn, sync=pyca_sync, repeat=30), nbytes) for name, fn, nbytes in ops}
    # The card's copy rate, the reference for "% of bandwidth": a device-to-device copy of a field
    # (3 x 64 MiB read and written).
    t_copy = timeit_median(lambda: ca.Copy(fo, fa), sync=pyca_sync, repeat=30)
    copy_rate = 6 * nb / t_copy
    table.add("Copy (field): copy rate", size + " GPU", t_copy, "-", None, _gbps(6 * nb, t_copy))

    peers = []
    torch = optional_import("torch")
    if torch is not None and torch.cuda.is_available():
        d = "cuda"
        T = {k: torch.rand((n, n, n), device=d) for k in ("a", "b", "o")}
        T["c"] = torch.rand((n, n, n), device=d) + 0.5
        T["m"] = torch.rand((n, n, n), device=d) > 0.5
        TF = {k: torch.rand((3, n, n, n), device=d) for k in ("a", "b", "o")}
        peers.append(("torch", torch.cuda.synchronize, {
            "Add (image)": lambda: torch.add(T["a"], T["b"], out=T["o"]),
            "MulC_I (image)": lambda: T["o"].mul_(1.0001),
            "Add_MulC a+b*c": lambda: torch.add(T["a"], T["b"], alpha=0.5, out=T["o"]),
            "Add masked": lambda: torch.where(T["m"], T["a"] + T["b"], T["o"], out=T["o"]),
            "Sqrt": lambda: torch.sqrt(T["c"], out=T["o"]),
            "Exp": lambda: torch.exp(T["a"], out=T["o"]),
            "Add (field)": lambda: torch.add(TF["a"], TF["b"], out=TF["o"]),
            "Mul field*image": lambda: torch.mul(TF["a"], T["a"], out=TF["o"]),
            "Magnitude": lambda: torch.linalg.vector_norm(TF["a"], dim=0, out=T["o"]),
            "Sum": lambda: T["a"].sum(dtype=torch.float64).item(),
            "Max": lambda: T["a"].max().item(),
            # both values on the host, as ca.MinMax returns them (one copy back)
            "MinMax": lambda: torch.stack(torch.aminmax(T["a"])).tolist(),
            "Dot": lambda: torch.dot(T["a"].view(-1), T["b"].view(-1)).item(),
        }))
    cp = optional_import("cupy")
    if cp is not None:
        try:
            C = {k: cp.random.rand(n, n, n, dtype=cp.float32) for k in ("a", "b", "o")}
            C["c"] = C["a"] + 0.5
            C["m"] = cp.random.rand(n, n, n) > 0.5
            CF = {k: cp.random.rand(3, n, n, n, dtype=cp.float32) for k in ("a", "b", "o")}
            sync = cp.cuda.Device().synchronize
            peers.append(("cupy", sync, {
                "Add (image)": lambda: cp.add(C["a"], C["b"], out=C["o"]),
                "MulC_I (image)": lambda: cp.multiply(C["o"], 1.0001, out=C["o"]),
                "Sqrt": lambda: cp.sqrt(C["c"], out=C["o"]),
                "Exp": lambda: cp.exp(C["a"], out=C["o"]),
                "Add (field)": lambda: cp.add(CF["a"], CF["b"], out=CF["o"]),
                "Mul field*image": lambda: cp.multiply(CF["a"], C["a"], out=CF["o"]),
                "Sum": lambda: float(C["a"].sum(dtype=cp.float64)),
                "Max": lambda: float(C["a"].max()),
                "Dot": lambda: float(cp.dot(C["a"].ravel(), C["b"].ravel())),
            }))
        except Exception as e:  # noqa: BLE001 - a broken peer is a missing one
            table.skip("cupy", size, "cupy", f"cupy unusable: {e}")
    if not peers:
        for name, (tp, nbytes) in t_pyca.items():
            table.add(name, size, tp, "-", None, _gbps(nbytes, tp, copy_rate) + " (no torch/cupy)")
        return
    for name, (tp, nbytes) in t_pyca.items():
        for peer, sync, fns in peers:
            if name in fns:
                tq = timeit_median(fns[name], sync=sync, repeat=30)
                table.add(name, size + " GPU", tp, peer, tq, _gbps(nbytes, tp, copy_rate))


def run(table: Table, gpu: bool = False):
    import pyca as ca

    _cpu(table, ca)
    if gpu:
        _gpu(table, ca)


if __name__ == "__main__":
    main_for(run, "arithmetic and reductions: pyca vs NumPy (CPU) / PyTorch, CuPy (GPU)")
