"""Multi-modal registration of two real brains (issue 37): a T2-like or FLAIR-like contrast of one
brain (pyca.apps.data.other_contrast of its T1: a non-monotonic map of the intensity, a smooth
multiplicative bias field, noise) registered onto the other brain's T1, beside the same pair T1 onto
T1, with pyca (--methods: `pyca lddmm --metric mi` and the symmetric method, `pyca register --metric mi`;
T1-T1 with each method's defaults) next to ANTs (SyN, Mattes MI for the affine and SyN stages, CPU) and
FireANTs (its MI, GPU), all in one process, same inputs:

- the brains: Colin27 (Debian's mricron-data, ch2bet.nii.gz) and the MNI152 2009a T1 template
  (nilearn's wheel), both directions (colin->mni: Colin27 moves onto the MNI template);
- one grid: the template's, at --resolution mm (block means); Colin27 brought onto it through world
  coordinates (trilinear), both scaled to [0, 1] by their 99.5th percentile inside the brain;
- tissue labels, one method for both brains: a 3-class k-means of each T1 inside its brain (1 CSF,
  2 grey, 3 white matter); Dice of the moving labels warped by each tool's map (nearest neighbour)
  against the fixed labels, mean over the three classes; the contrast image is made from the moving
  T1, so its labels are the T1's;
- det J min of the tool's map (pyca: det D phiinv; ANTs: its Jacobian image), time of the registration
  (wall clock, and the process's CPU time summed over its threads: on a shared machine the fairer
  comparison of two CPU tools run with the same --threads).

    python benchmarks/bench_multimodal.py --resolution 2 --peers ants                 # CPU, 2 mm
    python benchmarks/bench_multimodal.py --resolution 1 --device gpu --peers fireants  # GPU, 1 mm
    python benchmarks/bench_multimodal.py --methods syn --syn-params '{"bins": 32}'     # one method, a setting

Prints one row per run and, with --json FILE, writes them.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _harness import machine_line, optional_import  # noqa: E402

COLIN = "/usr/share/mricron/templates/ch2bet.nii.gz"


def kmeans_labels(a, brain, iterations=50):
    """1 CSF, 2 grey, 3 white matter: 3-class k-means of the intensities inside `brain`, started at the
    25th, 60th and 90th percentiles (pyca.apps.data.tissue_centres), then the nearest centre."""
    from pyca.apps import data

    c = data.tissue_centres(a, brain, iterations)
    lab = np.zeros(a.shape, np.uint8)
    lab[brain] = 1 + np.argmin(np.abs(a[brain][:, None] - c[None, :]), axis=1)
    return lab, c


def brains(resolution):
    """{'mni': (t1, labels, centres), 'colin': (...)}, affine: both on the template's grid at `resolution`."""
    import nibabel as nib
    from scipy import ndimage

    from pyca.apps import data

    mni, _, aff = data.mni_template(resolution)
    path = os.environ.get("PYCA_COLIN", COLIN)
    img = nib.load(path)
    col = np.asarray(img.dataobj, np.float32)
    if resolution > 1:
        col = ndimage.gaussian_filter(col, 0.42 * resolution)
    idx = np.stack(np.meshgrid(*[np.arange(n, dtype=float) for n in mni.shape], indexing="ij"), -1)
    world = idx @ aff[:3, :3].T + aff[:3, 3]
    vox = (world - img.affine[:3, 3]) @ np.linalg.inv(img.affine[:3, :3]).T
    col = ndimage.map_coordinates(col, [vox[..., k] for k in range(3)], order=1, mode="constant", cval=0.0)
    out = {}
    for name, a in (("mni", mni), ("colin", col)):
        brain = a > (0.2 * a.max() if name == "mni" else 0.02 * a.max())
        a = np.clip(a / np.percentile(a[brain], 99.5), 0, None).astype(np.float32)
        lab, c = kmeans_labels(a, brain)
        out[name] = (np.asfortranarray(a * brain), np.asfortranarray(lab), c)
    return out, aff


def dice_class(a, b, k):
    return float(2 * np.sum((a == k) & (b == k)) / max(np.sum(a == k) + np.sum(b == k), 1))


def dice(a, b):
    return float(np.mean([dice_class(a, b, k) for k in (1, 2, 3)]))


