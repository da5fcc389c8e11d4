// The `filters` family, Fourier part: ApplyFluidOperator (ops/filters.yaml) and the
// FluidKernelFFT class (pyca/filters.h). CPU: FFTW single precision, real-to-complex plans made
// once per grid size (and thread count) and cached for the process; the GPU side is in
// cuda/src/ops/filters_fft.cu. The symbol of the operator is in pyca/math/filters.h; the
// semantics in docs/operations/filters.md.
#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "ops/filters_cuda.h"
#include "ops/reductions_cuda.h"
#include "pyca/detail/checks.h"
#include "pyca/detail/parallel.h"
#include "pyca/errors.h"
#include "pyca/filters.h"
#include "pyca/math/filters.h"
#include "pyca/ops/filters.h"
#include "pyca/runtime.h"

namespace pyca {

namespace {

// FFTW's planner is not thread-safe: every plan creation and destruction holds this.
std::mutex& plannerMutex() {
  static std::mutex* m = new std::mutex;  // never destroyed: usable until the process ends
  return *m;
}

// The most time FFTW may spend measuring one plan (forward or inverse) of a grid size.
constexpr double kMeasureSeconds = 2.0;

// PYCA_FFTW_MEASURE=1: measured host plans for large grids (see FftwPlans).
bool measureRequested() {
  const char* v = std::getenv("PYCA_FFTW_MEASURE");
  return v && std::strcmp(v, "1") == 0;
}

// FFTW's description of a plan ("" for none).
std::string planText(fftwf_plan p) {
  if (!p) return {};
  char* text = fftwf_sprint_plan(p);
  std::string out = text ? text : "";
  std::free(text);
  return out;
}

// Plans and scratch of one grid size. The scratch is shared, so one caller at a time (`use`).
struct FftwPlans {
  Vec3Di size;
  std::size_t nReal = 0, nCplx = 0;  // floats per real component, complex values per component
  float* real = nullptr;             // nReal floats: input/output when a user plane is misaligned
  fftwf_complex* cplx[3] = {nullptr, nullptr, nullptr};
  fftwf_plan fwd = nullptr, bwd = nullptr;  // made on real <-> cplx[0]; executed with new arrays
  int nthreads = 1;
  unsigned flags = FFTW_ESTIMATE;
  // K on a band (fluidApplyCpu): the plans of the last band used, made on its first call. Along x
  // every row, into `spectrum`; along y the columns kx < nkx, from `spectrum` into cplx[c]; along z
  // the band's columns, in one or two ranges of rows (0..by and ny - by..ny - 1; rows = ny: every
  // row, one range); back along y in place, and along x keeping cplx[c] (FFTW_PRESERVE_INPUT), so
  // that its columns kx >= nkx, zeroed once (zeros[c]), stay zero from call to call. Made on real,
  // spectrum and cplx[0] (the ranges at their offsets), executed on every component's arrays.
  struct Band {
    int nkx = -1, rows = -1, by = -1;
    fftwf_plan x = nullptr, xb = nullptr, y = nullptr, yb = nullptr, z[2] = {}, zb[2] = {};
    int zStart[2] = {0, 0};
    fftwf_complex* spectrum = nullptr;  // nCplx
    bool zeros[3] = {false, false, false};
  } band;
  std::mutex use;

