"""bench_brain.py --pairs real: two different people's brains (Colin27 and the MNI152 2009a template,
benchmarks/_brains.py), both directions, pyca beside its peers in one process.

Two inputs per direction:
- the prepared pair (one grid, both normalised to [0, 1] and masked): pyca's methods through their
  Python API, ANTs antsRegistrationSyN[s] (antspyx, CPU), FireANTs SyN and greedy (GPU);
- the files as shipped (other grids, fields of view, intensity scales 0-255 and 0-133; --las: Colin27
  stored LAS) through the CLI: `pyca register --method M --fixed F --moving M --moving-labels L`.

Scores, on the fixed image's grid: Dice of the moving k-means labels warped by each tool (nearest
neighbour) against the fixed ones, per tissue (CSF, GM, WM) and their mean; the 95th percentile
Hausdorff distance (mm, both surfaces) per tissue; with MNI fixed, the soft Dice of the warped GM / WM
labels against nilearn's shipped probability maps (2 sum(p l) / (sum p + sum l)); the Jacobian
determinant of the whole map (fixed world -> moving world) over the fixed brain: min, max, the
fraction <= 0 and the standard deviation of log det (over det > 0); registration time; peak GPU
memory (FireANTs: torch's allocator; pyca: its CUDA pool's high-water mark in the process,
pyca.device_memory_peak(), which covers earlier runs of the process too).

    python benchmarks/bench_brain.py --pairs real --resolution 2 --peers ants          # CPU, 2 mm
    python benchmarks/bench_brain.py --pairs real --resolution 1 --device gpu --peers fireants,fireants-greedy
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time

import numpy as np

import _brains
from _harness import machine_line


def dice(a, b, label):
    x, y = a == label, b == label
    s = x.sum() + y.sum()
    return 2.0 * np.logical_and(x, y).sum() / s if s else float("nan")


def hd95(a, b, spacing):
    """95th percentile of the distances (mm) from each surface voxel of a to b's surface and back."""
    from scipy import ndimage

    if not a.any() or not b.any():
        return float("nan")
    box = np.argwhere(a | b)  # the distances within the two sets' bounding box (and a voxel around)
    lo, hi = np.maximum(box.min(0) - 1, 0), box.max(0) + 2
    a, b = a[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]], b[lo[0]:hi[0], lo[1]:hi[1], lo[2]:hi[2]]
    sa = a & ~ndimage.binary_erosion(a)
    sb = b & ~ndimage.binary_erosion(b)
    da = ndimage.distance_transform_edt(~sb, sampling=spacing)[sa]
    db = ndimage.distance_transform_edt(~sa, sampling=spacing)[sb]
    return float(np.percentile(np.concatenate([da, db]), 95))


def jacobian(map_vox, Wf, Wm, brain):
    g = [np.gradient(map_vox[..., c], axis=(0, 1, 2)) for c in range(3)]
    J = np.stack([np.stack(g[c], -1) for c in range(3)], -2)
    det = (np.linalg.det(J) * np.linalg.det(Wm[:3, :3]) / np.linalg.det(Wf[:3, :3]))[brain]
    pos = det[det > 0]
    return {"jac_min": float(det.min()), "jac_max": float(det.max()), "jac_nonpos": float(np.mean(det <= 0)),
            "logjac_std": float(np.log(pos).std()) if pos.size else float("nan")}


def score(tool, map_vox, labels, seconds, ref, peak=None):
    """ref: fixed_labels, fixed_brain, fixed_affine, moving_affine, prob (MNI fixed) or absent."""
    fl = ref["fixed_labels"]
    sp = np.sqrt((ref["fixed_affine"][:3, :3] ** 2).sum(0))
    row = {"tool": tool, "seconds": seconds, "peak_gpu_mib": None if peak is None else peak / 2 ** 20}
    for k, name in ((1, "csf"), (2, "gm"), (3, "wm")):
        row[f"dice_{name}"] = dice(labels, fl, k)
        row[f"hd95_{name}"] = hd95(labels == k, fl == k, sp) if ref.get("hd95", True) else float("nan")
    row["dice_mean"] = float(np.mean([row["dice_csf"], row["dice_gm"], row["dice_wm"]]))
    if ref.get("prob") is not None:
        for k, name in ((2, "gm"), (3, "wm")):
            p, l = ref["prob"][name], (labels == k)
            row[f"soft_{name}"] = float(2 * (p * l).sum() / (p.sum() + l.sum()))
    if map_vox is not None:
        row.update(jacobian(map_vox, ref["fixed_affine"], ref["moving_affine"], ref["fixed_brain"]))
    return row


