"""Two different people's brains for bench_brain.py --pairs real: Colin27 (Debian's mricron-data,
ch2bet.nii.gz: skull-stripped, 181 x 217 x 181, 1 mm, uint8 0-133) and the MNI152 2009a T1 template
from nilearn's wheel (197 x 233 x 189, 1 mm, uint8 0-255, brain only; nilearn's brain mask is the
template above 0.2 of its range).

Two forms of each pair:

- prepared: one grid (the MNI template's at the resolution asked, 1 or 2 mm), both images brought onto
  it in world coordinates (trilinear; at 2 mm after a Gaussian of 0.42 voxel, the block mean's
  width), masked by their brain masks and scaled to [0, 1] by their 99.5th percentile inside the
  brain;
- as shipped: the files themselves (other grids, fields of view and intensity scales), written to a
  folder for the CLI; with las=True the Colin27 file is stored LAS (its x axis reversed, the affine
  saying so: the same brain in the world).

Tissue labels, one method for both brains (label_tissues): 3-class k-means on the intensities of the
brain voxels of each image on its own 1 mm grid (voxels inside the brain mask: MNI, template > 0.2 of
its maximum; Colin27, ch2bet > 0), classes ordered by their mean intensity: 1 CSF, 2 grey matter,
3 white matter. Any other grid takes them by nearest neighbour in world coordinates.

Files are read from $PYCA_BRAINS_DIR or the checkout's .data/ folder when there (the GPU machine has
neither Debian packages nor nilearn: copy ch2bet.nii.gz and nilearn's three mni_icbm152_*_09a files
there), else from the installed packages.
"""
from __future__ import annotations

import functools
import os

import numpy as np

COLIN = "ch2bet.nii.gz"
MNI = {"t1": "mni_icbm152_t1_tal_nlin_sym_09a_converted.nii.gz",
       "gm": "mni_icbm152_gm_tal_nlin_sym_09a_converted.nii.gz",
       "wm": "mni_icbm152_wm_tal_nlin_sym_09a_converted.nii.gz"}
_HERE = os.path.dirname(os.path.abspath(__file__))


def _find(name):
    dirs = [os.environ.get("PYCA_BRAINS_DIR"), os.path.join(_HERE, "..", ".data"), "/usr/share/mricron/templates"]
    try:
        import importlib.util

        spec = importlib.util.find_spec("nilearn")
        if spec is not None and spec.submodule_search_locations:
            dirs.append(os.path.join(list(spec.submodule_search_locations)[0], "datasets", "data"))
    except ImportError:
        pass
    for d in dirs:
        if d and os.path.exists(os.path.join(d, name)):
            return os.path.join(d, name)
    return None


def available():
    """None when both brains can be read, else why not (one line)."""
    missing = [n for n in [COLIN] + list(MNI.values()) if _find(n) is None]
    if missing:
        return (f"needs {', '.join(missing)} (apt-get install mricron-data; pip install nilearn; or copy them into "
                ".data/)")
    return None


def paths():
    return {"colin": _find(COLIN), **{k: _find(v) for k, v in MNI.items()}}


def _load(path):
    import nibabel as nib

    img = nib.load(path)
    return np.asarray(img.dataobj, np.float32), img.affine.astype(float)


def kmeans3(values, iterations=50):
    """1-D k-means with 3 classes (Lloyd, started at the 10th, 50th and 90th percentiles); returns the
    class centres in increasing order."""
    c = np.percentile(values, [10, 50, 90]).astype(float)
    v = values.astype(float)
    for _ in range(iterations):
        k = np.argmin(np.abs(v[:, None] - c[None, :]), axis=1)
        new = np.array([v[k == j].mean() if np.any(k == j) else c[j] for j in range(3)])
        if np.allclose(new, c):
            break
        c = new
    return np.sort(c)


def label_tissues(a, brain):
    """0 outside the brain, 1 CSF, 2 grey, 3 white matter: the nearest of the 3 k-means centres."""
    c = kmeans3(a[brain])
    lab = np.zeros(a.shape, np.float32)
    lab[brain] = 1 + np.argmin(np.abs(a[brain][:, None] - c[None, :]), axis=1)
    return lab


@functools.lru_cache(maxsize=None)
def subject(name):
    """(t1, brain mask, labels, affine) of 'colin' or 'mni' on its own 1 mm grid, as shipped (computed
    once per process; do not modify the arrays)."""
    p = paths()
    if name == "colin":
        a, aff = _load(p["colin"])
        brain = a > 0
    else:
        a, aff = _load(p["t1"])
        brain = a > 0.2 * a.max()
    return a, brain, label_tissues(a, brain), aff


