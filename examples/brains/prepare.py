"""Two real brains on one 2 mm grid, for docs/tutorial-brains.md.

    python3 examples/brains/prepare.py OUT_FOLDER

Writes OUT_FOLDER/mni.nii.gz (the MNI152 2009c T1 template that nilearn's wheel ships, 2 mm block
means), OUT_FOLDER/mni_tissues.nii.gz (its grey / white matter labels: 1, 2) and
OUT_FOLDER/colin.nii.gz (Colin27, the brain-extracted ch2bet of Debian's mricron-data, resampled
with pyca.ResampleWorld onto the same 2 mm grid, world coordinates). Both are brains of different
people: registering one onto the other is an inter-subject registration.
"""
import os
import sys

import numpy as np

import pyca as ca
from pyca.apps import data

COLIN = "/usr/share/mricron/templates/ch2bet.nii.gz"  # apt-get install mricron-data


def main(out):
    os.makedirs(out, exist_ok=True)
    t1, tissues, aff = data.mni_template(resolution=2)  # needs nilearn (pip install nilearn)
    grid = ca.GridInfo(ca.Vec3Di(*t1.shape), ca.Vec3Df(*np.diag(aff)[:3]), ca.Vec3Df(*aff[:3, 3]))
    ca.io.save_image(ca.Image3D.from_array(t1, grid), os.path.join(out, "mni.nii.gz"))
    ca.io.save_image(ca.Image3D.from_array(tissues, grid), os.path.join(out, "mni_tissues.nii.gz"))
    if not os.path.exists(COLIN):
        sys.exit(f"prepare.py: {COLIN} is missing: apt-get install mricron-data")
    colin = ca.io.load_image(COLIN)
    on_grid = ca.Image3D(grid, ca.MEM_HOST)
    ca.ResampleWorld(on_grid, colin, ca.BACKGROUND_STRATEGY_ZERO)
    ca.io.save_image(on_grid, os.path.join(out, "colin.nii.gz"))
    print(f"wrote mni.nii.gz, mni_tissues.nii.gz and colin.nii.gz ({'x'.join(map(str, t1.shape))} voxels, "
          f"2 mm) to {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "brains")