class _GpuPeak:
    """Peak of the device's used memory while the block runs, above its level at the start (torch's
    mem_get_info polled every 2 ms; None without torch or a GPU)."""

    def __enter__(self):
        self.peak = None
        try:
            import torch

            self._info = torch.cuda.mem_get_info if torch.cuda.is_available() else None
        except ImportError:
            self._info = None
        if self._info is None:
            return self
        free, total = self._info()
        self._base, self._used, self._stop = total - free, 0, False

        def poll():
            while not self._stop:
                f, t = self._info()
                self._used = max(self._used, t - f)
                time.sleep(0.002)

        self._t = threading.Thread(target=poll, daemon=True)
        self._t.start()
        return self

    def __exit__(self, *exc):
        if self._info is not None:
            self._stop = True
            self._t.join()
            self.peak = max(0, self._used - self._base)
        return False


def run_pyca(method, pair, device, params):
    import pyca as ca
    from bench_brain import image
    from pyca.apps import lddmm, syn

    mod = syn if method == "syn" else lddmm
    fixed, moving = image(pair["fixed"], pair["fixed_affine"]), image(pair["moving"], pair["moving_affine"])
    labels = image(pair["moving_labels"].astype(np.float32), pair["moving_affine"])
    mod.register(fixed, moving, device=device, scales=(2, 1), iterations=(2, 1), affine="none")  # warm-up
    with _GpuPeak() as gp:
        t0 = time.perf_counter()
        res = mod.register(fixed, moving, moving_labels=labels, device=device, **params)
        ca.synchronize()
        sec = time.perf_counter() - t0
    peak = gp.peak
    if device == "gpu" and hasattr(ca, "device_memory_peak"):  # pyca's pool: polling sees its cached blocks
        peak = int(ca.device_memory_peak())  # (the process's high-water mark: this run or an earlier one)
    return res.full_map.numpy().astype(float), res.labels.numpy(), sec, peak, res


