"""Built-in, deterministically generated test data for the applications (no files, no randomness).

``builtin_pair()`` returns (fixed, moving): a smooth ball with an off-centre inner ellipsoid and a
notch (the fixed image), and the same object carried through a large, smooth, non-rigid and
invertible warp (the moving image): a "banana" bend of up to 9 world units along x, a twist-like
shear along y that varies with z, and a stretch along x. Undoing it needs displacements of many
voxels that vary across the object, the kind of deformation LDDMM is for. The default grid is
64 x 64 x 48 voxels with anisotropic spacing (1, 1, 4/3): a 64 x 64 x 64 world-unit box.

The images are analytic functions of the world coordinates, sampled at voxel centres, so any grid
size gives the same shapes at another resolution (the spacing is chosen to cover the same box
unless given).
"""
from __future__ import annotations

import numpy as np

from .. import core

BOX = 64.0  # world units per axis
DEFAULT_SIZE = (64, 64, 48)
DEFAULT_SPACING = (1.0, 1.0, 4.0 / 3.0)


def _spacing(size, spacing):
    # Default: the same 64^3 world-unit box whatever the size.
    return tuple(BOX / n for n in size) if spacing is None else tuple(float(s) for s in spacing)


def _smooth_step(d, width):
    # 1 inside (d < 0), 0 outside, a smooth logistic edge `width` world units wide.
    return 0.5 * (1.0 - np.tanh(d / width))


def phantom(x, y, z):
    """The fixed object at world points (x, y, z) (centred coordinates): values in [0, 1]."""
    r = np.sqrt(x * x + y * y + z * z)
    ball = _smooth_step(r - 16.0, 1.5)
    # A brighter inner ellipsoid, off centre.
    e = np.sqrt(((x - 4.0) / 7.0) ** 2 + ((y + 3.0) / 5.5) ** 2 + (z / 6.5) ** 2)
    inner = _smooth_step((e - 1.0) * 6.0, 1.5)
    # A notch (a darker cylinder along z cutting into the ball at -x).
    c = np.sqrt((x + 14.5) ** 2 + (y - 4.0) ** 2)
    notch = _smooth_step(c - 6.0, 1.5)
    return np.clip(0.6 * ball * (1.0 - notch) + 0.4 * inner, 0.0, 1.0)


def warp(x, y, z):
    """The inverse of the warp taking the fixed object to the moving one: moving(p) = phantom(warp(p)).

    A composition of invertible maps (shears with unit Jacobian and a stretch), so moving is a
    diffeomorphic image of fixed: x stretched by 1.12, then y sheared by 5 sin(pi z / 40), then x
    bent by 9 (y / 20)^2 - 3."""
    x1 = x / 1.12
    y1 = y - 5.0 * np.sin(np.pi * z / 40.0)
    x2 = x1 + 9.0 * (y1 / 20.0) ** 2 - 3.0
    return x2, y1, z


def _world_coords(size, spacing):
    size = tuple(int(s) for s in size)
    spacing = tuple(float(s) for s in spacing)
    axes = [(np.arange(n) - (n - 1) / 2.0) * sp for n, sp in zip(size, spacing)]
    return np.meshgrid(*axes, indexing="ij")


def builtin_arrays(size=DEFAULT_SIZE, spacing=None):
    """(fixed, moving) as float32 NumPy arrays of shape `size` (x, y, z), Fortran-ordered; spacing
    defaults to covering a 64^3 world-unit box."""
    x, y, z = _world_coords(size, _spacing(size, spacing))
    fixed = phantom(x, y, z)
    moving = phantom(*warp(x, y, z))
    return (np.asfortranarray(fixed, dtype=np.float32), np.asfortranarray(moving, dtype=np.float32))


def builtin_grid(size=DEFAULT_SIZE, spacing=None):
    """The grid of the built-in pair: origin chosen so that world (0, 0, 0) is the box centre."""
    spacing = _spacing(size, spacing)
    origin = tuple(-(n - 1) / 2.0 * sp for n, sp in zip(size, spacing))
    return core.GridInfo(tuple(int(s) for s in size), tuple(float(s) for s in spacing), origin)


