"""The tasks of atlas building and batch registration, as they run on Dask workers.

Every task takes paths (or small values) and reads its own inputs through the worker's cache
(pyca.distributed.cached_image), so images do not travel with the graph. A subject's registration
returns a dict that stays on its worker (its contribution to the template, its deformed image);
only the small 'record' part goes to the client. Results are host Image3D objects whatever device
the registration ran on (one device-to-host copy per image).

A subject whose input cannot be used (missing or unreadable file, constant or non-finite image,
mismatched dimension) gives {'ok': False, 'error': ...} instead of raising, so that one bad file
excludes one subject, not the whole reduction. The sums are never done in place: Dask may run a
task again on the same inputs after a worker failure.
"""
from __future__ import annotations

import os
import time

import numpy as np

from .. import core as ca
from .. import io as pio
from .._files import confined, safe_name, write_json
from ..distributed import cached_image
from ..registration import transform_files
from ..registration.inputs import on_grid
from ..registration.transforms import jacobian_det

# Input problems that exclude a subject (anything else is a bug and is reported as such too).
INPUT_ERRORS = (ValueError, TypeError, OSError, ca.CudaError, MemoryError)


def load(src):
    """An input (a path or an Image3D) as a host Image3D."""
    if isinstance(src, ca.Image3D):
        return src if src.memType() != ca.MEM_DEVICE else src.clone(ca.MEM_HOST)
    return cached_image(os.fspath(src))


def _failure(name, e):
    kind = "" if isinstance(e, INPUT_ERRORS) else f"{type(e).__name__}: "
    return {"name": name, "ok": False, "error": f"{kind}{e}".strip()}


def reference_grid(src):
    """The grid of an input (the atlas's template grid is the first usable subject's)."""
    return load(src).grid()


def _host(im):
    return im if im.memType() != ca.MEM_DEVICE else im.clone(ca.MEM_HOST)


def _on_grid(im, grid):
    """A copy of im on the template grid, placed by its own affine (pyca.registration.inputs.on_grid:
    never matched by size alone)."""
    out = on_grid(im, grid, background=ca.BACKGROUND_STRATEGY_ZERO)
    if out is im:
        out = im.clone()
        out.setGrid(grid)
    return out


def subject_file(out_dir, name, what, ext=".nii"):
    """out_dir/subjects/NAME/WHAT.nii: a subject's state after its last registration (what: 'deformed',
    'phiinv', 'jacdet'; iteration 0 writes 'deformed', its input on the template grid). Uncompressed by
    default: gzip of a float field costs far more than the registration on a GPU (docs/atlas.md). The path
    is made by pyca._files.confined: a name that would lead outside out_dir/subjects is refused."""
    return confined(out_dir, "subjects", safe_name(name, "atlas: subject name"), what + ext, what="atlas: subject file")


def initial(src, name, grid, out_dir, ext=".nii"):
    """Iteration 0: the subject on the template grid (world coordinates), weight 1; written as the
    subject's deformed image (the identity deformation)."""
    try:
        im = load(src)
        a = np.asarray(im)
        if not np.all(np.isfinite(a)):
            raise ValueError("the image holds NaN or infinite values")
        if a.size and a.max() <= a.min():
            raise ValueError(f"the image is constant ({a.min()}): nothing to register")
        if (im.grid().size().z == 1) != (grid.size().z == 1):
            raise ValueError(f"a {'2' if im.grid().size().z == 1 else '3'}-D image in a "
                             f"{'2' if grid.size().z == 1 else '3'}-D cohort")
        d = _on_grid(im, grid)
    except INPUT_ERRORS as e:
        return _failure(name, e)
    path = subject_file(out_dir, name, "deformed", ext)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pio.save_image(d, path, description="pyca atlas: iteration 0 (identity)")
    return {"name": name, "ok": True, "num": d, "den": 1.0,
            "record": {"name": name, "ok": True}}


