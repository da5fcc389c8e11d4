"""The set-up that mi_lab.py and syn_mi_checks.py share: their pair arguments (--resolution, the direction(s),
the contrast(s), --device) and bench_multimodal.py's real pairs (Colin27 and the MNI152 template on the
template's grid; the moving brain's T1 or a T2-/FLAIR-like contrast of it) as NumPy arrays and pyca images."""
from __future__ import annotations

import os
import sys
from typing import NamedTuple

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench_multimodal import brains  # noqa: E402


def add_arguments(ap, *, plural, direction, contrast):
    """--resolution, --direction(s) ('moving->fixed', comma-separated when plural), --contrast(s) (of the
    moving brain: t1, t2, flair) and --device."""
    s = "s" if plural else ""
    ap.add_argument("--resolution", type=int, default=2, help="mm")
    ap.add_argument(f"--direction{s}", default=direction, help="moving->fixed: colin->mni or mni->colin"
                    + (", comma-separated" if plural else ""))
    ap.add_argument(f"--contrast{s}", default=contrast, help="of the moving brain: t1, t2 or flair"
                    + (", comma-separated" if plural else ""))
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])


class Pair(NamedTuple):
    fixed: np.ndarray  # the fixed brain's T1
    fixed_labels: np.ndarray
    moving: np.ndarray  # the moving brain in the pair's contrast
    moving_labels: np.ndarray
    moving_t1: np.ndarray


class Pairs:
    """The two brains at `resolution` mm; pair(direction, contrast) and each(directions, contrasts) give the
    pairs (the other contrasts as bench_multimodal.py makes them: seed 1, the moving brain's tissue
    centres); image() makes a pyca image on the template's grid."""

    def __init__(self, resolution):
        import pyca as ca

        self.resolution = resolution
        self.brains, aff = brains(resolution)
        sp = np.linalg.norm(aff[:3, :3], axis=0)
        self.grid = ca.GridInfo(ca.Vec3Di(*self.brains["mni"][0].shape), ca.Vec3Df(*sp), ca.Vec3Df(*aff[:3, 3]))

    def image(self, x):
        import pyca as ca

        return ca.Image3D.from_array(np.asfortranarray(x, np.float32), self.grid)

    def pair(self, direction, contrast):
        from pyca.apps import data

        mv, fx = direction.split("->")
        t1, labels, centres = self.brains[mv]
        moving = t1 if contrast == "t1" else data.other_contrast(t1, contrast, seed=1, centres=centres,
                                                                 spacing=(self.resolution,) * 3)
        return Pair(self.brains[fx][0], self.brains[fx][1], moving, labels, t1)

    def each(self, directions, contrasts):
        """(direction, contrast, pair) for the comma-separated directions and contrasts, contrasts inner."""
        for direction in directions.split(","):
            for contrast in contrasts.split(","):
                yield direction, contrast, self.pair(direction, contrast)
