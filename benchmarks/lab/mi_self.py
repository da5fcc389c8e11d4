"""Why `pyca lddmm --metric mi` moves an image registered onto itself (docs/lddmm.md, 'Different
contrasts'), on the MNI152 T1 at `--resolution` mm (block means of the 1 mm file, values in [0, 1]):

1. The Parzen-windowed MI of an image with itself is not largest at the identity: along the op's own
   force v (dMI/dI grad I, Gaussian-smoothed, scaled to at most 1 voxel), MI(I o (id + e v), I) against
   MI(I, I) for e = +-0.2 .. 0.025 voxel, and the central slope against the op's prediction
   sum dMI/dI grad I . v (trilinear resampling; unit spacing).
2. The size of that force: the first step's direction (its largest component per unit of step, each
   scale), the image onto itself against the two samplings half a voxel apart (quality_tol's 'half').
3. `lddmm.register(I, I, metric='mi', affine='none')`: the map's displacement (mean / largest, voxels)
   and the final / linear match energy - 1, with interp_blur 'matched' (the defaults: mi's contrast-free
   form, the fixed image smoothed by sqrt(1/6)), 'none', and 'moving' (tried, not kept: the moving
   image's own interpolation bias subtracted from it, as syn does; MovingBiasLevel below).

    python benchmarks/lab/mi_self.py --resolution 4

The 'moving' variant on the real multi-modal pairs: mi_lab.py with the setting {"_moving_bias": true}.
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def moving_bias_level():
    """A Level whose match compares I0 o phi_{1,0} minus the bias trilinear interpolation gave it (an
    InterpTarget of a zero base, as syn's match_interp_blur) with the fixed image as it is."""
    import pyca as ca
    from pyca.apps._lddmm_solver import Level
    from pyca.registration.interpolation import InterpTarget

    class MovingBiasLevel(Level):
        def __init__(self, grid, mem, T, I0, I1, p, metric=None, source=None, interp=False, pad=None):
            super().__init__(grid, mem, T, I0, I1, p, metric=metric, source=source, interp=False, pad=pad)
            zero = ca.Image3D(grid, mem)
            ca.SetMem(zero, 0.0)
            self.bias = InterpTarget(grid, mem, zero, *((I0,) if source is None else source))
            self._moved = [ca.Image3D(grid, mem), ca.Image3D(grid, mem)]
            ca.Copy(self._moved[0], I0)

        def moved(self):
            return self._moved[0]

        def forward(self):
            _, h = super().forward()  # (its match() read the previous image: computed again below)
            self._moved.reverse()
            ca.Sub(self._moved[0], self.J0[self.T], self.bias.update(h))
            return self.match(), h

        def match(self):
            self._matched = True
            return self.metric.energy(self.moved(), self.I1)

        def gradients(self):
            assert self._fast and not self._plain, "the lab's variant covers the fused path of mi only"
            if not (self._matched and self.metric.last_gradient(self.resid)):
                self.metric.gradient(self.resid, self.moved(), self.I1)
            self._due = True

        def undo(self):
            super().undo()
            self.bias.undo()
            self._moved.reverse()

    return MovingBiasLevel


def register(F, M, variant, **kw):
    from pyca.apps import lddmm

    if variant != "moving":
        return lddmm.register(F, M, interp_blur=variant, **kw)
    level = lddmm.Level
    lddmm.Level = moving_bias_level()
    try:
        return lddmm.register(F, M, interp_blur="none", **kw)
    finally:
        lddmm.Level = level


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--resolution", type=int, default=4)
    ap.add_argument("--bins", type=int, default=24)
    a = ap.parse_args(argv)
    import pyca as ca
    from quality_tol import images

    F, _ = images(a.resolution, "itself", 0.0)
    arr = np.asarray(F.numpy(), np.float32)
    g1 = ca.GridInfo(arr.shape)  # unit spacing: v in voxels
    I = ca.Image3D.from_array(np.asfortranarray(arr), g1)
    lo, hi = (float(x) for x in ca.MinMax(I))
    g = ca.Image3D(g1, ca.MEM_HOST)
    mi0 = ca.MutualInformation(g, I, I, a.bins, lo, hi, lo, hi)
    b, v = ca.Field3D(g1, ca.MEM_HOST), ca.Field3D(g1, ca.MEM_HOST)
    ca.Gradient(b, I)
    ca.Mul_I(b, g)
    ca.GaussianBlur(v, b, ca.Vec3Df(2, 2, 2))
    vn = v.numpy() / np.abs(v.numpy()).max()
    idn = np.stack(np.indices(arr.shape), -1).astype(np.float32)
    out = ca.Image3D(g1, ca.MEM_HOST)
    print(f"1. MNI152 T1 {a.resolution} mm, {a.bins} bins: MI(I, I) {mi0:.6f} nats; the op's predicted slope "
          f"{float((b.numpy() * vn).sum()):.4e} per voxel of v")
    for e in (0.2, 0.1, 0.05, 0.025):
        vals = []
        for s in (e, -e):
            ca.ApplyH(out, I, ca.Field3D.from_array(np.asfortranarray(idn + s * vn), g1))
            vals.append(ca.MutualInformation(g, out, I, a.bins, lo, hi, lo, hi))
        print(f"   e {e}: MI(+e) - MI(I, I) {vals[0] - mi0:+.3e}, MI(-e) - MI(I, I) {vals[1] - mi0:+.3e}, "
              f"central slope {(vals[0] - vals[1]) / (2 * e):.4e}")

    print("2. the first step's direction, largest component per unit of step (each scale), affine 'none':")
    for pair in ("itself", "half"):
        Fp, Mp = images(a.resolution, pair, 0.0)
        for variant in ("matched", "none"):
            r = register(Fp, Mp, variant, metric="mi", affine="none", device="cpu")
            first = {}
            for rec in r.energies:
                if rec.get("step_vox") and rec["scale"] not in first:
                    first[rec["scale"]] = rec["step_vox"] / rec["step"]
            print(f"   {pair:6s} interp_blur {variant:7s}: " + ", ".join(f"scale {k}: {x:.3g}" for k, x in first.items()))

    print("3. the image onto itself, lddmm mi, affine 'none':")
    for variant in ("matched", "none", "moving"):
        r = register(F, F, variant, metric="mi", affine="none", device="cpu")
        d = np.linalg.norm(r.phiinv.numpy() - np.stack(np.indices(arr.shape), -1), axis=-1)
        q = r.quality
        print(f"   interp_blur {variant:7s}: displacement mean {d.mean():.4f}, largest {d.max():.4f} voxels; "
              f"final / linear energy - 1 {q['final_match_energy'] / q['linear_match_energy'] - 1:+.3e}; "
              f"problems {[p['code'] for p in q['problems']] or '-'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