def builtin_pair(size=DEFAULT_SIZE, spacing=None, mem=None):
    """(fixed, moving) Image3D objects in memory type `mem` (default MEM_HOST), on builtin_grid()."""
    f, m = builtin_arrays(size, spacing)
    g = builtin_grid(size, spacing)
    fixed, moving = core.Image3D.from_array(f, g), core.Image3D.from_array(m, g)
    if mem is not None and int(mem) != int(core.MEM_HOST):
        fixed, moving = fixed.clone(mem), moving.clone(mem)
    return fixed, moving


# ------------------------------------------------------------------------------------------------
# T1 brain pairs with known warps, from the MNI152 2009c template that nilearn's wheel ships
# (T1 and grey/white-matter probability maps, 1 mm, 197 x 233 x 189).
_MNI_FILES = {"t1": "mni_icbm152_t1_tal_nlin_sym_09a_converted.nii.gz",
              "gm": "mni_icbm152_gm_tal_nlin_sym_09a_converted.nii.gz",
              "wm": "mni_icbm152_wm_tal_nlin_sym_09a_converted.nii.gz"}


def mni_dir():
    """The folder of nilearn's template files ($PYCA_MNI_DIR when set), or None when nilearn is not
    installed (found without importing nilearn)."""
    import importlib.util
    import os

    env = os.environ.get("PYCA_MNI_DIR")
    if env:
        return env if all(os.path.exists(os.path.join(env, f)) for f in _MNI_FILES.values()) else None
    spec = importlib.util.find_spec("nilearn")
    if spec is None or not spec.submodule_search_locations:
        return None
    d = os.path.join(list(spec.submodule_search_locations)[0], "datasets", "data")
    return d if all(os.path.exists(os.path.join(d, f)) for f in _MNI_FILES.values()) else None


