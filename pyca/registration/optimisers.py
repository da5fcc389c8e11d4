"""Optimisers of registration: step rules that lower a problem's energy without knowing what its
state is (docs/design/registration.md).

- ``descend(problem, iterations, ...)``: gradient descent with LDDMM's step rule (an automatic step
  with growth, halving and undo) or a fixed step;
- ``stop_rule(history, tol)``: the stopping test on a history of accepted energies;
- ``GradientDescent``, ``Adam``: element-wise step rules on a list of pyca arrays (Field3D or
  Image3D: velocity fields, displacements), for methods that compute their own gradients and take
  a step per iteration (``opt.step(grads)``), on CPU and GPU alike.

A problem for ``descend`` offers (pyca/apps/_lddmm_solver.py's level is one):

    forward()        -> (match energy, anything): the state's images from its parameters
    match()          -> the match energy of the last forward() (the target may have changed since)
    reg_energy()     -> the regularisation energy of the current parameters
    gradients()      the energy's gradient at the current parameters (may be computed lazily)
    direction_max()  -> the largest component of the update direction, per unit of step, in voxels
    update(eps)      parameters <- parameters + eps * direction (the previous kept for undo())
    undo()           back to the parameters (and images) before the last update() and forward()
    halve()          after update(eps), forward(), undo(): the state update(eps / 2) would give
    admissible()     (optional) after forward(): False bars the step (it is undone as one that raised the energy)
"""
from __future__ import annotations

import numpy as np

from .. import core as ca

__all__ = ["descend", "stop_rule", "NoDescent", "GradientDescent", "Adam", "STEP_GROW", "STEP_MAX", "STOP_WINDOW",
           "MAX_REJECTED"]

STEP_GROW, STEP_MAX = 1.25, 0.45  # step='auto': growth after an accepted step, and its cap (< 0.5)
STOP_WINDOW = 5  # stop_rule's window of accepted iterations
MAX_REJECTED = 8  # a scale ends after this many rejected steps in a row


class NoDescent(ValueError):
    """A fixed step lowered the energy in none of its halvings: the problem would end where it began."""

    def __init__(self, eps, tries):
        super().__init__(f"a fixed step lowered the energy in none of {tries} tries (down to {eps * 2:g})")
        self.eps, self.tries = eps, tries


def stop_rule(hist, tol, window=STOP_WINDOW):
    """True when the last `window` accepted iterations together lowered the energy by less than
    `window * tol` times what the scale has gained so far (hist[0] - hist[-1]). Measured against the
    gain, not the energy itself: an energy with a large constant part (LNCC's flat background, the
    regulariser carried from a coarser scale) would otherwise stop at once."""
    return len(hist) > window and (hist[-window - 1] - hist[-1]) < window * tol * (hist[0] - hist[-1])