def register(src, template_path, name, out_dir, params, iteration, ext=".nii"):
    """One subject onto the current template (LDDMM: fixed = template, moving = subject). Writes the
    subject's deformed image, phiinv and Jacobian determinant to out_dir/subjects/NAME/ (this
    iteration's state) and returns its contribution jac * deformed, jac to the template's
    Jacobian-weighted average."""
    from . import lddmm

    t0 = time.perf_counter()
    try:
        fixed, moving = cached_image(template_path), load(src)
        res = lddmm.register(fixed, moving, **params)
    except INPUT_ERRORS as e:
        return _failure(name, e)
    t1 = time.perf_counter()
    deformed, jac = _host(res.deformed), _host(_map_jacobian(res.full_map, moving.grid()))
    num = ca.Image3D(deformed.grid(), ca.MEM_HOST)
    np.multiply(np.asarray(deformed), np.asarray(jac), out=np.asarray(num))
    os.makedirs(os.path.dirname(subject_file(out_dir, name, "deformed", ext)), exist_ok=True)
    pio.save_image(deformed, subject_file(out_dir, name, "deformed", ext), description=f"pyca atlas it {iteration}")
    # phiinv: template voxel -> subject voxel, the linear stage included (deformed = subject o phiinv);
    # an H-field (voxel coordinates), so NIfTI intent POINTSET. Beside it the same map as ANTs/ITK files.
    pio.save_field(res.full_map, subject_file(out_dir, name, "phiinv", ext), description="pyca H phiinv",
                   intent="pointset")
    pio.save_image(jac, subject_file(out_dir, name, "jacdet", ext), description="pyca atlas: det D phiinv (world)")
    folder = os.path.dirname(subject_file(out_dir, name, "deformed", ext))
    listing = transform_files.write_registration(res.affine.matrix if res.affine is not None else None,
                                                 res.phiinv, res.phi, folder, ext)
    write_json({"transforms": listing}, os.path.join(folder, "transforms.json"))
    jlo, jhi = (float(v) for v in ca.MinMax(jac))
    rec = {"name": name, "ok": True, "iteration": iteration, "energy": float(res.final_energy),
           "initial_mismatch": res.initial_mismatch, "final_mismatch": res.final_mismatch,
           "jacobian_min": jlo, "jacobian_max": jhi, "registration_s": t1 - t0,
           "task_s": time.perf_counter() - t0, "device": res.device.split(" (")[0], "worker": _worker_name()}
    return {"name": name, "ok": True, "num": num, "den": jac, "record": rec}


def _map_jacobian(full_map, moving_grid):
    """det D of the map a subject's phiinv describes (template voxel -> subject voxel, the linear stage
    included) in world units: the volume ratio, its sign that of the map in the world (a subject stored
    in another orientation is no fold). det D full_map (voxels) x det(subject vox2world) / det(template's)."""
    from .affine import vox2world

    out = ca.Image3D(full_map.grid(), full_map.memType())
    jacobian_det(out, full_map)
    ratio = np.linalg.det(vox2world(moving_grid)[:3, :3]) / np.linalg.det(vox2world(full_map.grid())[:3, :3])
    if ratio != 1.0:
        ca.MulC_I(out, float(ratio))
    return out




def _worker_name():
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return "client"


def record(result):
    """The small part of a subject's result that goes to the client."""
    return result["record"] if result["ok"] else {"name": result["name"], "ok": False, "error": result["error"]}


def _parts(x):
    if x.get("ok") is False or x.get("num") is None:
        return None
    return x["num"], x["den"], x.get("count", 1)


def combine(a, b):
    """The sum of two contributions (subject results or partial sums); failed subjects add nothing."""
    pa, pb = _parts(a), _parts(b)
    if pa is None or pb is None:
        p = pa or pb
        return {"num": p[0], "den": p[1], "count": p[2]} if p else {"num": None, "den": None, "count": 0}
    num = pa[0].clone()
    np.add(np.asarray(num), np.asarray(pb[0]), out=np.asarray(num))
    da, db = pa[1], pb[1]
    if isinstance(da, float) and isinstance(db, float):
        den = da + db
    else:
        den = ca.Image3D(num.grid(), ca.MEM_HOST)
        np.add(da if isinstance(da, float) else np.asarray(da), db if isinstance(db, float) else np.asarray(db),
               out=np.asarray(den))
    return {"num": num, "den": den, "count": pa[2] + pb[2]}


def finish(total):
    """The template: sum(jac * deformed) / sum(jac) (or the plain mean at iteration 0)."""
    if _parts(total) is None:
        raise ValueError("no subject could be used")
    out = total["num"].clone()
    a, den = np.asarray(out), total["den"]
    if isinstance(den, float):
        a /= den
    else:
        d = np.asarray(den)
        np.divide(a, d, out=a, where=d > 1e-6)
        a[d <= 1e-6] = 0.0
    return out


def spread(deformed, template_path):
    """Mean squared difference (per voxel) between the template and a subject's deformed image (files)."""
    t = np.asarray(cached_image(template_path))
    return float(np.mean((t.astype(np.float64) - np.asarray(pio.load_image(deformed))) ** 2))


def register_one(template_path, src, name, out_dir, params, report):
    """register-batch: one subject onto the template, written as `pyca lddmm` writes its outputs."""
    from . import lddmm

    t0 = time.perf_counter()
    try:
        fixed = cached_image(template_path)
        moving = load(src)
        res = lddmm.register(fixed, moving, **params)
        folder = os.path.join(out_dir, name)
        paths = lddmm.write_outputs(res, fixed, moving, folder, report=report,
                                    inputs={"fixed": template_path, "moving": src if isinstance(src, str) else None},
                                    command=["(a task of pyca register-batch: its command is in ../summary.json)"])
    except INPUT_ERRORS as e:
        return _failure(name, e)
    return {"name": name, "ok": True, "energy": float(res.final_energy), "initial_mismatch": res.initial_mismatch,
            "final_mismatch": res.final_mismatch, "mismatch_reduction": res.mismatch_reduction,
            "registration_s": res.timings["registration_s"], "task_s": time.perf_counter() - t0,
            "files": [os.path.relpath(p, out_dir) for p in paths], "device": res.device.split(" (")[0],
            "worker": _worker_name()}
