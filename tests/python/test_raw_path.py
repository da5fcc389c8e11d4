"""The files as shipped (issue 36): two images of one anatomy with different fields of view and
intensity scales must be compared like with like. Reference: the object's own intensities (NumPy)."""
from __future__ import annotations

import numpy as np

import pyca as ca
from pyca.apps import lddmm


def _object(shape, pad):
    """Three tissues (0.3, 0.6, 0.9) in nested boxes, surrounded by `pad` voxels of zero background."""
    a = np.zeros(shape, np.float32)
    a[2:-2, 2:-2, 2:-2] = 0.3
    a[5:-5, 5:-5, 5:-5] = 0.6
    a[8:-8, 8:-8, 8:-8] = 0.9
    return np.pad(a, pad)


def test_histogram_matching_ignores_the_background_of_another_field_of_view():
    """The moving image: the same object at another scale (0-255), in a field of view with far more
    background. Matched to the fixed image, each tissue takes the fixed image's value; quantiles over
    whole images (the background's share differing) mapped the darkest tissue onto the background."""
    f = _object((24, 24, 24), 2)
    m = 255.0 * _object((24, 24, 24), 10)
    g = lambda a: ca.GridInfo(a.shape, (1.0, 1.0, 1.0), (0.0, 0.0, 0.0))  # noqa: E731
    F = ca.Image3D.from_array(np.asfortranarray(f), g(f))
    M = ca.Image3D.from_array(np.asfortranarray(m, np.float32), g(m))
    out = lddmm._histogram_matched(M, F).numpy()
    for v in (0.3, 0.6, 0.9):
        got = out[np.isclose(m, 255.0 * v)]
        assert np.allclose(got, v, atol=0.02), (v, got.min(), got.max())
    assert np.all(out[m == 0] == 0)
