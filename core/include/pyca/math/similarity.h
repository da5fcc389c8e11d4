// Math of the `similarity` family (docs/operations/similarity.md), shared by the CPU implementation
// (core/src/ops/similarity.cpp) and the CUDA kernels (cuda/src/ops/similarity.cu, mutual_information.cu):
// window counts of box sums truncated to the grid, and the per-voxel terms of the local normalised
// cross-correlation (LNCC) and of its exact gradient.
//
// With W(y) the window of (2r + 1) voxels per axis centred at y, truncated to the grid and, with a
// support s, to the support (its voxels weighted by s: n(y) = sum over W(y) of s), and window means mu_I,
// mu_J, covariance c = <IJ> - mu_I mu_J, variances vI, vJ, the LNCC of one window is cc(y) = (c^2 +
// eps) / (vI vJ + eps) and the operation's value is S = sum_y w(y) cc(y) (w: mask weights, 1 without a
// mask; a voxel outside the support is in no window). eps in the numerator too makes cc = 1 exactly for
// two equal windows, flat ones included, and their gradient 0: an image compared with itself is at a
// stationary point (with c^2 / (vI vJ + eps), I = J is not one: raising the contrast of a weakly textured
// window raises cc). Since x is in W(y) exactly when y is in W(x) (truncated windows), the derivative of S
// with respect to I(x) is
//   dS/dI(x) = s(x) sum_{y in W(x)} alpha(y) (J(x) - mu_J(y)) - beta(y) (I(x) - mu_I(y))
//   alpha = 2 w c / (n (vI vJ + eps)),  beta = 2 w cc vJ / (n (vI vJ + eps)),
// that is s(x) (J(x) S[alpha] - S[alpha mu_J] - I(x) S[beta] + S[beta mu_I]) with S[.] the same box sums
// (s(x) = 1 without a support).
//
// Mutual information (MI) of I and J from a Parzen-windowed joint histogram (Mattes-style; the window the
// cubic B-spline interpolated linearly between knots, kMiSub to a bin), summed in integers so that sums in
// any order give the same bits; MI and its table L(a, b) = log(p(a, b) / p_I(a)) come from the integer
// histogram, and the gradient from L spread onto the knots. Design: docs/design/mutual-information.md.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

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
// variances are differences of nearly equal numbers. For I = J (the same bits) c, vI and vJ are the
// same doubles, so cc is exactly 1 and alpha, beta (and alpha mu_J, beta mu_I) the same numbers.
PYCA_HD float lnccCoeffs(float sI, float sJ, float sII, float sJJ, float sIJ, float cnt, float w, float eps,
                         float* k) {
  if (!(cnt > 0.f)) {  // a window with no voxel of the support: no term
    k[0] = k[1] = k[2] = k[3] = 0.f;
    return 0.f;
  }
  const double inv = 1.0 / double(cnt);
  const double muI = double(sI) * inv, muJ = double(sJ) * inv;
  const double vI = double(sII) * inv - muI * muI, vJ = double(sJJ) * inv - muJ * muJ;
  // A variance below 0 from rounding: a flat window, whose covariance is 0 too.
  const bool flat = !(vI > 0.0 && vJ > 0.0);
  const double c = flat ? 0.0 : double(sIJ) * inv - muI * muJ;
  const double vIc = vI > 0.0 ? vI : 0.0, vJc = vJ > 0.0 ? vJ : 0.0;
  const double den = vIc * vJc + double(eps);
  const double cc = (c * c + double(eps)) / den;
  const double a = 2.0 * double(w) * inv / den;
  const double alpha = a * c;
  const double beta = a * (cc * vJc);
  k[0] = float(alpha);
  k[1] = float(alpha * muJ);
  k[2] = float(beta);
  k[3] = float(beta * muI);
  return float(double(w) * cc);
}

// The maps whose box sums give a window's statistics, at voxel k: t0..t4 = I, J, I^2, J^2, I J; with a
// support of weight m there (t5 not null) m I, m J, m I^2, m J^2, m I J, and t5 = m, whose box sum is the
// window's weight n (without one n is the box's voxel count, boxCount).
PYCA_HD void lnccTerms(std::size_t k, float i, float j, const float* support, float* t0, float* t1, float* t2,
                       float* t3, float* t4, float* t5) {
  const float m = support ? support[k] : 1.f;
  const float mi = support ? m * i : i, mj = support ? m * j : j;
  t0[k] = mi;
  t1[k] = mj;
  t2[k] = mi * i;
  t3[k] = mj * j;
  t4[k] = mi * j;
  if (support) t5[k] = m;
}

