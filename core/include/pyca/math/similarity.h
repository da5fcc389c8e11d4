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
// Mutual information (MI) of I and J from a Parzen-windowed joint histogram (Mattes-style): every
// voxel adds cubic B-spline weights beta3(t_I - a) beta3(t_J - b) to the 4 x 4 bins (a, b) around its
// bin coordinates t_I, t_J, in integer fixed point (kMiScale units per unit of weight), so that sums
// in any order give the same bits. MI and its table L(a, b) = log(p(a, b) / p_I(a)) come from the
// integer histogram; dMI/dI(x) = m (kMiScale / N) (dt_I/dI) sum_a beta3'(t_I - a) sum_b beta3(t_J - b)
// L(a, b). Design: docs/design/mutual-information.md.
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

// Histogram units per unit of Parzen weight (2^32). A voxel adds at most 16 products of two cubic
// B-spline weights times a mask weight in [0, 1] (each product <= 4/9, their sum 1 up to rounding),
// so a uint64 histogram holds 2^32 voxels without overflow.
constexpr double kMiScale = 4294967296.0;

// Bins and intensity ranges of a joint histogram: n bins per image, intensities of I in [iLo, iHi]
// and of J in [jLo, jHi] (lo < hi).
struct MiBins {
  int nI, nJ;
  float iLo, iHi, jLo, jHi;
};

// Products and sums that the CUDA compiler may not contract into fused multiply-adds (the CPU build
// contracts none): the histogram's weights are the same doubles, so the same integers, on both. The
// template is the CPU's vector of doubles (core/src/ops/similarity_simd.cpp, compiled without
// contraction): lane by lane the same product and sum.
template <class T>
PYCA_HD_LANES T mulRn(T a, T b) {
  return a * b;
}
template <class T>
PYCA_HD_LANES T addRn(T a, T b) {
  return a + b;
}
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

// The lane operations the MI formulas below need beyond + - * and comparisons, for T = double (one
// voxel: the GPU and the scalar CPU loop); the CPU's SIMD loops specialise it for a vector of doubles
// (core/src/ops/similarity_simd.cpp), so that every lane computes what the scalar functions compute.
template <class T>
struct MiLanes {
  using Int = int;
  using Mask = bool;
  PYCA_HD_LANES static T splat(double a) { return a; }
  PYCA_HD_LANES static Mask greater(T a, double b) { return a > b; }  // false for NaN
  PYCA_HD_LANES static Mask less(T a, double b) { return a < b; }     // false for NaN
  PYCA_HD_LANES static Mask both(Mask a, Mask b) { return a && b; }
  PYCA_HD_LANES static T select(Mask c, T a, T b) { return c ? a : b; }
  PYCA_HD_LANES static Int truncate(T t) { return Int(t); }
  PYCA_HD_LANES static T toReal(Int k) { return T(k); }
  // k > hi ? hi : (k < 0 ? 0 : k), for hi >= 0
  PYCA_HD_LANES static Int clampInt(Int k, int hi) { return k > hi ? hi : (k < 0 ? 0 : k); }
  // double(L[k]): the table of miFromHistogram at index k (the GPU keeps its floats as doubles in shared
  // memory: the same values, converted once)
  PYCA_HD_LANES static T table(const float* L, Int k) { return T(L[k]); }
  PYCA_HD_LANES static T table(const double* L, Int k) { return T(L[k]); }
};

// Parzen window of intensity v on an axis of n >= 4 bins over [lo, hi]: v clamped to [lo, hi] (a NaN
// counts as lo) has the bin coordinate t = 1 + (v - lo) / (hi - lo) (n - 3) in [1, n - 2], so its four
// bins base .. base + 3 (base = min(floor(t) - 1, n - 4)) lie inside the histogram. w[k] = beta3(t -
// base - k), beta3 the cubic B-spline, written as the four pieces of the fraction f = t - base - 1 in
// [0, 1] (no branch per weight); dw[k] = d w[k] / dv (0 where v was clamped), unless dw is null.
// Returns base. T: double (v a float's value), or the CPU's vector of doubles (MiLanes).
template <class T>
PYCA_HD_LANES typename MiLanes<T>::Int miParzen(T v, float lo, float hi, int n, T* w, T* dw) {
  using L = MiLanes<T>;
  using Int = typename MiLanes<T>::Int;
  const double span = double(hi) - double(lo);
  const double dtdv = double(n - 3) / span;
  // v <= lo or NaN: lo, slope 0; v >= hi: hi, slope 0; else v, slope dt/dv
  const auto above = L::greater(v, double(lo));
  const auto below = L::less(v, double(hi));
  const T x = L::select(above, L::select(below, v, L::splat(double(hi))), L::splat(double(lo)));
  const T slope = L::select(L::both(above, below), L::splat(dtdv), L::splat(0.0));
  const T t = addRn(L::splat(1.0), mulRn(x - double(lo), L::splat(dtdv)));
  const Int base = L::clampInt(L::truncate(t) - 1, n - 4);  // t >= 1: truncation is floor
  const T f = t - L::toReal(base + 1), g = 1.0 - f;
  const T f2 = mulRn(f, f), g2 = mulRn(g, g);
  const T f3 = mulRn(f2, f), g3 = mulRn(g2, g);
  w[0] = mulRn(g3, L::splat(1.0 / 6.0));                     // beta3(1 + f)
  w[1] = addRn((2.0 / 3.0) - f2, mulRn(L::splat(0.5), f3));  // beta3(f)
  w[2] = addRn((2.0 / 3.0) - g2, mulRn(L::splat(0.5), g3));  // beta3(f - 1)
  w[3] = mulRn(f3, L::splat(1.0 / 6.0));                     // beta3(f - 2)
  if (dw) {  // -g^2 / 2, -2 f + 3 f^2 / 2, 2 g - 3 g^2 / 2, f^2 / 2, times the slope (no contraction)
    dw[0] = mulRn(mulRn(L::splat(-0.5), g2), slope);
    dw[1] = mulRn(addRn(mulRn(L::splat(-2.0), f), mulRn(L::splat(1.5), f2)), slope);
    dw[2] = mulRn(addRn(mulRn(L::splat(2.0), g), mulRn(L::splat(-1.5), g2)), slope);
    dw[3] = mulRn(mulRn(L::splat(0.5), f2), slope);
  }
  return base;
}

