"""Brain MRI registration accuracy and time: pyca lddmm next to ANTs (antspyx, CPU) and FireANTs (GPU)
on synthetic T1 pairs with known maps (pyca.apps.data.brain_pair: the MNI152 2009c template that
nilearn ships, pulled through a random diffeomorphic warp, a rotation and a translation by a cubic
B-spline, or trilinearly with --interp linear (the generator of the rows recorded before main 4e2bc1c:
docs/design/registration.md, 'The synthetic known-warp pairs'), its intensities changed), all in one
process, same inputs, same metrics:

- Dice of grey / white matter: the moving labels warped into the fixed space by each tool's map
  (nearest neighbour), against the fixed labels;
- time of the registration (inputs in memory; file I/O of the peers included where they need it);
- the Jacobian determinant of the whole map (fixed world -> moving world, affine included): max, and
  the fraction <= 0 (folds), over the brain (fixed labels > 0);
- target registration error (TRE): for 3000 brain voxels y of the moving grid, the known fixed point
  psi(y), and the distance in mm between y and the tool's map evaluated at psi(y);
- for a generated pair, the same for the exact map psi^-1 (data.brain_pair_true_map): the Dice a
  perfect tool reaches through nearest-neighbour labels.

    python benchmarks/bench_brain.py --pairs real --resolution 2 --peers ants       # two different brains
                                                                                    # (benchmarks/_real.py)
    python benchmarks/bench_brain.py --resolution 2 --pairs 2 --peers ants          # CPU, 2 mm
    python benchmarks/bench_brain.py --resolution 2 --pairs 3 --peers none --methods lddmm,syn \
        --interp cubic,linear                                                       # both methods, both generators
    python benchmarks/bench_brain.py --resolution 1 --device gpu --peers fireants   # GPU, 1 mm

    # pyca's defaults beside its LNCC setting (docs/lddmm.md, "Defaults for T1 brain MRI"):
    python benchmarks/bench_brain.py --resolution 1 --device gpu --peers fireants --params '[{}, {"metric":
        "lncc", "normalize": "percentiles", "bias_sigma": 0, "fixed_blur": 0, "gamma": 0.04, "time_steps": 8,
        "tol": 0.01, "iterations": [100, 60, 30]}]'

Needs nilearn (the template); antspyx and fireants are used when installed. Prints a table and,
with --json FILE, writes the numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import machine_line, optional_import  # noqa: E402


def dice(a, b, label):
    x, y = a == label, b == label
    s = x.sum() + y.sum()
    return 2.0 * np.logical_and(x, y).sum() / s if s else float("nan")


def jac_stats(map_vox, Wf, Wm, brain):
    """map_vox: (X, Y, Z, 3) moving voxel coordinates of every fixed voxel. det of the world map."""
    g = [np.gradient(map_vox[..., c], axis=(0, 1, 2)) for c in range(3)]
    J = np.stack([np.stack(g[c], -1) for c in range(3)], -2)  # [..., c, d] = d map_c / d x_d
    # world -> world: the signed determinants of both affines (a LAS image's flip is not a fold)
    det = np.linalg.det(J) * np.linalg.det(Wm[:3, :3]) / np.linalg.det(Wf[:3, :3])
    d = det[brain]
    return float(d.max()), float(d.min()), float(np.mean(d <= 0))


def tre(map_vox, pair):
    """Mean and 90th percentile TRE (mm) of a map (fixed voxel -> moving voxel coordinates) at the
    pair's landmarks (moving voxels y with their known fixed world points psi(y))."""
    from scipy import ndimage

    Wf, Wm = pair["fixed_affine"], pair["moving_affine"]
    ys, psi = pair["landmarks"].astype(float), pair["landmarks_fixed_world"]
    xf = (psi - Wf[:3, 3]) @ np.linalg.inv(Wf[:3, :3]).T
    pred = np.stack([ndimage.map_coordinates(map_vox[..., c], xf.T, order=1, mode="nearest") for c in range(3)], -1)
    err = np.linalg.norm((pred - ys) @ Wm[:3, :3].T, axis=1)
    return float(err.mean()), float(np.percentile(err, 90))


def evaluate(name, map_vox, labels, seconds, pair, brain):
    jmax, jmin, folds = jac_stats(map_vox, pair["fixed_affine"], pair["moving_affine"], brain)
    t_mean, t90 = tre(map_vox, pair)
    return {"tool": name, "dice_gm": dice(labels, pair["fixed_labels"], 1), "dice_wm": dice(labels, pair["fixed_labels"], 2),
            "seconds": seconds, "jac_max": jmax, "jac_min": jmin, "folds": folds, "tre_mean": t_mean, "tre_p90": t90}