def descend(lev, n_it, *, step="auto", max_step=0.5, tol=0.0, records=None, tag=None, label="", pbar=None,
            forwarded=False):
    """Gradient descent of `lev` (see the module's docstring) for at most n_it iterations; returns the
    report {**tag, iterations, max_iterations, stop, energy_start, energy_end, last_relative_decrease}.

    step: 'auto' (the first step sized so that the largest velocity change is max_step voxels, then
    times STEP_GROW after each accepted step, up to STEP_MAX) or a fixed eps; a rejected step (the
    energy rose or is not finite) is undone and halved. Stops when stop_rule(history, tol) holds, after
    MAX_REJECTED rejections in a row, or at n_it. A problem that offers admissible() (called after
    forward(), on a step that lowered the energy) has the step rejected too where it returns False (a map
    that would fold). records: a list that receives one dict per iteration ({**tag, iteration, energy,
    match, reg, step, step_vox (the step in voxels, with step='auto'), accepted; with admissible(),
    inadmissible}); pbar: a progress bar (set_postfix_str,
    update) labelled `label`; forwarded: lev.forward() has run with the current parameters (only the
    target may have changed since). A fixed step that lowered nothing raises NoDescent."""
    tag = dict(tag or {})
    match = lev.match() if forwarded else lev.forward()[0]
    E = match + lev.reg_energy()
    hist = [E]
    auto = step == "auto"
    eps = None if auto else float(step)
    fails, stop, it = 0, "iteration cap", -1
    grid = getattr(lev, "grid", None)
    nvox = float(grid.nVox()) if grid is not None else 1.0  # energies shown per voxel
    dmax = None  # the direction's largest component, voxels per unit of eps: the step in voxels is eps dmax
    admissible = getattr(lev, "admissible", None)
    barred = False
    for it in range(n_it):
        if fails:  # the rejected step, halved: no gradients to compute again (halve())
            lev.halve()
        else:
            lev.gradients()
            if eps is None:
                dmax = lev.direction_max()
                if dmax == 0:  # a stationary point (equal images at the identity): no step would move anything
                    if pbar is not None:  # this iteration and the rest, none of them run
                        pbar.update(n_it - it)
                    stop, it = "converged (the update direction is zero)", it - 1
                    break
                eps = min(0.25, float(max_step) / dmax) if dmax > 0 else 0.25
            lev.update(eps)
        m_new, _ = lev.forward()
        r_new = lev.reg_energy()
        E_new = m_new + r_new
        accepted = bool(np.isfinite(E_new) and E_new <= E)
        barred = accepted and admissible is not None and not admissible()  # e.g. a map that would fold
        accepted = accepted and not barred
        if records is not None:
            records.append({**tag, "iteration": it, "energy": E_new, "match": m_new, "reg": r_new, "step": eps,
                            "step_vox": eps * dmax if dmax else None, "accepted": accepted,
                            **({"inadmissible": barred} if admissible is not None else {})})
        if accepted:
            E, match, fails = E_new, m_new, 0
            hist.append(E)
            if auto:  # the step grows again after a successful one
                eps = min(eps * STEP_GROW, STEP_MAX)
        else:  # back to the previous parameters (and their images), half the step
            lev.undo()
            eps *= 0.5
            fails += 1
        if pbar is not None:
            # per voxel, and the step as the velocity change it makes in voxels (eps is no unit to read)
            shown = f"~{eps * dmax:.2g} vox" if dmax else f"eps {eps:.2g}"
            pbar.set_postfix_str(f"{label} E/vox={E / nvox:.3g} match/vox={match / nvox:.3g} step={shown}",
                                 refresh=False)
            pbar.update(1)
        if accepted and stop_rule(hist, float(tol)):
            stop = f"converged (the last {STOP_WINDOW} iterations gained < {STOP_WINDOW * tol:g} of the scale's gain)"
        elif fails >= MAX_REJECTED:
            stop = (f"step too small ({MAX_REJECTED} rejected steps in a row, the last inadmissible: e.g. a map that "
                    "would fold)" if barred else
                    f"step too small ({MAX_REJECTED} rejected steps in a row)")
        else:
            continue
        if pbar is not None:
            pbar.update(n_it - it - 1)
        break
    if not auto and fails and len(hist) == 1:  # a fixed step that lowered nothing: it would end as it began
        raise NoDescent(eps, fails)
    rel = (hist[-2] - hist[-1]) / abs(hist[-1]) if len(hist) > 1 and hist[-1] != 0 else 0.0
    return {**tag, "iterations": it + 1, "max_iterations": n_it, "stop": stop, "energy_start": hist[0],
            "energy_end": hist[-1], "last_relative_decrease": rel}


# ------------------------------------------------------------------------------------------------
# Element-wise step rules on pyca arrays
def _like(x):
    out = type(x)(x.grid(), x.memType())
    ca.SetMem(out, 0.0)
    return out


class GradientDescent:
    """x <- x - lr g for each array x of params and its gradient g (the list given to step())."""

    def __init__(self, params, lr):
        self.params, self.lr = list(params), float(lr)

    def step(self, grads):
        for x, g in zip(self.params, grads, strict=True):
            ca.Add_MulC_I(x, g, -self.lr)


class Adam:
    """Adam (Kingma and Ba): per element, with t the number of steps taken,

        m <- b1 m + (1 - b1) g,   v <- b2 v + (1 - b2) g^2,
        x <- x - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)

    for each array x of params (Field3D or Image3D, any memory type) and its gradient g. The moments
    live beside the parameters (two arrays each, and one scratch array); reset() zeroes them."""

    def __init__(self, params, lr, betas=(0.9, 0.999), eps=1e-8):
        self.params, self.lr = list(params), float(lr)
        self.b1, self.b2 = (float(b) for b in betas)
        if not (0 <= self.b1 < 1 and 0 <= self.b2 < 1 and self.lr > 0 and eps > 0):
            raise ValueError(f"Adam: need lr > 0, 0 <= betas < 1, eps > 0; got lr={lr}, betas={betas}, eps={eps}")
        self.eps = float(eps)
        self.m = [_like(x) for x in self.params]
        self.v = [_like(x) for x in self.params]
        self._tmp = [_like(x) for x in self.params]
        self.t = 0

    def reset(self):
        self.t = 0
        for a in self.m + self.v:
            ca.SetMem(a, 0.0)

    def step(self, grads):
        self.t += 1
        c1, c2 = 1.0 - self.b1 ** self.t, 1.0 - self.b2 ** self.t
        for x, g, m, v, tmp in zip(self.params, grads, self.m, self.v, self._tmp, strict=True):
            ca.MulC_Add_MulC_I(m, self.b1, g, 1.0 - self.b1)
            ca.Sqr(tmp, g)
            ca.MulC_Add_MulC_I(v, self.b2, tmp, 1.0 - self.b2)
            ca.MulC(tmp, v, 1.0 / c2)
            ca.Sqrt_I(tmp)
            ca.AddC_I(tmp, self.eps)
            ca.Div(tmp, m, tmp)  # m-hat / (sqrt(v-hat) + eps), up to the factor 1 / c1 (element-wise: in place)
            ca.Add_MulC_I(x, tmp, -self.lr / c1)