// The mask weight m clamped to [0, 1] (a NaN counts as 0).
template <class T>
PYCA_HD_LANES T miMaskWeight(T m) {
  using L = MiLanes<T>;
  return L::select(L::greater(m, 0.0), L::select(L::less(m, 1.0), m, L::splat(1.0)), L::splat(0.0));
}

// The 16 fixed-point Parzen weights of one voxel (intensities i of I, j of J, mask weight m):
// q[4 a + b] = round(miMaskWeight(m) wI[a] wJ[b] kMiScale) for bin (bI + a, bJ + b), as doubles
// (each below 2^63: converted to an integer by the caller, through a signed integer).
template <class T>
PYCA_HD_LANES void miVoxelProducts(T i, T j, T m, const MiBins& b, typename MiLanes<T>::Int* bI,
                                   typename MiLanes<T>::Int* bJ, T* q) {
  T wI[4], wJ[4];
  *bI = miParzen(i, b.iLo, b.iHi, b.nI, wI, static_cast<T*>(nullptr));
  *bJ = miParzen(j, b.jLo, b.jHi, b.nJ, wJ, static_cast<T*>(nullptr));
  const T mm = miMaskWeight(m);
  for (int a = 0; a < 4; ++a) {
    const T ma = mulRn(mulRn(mm, wI[a]), MiLanes<T>::splat(kMiScale));
    for (int c = 0; c < 4; ++c) q[4 * a + c] = addRn(mulRn(ma, wJ[c]), MiLanes<T>::splat(0.5));
  }
}

// The 16 fixed-point Parzen weights of one voxel (intensities i of I, j of J, mask weight m clamped
// to [0, 1]): q[4 a + b] = round(m wI[a] wJ[b] kMiScale) for bin (bI + a, bJ + b) (each below 2^63:
// converted through a signed integer, one instruction).
PYCA_HD void miVoxelWeights(float i, float j, float m, const MiBins& b, int* bI, int* bJ, std::uint64_t* q) {
  double d[16];
  miVoxelProducts(double(i), double(j), double(m), b, bI, bJ, d);
  for (int k = 0; k < 16; ++k) q[k] = std::uint64_t(std::int64_t(d[k]));
}

// trunc(y) for 0 <= y < 2^31 by double additions instead of a conversion (the GPU converts from double
// at a quarter of its double-precision rate): z = y + 1.5 2^52 holds round-to-nearest(y) in its low
// mantissa bits (ulp(z) = 1), and z - 1.5 2^52 is that integer exactly; one less where it rounded up.
// The integer uint32_t(y) is (tests/cpp/test_similarity_simd.cpp).
PYCA_HD std::uint32_t miTruncU32(double y) {
  constexpr double kMagic = 6755399441055744.0;  // 1.5 * 2^52
  const double z = addRn(y, kMagic);
#ifdef __CUDA_ARCH__
  const std::uint32_t r = std::uint32_t(__double2loint(z));
#else
  std::uint64_t bits;
  std::memcpy(&bits, &z, sizeof bits);
  const std::uint32_t r = std::uint32_t(bits);
#endif
  return r - (addRn(z, -kMagic) > y ? 1u : 0u);
}