def grid(resolution):
    """(shape, affine) of the MNI template's grid at 1 or 2 mm (2: nilearn's 2 mm grid, 99 x 117 x 95)."""
    _, aff = _load(paths()["t1"])
    shape = (197, 233, 189)
    if resolution == 1:
        return shape, aff
    f = int(resolution)
    a2 = aff.copy()
    a2[:3, :3] *= f
    return tuple(-(-n // f) for n in shape), a2


def resample(a, aff, shape, aff_to, order=1):
    """a (on the grid aff) at the voxels of the grid (shape, aff_to), world coordinates; 0 outside.
    Smoothed first (Gaussian of 0.42 coarse voxels) when the target grid is coarser."""
    from scipy import ndimage

    M = np.linalg.inv(aff) @ aff_to
    ratio = np.sqrt((M[:3, :3] ** 2).sum(0))
    if order > 0 and np.any(ratio > 1.01):
        a = ndimage.gaussian_filter(a, 0.42 * np.maximum(ratio, 1.0) * (ratio > 1.01))
    idx = np.indices(shape, dtype=np.float32).reshape(3, -1)
    src = M[:3, :3] @ idx + M[:3, 3:4]
    return ndimage.map_coordinates(a, src, order=order, mode="constant", cval=0.0).reshape(shape).astype(np.float32)


def prepared(moving, resolution):
    """The prepared pair: dict of fixed, moving (on one grid, normalised), their labels and brain masks,
    fixed_affine = moving_affine, and (MNI fixed) the GM / WM probability maps on the grid.
    moving: 'colin' (Colin27 -> MNI) or 'mni' (MNI -> Colin27)."""
    shape, aff = grid(resolution)
    out = {}
    for name in ("colin", "mni"):
        a, brain, lab, a_aff = subject(name)
        r = resample(a, a_aff, shape, aff)
        b = resample(brain.astype(np.float32), a_aff, shape, aff, order=0) > 0
        ln = resample(lab, a_aff, shape, aff, order=0)
        r = np.where(b, r, 0.0)
        r = np.clip(r / np.percentile(r[b], 99.5), 0, 1).astype(np.float32)
        out[name] = (r, b, ln)
    fixed = "mni" if moving == "colin" else "colin"
    pair = {"fixed": out[fixed][0], "moving": out[moving][0], "fixed_labels": out[fixed][2],
            "moving_labels": out[moving][2], "fixed_brain": out[fixed][1], "moving_brain": out[moving][1],
            "fixed_affine": aff, "moving_affine": aff, "name": f"{moving}->{fixed}", "resolution": resolution}
    if fixed == "mni":
        pair["prob"] = mni_probability(shape, aff)
    return pair


def mni_probability(shape, aff):
    """nilearn's grey and white matter probability maps of the MNI template on a grid, in [0, 1]."""
    p = paths()
    out = {}
    for k in ("gm", "wm"):
        a, a_aff = _load(p[k])
        out[k] = np.clip(resample(a / 255.0, a_aff, shape, aff), 0, 1)
    return out


def as_shipped(moving, resolution, folder, las=False):
    """The files as shipped, written into folder for the CLI: fixed.nii.gz, moving.nii.gz,
    moving_labels.nii.gz (k-means labels on the moving file's own grid); returns a dict with their paths
    and the fixed labels / affine / brain (and MNI probability maps) to score against, on the fixed
    file's own grid. At 2 mm the MNI file is nilearn's 2 mm template (its own resampling); Colin27
    stays at 1 mm as shipped (another resolution again). las: the Colin27 file stored LAS."""
    import nibabel as nib

    os.makedirs(folder, exist_ok=True)
    files = {}
    info = {}
    for name in ("colin", "mni"):
        a, brain, lab, aff = subject(name)
        if name == "mni" and resolution == 2:
            shape, aff2 = grid(2)
            a_u8 = np.asarray(nib.load(paths()["t1"]).dataobj)
            a = resample(a_u8.astype(np.float32), aff, shape, aff2)
            brain = resample(brain.astype(np.float32), aff, shape, aff2, order=0) > 0
            lab = resample(lab, aff, shape, aff2, order=0)
            aff = aff2
        if name == "colin" and las:
            a, brain, lab = a[::-1].copy(), brain[::-1].copy(), lab[::-1].copy()
            flip = np.eye(4)
            flip[0, 0], flip[0, 3] = -1, a.shape[0] - 1
            aff = aff @ flip
        info[name] = (a, brain, lab, aff)
        dt = np.uint8 if name == "colin" or resolution == 1 else np.float32
        files[name] = nib.Nifti1Image(np.round(a).astype(dt) if dt == np.uint8 else a, aff)
    fixed = "mni" if moving == "colin" else "colin"
    out = {"fixed_file": os.path.join(folder, "fixed.nii.gz"), "moving_file": os.path.join(folder, "moving.nii.gz"),
           "labels_file": os.path.join(folder, "moving_labels.nii.gz")}
    nib.save(files[fixed], out["fixed_file"])
    nib.save(files[moving], out["moving_file"])
    nib.save(nib.Nifti1Image(info[moving][2].astype(np.uint8), info[moving][3]), out["labels_file"])
    a, brain, lab, aff = info[fixed]
    out.update(fixed_labels=lab, fixed_brain=brain, fixed_affine=aff, moving_affine=info[moving][3],
               moving_shape=info[moving][0].shape, name=f"{moving}->{fixed} (as shipped)")
    if fixed == "mni":
        out["prob"] = mni_probability(lab.shape, aff)
    return out