// dS/dI at one voxel from I, J and the box sums of the four coefficient maps: J S[alpha] - S[alpha mu_J]
// - I S[beta] + S[beta mu_I], grouped so that it is exactly 0 where I = J and the sums of alpha and beta
// (and of alpha mu_J and beta mu_I) are equal, with or without contracted multiply-adds.
PYCA_HD float lnccGradAt(float I, float J, float sAlpha, float sAlphaMuJ, float sBeta, float sBetaMuI) {
  return ((J - I) * sAlpha + I * (sAlpha - sBeta)) - (sAlphaMuJ - sBetaMuI);
}

// The same at a voxel of support weight m (it is in the windows with that weight).
PYCA_HD float lnccMaskedGradAt(float I, float J, float m, float sAlpha, float sAlphaMuJ, float sBeta,
                               float sBetaMuI) {
  return m * lnccGradAt(I, J, sAlpha, sAlphaMuJ, sBeta, sBetaMuI);
}

// ---- Mutual information -------------------------------------------------------------------------
// (docs/design/mutual-information.md) Each image's bin coordinate t = 1 + (clamp(v) - lo) / (hi - lo) (n -
// 3) in [1, n - 2] is placed on a fine grid of knots, kMiSub per bin (knot u at t = 1 + u / kMiSub), between
// its knots u and u + 1 at f / kMiFrac (f an integer in [0, kMiFrac]). A voxel adds four integer weights,
// the bilinear products (kMiFrac - fI or fI)(kMiFrac - fJ or fJ), to a fine table F(u, v) (its knots, nf =
// (n - 3) kMiSub + 1 per image); the joint histogram is F convolved with the cubic B-spline sampled at the
// knots (integers miTap): H(a, b) = sum_uv F(u, v) c(u, a) c(v, b). Its Parzen window is the cubic
// B-spline's piecewise-linear interpolant at 1 / kMiSub of a bin (non-negative, a partition of unity),
// every sum an integer: the same bits in any order, on either backend.

// Knots per bin, and the steps of a voxel's position between two knots.
constexpr int kMiSub = 4;
constexpr int kMiFrac = 256;
// The integer taps c(j) = kMiTapOne beta3(j / kMiSub) (kMiTapOne = 6 kMiSub^3: integers), and the
// histogram's units per unit of Parzen weight: kMiFrac^2 for the bilinear weights times kMiTapOne^2.
// A voxel adds at most kMiScale (about 2^33.2) in all: a uint64 histogram holds 2^30 voxels.
constexpr int kMiTapOne = 6 * kMiSub * kMiSub * kMiSub;
constexpr double kMiScale = double(kMiFrac) * double(kMiFrac) * double(kMiTapOne) * double(kMiTapOne);

// Bins and intensity ranges of a joint histogram: n bins per image, intensities of I in [iLo, iHi]
// and of J in [jLo, jHi] (lo < hi).
struct MiBins {
  int nI, nJ;
  float iLo, iHi, jLo, jHi;
};