def run_pyca(F, M, L, aff, device, params, method="lddmm"):
    import pyca as ca
    from pyca.apps import lddmm, syn

    sp = np.linalg.norm(aff[:3, :3], axis=0)
    g = ca.GridInfo(ca.Vec3Di(*F.shape), ca.Vec3Df(*sp), ca.Vec3Df(*aff[:3, 3]))

    def im(a):
        return ca.Image3D.from_array(np.asfortranarray(a, np.float32), g)

    mod = syn if method == "syn" else lddmm
    mod.register(im(F), im(M), device=device, scales=(2, 1), iterations=(2, 1), affine="none",
                 **{k: v for k, v in params.items() if k == "metric"})  # warm-up
    t0, c0 = time.perf_counter(), time.process_time()
    r = mod.register(im(F), im(M), moving_labels=im(L), device=device, **params)
    ca.synchronize()
    sec, cpu = time.perf_counter() - t0, time.process_time() - c0
    q = r.quality
    return np.round(r.labels.numpy()), sec, cpu, q["jacobian_min"], [p["code"] for p in q["problems"]]


def run_ants(F, M, L, aff, threads, metric):
    ants = optional_import("ants")
    if ants is None:
        return None
    os.environ["ITK_GLOBAL_DEFAULT_NUMBER_OF_THREADS"] = str(threads)
    sp = tuple(float(x) for x in np.linalg.norm(aff[:3, :3], axis=0))

    def im(a):
        return ants.from_numpy(np.ascontiguousarray(a, np.float32), spacing=sp)

    f, m, ml = im(F), im(M), im(L.astype(np.float32))
    t0, c0 = time.perf_counter(), time.process_time()
    reg = ants.registration(f, m, type_of_transform="SyN", aff_metric=metric, syn_metric=metric)
    sec, cpu = time.perf_counter() - t0, time.process_time() - c0
    lab = ants.apply_transforms(f, ml, reg["fwdtransforms"], interpolator="nearestNeighbor").numpy()
    jac = ants.create_jacobian_determinant_image(f, reg["fwdtransforms"][0]).numpy()
    return np.round(lab), sec, cpu, float(jac.min()), []