  explicit FftwPlans(const Vec3Di& s, int threads) : size(s), nthreads(threads) {
    nReal = std::size_t(s.x) * s.y * s.z;
    nCplx = std::size_t(s.x / 2 + 1) * s.y * s.z;
    // Row-major dims (z, y, x), leading size-1 dims dropped (2-D and 1-D grids).
    int dims[3] = {s.z, s.y, s.x};
    int first = 0;
    while (first < 2 && dims[first] == 1) ++first;
    const int rank = 3 - first;
    real = fftwf_alloc_real(nReal);
    for (auto& c : cplx) c = fftwf_alloc_complex(nCplx);
    if (!real || !cplx[0] || !cplx[1] || !cplx[2]) {
      release();
      throw OutOfMemory("FluidKernelFFT: out of host memory for the FFT buffers of a " + std::to_string(s.x) +
                        "x" + std::to_string(s.y) + "x" + std::to_string(s.z) + " grid");
    }
    {
      std::lock_guard<std::mutex> lk(plannerMutex());
      // Estimated plans depend on the grid alone, so a rerun (another process, another number of
      // threads) gives the same bits; measured plans are chosen by timing, differ from process to
      // process and cost seconds of planning per grid size. PYCA_FFTW_MEASURE=1 measures grids of
      // 2^18 voxels and more (a few percent faster transforms, not bit-reproducible).
      flags = (nReal >= (std::size_t(1) << 18) && measureRequested()) ? FFTW_MEASURE : FFTW_ESTIMATE;
      plan(rank, dims + first, nthreads, flags);
      // Estimated (not measured) threaded plans of some odd x sizes (49, 99, ...) split each 1-D
      // transform along x over the threads, thousands of times a call: 100-500x slower than one
      // thread (benchmarks/lab/notes.md, "FFTW's threaded odd rows"). Such a plan is made again on
      // one thread.
      if (flags == FFTW_ESTIMATE && nthreads > 1 &&
          (threadsInsideTransforms(fwd) || threadsInsideTransforms(bwd))) {
        destroyPlans();
        plan(rank, dims + first, 1, flags);
      }
    }
    if (!fwd || !bwd) {
      release();
      throw ValueError("FluidKernelFFT: FFTW could not plan a transform of this grid size");
    }
  }
  ~FftwPlans() { release(); }
  FftwPlans(const FftwPlans&) = delete;
  FftwPlans& operator=(const FftwPlans&) = delete;

  // The planner's mutex is held by the caller of these three.
  void plan(int rank, const int* dims, int nthreads, unsigned flags) {
    fftwf_plan_with_nthreads(nthreads);
    // Measuring without a limit took 54 s for the 197 x 233 x 189 grid of a 1 mm brain on 2
    // threads; the plans found within the limit run as fast (notes.md, "FFTW's threaded odd rows").
    fftwf_set_timelimit(flags == FFTW_ESTIMATE ? FFTW_NO_TIMELIMIT : kMeasureSeconds);
    fwd = fftwf_plan_dft_r2c(rank, dims, real, cplx[0], flags);
    bwd = fftwf_plan_dft_c2r(rank, dims, cplx[0], real, flags);
  }
  void destroyPlans() {
    if (fwd) fftwf_destroy_plan(fwd);
    if (bwd) fftwf_destroy_plan(bwd);
    fwd = bwd = nullptr;
    destroyBand();
  }
  void destroyBand() {
    for (fftwf_plan* p :
         {&band.x, &band.xb, &band.y, &band.yb, &band.z[0], &band.z[1], &band.zb[0], &band.zb[1]}) {
      if (*p) fftwf_destroy_plan(*p);
      *p = nullptr;
    }
    band.nkx = band.rows = band.by = -1;
    for (bool& z : band.zeros) z = false;
  }
  // The plans of a band (3-D grids): columns kx < nkx, rows 0..by and ny - by..ny - 1 (rows = 2 by +
  // 1), or every row (rows = ny). Made under the planner's mutex, with the fallback of the
  // constructor for threaded plans inside single transforms.
  void ensureBand(int nkx, int rows, int by) {
    if (band.nkx == nkx && band.rows == rows && band.by == by) return;
    if (!band.spectrum) band.spectrum = fftwf_alloc_complex(nCplx);
    if (!band.spectrum) {
      throw OutOfMemory("FluidKernelFFT: out of host memory for the FFT buffers of a band on a " +
                        detail::sizeStr(size) + " grid");
    }
    std::lock_guard<std::mutex> lk(plannerMutex());
    destroyBand();
    const int nx = size.x, ny = size.y, nz = size.z, nxh = nx / 2 + 1, plane = nxh * ny;
    auto make = [&](fftwf_plan* p, auto planIt) {
      fftwf_plan_with_nthreads(nthreads);
      fftwf_set_timelimit(flags == FFTW_ESTIMATE ? FFTW_NO_TIMELIMIT : kMeasureSeconds);
      *p = planIt();
      if (*p && flags == FFTW_ESTIMATE && nthreads > 1 && threadsInsideTransforms(*p)) {
        fftwf_destroy_plan(*p);
        fftwf_plan_with_nthreads(1);
        *p = planIt();
      }
      if (!*p) {
        destroyBand();
        throw ValueError("FluidKernelFFT: FFTW could not plan a transform of this grid size on a band");
      }
    };
    make(&band.x, [&] {
      return fftwf_plan_many_dft_r2c(1, &nx, ny * nz, real, nullptr, 1, nx, band.spectrum, nullptr, 1, nxh,
                                     flags);
    });
    make(&band.xb, [&] {
      return fftwf_plan_many_dft_c2r(1, &nx, ny * nz, cplx[0], nullptr, 1, nxh, real, nullptr, 1, nx,
                                     flags | FFTW_PRESERVE_INPUT);
    });
    const fftwf_iodim yDim{ny, nxh, nxh}, yMany[2] = {{nkx, 1, 1}, {nz, plane, plane}};
    for (int sign : {FFTW_FORWARD, FFTW_BACKWARD}) {
      make(sign == FFTW_FORWARD ? &band.y : &band.yb, [&] {
        fftwf_complex* from = sign == FFTW_FORWARD ? band.spectrum : cplx[0];
        return fftwf_plan_guru_dft(1, &yDim, 2, yMany, from, cplx[0], sign, flags);
      });
    }
    const int ranges = rows == ny ? 1 : (by > 0 ? 2 : 1);
    for (int r = 0; r < ranges; ++r) {
      band.zStart[r] = r == 0 ? 0 : ny - by;
      const int count = rows == ny ? ny : (r == 0 ? by + 1 : by);
      const fftwf_iodim zDim{nz, plane, plane}, zMany[2] = {{nkx, 1, 1}, {count, nxh, nxh}};
      fftwf_complex* at = cplx[0] + std::size_t(band.zStart[r]) * nxh;
      for (int sign : {FFTW_FORWARD, FFTW_BACKWARD}) {
        make(sign == FFTW_FORWARD ? &band.z[r] : &band.zb[r],
             [&] { return fftwf_plan_guru_dft(1, &zDim, 2, zMany, at, at, sign, flags); });
      }
    }
    band.nkx = nkx;
    band.rows = rows;
    band.by = by;
  }
  // True when the plan parallelises inside single 1-D transforms (FFTW's threaded Cooley-Tukey
  // solvers, "dft-thr-ct" / "rdft-thr-ct" in its plan description) rather than over the rows.
  static bool threadsInsideTransforms(fftwf_plan p) {
    return planText(p).find("thr-ct") != std::string::npos;
  }