def run_cli(method, shipped, device, params, out):
    """The files as shipped through the CLI; returns (map, labels, registration seconds, summary)."""
    import nibabel as nib
    from pyca import cli

    cmd = "register" if method == "syn" else "lddmm"
    argv = [cmd, "--fixed", shipped["fixed_file"], "--moving", shipped["moving_file"], "--moving-labels",
            shipped["labels_file"], "--out", out, "--overwrite", "--device", device, "--no-report", "--no-progress",
            "-q", "--no-compress"]
    if method == "syn" and cmd == "register":
        argv += ["--method", "syn"]
    for k, v in params.items():
        if v is True:  # a flag (allow_folds)
            argv += [f"--{k.replace('_', '-')}"]
            continue
        argv += [f"--{k.replace('_', '-')}", ",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v)]
    code = cli.main(argv)
    if code != 0:
        raise RuntimeError(f"pyca {' '.join(argv)} exited {code}")
    with open(os.path.join(out, "summary.json")) as fh:
        summary = json.load(fh)
    lab = np.asarray(nib.load(os.path.join(out, "labels.nii")).dataobj)
    full = np.asarray(nib.load(os.path.join(out, "phiinv_full.nii")).dataobj, float).reshape(lab.shape + (3,))
    return full, lab, summary["timings"]["registration_s"], summary


def _print(direction, r):
    soft = f" soft GM {r['soft_gm']:.3f} WM {r['soft_wm']:.3f}" if "soft_gm" in r else ""
    jac = (f" det J [{r['jac_min']:.3f}, {r['jac_max']:.2f}] <=0 {100 * r['jac_nonpos']:.4f}% sd log "
           f"{r['logjac_std']:.3f}" if "jac_min" in r else "")
    mem = f" GPU {r['peak_gpu_mib']:.0f} MiB" if r.get("peak_gpu_mib") is not None else ""
    print(f"{direction:<28s} {r['tool']:<24s} Dice {r['dice_csf']:.3f} {r['dice_gm']:.3f} {r['dice_wm']:.3f} mean "
          f"{r['dice_mean']:.4f} HD95 {r['hd95_csf']:.1f} {r['hd95_gm']:.1f} {r['hd95_wm']:.1f} mm"
          f"{soft} {r['seconds']:7.2f} s{jac}{mem}", flush=True)


def _params(a):
    """[(method, parameters, label)]: --params is one dict of parameters for every method, a dict
    method -> parameters (null: that method is not run for this entry), or a list of either (a sweep: one
    row per entry and method)."""
    p = json.loads(a.params)
    methods = [m for m in a.methods.split(",") if m]
    sets = p if isinstance(p, list) else [p]
    out = []
    for k, q in enumerate(sets):
        per = {m: q.get(m, {}) for m in methods} if q and set(q) <= set(methods) else {m: q for m in methods}
        for m in methods:
            if per[m] is not None:
                out.append((m, per[m], m if len(sets) == 1 else f"{m}-{k}"))
    return out


def main(a):
    import pyca as ca
    from bench_brain import ANTS_KINDS, identity_map, run_ants, run_fireants

    why = _brains.available()
    if why:
        print(f"bench_brain --pairs real: {why}")
        return 0
    print(machine_line())
    params = _params(a)
    peers = [p for p in a.peers.split(",") if p and p != "none"]
    rows = []
    for moving in [m for m in a.moving.split(",") if m]:
        if a.raw != "only":
            pair = _brains.prepared(moving, a.resolution)
            d = f"{pair['name']} {a.resolution} mm"
            ref = {k: pair.get(k) for k in ("fixed_labels", "fixed_brain", "fixed_affine", "moving_affine", "prob")}
            ref["hd95"] = not getattr(a, "no_hd95", False)
            m0 = identity_map(pair)
            from bench_brain import nn_map

            rows.append({"pair": d, **score("none (identity)", None, nn_map(pair, m0), 0.0, ref)})
            _print(d, rows[-1])
            for peer in peers:
                try:
                    if peer in ANTS_KINDS:
                        out = run_ants(pair, a.threads, ANTS_KINDS[peer])
                        out = out and (*out, None)
                    elif peer in ("fireants", "fireants-greedy"):
                        out = run_fireants(pair, "greedy" if peer.endswith("greedy") else "syn")
                    else:
                        out = None
                except Exception as e:  # noqa: BLE001 - a peer that breaks is reported, not fatal
                    print(f"  {peer}: failed: {type(e).__name__}: {e}")
                    continue
                if out is None:
                    print(f"  {peer}: not installed or no GPU; skipped")
                    continue
                rows.append({"pair": d, **score(peer, out[0], out[1], out[2], ref, out[3])})
                _print(d, rows[-1])
            for method, prm, label in params:
                mvox, lab, sec, peak, res = run_pyca(method, pair, a.device, prm)
                r = score(f"pyca {label} ({a.device})", mvox, lab, sec, ref, peak)
                if hasattr(res, "inverse_consistency"):
                    r["ic_mean"], r["ic_p99"] = res.inverse_consistency
                r["stops"] = [f"{s['stop'].split(' (')[0]} @{s['iterations']}" for s in res.timings["scales"]]
                r["grid_det_min"], r["grid_det_max"] = (float(x) for x in ca.MinMax(res.jacobian))
                r["verdict"] = ",".join(q["code"] for q in res.quality["problems"]) or "ok"
                rows.append({"pair": d, "params": prm, **r})
                _print(d, rows[-1])
                print(f"{'':<28s} det D phiinv over the whole grid [{r['grid_det_min']:.3f}, {r['grid_det_max']:.2f}]"
                      f", verdict {r['verdict']}; scales {r['stops']}", flush=True)
                if "ic_mean" in r:
                    print(f"{'':<28s} inverse consistency |phi o phiinv - id| mean {r['ic_mean']:.4f} p99 "
                          f"{r['ic_p99']:.4f} voxels; scales {r['stops']}", flush=True)
        if a.raw != "no":
            with tempfile.TemporaryDirectory() as tmp:
                shipped = _brains.as_shipped(moving, a.resolution, tmp, las=getattr(a, "las", False))
                d = f"{shipped['name']} {a.resolution} mm"
                for method, prm, label in params:
                    try:
                        full, lab, sec, summ = run_cli(method, shipped, a.device, prm, os.path.join(tmp, "out"))
                    except Exception as e:  # noqa: BLE001
                        print(f"  pyca {label} on the files as shipped: failed: {e}")
                        continue
                    r = score(f"pyca {label} CLI ({a.device})", full, lab, sec, shipped)
                    if "inverse_consistency_voxels" in summ:
                        r["ic_mean"] = summ["inverse_consistency_voxels"]["mean"]
                        r["ic_p99"] = summ["inverse_consistency_voxels"]["p99"]
                    rows.append({"pair": d, "params": prm, **r})
                    _print(d, rows[-1])
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"machine": machine_line(), "resolution": a.resolution, "params": [list(x) for x in params],
                       "rows": rows}, fh,
                      indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(0)