def run_fireants(F, M, L, aff, loss):
    """FireANTs: moments, affine (8, 4, 2, 1 x 100, 50, 25, 20) and SyN (4, 2, 1 x 100, 75, 50, Adam lr
    0.5, gradient smoothing 1), all with `loss` ('mi': its global mutual information; 'cc': CC 5)."""
    torch = optional_import("torch")
    if torch is None or not torch.cuda.is_available() or optional_import("fireants") is None:
        return None
    import _sitk_stub

    stub = _sitk_stub.install()
    from fireants.io import BatchedImages, Image
    from fireants.registration.affine import AffineRegistration
    from fireants.registration.moments import MomentsRegistration
    from fireants.registration.syn import SyNRegistration

    sp = tuple(float(x) for x in np.linalg.norm(aff[:3, :3], axis=0))

    def img(a):
        zyx = np.ascontiguousarray(np.transpose(a, (2, 1, 0)), np.float32)
        if stub:
            s = _sitk_stub.Image(zyx, sp, (0.0, 0.0, 0.0), (1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0))
        else:
            import SimpleITK as sitk

            s = sitk.GetImageFromArray(zyx)
            s.SetSpacing(sp)
        return BatchedImages([Image(s, device="cuda")])

    Fi, Mi, Li = img(F), img(M), img(L.astype(np.float32))
    kw = {"cc_kernel_size": 5} if loss == "cc" else {}

    def register(ai, si):
        mom = MomentsRegistration(1.0, Fi, Mi, moments=1)
        mom.optimize()
        a = AffineRegistration([8, 4, 2, 1], ai, Fi, Mi, loss_type=loss, optimizer="Adam", optimizer_lr=3e-4,
                               init_rigid=mom.get_affine_init(), **kw)
        a.optimize()
        r = SyNRegistration(scales=[4, 2, 1], iterations=si, fixed_images=Fi, moving_images=Mi, loss_type=loss,
                            deformation_type="compositive", optimizer="adam", optimizer_lr=0.5, smooth_grad_sigma=1,
                            init_affine=a.get_affine_matrix().detach(), **kw)
        r.optimize()
        return r

    register([2, 2, 2, 2], [2, 2, 2])
    torch.cuda.synchronize()
    t0, c0 = time.perf_counter(), time.process_time()
    reg = register([100, 50, 25, 20], [100, 75, 50])
    torch.cuda.synchronize()
    sec, cpu = time.perf_counter() - t0, time.process_time() - c0
    with torch.no_grad():
        grid = reg.get_warped_coordinates(Fi, Mi)
        lab = torch.nn.functional.grid_sample(Li(), grid, mode="nearest", align_corners=True)
    return np.round(lab[0, 0].cpu().numpy().transpose(2, 1, 0)), sec, cpu, float("nan"), []


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resolution", type=int, default=2)
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--directions", default="colin->mni,mni->colin")
    ap.add_argument("--contrasts", default="t1,t2,flair", help="of the moving brain: t1 (the reference), t2, flair")
    ap.add_argument("--peers", default="ants", help="comma-separated: ants (SyN, Mattes MI), fireants (GPU, MI); "
                    "none")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--methods", default="lddmm,syn", help="pyca's methods, comma-separated: lddmm (pyca lddmm), "
                    "syn (pyca register, the symmetric method)")
    ap.add_argument("--params", default="{}", help="JSON dict of lddmm parameters for pyca's multi-modal runs "
                    "(metric mi unless given)")
    ap.add_argument("--syn-params", default="{}", help="JSON dict of syn parameters for its multi-modal runs "
                    "(metric mi unless given)")
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args(argv)
    from pyca.apps import data

    print(machine_line(), flush=True)
    imgs, aff = brains(a.resolution)
    peers = [p for p in a.peers.split(",") if p and p != "none"]
    rows = []
    for direction in a.directions.split(","):
        mv, fx = direction.split("->")
        Mt1, Ml, Mc = imgs[mv]
        F, Fl, _ = imgs[fx]
        print(f"{direction} at {a.resolution} mm: no registration, Dice {dice(Ml, Fl):.4f}", flush=True)
        for contrast in a.contrasts.split(","):
            M = Mt1 if contrast == "t1" else data.other_contrast(Mt1, contrast, seed=1, centres=Mc,
                                                                  spacing=(a.resolution,) * 3)
            runs = []
            for method in [m for m in a.methods.split(",") if m]:
                given = json.loads(a.syn_params if method == "syn" else a.params)
                prm = {} if contrast == "t1" else {"metric": "mi", **given}
                runs.append((f"pyca {method}", prm,
                             lambda method=method, prm=prm: run_pyca(F, M, Ml, aff, a.device, prm, method)))
            metric = "mattes"
            if "ants" in peers and contrast != "t1":  # (the T1-T1 reference is pyca's own)
                runs.append((f"ants SyN ({metric})", None, lambda: run_ants(F, M, Ml, aff, a.threads, metric)))
            if "fireants" in peers and contrast != "t1":
                loss = "mi"
                runs.append((f"fireants SyN ({loss})", None, lambda: run_fireants(F, M, Ml, aff, loss)))
            for tool, params, fn in runs:
                try:
                    out = fn()
                except Exception as e:  # noqa: BLE001 - a peer's failure is a row, not the end of the run
                    print(f"  {contrast:6s} {tool:22s} failed: {type(e).__name__}: {e}", flush=True)
                    continue
                if out is None:
                    continue
                lab, sec, cpu, jmin, problems = out
                row = {"direction": direction, "resolution": a.resolution, "contrast": contrast, "tool": tool,
                       "params": params, "dice": dice(lab, Fl),
                       "dice_per_class": [dice_class(lab, Fl, k) for k in (1, 2, 3)],
                       "seconds": sec, "cpu_seconds": cpu, "jacobian_min": jmin, "problems": problems}
                rows.append(row)
                print(f"  {contrast:6s} {tool:22s} Dice {row['dice']:.4f} (CSF/GM/WM "
                      f"{'/'.join(f'{d:.3f}' for d in row['dice_per_class'])}) det J min {jmin:.3g} "
                      f"{sec:7.1f} s (CPU time {cpu:6.1f} s) {'problems: ' + ','.join(problems) if problems else ''}", flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
