"""The built-in atlas cohort: deterministic random diffeomorphic warps of the built-in phantom.

Subject k is ``phantom(w_k(p))`` at the world points p of the grid, with w_k a composition of an
anisotropic scaling and three shears (x by a smooth function of (y, z), y by one of (x, z), z by one
of (x, y)). Each shear is invertible whatever its amplitude (unit Jacobian), the scaling too, so
every w_k is a diffeomorphism. The random coefficients come from numpy's generator seeded with
`seed`; subjects come in antithetic pairs (coefficients c and -c, scalings s and 1/s), so the warps
average to the identity to first order and the unbiased template of the cohort is the phantom
itself: the ground truth a built atlas is compared with.
"""
from __future__ import annotations

import numpy as np

from .. import core
from . import data

__all__ = ["synthetic_cohort", "cohort_grid", "DEFAULT_COHORT_SIZE"]

DEFAULT_COHORT_SIZE = (32, 32, 32)
_MODES = 3  # sine modes per shear function
_AMPLITUDE = 3.0  # world units per mode (the phantom's radius is 16, the box 64)
_SCALE = 0.06  # log of the largest scaling per axis


def cohort_grid(size=DEFAULT_COHORT_SIZE):
    """The grid of the built-in cohort: the built-in phantom's 64^3 world-unit box at `size` voxels."""
    return data.builtin_grid(tuple(int(s) for s in size))


def _shear_fn(rng):
    # A smooth function of two coordinates: a few low-frequency sine modes over the 64-unit box.
    freq = rng.integers(1, 3, size=(_MODES, 2)) * rng.choice([-1, 1], size=(_MODES, 2))
    phase = rng.uniform(0, 2 * np.pi, size=_MODES)
    amp = rng.normal(0.0, _AMPLITUDE / np.sqrt(_MODES), size=_MODES)
    return freq, phase, amp


def _eval(fn, u, v, sign):
    freq, phase, amp = fn
    out = np.zeros_like(u)
    for (fu, fv), ph, a in zip(freq, phase, amp):
        out += sign * a * np.sin(2 * np.pi * (fu * u + fv * v) / data.BOX + ph)
    return out


def _warp_params(n, seed):
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range((n + 1) // 2):
        pairs.append({"log_scale": rng.uniform(-_SCALE, _SCALE, size=3),
                      "shears": [_shear_fn(rng) for _ in range(3)]})
    return [(pairs[k // 2], 1.0 if k % 2 == 0 else -1.0) for k in range(n)]


def _warp(p, sign, x, y, z, two_d):
    s = np.exp(sign * p["log_scale"])
    x, y, z = x * s[0], y * s[1], (z if two_d else z * s[2])
    a, b, c = p["shears"]
    x = x + _eval(a, y, z, sign)
    y = y + _eval(b, x, z, sign)
    if not two_d:
        z = z + _eval(c, x, y, sign)
    return x, y, z


def synthetic_cohort(n=16, size=DEFAULT_COHORT_SIZE, seed=0):
    """(subjects, truth): `n` Image3D subjects (host memory) and the ground-truth phantom, all on
    cohort_grid(size) (size z = 1 gives 2-D images of the phantom's central slice)."""
    if int(n) < 2:
        raise ValueError(f"synthetic_cohort: need at least 2 subjects, got {n}")
    g = cohort_grid(size)
    sp = tuple(g.spacing())
    axes = [(np.arange(m) - (m - 1) / 2.0) * s for m, s in zip(g.size(), sp)]
    x, y, z = np.meshgrid(*axes, indexing="ij")
    two_d = g.size().z == 1

    def image(arr):
        return core.Image3D.from_array(np.asfortranarray(arr, dtype=np.float32), g)

    subjects = [image(data.phantom(*_warp(p, sign, x, y, z, two_d))) for p, sign in _warp_params(int(n), seed)]
    return subjects, image(data.phantom(x, y, z))
