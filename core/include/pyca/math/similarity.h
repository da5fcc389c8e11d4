// Math of the `similarity` family (docs/operations/similarity.md), shared by the CPU implementation
// (core/src/ops/similarity.cpp) and the CUDA kernels (cuda/src/ops/similarity.cu): window counts of
// box sums truncated to the grid, and the per-voxel terms of the local normalised cross-correlation
// (LNCC) and of its exact gradient.
//
// With W(y) the window of (2r + 1) voxels per axis centred at y, truncated to the grid (n(y) voxels),
// and window means mu_I, mu_J, covariance c = <IJ> - mu_I mu_J, variances vI, vJ, the LNCC of one
// window is cc(y) = c^2 / (vI vJ + eps) and the operation's value is S = sum_y w(y) cc(y) (w: mask
// weights, 1 without a mask). Since x is in W(y) exactly when y is in W(x) (truncated windows), the
// derivative of S with respect to I(x) is
//   dS/dI(x) = sum_{y in W(x)} alpha(y) (J(x) - mu_J(y)) - beta(y) (I(x) - mu_I(y))
//   alpha = 2 w c / (n (vI vJ + eps)),  beta = 2 w c^2 vJ / (n (vI vJ + eps)^2),
// that is J(x) S[alpha] - S[alpha mu_J] - I(x) S[beta] + S[beta mu_I] with S[.] the same box sums.
#pragma once

#include "pyca/config.h"

namespace pyca {
namespace math {

// Voxels of the window of radius r around index i on an axis of n voxels (truncated to [0, n)).
PYCA_HD int boxCount(int i, int r, int n) {
  const int lo = i - r < 0 ? 0 : i - r;
  const int hi = i + r > n - 1 ? n - 1 : i + r;
  return hi - lo + 1;
}

// From the five window sums of one voxel (sum I, sum J, sum I^2, sum J^2, sum IJ over cnt voxels)
// and the weight w: k[0..3] = (alpha, alpha mu_J, beta, beta mu_I); returns w cc. In double: the
// variances are differences of nearly equal numbers.
PYCA_HD float lnccCoeffs(float sI, float sJ, float sII, float sJJ, float sIJ, float cnt, float w, float eps,
                         float* k) {
  const double inv = 1.0 / double(cnt);
  const double muI = double(sI) * inv, muJ = double(sJ) * inv;
  double vI = double(sII) * inv - muI * muI, vJ = double(sJJ) * inv - muJ * muJ;
  vI = vI > 0.0 ? vI : 0.0;
  vJ = vJ > 0.0 ? vJ : 0.0;
  const double c = double(sIJ) * inv - muI * muJ;
  const double den = vI * vJ + double(eps);
  const double alpha = 2.0 * double(w) * c * inv / den;
  const double beta = 2.0 * double(w) * c * c * vJ * inv / (den * den);
  k[0] = float(alpha);
  k[1] = float(alpha * muJ);
  k[2] = float(beta);
  k[3] = float(beta * muI);
  return float(double(w) * c * c / den);
}

// dS/dI at one voxel from I, J and the box sums of the four coefficient maps.
PYCA_HD float lnccGradAt(float I, float J, float sAlpha, float sAlphaMuJ, float sBeta, float sBetaMuI) {
  return J * sAlpha - sAlphaMuJ - I * sBeta + sBetaMuI;
}

}  // namespace math
}  // namespace pyca