def identity_map(pair):
    shape = pair["fixed"].shape
    idx = np.stack(np.meshgrid(*[np.arange(n, dtype=float) for n in shape], indexing="ij"), -1)
    M = np.linalg.inv(pair["moving_affine"]) @ pair["fixed_affine"]
    return idx @ M[:3, :3].T + M[:3, 3]


def image(a, aff):
    """A pyca Image3D of array a with the whole voxel -> world affine aff, as pyca.io reads it from a file."""
    import pyca as ca
    from pyca.io import split_affine

    sp, org, direction = split_affine(aff, "bench_brain", "image")
    return ca.Image3D.from_array(np.asfortranarray(a, np.float32),
                                 ca.GridInfo(a.shape, tuple(sp), tuple(org), direction=direction))


def run_pyca(pair, device, params):
    import pyca as ca
    from pyca.apps import lddmm

    fixed, moving = image(pair["fixed"], pair["fixed_affine"]), image(pair["moving"], pair["moving_affine"])
    labels = image(pair["moving_labels"].astype(np.float32), pair["moving_affine"])
    lddmm.register(fixed, moving, device=device, scales=(2, 1), iterations=(2, 1), affine="none")  # warm-up
    t0 = time.perf_counter()
    res = lddmm.register(fixed, moving, moving_labels=labels, device=device, **params)
    ca.synchronize()
    sec = time.perf_counter() - t0
    return res.full_map.numpy().astype(float), res.labels.numpy(), sec, res


def run_ants(pair, threads, kind="s"):
    """antspyx's antsRegistrationSyN[kind]: 's' rigid, affine and SyN; 'so' SyN only (from the
    identity, as the issue names it)."""
    ants = optional_import("ants")
    if ants is None:
        return None
    os.environ["ITK_GLOBAL_DEFAULT_NUMBER_OF_THREADS"] = str(threads)

    def img(a, aff):
        sp = np.sqrt((aff[:3, :3] ** 2).sum(0))
        D = aff[:3, :3] / sp
        L = np.diag([-1.0, -1.0, 1.0])  # ITK's physical space is LPS
        return ants.from_numpy(np.ascontiguousarray(a, np.float32), origin=tuple(L @ aff[:3, 3]),
                               spacing=tuple(sp), direction=L @ D)

    f, m = img(pair["fixed"], pair["fixed_affine"]), img(pair["moving"], pair["moving_affine"])
    ml = img(pair["moving_labels"].astype(np.float32), pair["moving_affine"])
    t0 = time.perf_counter()
    reg = ants.registration(f, m, type_of_transform=f"antsRegistrationSyN[{kind}]")
    sec = time.perf_counter() - t0
    lab = ants.apply_transforms(f, ml, reg["fwdtransforms"], interpolator="nearestNeighbor").numpy()
    with tempfile.TemporaryDirectory() as d:
        comp = ants.apply_transforms(f, m, reg["fwdtransforms"], compose=os.path.join(d, "comp"))
        disp = ants.image_read(comp).numpy()  # (X, Y, Z, 3): displacement in LPS mm
    shape = pair["fixed"].shape
    idx = np.stack(np.meshgrid(*[np.arange(n, dtype=float) for n in shape], indexing="ij"), -1)
    Wf, Wm = pair["fixed_affine"], pair["moving_affine"]
    world = idx @ Wf[:3, :3].T + Wf[:3, 3] + disp * np.array([-1.0, -1.0, 1.0])
    mvox = (world - Wm[:3, 3]) @ np.linalg.inv(Wm[:3, :3]).T
    return mvox, lab, sec


ANTS_KINDS = {"ants": "s", "ants-so": "so"}  # bench peer name -> antsRegistrationSyN's transform