// Runs of equal (I, J, mask) triples in a sequence of voxels -- the background, mostly: push() hands
// each run to add(i, j, m, length) once, when the next different voxel (or finish()) ends it, so a run
// adds its weights once, times its length. A NaN never equals itself: it starts a run of its own.
template <class Count>
struct MiRuns {
  float i = 0.f, j = 0.f, m = 0.f;
  Count n = 0;
  template <class Add>
  PYCA_HD void push(float vi, float vj, float vm, const Add& add) {
    if (n && vi == i && vj == j && vm == m) {
      ++n;
      return;
    }
    finish(add);
    i = vi;
    j = vj;
    m = vm;
    n = 1;
  }
  template <class Add>
  PYCA_HD void finish(const Add& add) {
    if (n) add(i, j, m, n);
    n = 0;
  }
};

// sum_a dA[a] sum_c wB[c] LT((bA + a) nB + bB + c): the table LT (rows the bins of A, nB columns) read
// through one voxel's Parzen derivatives along A and weights along B, every product and sum rounded on
// its own (mulRn, addRn: the GPU gives the CPU's bits); T as miParzen's.
template <class T, class Tab>
PYCA_HD_LANES T miTableSum(const T* dA, const T* wB, typename MiLanes<T>::Int bA, typename MiLanes<T>::Int bB,
                           int nB, const Tab* LT) {
  using Int = typename MiLanes<T>::Int;
  using L = MiLanes<T>;
  T g = L::splat(0.0);
  for (int a = 0; a < 4; ++a) {
    const Int k = (bA + a) * nB + bB;
    T r = mulRn(wB[0], L::table(LT, k));
    r = addRn(r, mulRn(wB[1], L::table(LT, k + 1)));
    r = addRn(r, mulRn(wB[2], L::table(LT, k + 2)));
    r = addRn(r, mulRn(wB[3], L::table(LT, k + 3)));
    g = addRn(g, mulRn(dA[a], r));
  }
  return g;
}

// dMI/dI at one voxel: gscale (dt/dI) m sum_a beta3'(t_I - a) sum_b beta3(t_J - b) L(a, b), with L the
// table of miFromHistogram (row-major, L[a nJ + b]) and gscale = kMiScale / N; T as miParzen's (the
// caller converts the result to float).
template <class T, class Tab>
PYCA_HD_LANES T miGradient(T i, T j, T m, const MiBins& b, const Tab* L, float gscale) {
  using Int = typename MiLanes<T>::Int;
  T wI[4], dI[4], wJ[4];
  const Int bI = miParzen(i, b.iLo, b.iHi, b.nI, wI, dI);
  const Int bJ = miParzen(j, b.jLo, b.jHi, b.nJ, wJ, static_cast<T*>(nullptr));
  const T mm = miMaskWeight(m);
  return mulRn(mulRn(miTableSum(dI, wJ, bI, bJ, b.nJ, L), mm), MiLanes<T>::splat(double(gscale)));
}

// Both images' derivatives at one voxel from one pair of Parzen windows: *gI = miGradient(i, j, m, b,
// LI, gscale) and *gJ = miGradient(j, i, m, b transposed, LJ, gscale) (LJ: the table of the transposed
// histogram, rows the bins of J), the same expressions, so the same values. Tab: float, or double holding
// the tables' floats.
template <class T, class Tab>
PYCA_HD_LANES void miGradientPair(T i, T j, T m, const MiBins& b, const Tab* LI, const Tab* LJ, float gscale,
                                  T* gI, T* gJ) {
  using Int = typename MiLanes<T>::Int;
  T wI[4], dI[4], wJ[4], dJ[4];
  const Int bI = miParzen(i, b.iLo, b.iHi, b.nI, wI, dI);
  const Int bJ = miParzen(j, b.jLo, b.jHi, b.nJ, wJ, dJ);
  const T mm = miMaskWeight(m);
  const T gs = MiLanes<T>::splat(double(gscale));
  *gI = mulRn(mulRn(miTableSum(dI, wJ, bI, bJ, b.nJ, LI), mm), gs);
  *gJ = mulRn(mulRn(miTableSum(dJ, wI, bJ, bI, b.nI, LJ), mm), gs);
}

// Whether miParzen clamps v to [lo, hi] (v at or below lo, at or above hi, or NaN): its Parzen derivatives
// are then +-0, and miGradient's value for that image is +0 exactly (a sum of +-0 products from +0, times
// the mask weight and gscale, both >= 0), so a loop may write +0 without evaluating it.
PYCA_HD bool miClamped(float v, float lo, float hi) {
  return !(double(v) > double(lo) && double(v) < double(hi));
}

template <class Tab>
PYCA_HD float miGradAt(float i, float j, float m, const MiBins& b, const Tab* L, float gscale) {
  return float(miGradient(double(i), double(j), double(m), b, L, gscale));
}

template <class Tab>
PYCA_HD void miGradPairAt(float i, float j, float m, const MiBins& b, const Tab* LI, const Tab* LJ,
                          float gscale, float* gI, float* gJ) {
  double u, v;
  miGradientPair(double(i), double(j), double(m), b, LI, LJ, gscale, &u, &v);
  *gI = float(u);
  *gJ = float(v);
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