  void release() {
    {
      std::lock_guard<std::mutex> lk(plannerMutex());
      destroyPlans();
    }
    fftwf_free(real);
    real = nullptr;
    fftwf_free(band.spectrum);
    band.spectrum = nullptr;
    for (auto& c : cplx) {
      fftwf_free(c);
      c = nullptr;
    }
  }

  // FFTW's new-array execute functions need the alignment the plan was made with.
  bool aligned(const float* p) const {
    return fftwf_alignment_of(const_cast<float*>(p)) == fftwf_alignment_of(real);
  }
};

// Process-wide cache of plans by (size, threads); keeps the 8 most recently created sizes.
std::shared_ptr<FftwPlans> getPlans(const Vec3Di& size) {
  static std::once_flag threadsInit;
  std::call_once(threadsInit, [] { fftwf_init_threads(); });
  using Key = std::tuple<int, int, int, int>;
  static auto* mutex = new std::mutex;
  static auto* cache = new std::map<Key, std::shared_ptr<FftwPlans>>;
  static auto* order = new std::deque<Key>;
  const int nthreads = detail::threadsFor(std::size_t(size.x) * std::size_t(size.y) * std::size_t(size.z));
  const Key key{size.x, size.y, size.z, nthreads};
  std::lock_guard<std::mutex> lk(*mutex);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  auto plans = std::make_shared<FftwPlans>(size, nthreads);
  (*cache)[key] = plans;
  order->push_back(key);
  if (order->size() > 8) {
    cache->erase(order->front());  // callers still holding it keep it alive
    order->pop_front();
  }
  return plans;
}

}  // namespace

std::string detail::fftwPlanText(const Vec3Di& size) {
  const std::shared_ptr<FftwPlans> P = getPlans(size);
  std::lock_guard<std::mutex> lk(plannerMutex());
  return planText(P->fwd) + "\n" + planText(P->bwd) + "\n";
}

namespace {

// The band's columns and rows on the host: kx < nkx; the rows 0..by and ny - by..ny - 1 (rows = 2 by
// + 1), or every row (rows = ny, by = ny - 1).
struct BandExtent {
  int nkx, rows, by;
  int ky(int r, int ny) const { return r <= by ? r : ny - (rows - r); }
  bool holdsRow(int ky, int ny) const { return rows == ny || ky <= by || ky >= ny - by; }
};

// Forward transform of component c into P.cplx[c] (r2c keeps its input): by the 3-D plan, or on a
// band (P.band's plans) along x, y on the band's columns, z on its columns and rows, the values
// outside the band 0.
void forwardCpu(FftwPlans& P, int c, const float* in, const BandExtent* b) {
  fftwf_complex* C = P.cplx[c];
  const float* src = in;
  if (!P.aligned(in)) {
    std::memcpy(P.real, in, sizeof(float) * P.nReal);
    src = P.real;
  }
  if (!b) {
    fftwf_execute_dft_r2c(P.fwd, const_cast<float*>(src), C);
    P.band.zeros[c] = false;
    return;
  }
  fftwf_execute_dft_r2c(P.band.x, const_cast<float*>(src), P.band.spectrum);
  fftwf_execute_dft(P.band.y, P.band.spectrum, C);
  // Zeros: the band's columns in the rows outside it; the other columns once (kept by the way back).
  const Vec3Di s = P.size;
  const int nxh = s.x / 2 + 1;
  const bool all = !P.band.zeros[c];
#pragma omp parallel for schedule(static) num_threads(detail::threadsFor(all ? P.nCplx : P.nCplx / 4))
  for (int z = 0; z < s.z; ++z) {
    for (int y = 0; y < s.y; ++y) {
      fftwf_complex* row = C + (std::size_t(z) * s.y + y) * nxh;
      const bool held = b->holdsRow(y, s.y);
      if (held && !all) continue;
      const int from = held ? b->nkx : 0, to = all ? nxh : b->nkx;
      std::memset(static_cast<void*>(row + from), 0, sizeof(fftwf_complex) * std::size_t(to - from));
    }
  }
  P.band.zeros[c] = true;
  for (int r = 0; r < 2 && P.band.z[r]; ++r) {
    fftwf_complex* at = C + std::size_t(P.band.zStart[r]) * nxh;
    fftwf_execute_dft(P.band.z[r], at, at);
  }
}

// Inverse transform of P.cplx[c] to out: the 3-D plan (cplx[c] destroyed), or on a band z, y and x
// back (its columns outside the band kept).
void inverseCpu(FftwPlans& P, int c, float* out, const BandExtent* b) {
  fftwf_complex* C = P.cplx[c];
  float* dst = P.aligned(out) ? out : P.real;
  if (!b) {
    fftwf_execute_dft_c2r(P.bwd, C, dst);
  } else {
    const int nxh = P.size.x / 2 + 1;
    for (int r = 0; r < 2 && P.band.zb[r]; ++r) {
      fftwf_complex* at = C + std::size_t(P.band.zStart[r]) * nxh;
      fftwf_execute_dft(P.band.zb[r], at, at);
    }
    fftwf_execute_dft(P.band.yb, C, C);
    fftwf_execute_dft_c2r(P.band.xb, C, dst);
  }
  if (dst != out) std::memcpy(out, P.real, sizeof(float) * P.nReal);
}

// out = L^p in (or its inverse) on the host; out may equal in.
// dot (may be null): adds <in, out> (Parseval over the half spectrum) to *dot.
// On a band (3-D grids), FFTW transforms along y and z only the band's columns, and the operator
// runs on the band alone: the same projection as zeroing the frequencies outside it.
void fluidApplyCpu(FftwPlans& P, float* const out[3], const float* const in[3], const Vec3Df& spacing,
                   const math::FluidParams& prm, double* dot) {
  std::lock_guard<std::mutex> lk(P.use);
  const Vec3Di s = P.size;
  const int nxh = s.x / 2 + 1;
  BandExtent ext{nxh, s.y, s.y - 1};
  // (A band along z alone saves no transform: the operator zeroes those frequencies.)
  const bool banded =
      s.x > 1 && s.y > 1 && s.z > 1 && (math::axisBanded(prm, 0, s.x) || math::axisBanded(prm, 1, s.y));
  if (banded) {
    if (math::axisBanded(prm, 0, s.x)) ext.nkx = prm.band[0] + 1;
    if (math::axisBanded(prm, 1, s.y)) ext = {ext.nkx, 2 * prm.band[1] + 1, prm.band[1]};
    P.ensureBand(ext.nkx, ext.rows, ext.by);  // (before the transforms: planning may use cplx[0])
  }
  for (int c = 0; c < 3; ++c) forwardCpu(P, c, in[c], banded ? &ext : nullptr);

  // Scaled symbol tables per axis.
  std::vector<float> cx(nxh), sx(nxh), cy(s.y), sy(s.y), cz(s.z), sz(s.z);
  {
    std::vector<float> t(std::max(s.x, std::max(s.y, s.z))), sn(t.size());
    auto table = [&](int n, float h, float* c, float* sv, int count) {
      math::fluidAxisTable(n, t.data(), sn.data());
      for (int k = 0; k < count; ++k) {
        c[k] = t[k] / (h * h);
        sv[k] = sn[k] / h;
      }
    };
    table(s.x, spacing.x, cx.data(), sx.data(), nxh);
    table(s.y, spacing.y, cy.data(), sy.data(), s.y);
    table(s.z, spacing.z, cz.data(), sz.data(), s.z);
  }
  const float scale = float(1.0 / double(P.nReal));
  fftwf_complex *X = P.cplx[0], *Y = P.cplx[1], *Z = P.cplx[2];
  // Rows (kz, r), their Parseval terms added in order (the same bits for any number of threads).
  const double sum = detail::orderedRowSum(std::ptrdiff_t(s.z) * ext.rows, ext.nkx, [&](std::ptrdiff_t row) {
    const int kz = int(row / ext.rows), ky = ext.ky(int(row % ext.rows), s.y);
    std::size_t i = (std::size_t(kz) * s.y + ky) * nxh;
    double part = 0.0;
    for (int kx = 0; kx < ext.nkx; ++kx, ++i) {
      float re[3] = {X[i][0], Y[i][0], Z[i][0]};
      float im[3] = {X[i][1], Y[i][1], Z[i][1]};
      const float re0[3] = {re[0], re[1], re[2]}, im0[3] = {im[0], im[1], im[2]};
      math::fluidApplyBanded(prm, kx, ky, kz, s.x, s.y, s.z, cx[kx], cy[ky], cz[kz], sx[kx], sy[ky], sz[kz],
                             scale, re, im);
      if (dot) part += math::parsevalTerm(kx, s.x, re0, im0, re, im);
      X[i][0] = re[0];
      Y[i][0] = re[1];
      Z[i][0] = re[2];
      X[i][1] = im[0];
      Y[i][1] = im[1];
      Z[i][1] = im[2];
    }
    return part;
  });
  if (dot) *dot += sum;

  for (int c = 0; c < 3; ++c) inverseCpu(P, c, out[c], banded ? &ext : nullptr);
}

constexpr int kMaxLPow = 64;

void checkParams(const char* op, float alpha, float beta, float gamma, int lpow) {
  if (!std::isfinite(alpha) || !std::isfinite(beta) || !std::isfinite(gamma)) {
    throw ValueError(std::string(op) + ": alpha, beta and gamma must be finite");
  }
  // Each frequency costs lpow products (a loop, not a power, for the matrix case): bounded, so that a
  // huge lpow is refused at once rather than running for hours. L^64 of any useful operator
  // overflows float anyway.
  if (lpow < 0 || lpow > kMaxLPow) {
    throw ValueError(std::string(op) + ": argument 'lpow' must be >= 0 and <= " + std::to_string(kMaxLPow) +
                     ", not " + std::to_string(lpow));
  }
}

// Shared by the function and the class: checks done, runs on the arguments' side.
// hostDot / devDot (may be null): the accumulator of <in, out> on the side that runs.
void runFluid(const char* op, bool dev, Field3D& out, const Field3D& in, const GridInfo& grid,
              const math::FluidParams& prm, std::shared_ptr<FftwPlans>* cached, double* hostDot = nullptr,
              double* devDot = nullptr) {
  float* const o[3] = {out.x(), out.y(), out.z()};
  const float* const i[3] = {in.x(), in.y(), in.z()};
  if (dev) {
    PYCA_CUDA_CALL(op, cuda_impl::FluidApply(o, i, grid, prm, devDot));
    (void)devDot;
    return;
  }
  std::shared_ptr<FftwPlans> plans;
  if (cached && *cached && (*cached)->size == grid.size()) {
    plans = *cached;
  } else {
    plans = getPlans(grid.size());
    if (cached) *cached = plans;
  }
  fluidApplyCpu(*plans, o, i, grid.spacing(), prm, hostDot);
  (void)op;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Plain function

void ApplyFluidOperator(Field3D& out, const Field3D& in, float alpha, float beta, float gamma, int lpow,
                        bool inverse) {
  const char* op = "ApplyFluidOperator";
  const bool dev = detail::prepare(op, {{"out", &out}, {"in", &in}});
  checkParams(op, alpha, beta, gamma, lpow);
  math::FluidParams prm;
  prm.alpha = alpha;
  prm.beta = beta;
  prm.gamma = gamma;
  prm.lpow = lpow;
  prm.inverse = inverse;
  runFluid(op, dev, out, in, in.grid(), prm, nullptr);
}

// ------------------------------------------------------------------------------------------------
// FluidKernelFFT

struct FluidKernelFFT::Impl {
  math::FluidParams prm;
  GridInfo grid;
  bool hasGrid = false;
  std::shared_ptr<FftwPlans> plans;  // host plans of grid's size, made on first host use
  // applyInverseOperatorDot's accumulator: host part, and device part (one double on devDotDevice,
  // from the device pool on the first device call).
  double hostDot = 0.0;
  double* devDot = nullptr;
  int devDotDevice = -1;
  // stageDot()'s host memory and event, made on first use; `staged`: a move into it is queued;
  // `pending`: devDot may hold a sum not staged.
#ifdef PYCA_WITH_CUDA
  cuda_impl::SumStaging* staging = nullptr;
#endif
  bool staged = false, pending = false;

  // Device calls must stay on the device of the first one, which holds devDot.
  void checkDotDevice(const char* op) const {
#ifdef PYCA_WITH_CUDA
    if (devDot && cuda_impl::CurrentDevice() != devDotDevice) {
      throw ValueError(std::string(op) + ": this object accumulates on device " +
                       std::to_string(devDotDevice) + "; use one FluidKernelFFT per device");
    }
#else
    (void)op;
#endif
  }

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  ~Impl() {
    if (devDot) detail::deviceFree(devDot);
#ifdef PYCA_WITH_CUDA
    cuda_impl::freeStaging(staging);
#endif
  }
};

FluidKernelFFT::FluidKernelFFT() : impl_(new Impl) {}
FluidKernelFFT::~FluidKernelFFT() = default;
FluidKernelFFT::FluidKernelFFT(FluidKernelFFT&&) noexcept = default;
FluidKernelFFT& FluidKernelFFT::operator=(FluidKernelFFT&&) noexcept = default;

void FluidKernelFFT::setAlpha(float alpha) {
  checkParams("FluidKernelFFT.setAlpha", alpha, 0.f, 0.f, 0);
  impl_->prm.alpha = alpha;
}
float FluidKernelFFT::getAlpha() const { return impl_->prm.alpha; }
void FluidKernelFFT::setBeta(float beta) {
  checkParams("FluidKernelFFT.setBeta", 0.f, beta, 0.f, 0);
  impl_->prm.beta = beta;
}
float FluidKernelFFT::getBeta() const { return impl_->prm.beta; }
void FluidKernelFFT::setGamma(float gamma) {
  checkParams("FluidKernelFFT.setGamma", 0.f, 0.f, gamma, 0);
  impl_->prm.gamma = gamma;
}
float FluidKernelFFT::getGamma() const { return impl_->prm.gamma; }
void FluidKernelFFT::setLPow(int lpow) {
  checkParams("FluidKernelFFT.setLPow", 0.f, 0.f, 0.f, lpow);
  impl_->prm.lpow = lpow;
}
int FluidKernelFFT::getLPow() const { return impl_->prm.lpow; }
void FluidKernelFFT::setDivergenceFree(bool divFree) { impl_->prm.divFree = divFree; }
bool FluidKernelFFT::getDivergenceFree() const { return impl_->prm.divFree; }
void FluidKernelFFT::setBand(const Vec3Di& band) {
  if (band.x < -1 || band.y < -1 || band.z < -1) {
    throw ValueError(
        "FluidKernelFFT.setBand: argument 'band' must hold values >= -1 (-1: the whole axis), not " +
        detail::vecStr(band));
  }
  for (int a = 0; a < 3; ++a) impl_->prm.band[a] = band[a];
}
Vec3Di FluidKernelFFT::getBand() const {
  return Vec3Di(impl_->prm.band[0], impl_->prm.band[1], impl_->prm.band[2]);
}

void FluidKernelFFT::setGrid(const GridInfo& grid) {
  if (impl_->hasGrid && impl_->grid.size() != grid.size()) impl_->plans.reset();
  impl_->grid = grid;
  impl_->hasGrid = true;
}
const GridInfo& FluidKernelFFT::grid() const { return impl_->grid; }

void FluidKernelFFT::apply(const char* op, Field3D& out, const Field3D& in, bool inverse, bool dot) {
  if (!impl_->hasGrid) throw ValueError(std::string(op) + ": call setGrid(grid) first");
  const bool dev = detail::prepare(op, {{"out", &out}, {"in", &in}});
  const Vec3Di& gs = impl_->grid.size();
  if (in.size() != gs) {
    throw ValueError(std::string(op) + ": size of 'in' (" + detail::sizeStr(in.size()) +
                     ") does not match the grid given to setGrid (" + detail::sizeStr(gs) + ")");
  }
  math::FluidParams prm = impl_->prm;
  prm.inverse = inverse;
  double* devDot = nullptr;
#ifdef PYCA_WITH_CUDA
  if (dot && dev) {
    impl_->checkDotDevice(op);
    if (!impl_->devDot) {
      impl_->devDot = static_cast<double*>(detail::deviceAlloc(sizeof(double), &impl_->devDotDevice));
      detail::deviceFill(reinterpret_cast<float*>(impl_->devDot), 2, 0.f);  // 0.0 (all bits 0)
    }
    devDot = impl_->devDot;
    impl_->pending = true;
  }
#endif
  runFluid(op, dev, out, in, impl_->grid, prm, &impl_->plans, dot && !dev ? &impl_->hostDot : nullptr,
           devDot);
}

void FluidKernelFFT::applyOperator(Field3D& out, const Field3D& in) {
  apply("FluidKernelFFT.applyOperator", out, in, false);
}
void FluidKernelFFT::applyInverseOperator(Field3D& out, const Field3D& in) {
  apply("FluidKernelFFT.applyInverseOperator", out, in, true);
}
void FluidKernelFFT::applyOperator(Field3D& f) { apply("FluidKernelFFT.applyOperator", f, f, false); }
void FluidKernelFFT::applyInverseOperator(Field3D& f) {
  apply("FluidKernelFFT.applyInverseOperator", f, f, true);
}
void FluidKernelFFT::applyInverseOperatorDot(Field3D& out, const Field3D& in) {
  apply("FluidKernelFFT.applyInverseOperatorDot", out, in, true, true);
}
double FluidKernelFFT::takeDot() {
  double sum = impl_->hostDot;
  impl_->hostDot = 0.0;
#ifdef PYCA_WITH_CUDA
  if (impl_->staged) {
    impl_->staged = false;
    sum += cuda_impl::takeStaged("FluidKernelFFT.takeDot", impl_->staging);
  }
  if (impl_->devDot && impl_->pending) sum += cuda_impl::takeSum("FluidKernelFFT.takeDot", impl_->devDot);
  impl_->pending = false;
#endif
  return sum;
}

void FluidKernelFFT::stageDot() {
#ifdef PYCA_WITH_CUDA
  if (!impl_->devDot || !impl_->pending) return;
  const char* op = "FluidKernelFFT.stageDot";
  impl_->checkDotDevice(op);
  if (!impl_->staging) impl_->staging = cuda_impl::createStaging(op);
  cuda_impl::stageSum(op, impl_->devDot, impl_->staging);
  impl_->staged = true;
  impl_->pending = false;
#endif
}

}  // namespace pyca