def run_fireants(pair, method="syn"):
    """FireANTs with its published brain-MRI settings (its LPBA40 pairwise script: affine 8,4,2,1 x
    100,50,25,20 with CC 5, then SyN 4,2,1 x 100,75,50, CC 5, Adam lr 0.5, gradient smoothing 1),
    started from the images' centres of mass (its MomentsRegistration), as our pairs are not
    pre-aligned. method 'greedy': its GreedyRegistration (compositive) with the same schedule and
    settings in place of SyNRegistration. Returns (map, labels, seconds, peak GPU bytes)."""
    torch = optional_import("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    import _sitk_stub

    stub = _sitk_stub.install()
    if optional_import("fireants") is None:
        return None
    from fireants.io import BatchedImages, Image
    from fireants.registration.affine import AffineRegistration
    from fireants.registration.moments import MomentsRegistration
    from fireants.registration.greedy import GreedyRegistration
    from fireants.registration.syn import SyNRegistration

    def img(a, aff):
        sp = np.sqrt((aff[:3, :3] ** 2).sum(0))
        L = np.diag([-1.0, -1.0, 1.0])  # ITK's physical space is LPS
        zyx = np.transpose(a, (2, 1, 0)).astype(np.float32)
        direction = tuple(float(x) for x in (L @ (aff[:3, :3] / sp)).ravel())
        origin = tuple(float(x) for x in L @ aff[:3, 3])
        if stub:
            s = _sitk_stub.Image(zyx, tuple(float(x) for x in sp), origin, direction)
        else:
            import SimpleITK as sitk

            s = sitk.GetImageFromArray(np.ascontiguousarray(zyx))
            s.SetSpacing(tuple(float(x) for x in sp))
            s.SetOrigin(origin)
            s.SetDirection(direction)
        return Image(s, device="cuda")

    F = BatchedImages([img(pair["fixed"], pair["fixed_affine"])])
    M = BatchedImages([img(pair["moving"], pair["moving_affine"])])
    ML = BatchedImages([img(pair["moving_labels"].astype(np.float32), pair["moving_affine"])])

    def register(affine_iterations, syn_iterations):
        mom = MomentsRegistration(1.0, F, M, moments=1)
        mom.optimize()
        aff = AffineRegistration([8, 4, 2, 1], affine_iterations, F, M, loss_type="cc", optimizer="Adam",
                                 optimizer_lr=3e-4, cc_kernel_size=5, init_rigid=mom.get_affine_init())
        aff.optimize()
        cls = SyNRegistration if method == "syn" else GreedyRegistration
        reg = cls(scales=[4, 2, 1], iterations=syn_iterations, fixed_images=F, moving_images=M,
                  cc_kernel_size=5, deformation_type="compositive", optimizer="adam", optimizer_lr=0.5,
                  smooth_grad_sigma=1, init_affine=aff.get_affine_matrix().detach())
        reg.optimize()
        return reg

    register([2, 2, 2, 2], [2, 2, 2])  # warm-up (CUDA context, kernels, allocator), as pyca gets one
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    reg = register([100, 50, 25, 20], [100, 75, 50])
    torch.cuda.synchronize()
    sec = time.perf_counter() - t0
    with torch.no_grad():
        grid = reg.get_warped_coordinates(F, M)  # normalised [-1, 1] moving coordinates, (x, y, z) last
        lab = torch.nn.functional.grid_sample(ML(), grid, mode="nearest", align_corners=True)
    lab = lab[0, 0].cpu().numpy().transpose(2, 1, 0)
    g = grid[0].cpu().numpy().transpose(2, 1, 0, 3)  # (X, Y, Z, 3), normalised moving x, y, z
    shape_m = np.array(pair["moving"].shape, float)
    mvox = (g + 1.0) / 2.0 * (shape_m - 1.0)
    return mvox, lab, sec, torch.cuda.max_memory_allocated()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resolution", type=int, default=2)
    ap.add_argument("--pairs", default="1", help="'real': Colin27 and the MNI152 template, both directions "
                    "(benchmarks/_real.py); N: N synthetic known-warp pairs (seeds 0 .. N-1, the regression test)")
    ap.add_argument("--las", action="store_true", help="with --pairs real: the Colin27 file as shipped is stored "
                    "LAS (x reversed, the affine saying so)")
    ap.add_argument("--moving", default="colin,mni", help="with --pairs real: the moving brains, comma-separated "
                    "(colin: Colin27 -> MNI, mni: MNI -> Colin27)")
    ap.add_argument("--methods", help="pyca methods, comma-separated (syn, lddmm; default: syn with --pairs real, "
                    "lddmm with synthetic pairs)")
    ap.add_argument("--interp", default="cubic", help="synthetic pairs: how the generator resamples the template, "
                    "comma-separated for one row set each: cubic (a prefiltered cubic B-spline, the default) or "
                    "linear (trilinear: the generator of the rows recorded before main 4e2bc1c; data.brain_pair)")
    ap.add_argument("--no-exact", action="store_true", help="synthetic pairs: skip the exact map's row (its fixed-point "
                    "inversion takes about a minute per pair at 1 mm on one core)")
    ap.add_argument("--raw", default="yes", choices=["yes", "no", "only"], help="with --pairs real: also (or only) "
                    "the files as shipped through the CLI (pyca register / pyca lddmm)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--peers", default="ants", help="comma-separated: ants (antsRegistrationSyN[s]), ants-so "
                    "(antsRegistrationSyN[so], SyN only), fireants, none")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--params", default="{}", help="JSON dict of parameters for every pyca method, a dict method -> "
                    "parameters (null: not run), or a list of either (one pyca row each)")
    ap.add_argument("--no-hd95", action="store_true", help="with --pairs real: skip the Hausdorff distances (the "
                    "slowest score: a sweep of many settings)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--pair-file", help="a saved brain_pair (.npz) instead of generating one (no nilearn needed)")
    a = ap.parse_args(argv)
    if a.methods is None:
        a.methods = "syn" if a.pairs == "real" else "lddmm"
    if a.pairs == "real":
        import _real

        return _real.main(a)
    a.pairs = int(a.pairs)
    from pyca.apps import data

    if data.mni_dir() is None and not a.pair_file:
        print("bench_brain: needs nilearn (the MNI152 template): pip install nilearn")
        return 0
    print(machine_line())
    import _real

    params = json.loads(a.params)
    settings = _real._params(a)  # [(method, parameters, label)]
    peers = [p for p in a.peers.split(",") if p and p != "none"]
    interps = [i for i in a.interp.split(",") if i]
    bad = [i for i in interps if i not in data.BRAIN_PAIR_INTERPS]
    if bad or not interps:
        ap.error(f"--interp: one or more of {', '.join(data.BRAIN_PAIR_INTERPS)}, not {a.interp!r}")
    if a.pair_file:
        interps = ["file"]
    rows = []
    for seed, interp in ((s, i) for s in range(a.pairs) for i in interps):
        pair = load_pair(a.pair_file) if a.pair_file else data.brain_pair(seed=seed, resolution=a.resolution,
                                                                           interp=interp)
        print(f"pair {seed}: the moving image made by {interp} resampling (data.brain_pair)", flush=True)
        brain = pair["fixed_labels"] > 0
        tag = {"pair": seed, "interp": interp}
        rows.append({**tag, **evaluate("none (identity)", identity_map(pair), _nn_identity(pair), 0.0, pair, brain)})
        if not a.pair_file and not a.no_exact:  # the exact map: what a perfect tool reaches through NN labels
            m = data.brain_pair_true_map(seed=seed, resolution=a.resolution)
            rows.append({**tag, **evaluate("exact map", m, nn_map(pair, m), 0.0, pair, brain)})
        for method, prm, label in settings:
            mvox, lab, sec, _, res = _real.run_pyca(method, pair, a.device, prm)
            rows.append({**tag, **evaluate(f"pyca-{label} ({a.device})", mvox, lab, sec, pair, brain),
                         "params": prm,
                         "stops": [s["stop"].split(" (")[0] + f" @{s['iterations']}" for s in res.timings["scales"]]})
        for peer in peers:
            try:
                out = (run_ants(pair, a.threads, ANTS_KINDS[peer]) if peer in ANTS_KINDS else run_fireants(pair)[:3]
                       if peer == "fireants" else None)
            except Exception as e:  # noqa: BLE001 - a peer that breaks is reported, not fatal
                print(f"  {peer}: failed: {type(e).__name__}: {e}")
                continue
            if out is None:
                print(f"  {peer}: not installed or no GPU; skipped")
                continue
            rows.append({**tag, **evaluate(peer, *out, pair, brain)})
        mine = [r for r in rows if r["pair"] == seed and r["interp"] == interp]
        for r in mine:
            print(f"pair {r['pair']} {interp:<6s} {r['tool']:<20s} Dice GM {r['dice_gm']:.4f} WM {r['dice_wm']:.4f}  "
                  f"{r['seconds']:7.2f} s  det max {r['jac_max']:6.2f} min {r['jac_min']:6.3f} folds "
                  f"{100 * r['folds']:.3f}%  TRE {r['tre_mean']:.3f} mm (p90 {r['tre_p90']:.2f})", flush=True)
        for q in (r for r in mine if r["tool"] in peers):  # pyca against each peer, same pair, same run
            for r in (r for r in mine if r["tool"].startswith("pyca-")):
                print(f"pair {seed} {r['tool']} / {q['tool']}: time x{r['seconds'] / q['seconds']:.3f}, "
                      f"Dice GM {r['dice_gm'] - q['dice_gm']:+.3f} WM {r['dice_wm'] - q['dice_wm']:+.3f}, "
                      f"TRE x{r['tre_mean'] / q['tre_mean']:.2f}", flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"machine": machine_line(), "resolution": a.resolution, "params": params, "interp": interps,
                       "rows": rows}, fh,
                      indent=1)
    return 0


def nn_map(pair, m):
    """The moving labels through a map (fixed voxel -> moving voxel), nearest neighbour, 0 outside."""
    from scipy import ndimage

    return ndimage.map_coordinates(pair["moving_labels"], [m[..., k] for k in range(3)], order=0, mode="constant")


def _nn_identity(pair):
    return nn_map(pair, identity_map(pair))


def load_pair(path):
    z = np.load(path)
    return {k: z[k] for k in z.files}


if __name__ == "__main__":
    sys.exit(main())