// Products and sums that the CUDA compiler may not contract into fused multiply-adds (the CPU build
// contracts none): the same values on both backends.
PYCA_HD double mulRn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}
PYCA_HD double addRn(double a, double b) {
#ifdef __CUDA_ARCH__
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}
PYCA_HD float mulRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
PYCA_HD float addRn(float a, float b) {
#ifdef __CUDA_ARCH__
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// The knots of an axis of n bins: (n - 3) kMiSub + 1.
PYCA_HD int miKnots(int n) { return (n - 3) * kMiSub + 1; }

// c(j) = kMiTapOne beta3(j / kMiSub), beta3 the cubic B-spline: 4 K^3 - 6 K j^2 + 3 |j|^3 for |j| < K,
// (2 K - |j|)^3 for K <= |j| < 2 K, else 0 (K = kMiSub). Knot u of an axis weighs c(kMiSub (1 - a) + u)
// on bin a; the taps of one knot sum to kMiTapOne.
PYCA_HD std::int64_t miTap(int j) {
  constexpr std::int64_t K = kMiSub;
  const std::int64_t a = j < 0 ? -std::int64_t(j) : std::int64_t(j);
  if (a >= 2 * K) return 0;
  if (a < K) return 4 * K * K * K - 6 * K * a * a + 3 * a * a * a;
  return (2 * K - a) * (2 * K - a) * (2 * K - a);
}

// The fine grid of a histogram: MiBins, the knots of each axis and each axis' steps per unit of intensity,
// kMiFrac kMiSub (n - 3) / (hi - lo) (a double's quotient rounded to a float once: the same on both
// backends).
struct MiGrid {
  MiBins b;
  int nfI, nfJ;
  float sI, sJ;
};
inline MiGrid miGrid(const MiBins& b) {
  const auto steps = [](int n, float lo, float hi) {
    return float(double(kMiFrac) * double(kMiSub * (n - 3)) / (double(hi) - double(lo)));
  };
  return MiGrid{b, miKnots(b.nI), miKnots(b.nJ), steps(b.nI, b.iLo, b.iHi), steps(b.nJ, b.jLo, b.jHi)};
}

// Where intensity v lies on an axis of nf knots over [lo, hi] (`steps` per unit of intensity): v clamped to
// [lo, hi] (a NaN counts as lo), its position R = round((v - lo) steps) in 1/kMiFrac of a knot spacing
// (floats, halves up), the lower knot of its cell u = min(R / kMiFrac, nf - 2) and its place in the cell f =
// min(R - kMiFrac u, kMiFrac). inside: v strictly inside (lo, hi) (outside, the clamp's derivative is 0).
struct MiKnot {
  int u, f;
  bool inside;
};
PYCA_HD MiKnot miKnot(float v, float lo, float hi, int nf, float steps) {
  const bool above = v > lo, below = v < hi;  // both false for NaN
  const float x = above ? (below ? v : hi) : lo;
  const int R = int(addRn(mulRn(addRn(x, -lo), steps), 0.5f));  // >= 0
  const int u = R / kMiFrac < nf - 2 ? R / kMiFrac : nf - 2;
  const int f = R - kMiFrac * u < kMiFrac ? R - kMiFrac * u : kMiFrac;
  return MiKnot{u, f, above && below};
}

// The mask weight m clamped to [0, 1] (a NaN counts as 0) in 1/kMiFrac, rounded (halves up).
PYCA_HD int miMaskSteps(float m) {
  return m > 0.f ? (m < 1.f ? int(addRn(mulRn(m, float(kMiFrac)), 0.5f)) : kMiFrac) : 0;
}

// One voxel's share of the fine table F: its cell (knots uI, uJ; key = uI nfJ + uJ, F row-major) and the
// weights w of the knots (uI, uJ), (uI, uJ + 1), (uI + 1, uJ), (uI + 1, uJ + 1): the bilinear products
// (kMiFrac - fI or fI)(kMiFrac - fJ or fJ), each times the mask's steps mq / kMiFrac rounded (halves up)
// where mq < kMiFrac. Each weight <= kMiFrac^2 = 2^16, their sum too.
struct MiSplat {
  int key, uI, uJ;
  unsigned w[4];
};
PYCA_HD MiSplat miSplat(float i, float j, int mq, const MiGrid& g) {
  const MiKnot kI = miKnot(i, g.b.iLo, g.b.iHi, g.nfI, g.sI);
  const MiKnot kJ = miKnot(j, g.b.jLo, g.b.jHi, g.nfJ, g.sJ);
  const unsigned gI = unsigned(kMiFrac - kI.f), fI = unsigned(kI.f);
  const unsigned gJ = unsigned(kMiFrac - kJ.f), fJ = unsigned(kJ.f);
  MiSplat s{kI.u * g.nfJ + kJ.u, kI.u, kJ.u, {gI * gJ, gI * fJ, fI * gJ, fI * fJ}};
  if (mq < kMiFrac)
    for (unsigned& w : s.w) w = (unsigned(mq) * w + unsigned(kMiFrac / 2)) / unsigned(kMiFrac);
  return s;
}

// sum over the knots x of an axis of nf knots of v[x stride] c(kMiSub (1 - a) + x): the fine values v
// (a row or column of F, or of its convolution along the other axis) on bin a, an integer.
template <class V>
PYCA_HD std::uint64_t miTapSum(const V* v, std::size_t stride, int nf, int a) {
  const int x0 = kMiSub * (a - 3) + 1 > 0 ? kMiSub * (a - 3) + 1 : 0;
  const int x1 = kMiSub * (a + 1) - 1 < nf - 1 ? kMiSub * (a + 1) - 1 : nf - 1;
  std::uint64_t s = 0;
  for (int x = x0; x <= x1; ++x)
    s += std::uint64_t(v[std::size_t(x) * stride]) * std::uint64_t(miTap(kMiSub * (1 - a) + x));
  return s;
}

// The knot table of the gradient: LF(u, v) = sum_a c(u, a) sum_b c(v, b) L[a nB + b] (L the table of
// miFromHistogram, nA x nB, as doubles; c as miTap), every product and sum rounded on its own in a fixed
// order; and D(u, v) = LF(u + 1, v) - LF(u, v) for u < nfA - 1, the table miGradAt reads.
PYCA_HD double miKnotValue(const float* L, int nA, int nB, int u, int v) {
  // the bins within reach of knots u and v (miTap is 0 beyond), in increasing order
  const int a1 = u / kMiSub + 4 < nA ? u / kMiSub + 4 : nA, b1 = v / kMiSub + 4 < nB ? v / kMiSub + 4 : nB;
  double s = 0.0;
  for (int a = u / kMiSub; a < a1; ++a) {
    const std::int64_t ca = miTap(kMiSub * (1 - a) + u);
    if (!ca) continue;
    double r = 0.0;
    for (int b = v / kMiSub; b < b1; ++b) {
      const std::int64_t cb = miTap(kMiSub * (1 - b) + v);
      if (cb) r = addRn(r, mulRn(double(cb), double(L[std::size_t(a) * nB + b])));
    }
    s = addRn(s, mulRn(double(ca), r));
  }
  return s;
}
PYCA_HD double miSlopeValue(const float* L, int nA, int nB, int u, int v) {
  return addRn(miKnotValue(L, nA, nB, u + 1, v), -miKnotValue(L, nA, nB, u, v));
}

// dMI/dA at one voxel (a of image A, b of the other image B, mask steps mq): the derivative of the
// histogram's window along A (piecewise constant: the difference of the two knots' taps times ds/da)
// with B's weights as the histogram has them: steps mq ((kMiFrac - fB) D(uA, uB) + fB D(uA, uB + 1)) gk,
// gk = gscale / (kMiScale kMiFrac) (miFromHistogram's gscale = kMiScale / N; steps = kMiFrac ds/da), D the
// slope table (rows the knot cells of A, nfB columns); +0 where a is clamped (the clamp's derivative). Order
// of operations fixed.
PYCA_HD float miGradAt(float a, float b, int mq, float loA, float hiA, int nfA, float sA, float loB,
                       float hiB, int nfB, float sB, const double* D, double gk) {
  const MiKnot kA = miKnot(a, loA, hiA, nfA, sA);
  if (!kA.inside || mq == 0) return 0.f;
  const MiKnot kB = miKnot(b, loB, hiB, nfB, sB);
  const double* row = D + std::size_t(kA.u) * std::size_t(nfB) + std::size_t(kB.u);
  const double s = addRn(mulRn(double(kMiFrac - kB.f), row[0]), mulRn(double(kB.f), row[1]));
  return float(mulRn(mulRn(mulRn(s, double(mq)), double(sA)), gk));
}

// miGradAt for image I (A = I, D = DI) and for image J (A = J, D = DJ, the slope table of the transposed
// histogram's L, rows the knot cells of J) of a grid.
PYCA_HD float miGradI(float i, float j, int mq, const MiGrid& g, const double* DI, double gk) {
  return miGradAt(i, j, mq, g.b.iLo, g.b.iHi, g.nfI, g.sI, g.b.jLo, g.b.jHi, g.nfJ, g.sJ, DI, gk);
}
PYCA_HD float miGradJ(float i, float j, int mq, const MiGrid& g, const double* DJ, double gk) {
  return miGradAt(j, i, mq, g.b.jLo, g.b.jHi, g.nfJ, g.sJ, g.b.iLo, g.b.iHi, g.nfI, g.sI, DJ, gk);
}

// The marginals of the integer joint histogram H (row-major, H[a nJ + b]): hI[a] = sum_b H(a, b), hJ[b] =
// sum_a H(a, b); returns N, the sum of H (integer sums: exact).
inline std::uint64_t miMarginals(const std::uint64_t* H, int nI, int nJ, std::vector<std::uint64_t>& hI,
                                 std::vector<std::uint64_t>& hJ) {
  hI.assign(std::size_t(nI), 0);
  hJ.assign(std::size_t(nJ), 0);
  std::uint64_t N = 0;
  for (int a = 0; a < nI; ++a)
    for (int b = 0; b < nJ; ++b) {
      const std::uint64_t h = H[std::size_t(a) * nJ + b];
      hI[std::size_t(a)] += h;
      hJ[std::size_t(b)] += h;
      N += h;
    }
  return N;
}

// MI of the integer joint histogram H (row-major, H[a nJ + b]: a the bin of I, b of J) in nats, summed
// in a fixed order (host code, the same on both backends); L (nI nJ floats) <- log(p(a, b) / p_I(a))
// where H(a, b) > 0, else 0; *gscale <- kMiScale / N (N = sum of H; 0 when H is empty).
inline double miFromHistogram(const std::uint64_t* H, int nI, int nJ, float* L, float* gscale) {
  std::vector<std::uint64_t> hI, hJ;
  const std::uint64_t N = miMarginals(H, nI, nJ, hI, hJ);
  *gscale = N ? float(kMiScale / double(N)) : 0.f;
  double mi = 0.0;
  const double dN = double(N);
  for (int a = 0; a < nI; ++a)
    for (int b = 0; b < nJ; ++b) {
      const std::size_t k = std::size_t(a) * nJ + b;
      if (H[k] == 0) {
        L[k] = 0.f;
        continue;
      }
      const double h = double(H[k]);
      L[k] = float(std::log(h / double(hI[std::size_t(a)])));
      mi += h / dN * std::log(h * dN / (double(hI[std::size_t(a)]) * double(hJ[std::size_t(b)])));
    }
  return mi;
}

// Studholme's normalised MI of H, NMI = (H_I + H_J) / H_IJ (the marginal and joint entropies of p = H / N,
// in a fixed order), and the table of its derivative with respect to I: L[a nJ + b] <- (NMI log p(a, b) -
// log p_I(a)) / H_IJ where H(a, b) > 0, else 0 (dNMI = sum_ab dp(a, b) L(a, b): dH_J vanishes, as p_J
// does not depend on I, and constants drop, as sum_ab dp = 0); *gscale as miFromHistogram. Returns 1
// with L = 0 when H_IJ is 0 (one bin: no information to normalise).
inline double nmiFromHistogram(const std::uint64_t* H, int nI, int nJ, float* L, float* gscale) {
  std::vector<std::uint64_t> hI, hJ;
  const std::uint64_t N = miMarginals(H, nI, nJ, hI, hJ);
  *gscale = N ? float(kMiScale / double(N)) : 0.f;
  const double dN = double(N);
  const auto plogp = [&](std::uint64_t h) { return h ? double(h) / dN * std::log(double(h) / dN) : 0.0; };
  double eI = 0.0, eJ = 0.0, eIJ = 0.0;
  for (int a = 0; a < nI; ++a) eI -= plogp(hI[std::size_t(a)]);
  for (int b = 0; b < nJ; ++b) eJ -= plogp(hJ[std::size_t(b)]);
  for (std::size_t k = 0; k < std::size_t(nI) * std::size_t(nJ); ++k) eIJ -= plogp(H[k]);
  if (!(eIJ > 0.0)) {
    for (std::size_t k = 0; k < std::size_t(nI) * std::size_t(nJ); ++k) L[k] = 0.f;
    return 1.0;
  }
  const double nmi = (eI + eJ) / eIJ;
  for (int a = 0; a < nI; ++a)
    for (int b = 0; b < nJ; ++b) {
      const std::size_t k = std::size_t(a) * nJ + b;
      L[k] =
          H[k] ? float((nmi * std::log(double(H[k]) / dN) - std::log(double(hI[std::size_t(a)]) / dN)) / eIJ)
               : 0.f;
    }
  return nmi;
}

}  // namespace math
}  // namespace pyca
