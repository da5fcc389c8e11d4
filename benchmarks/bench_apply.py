"""`pyca apply`'s work (pyca.apply_transforms) beside antsApplyTransforms (antspyx), files included.

    python benchmarks/bench_apply.py [--size 182,218,182] [--device auto|cpu|gpu] [--repeat 5] [--no-ants]

A 1 mm image (default: the MNI152 grid, 182 x 218 x 182, stored LAS with an origin) through a
composite transform as ANTs writes one: a displacement field on the reference grid (smooth, a few
mm) and an affine (.mat). Each timed call starts from the files: pyca reads the input image and the
transforms, composes them into one map on the device, samples the image (trilinear) and waits for
the device; antspyx (ants.apply_transforms, which runs antsApplyTransforms' code on every core)
reads the reference and input images itself and the transforms inside. Uncompressed .nii and
.nii.gz are timed separately (gzip decompression alone is most of a .nii.gz read). Writing the result
is timed apart. Prints the medians, pyca / ANTs and the images' agreement (relative RMS).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

import pyca as ca
from pyca import io as pio
from pyca.registration import apply as pa
from pyca.registration import transform_files as tf


def median_time(fn, repeat, warmup=1):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def make_case(d, size, ext):
    """Files of the case in folder d: image, reference, warp (ITK displacement field), affine."""
    rs = np.random.default_rng(0)
    las = np.diag([-1.0, 1.0, 1.0])
    g = ca.GridInfo(size, (1.0, 1.0, 1.0), (90.0, -126.0, -72.0), las)
    # a smooth image: a sum of a few wide Gaussians (values in [0, 1]), zero-padded border
    idx = [np.arange(n, dtype=np.float32) for n in size]
    img = np.zeros(size, np.float32)
    for _ in range(6):
        c = [rs.uniform(0.3, 0.7) * n for n in size]
        r = [rs.uniform(0.1, 0.25) * n for n in size]
        gx, gy, gz = (np.exp(-((i - ci) / ri) ** 2) for i, ci, ri in zip(idx, c, r))
        img += rs.uniform(0.3, 1.0) * gx[:, None, None] * gy[None, :, None] * gz[None, None, :]
    im = ca.Image3D.from_array(np.asfortranarray(img), g)
    pio.save_image(im, os.path.join(d, "image" + ext))
    # displacement: smooth, up to ~3 mm, as an H-field of the grid
    h = ca.Field3D(g, ca.MEM_HOST)
    ca.SetToIdentity(h)
    a = np.asarray(h)
    for c in range(3):
        ph = rs.uniform(0, 2 * np.pi, 3)
        a[..., c] += (2.0 * np.sin(idx[0] / size[0] * 2 * np.pi + ph[0])[:, None, None]
                      * np.sin(idx[1] / size[1] * 2 * np.pi + ph[1])[None, :, None]
                      * np.sin(idx[2] / size[2] * 2 * np.pi + ph[2])[None, None, :])
    tf.write_displacement(h, os.path.join(d, "warp" + ext))
    M = np.eye(4)
    th = 0.05
    M[:3, :3] = np.array([[np.cos(th), -np.sin(th), 0], [np.sin(th), np.cos(th), 0], [0, 0, 1]]) * 1.03
    M[:3, 3] = [2.0, -3.0, 1.5]
    tf.write_affine(M, os.path.join(d, "affine.mat"))
    return [os.path.join(d, "warp" + ext), os.path.join(d, "affine.mat")], os.path.join(d, "image" + ext)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", default="182,218,182")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-ants", action="store_true")
    ap.add_argument("--formats", default=".nii,.nii.gz")
    a = ap.parse_args(argv)
    size = tuple(int(x) for x in a.size.split(","))
    mem = pa.resolve_device(a.device, "bench_apply")
    dev = "GPU " + ca.device_info() if int(mem) == int(ca.MEM_DEVICE) else f"CPU ({os.cpu_count()} cores)"
    ants = None if a.no_ants else __import__("importlib").import_module("ants") if _has("ants") else None
    print(f"pyca apply: a {size[0]}x{size[1]}x{size[2]} 1 mm image (LAS) through [displacement field, affine], "
          f"files included; pyca on {dev}; median of {a.repeat}")
    with tempfile.TemporaryDirectory() as d:
        for ext in a.formats.split(","):
            tl, image = make_case(d, size, ext)

            def pyca_apply(tl=tl, image=image):
                out = pa.apply_transforms(image, image, tl, device=a.device)
                ca.synchronize()
                return out

            t_pyca = median_time(pyca_apply, a.repeat)
            res = pyca_apply()
            t_write = median_time(lambda: pio.save_image(res, os.path.join(d, "out" + ext)), max(1, a.repeat // 2))
            print(f"  {ext:7s} pyca.apply_transforms (read image + transforms, compose, sample): {t_pyca * 1e3:8.1f} ms"
                  f"   writing the result: {t_write * 1e3:7.1f} ms")
            # where pyca's time goes: the files alone
            t_field = median_time(lambda: tf.read_displacement_world(tl[0], mem), a.repeat)
            t_img = median_time(lambda: pio.load_image(image), a.repeat)
            print(f"          of which reading the field to {('device' if int(mem) == int(ca.MEM_DEVICE) else 'host')}:"
                  f" {t_field * 1e3:.1f} ms, the image (host): {t_img * 1e3:.1f} ms")
            if ants is None:
                print("          antspyx: not installed (or --no-ants)")
                continue

            def ants_apply(tl=tl, image=image):
                f = ants.image_read(image)
                return ants.apply_transforms(f, ants.image_read(image), tl)

            t_ants = median_time(ants_apply, max(1, a.repeat // 2))
            want = ants_apply().numpy()
            got = res.numpy() if res.is_on_device else np.asarray(res)
            rel = float(np.sqrt(np.mean((got - want) ** 2)) / (want.max() - want.min()))
            print(f"          ants.apply_transforms (CPU, {os.cpu_count()} cores, reads included): {t_ants * 1e3:8.1f} ms"
                  f"   pyca / ANTs = {t_pyca / t_ants:.3f}   relative RMS pyca vs ANTs: {rel:.2e}")
    return 0


def _has(name):
    import importlib.util

    return importlib.util.find_spec(name) is not None


if __name__ == "__main__":
    sys.exit(main())