def _block_mean(a, f):
    if f == 1:
        return a
    s = [n // f * f for n in a.shape]
    a = a[: s[0], : s[1], : s[2]]
    return a.reshape(s[0] // f, f, s[1] // f, f, s[2] // f, f).mean(axis=(1, 3, 5))


def mni_template(resolution=2):
    """(t1, labels, affine): the MNI152 2009c T1 (float32, values in [0, 1]), tissue labels (0
    background/CSF, 1 grey matter, 2 white matter: the larger probability where it is >= 0.5) and
    the 4 x 4 voxel-to-world (RAS) matrix, at `resolution` mm (1, or an integer: block means)."""
    import os

    import nibabel as nib

    d = mni_dir()
    if d is None:
        raise ImportError("the MNI152 template comes with nilearn: pip install nilearn")
    f = int(resolution)
    img = nib.load(os.path.join(d, _MNI_FILES["t1"]))
    t1 = _block_mean(np.asarray(img.dataobj, np.float32), f)
    gm = _block_mean(np.asarray(nib.load(os.path.join(d, _MNI_FILES["gm"])).dataobj, np.float32), f)
    wm = _block_mean(np.asarray(nib.load(os.path.join(d, _MNI_FILES["wm"])).dataobj, np.float32), f)
    labels = np.where(np.maximum(gm, wm) >= 0.5, np.where(wm > gm, 2, 1), 0).astype(np.float32)
    aff = img.affine.copy()
    aff[:3, :3] *= f
    aff[:3, 3] += aff[:3, :3] @ np.full(3, (f - 1) / (2.0 * f))  # block centres
    return np.asfortranarray(t1), np.asfortranarray(labels), aff


def random_svf_warp(shape, spacing, rng, amplitude=4.0, smooth=10.0, steps=6, coarse=4.0):
    """A random diffeomorphic displacement (world units, shape + (3,)) on a grid: the exponential of
    a smooth random stationary velocity field (Gaussian-smoothed noise of standard deviation
    `smooth` world units, scaled so that its largest value is `amplitude`), by scaling and squaring
    on a grid of `coarse` world units, then trilinearly interpolated (the field is smooth)."""
    from scipy import ndimage

    sp = np.asarray(spacing, float)
    f = np.maximum(1, np.floor(coarse / sp)).astype(int)  # fine voxels per coarse voxel
    cshape = tuple(int(np.ceil((n - 1) / k)) + 1 for n, k in zip(shape, f))
    csp = sp * f
    v = np.stack([ndimage.gaussian_filter(rng.standard_normal(cshape), smooth / csp) for _ in range(3)], -1)
    v *= amplitude / max(np.abs(v).max(), 1e-12)
    u = v / 2.0**steps  # world units
    idx = np.stack(np.meshgrid(*[np.arange(n, dtype=float) for n in cshape], indexing="ij"), -1)
    for _ in range(steps):  # u <- u + u o (id + u)
        pos = idx + u / csp
        u = u + np.stack([ndimage.map_coordinates(u[..., c], [pos[..., d] for d in range(3)], order=1,
                                                  mode="nearest") for c in range(3)], -1)
    fine = np.meshgrid(*[np.arange(n, dtype=float) / k for n, k in zip(shape, f)], indexing="ij")
    return np.stack([ndimage.map_coordinates(u[..., c], fine, order=1, mode="nearest") for c in range(3)], -1)


def _world_points(shape, aff):
    idx = np.stack(np.meshgrid(*[np.arange(n, dtype=float) for n in shape], indexing="ij"), -1)
    return idx @ aff[:3, :3].T + aff[:3, 3]


def _brain_warp(shape, aff, rng, warp_mm, rotation_deg, translation_mm):
    """brain_pair's psi(y) = R (y + u(y) - c) + c + t: u (world units, on the template grid), R, t, c."""
    from scipy.spatial.transform import Rotation

    u = random_svf_warp(shape, np.sqrt((aff[:3, :3] ** 2).sum(0)), rng, amplitude=warp_mm)
    axis = rng.standard_normal(3)
    R = Rotation.from_rotvec(np.deg2rad(rotation_deg) * axis / np.linalg.norm(axis)).as_matrix()
    d = rng.standard_normal(3)
    c = aff[:3, :3] @ ((np.array(shape) - 1) / 2.0) + aff[:3, 3]
    return {"u": u, "R": R, "t": translation_mm * d / np.linalg.norm(d), "c": c}


def brain_pair_true_map(seed=0, resolution=2, warp_mm=4.0, rotation_deg=8.0, translation_mm=6.0, las=False,
                        tol=1e-4):
    """The exact answer for brain_pair(seed, resolution, ...) with the same arguments: for every fixed
    voxel x, the moving voxel coordinates of psi^-1(x) ((X, Y, Z, 3) float64), found by the fixed-point
    iteration y <- R^T (x - c - t) + c - u(y) (u is smooth and small) to `tol` world units."""
    from scipy import ndimage

    t1, _, aff = mni_template(resolution)
    shape = t1.shape
    w = _brain_warp(shape, aff, np.random.default_rng(seed), warp_mm, rotation_deg, translation_mm)
    z = (_world_points(shape, aff) - w["c"] - w["t"]) @ w["R"] + w["c"]
    Ainv = np.linalg.inv(aff[:3, :3])
    y = z
    for _ in range(50):
        yv = (y - aff[:3, 3]) @ Ainv.T
        uy = np.stack([ndimage.map_coordinates(w["u"][..., k], [yv[..., j] for j in range(3)], order=1,
                                               mode="nearest") for k in range(3)], -1)
        y, prev = z - uy, y
        if np.abs(y - prev).max() < tol:
            break
    vox = (y - aff[:3, 3]) @ Ainv.T  # template voxels = moving voxels (before a LAS flip)
    if las:
        vox[..., 0] = shape[0] - 1 - vox[..., 0]
    return vox


BRAIN_PAIR_INTERPS = ("cubic", "linear")  # brain_pair's resampling of the template: SciPy spline order 3, 1


def brain_pair(seed=0, resolution=2, warp_mm=4.0, rotation_deg=8.0, translation_mm=6.0, intensity=(0.6, 0.15),
               gamma=1.1, las=False, cache=True, n_landmarks=3000, interp="cubic"):
    """A synthetic T1 pair with a known map. The fixed image is the MNI template; the moving image is
    the template pulled through psi (moving(y) = template(psi(y)), y a moving-grid world point),
    psi = rigid o exp(v): a random diffeomorphic warp (largest displacement `warp_mm`), then a
    rotation (random axis, `rotation_deg`) about the centre and a translation of `translation_mm`;
    its intensities changed to a * I^gamma + b (intensity = (a, b)). With las, the moving image is
    stored left-right flipped with an affine whose first column is negated (the same anatomy in
    LAS orientation). Returns a dict: fixed, moving (float32 arrays), fixed_labels, moving_labels
    (uint8), fixed_affine, moving_affine (4 x 4 voxel -> world), landmarks (n_landmarks brain voxels
    y of the moving grid, integer indices) and landmarks_fixed_world (psi(y): where each is in the
    fixed image, world coordinates). The template is resampled through psi by a prefiltered cubic
    B-spline (interp 'cubic', SciPy map_coordinates order 3), or trilinearly ('linear': the generator
    of the rows recorded before main 4e2bc1c, whose blur varies from voxel to voxel: docs/design/
    registration.md, 'The synthetic pairs'); the labels by nearest neighbour either way. Cached under
    $PYCA_CACHE (default ~/.cache/pyca) when cache."""
    import os

    if interp not in BRAIN_PAIR_INTERPS:
        raise ValueError(f"brain_pair: interp must be one of {', '.join(BRAIN_PAIR_INTERPS)}, not {interp!r}")

    key = f"brain_n{n_landmarks}_s{seed}_r{resolution}_w{warp_mm}_rot{rotation_deg}_t{translation_mm}_i{intensity[0]}-" \
          f"{intensity[1]}_g{gamma}_las{int(las)}{'_cubic' if interp == 'cubic' else ''}.npz"
    cdir = os.environ.get("PYCA_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "pyca"))
    path = os.path.join(cdir, key)
    if cache and os.path.exists(path):
        z = np.load(path)
        return {k: (np.asfortranarray(z[k]) if z[k].ndim >= 3 else z[k]) for k in z.files}
    from scipy import ndimage

    t1, lab, aff = mni_template(resolution)
    rng = np.random.default_rng(seed)
    shape = t1.shape
    w = _brain_warp(shape, aff, rng, warp_mm, rotation_deg, translation_mm)
    world = _world_points(shape, aff)
    psi = (world + w["u"] - w["c"]) @ w["R"].T + w["c"] + w["t"]  # template world point of each moving voxel
    vox = (psi - aff[:3, 3]) @ np.linalg.inv(aff[:3, :3]).T
    coords = [vox[..., k] for k in range(3)]
    if interp == "cubic":
        moving = ndimage.map_coordinates(t1.astype(np.float64), coords, order=3, prefilter=True, mode="constant",
                                         cval=0.0)
    else:
        moving = ndimage.map_coordinates(t1, coords, order=1, mode="constant", cval=0.0)
    mlab = ndimage.map_coordinates(lab, coords, order=0, mode="constant", cval=0.0)
    a, b = intensity
    moving = a * np.clip(moving, 0, None) ** gamma + b
    maff = aff.copy()
    if las:
        moving, mlab, psi = moving[::-1], mlab[::-1], psi[::-1]
        maff[:, 0] = -aff[:, 0]
        maff[:3, 3] = aff[:3, 3] + aff[:3, 0] * (shape[0] - 1)
    ys = np.argwhere(mlab > 0)
    ys = ys[rng.choice(len(ys), min(n_landmarks, len(ys)), replace=False)]
    out = {"fixed": np.asfortranarray(t1), "moving": np.asfortranarray(moving, np.float32),
           "fixed_labels": np.asfortranarray(lab, np.uint8), "moving_labels": np.asfortranarray(mlab, np.uint8),
           "fixed_affine": aff, "moving_affine": maff, "landmarks": ys.astype(np.int32),
           "landmarks_fixed_world": psi[ys[:, 0], ys[:, 1], ys[:, 2]].astype(np.float64)}
    if cache:
        os.makedirs(cdir, exist_ok=True)
        tmp = path + f".tmp{os.getpid()}.npz"
        np.savez_compressed(tmp, **out)
        os.replace(tmp, path)
    return out


# ------------------------------------------------------------------------------------------------
# Other contrasts of a T1 image (multi-modal test data, docs/design/mutual-information.md)
# Intensity of each tissue class relative to the brightest, after the map: background 0 stays 0.
CONTRASTS = {
    "t2": {"csf": 1.0, "gm": 0.55, "wm": 0.3, "bright": 0.25},  # CSF brightest, white matter dark
    "flair": {"csf": 0.12, "gm": 0.85, "wm": 0.5, "bright": 0.45},  # grey matter brightest, CSF dark
}


def tissue_centres(t1, mask=None, iterations=30):
    """The mean T1 intensity of CSF, grey and white matter: a 3-class k-means (1-D, started at the
    25th, 60th and 90th percentiles) of the voxels above 5% of the maximum (or inside `mask`)."""
    a = np.asarray(t1, np.float64)
    v = a[mask > 0] if mask is not None else a[a > 0.05 * a.max()]
    c = np.percentile(v, [25, 60, 90])
    for _ in range(iterations):
        k = np.argmin(np.abs(v[:, None] - c[None, :]), axis=1)
        c = np.array([v[k == i].mean() if np.any(k == i) else c[i] for i in range(3)])
    return np.sort(c)


def other_contrast(t1, kind="t2", seed=0, bias=0.2, noise=0.02, spacing=(1.0, 1.0, 1.0), centres=None):
    """A T2-like (kind 't2': CSF brightest, then grey, then white matter) or FLAIR-like ('flair': grey
    matter brightest, CSF dark) image of the anatomy of the T1 image `t1` (NumPy, x, y, z): a
    non-monotonic, piecewise-linear map of the T1 intensity through the tissue classes' mean
    intensities (`centres`: CSF, GM, WM; default tissue_centres(t1)) to CONTRASTS[kind], times a
    smooth multiplicative bias field exp(b(x)) (b: Gaussian-smoothed noise, sd 60 mm, scaled so that
    its largest |b| is `bias`), plus Gaussian noise of standard deviation `noise` (relative to the
    brightest tissue), clipped at 0. Float32 in [0, ~1.3], Fortran-ordered; deterministic in `seed`."""
    from scipy import ndimage

    if kind not in CONTRASTS:
        raise ValueError(f"other_contrast: kind must be one of {', '.join(CONTRASTS)}, not {kind!r}")
    a = np.asarray(t1, np.float64)
    csf, gm, wm = tissue_centres(a) if centres is None else centres
    top = float(a.max())
    t = CONTRASTS[kind]
    xs = [0.0, 0.5 * csf, csf, gm, wm, max(top, wm + 1e-6)]
    ys = [0.0, 0.5 * t["csf"], t["csf"], t["gm"], t["wm"], t["bright"]]
    out = np.interp(a, xs, ys)
    rng = np.random.default_rng(seed)
    sd = [60.0 / float(s) for s in spacing]
    b = ndimage.gaussian_filter(rng.standard_normal(a.shape), sd, mode="reflect")
    b *= bias / max(float(np.abs(b).max()), 1e-12)
    out = out * np.exp(b) + noise * rng.standard_normal(a.shape)
    return np.asfortranarray(np.clip(out, 0.0, None), dtype=np.float32)
