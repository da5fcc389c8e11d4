// CUDA backend of FluidKernelFFT / ApplyFluidOperator: cuFFT real-to-complex transforms of the
// three components (one batched plan), the operator applied per frequency by a kernel calling
// pyca/math/filters.h, and the complex-to-real transforms back; on 3-D grids with a power-of-two
// nz, cuFFT transforms each z-plane and one kernel does z and the operator (fft_zpass.cuh,
// docs/design/fluid-fft.md); on a band, the y passes of fft_band.cuh or, where nx = ny, x and y
// together (fft_xy.cuh) without cuFFT. Plans, the complex buffer and the symbol tables are made on
// the first use of a (grid size, device, stream) and cached; later calls only queue work on pyca's
// current stream (no synchronisation).
#include <cuda_runtime.h>
#include <cufft.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "ops/cuda_common.cuh"
#include "ops/fft_band.cuh"
#include "ops/fft_xy.cuh"
#include "ops/fft_zpass.cuh"
#include "ops/filters_cuda.h"
#include "pyca/errors.h"
#include "pyca/math/filters.h"
#include "pyca/runtime.h"

namespace pyca {
namespace cuda_impl {

namespace {

const char* kOp = "FluidKernelFFT";

void checkFft(cufftResult r, const char* what) {
  if (r == CUFFT_SUCCESS) return;
  if (r == CUFFT_ALLOC_FAILED) throw OutOfMemory(std::string(kOp) + ": out of device memory (" + what + ")");
  throw CudaError(std::string(kOp) + ": " + what + " failed with cufftResult " + std::to_string(int(r)));
}

// Calls f(std::integral_constant<int, nz>) for the nz zPassKernel is instantiated for (8 to 256).
template <int... Ns, class F>
void withZPassOf(int nz, F&& f) {
  const bool done = ((nz == Ns ? (f(std::integral_constant<int, Ns>{}), true) : false) || ...);
  if (!done) throw CudaError(std::string(kOp) + ": no z pass for nz = " + std::to_string(nz));
}
template <class F>
void withZPass(int nz, F&& f) {
  withZPassOf<8, 16, 32, 64, 128, 256>(nz, f);
}
// The same for the N of x and y together (fft_xy.cuh, xySupports).
template <class F>
void withXY(int n, F&& f) {
  withZPassOf<32, 64, 128, 256>(n, f);
}

// Plans and buffers of one (size, device, stream).
struct CufftPlans {
  Vec3Di size;
  cudaStream_t stream;
  int rank = 3;
  int dims[3] = {1, 1, 1};
  std::size_t nReal = 0, nCplx = 0;
  cufftHandle r2c3 = 0, c2r3 = 0;  // batch of 3 contiguous components
  cufftHandle r2c1 = 0, c2r1 = 0;  // one component (fields whose planes are not contiguous); lazy
  // 3-D grids whose nz zPassKernel handles: 2-D transforms of the 3 * nz planes, z by zPassKernel.
  bool zPass = false;
  cufftHandle r2c2 = 0, c2r2 = 0;
  float2* twiddles = nullptr;  // exp(-2 pi i m / nz), m < nz
  bool hasR2c3 = false, hasC2r3 = false, hasR2c1 = false, hasC2r1 = false, hasR2c2 = false, hasC2r2 = false;
  // A band (fft_band.cuh), on z-pass grids whose ny the y passes handle: the y passes' twiddles,
  // made on the first call with a band (ensureBand), and cuFFT along x alone (batch 3 ny nz rows),
  // made on the first call that needs it (ensureRows).
  bool yPass = false, bandReady = false, hasR2cx = false, hasC2rx = false;
  int sms = 1;  // the device's multiprocessors (ensureBand)
  // x and y together (fft_xy.cuh) where nx = ny: the most shared memory a block may take (two
  // blocks an SM), 0 where the kernels do not apply; made by ensureBand.
  std::size_t xyCap = 0;
  cufftHandle r2cx = 0, c2rx = 0;
  float2* twiddlesY = nullptr;  // exp(-2 pi i m / ny), m < ny
  std::vector<float2> hostTwiddlesY;
  cufftComplex* cplx = nullptr;  // 3 * nCplx
  float* tables = nullptr;       // t_x, s_x (nx/2+1 each), t_y, s_y (ny), t_z, s_z (nz), unscaled
  std::vector<float> hostTables;
  std::vector<float2> hostTwiddles;
  std::mutex use;  // one caller queues work at a time (plans and buffer are shared)

  CufftPlans(const Vec3Di& s, cudaStream_t st) : size(s), stream(st) {
    nReal = std::size_t(s.x) * s.y * s.z;
    nCplx = std::size_t(s.x / 2 + 1) * s.y * s.z;
    const int d[3] = {s.z, s.y, s.x};
    int first = 0;
    while (first < 2 && d[first] == 1) ++first;  // 2-D and 1-D grids: lower rank
    rank = 3 - first;
    for (int i = 0; i < rank; ++i) dims[i] = d[first + i];

    try {
      plan(&r2c3, &hasR2c3, CUFFT_R2C, 3);
      plan(&c2r3, &hasC2r3, CUFFT_C2R, 3);
      zPass = rank == 3 && s.x > 1 && s.y > 1 && zPassSupports(s.z);
      if (zPass) makeZPass();
      yPass = zPass && yPassSupports(s.y);
      check(cudaMalloc(&cplx, 3 * nCplx * sizeof(cufftComplex)), kOp, "cudaMalloc");

      const int nxh = s.x / 2 + 1;
      hostTables.resize(2 * (std::size_t(nxh) + s.y + s.z));
      std::vector<float> t(std::max(s.x, std::max(s.y, s.z))), sn(t.size());
      float* h = hostTables.data();
      const int n[3] = {s.x, s.y, s.z}, count[3] = {nxh, s.y, s.z};
      for (int a = 0; a < 3; ++a) {
        math::fluidAxisTable(n[a], t.data(), sn.data());
        std::copy(t.begin(), t.begin() + count[a], h);
        std::copy(sn.begin(), sn.begin() + count[a], h + count[a]);
        h += 2 * count[a];
      }
      check(cudaMalloc(&tables, hostTables.size() * sizeof(float)), kOp, "cudaMalloc");
      check(cudaMemcpyAsync(tables, hostTables.data(), hostTables.size() * sizeof(float),
                            cudaMemcpyHostToDevice, stream),
            kOp, "cudaMemcpyAsync");
    } catch (...) {
      release();
      throw;
    }
  }
  ~CufftPlans() { release(); }
  CufftPlans(const CufftPlans&) = delete;
  CufftPlans& operator=(const CufftPlans&) = delete;

  // The 2-D plans (batch 3 nz), the twiddles and zPassKernel's shared memory limit.
  void makeZPass() {
    const int d2[2] = {size.y, size.x};
    for (int k = 0; k < 2; ++k) {
      cufftHandle* h = k == 0 ? &r2c2 : &c2r2;
      checkFft(cufftPlanMany(h, 2, const_cast<int*>(d2), nullptr, 1, 0, nullptr, 1, 0,
                             k == 0 ? CUFFT_R2C : CUFFT_C2R, 3 * size.z),
               "cufftPlanMany");
      (k == 0 ? hasR2c2 : hasC2r2) = true;
      checkFft(cufftSetStream(*h, stream), "cufftSetStream");
    }
    twiddles = makeTwiddles(size.z, hostTwiddles);
    withZPass(size.z, [&](auto nz) {
      constexpr int NZ = decltype(nz)::value;
      check(cudaFuncSetAttribute(zPassKernel<NZ>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(zPassSharedBytes<NZ>())),
            kOp, "cudaFuncSetAttribute");
    });
  }

  // exp(-2 pi i m / n), m < n, on the device (host copy kept until the copy has run).
  float2* makeTwiddles(int n, std::vector<float2>& host) {
    host.resize(std::size_t(n));
    for (int i = 0; i < n; ++i) {
      const double a = -2.0 * 3.14159265358979323846 * double(i) / double(n);
      host[std::size_t(i)] = make_float2(float(std::cos(a)), float(std::sin(a)));
    }
    float2* d = nullptr;
    check(cudaMalloc(&d, std::size_t(n) * sizeof(float2)), kOp, "cudaMalloc");
    check(cudaMemcpyAsync(d, host.data(), std::size_t(n) * sizeof(float2), cudaMemcpyHostToDevice, stream),
          kOp, "cudaMemcpyAsync");
    return d;
  }

  // The plans along x, the y twiddles and the y passes' shared memory limit (yPass grids only).
  void ensureBand() {
    if (bandReady) return;
    int device = 0;
    check(cudaGetDevice(&device), kOp, "cudaGetDevice");
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), kOp,
          "cudaDeviceGetAttribute");
    if (!twiddlesY) twiddlesY = makeTwiddles(size.y, hostTwiddlesY);
    // Shared memory limits of the band's kernels (the widest blocks of 128 and 256 points need more
    // than the default 48 KB).
    withZPass(size.y, [&](auto ny) {
      constexpr int NY = decltype(ny)::value;
      withColumns(16, [&](auto c16) { setShared<NY, decltype(c16)::value>(); });
      withColumns(8, [&](auto c8) { setShared<NY, decltype(c8)::value>(); });
      withColumns(4, [&](auto c4) { setShared<NY, decltype(c4)::value>(); });
    });
    withZPass(size.z, [&](auto nz) {
      constexpr int NZ = decltype(nz)::value;
      withColumns(8, [&](auto c8) { setZShared<NZ, decltype(c8)::value>(); });
      withColumns(4, [&](auto c4) { setZShared<NZ, decltype(c4)::value>(); });
    });
    if (size.x == size.y && xySupports(size.x)) {
      int perBlock = 0, perSM = 0;
      check(cudaDeviceGetAttribute(&perBlock, cudaDevAttrMaxSharedMemoryPerBlockOptin, device), kOp,
            "cudaDeviceGetAttribute");
      check(cudaDeviceGetAttribute(&perSM, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device), kOp,
            "cudaDeviceGetAttribute");
      xyCap = std::size_t(std::max(0, std::min(perBlock, perSM / 2 - 1024)));  // (1 KB a block reserves)
      withXY(size.y, [&](auto n) {
        constexpr int N = decltype(n)::value;
        check(
            cudaFuncSetAttribute(xyForwardKernel<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(xyCap)),
            kOp, "cudaFuncSetAttribute");
        check(
            cudaFuncSetAttribute(xyInverseKernel<N>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(xyCap)),
            kOp, "cudaFuncSetAttribute");
      });
    }
    bandReady = true;
  }

  // cuFFT's plans along x (batch 3 ny nz rows): the band's passes without x and y together; made on
  // their first use.
  void ensureRows() {
    int nx = size.x;
    for (int k = 0; k < 2; ++k) {
      cufftHandle* h = k == 0 ? &r2cx : &c2rx;
      bool* made = k == 0 ? &hasR2cx : &hasC2rx;
      if (*made) continue;
      checkFft(cufftPlanMany(h, 1, &nx, nullptr, 1, 0, nullptr, 1, 0, k == 0 ? CUFFT_R2C : CUFFT_C2R,
                             3 * size.y * size.z),
               "cufftPlanMany");
      *made = true;
      checkFft(cufftSetStream(*h, stream), "cufftSetStream");
    }
  }

  template <int NY, int TX>
  void setShared() {
    if constexpr (TX <= zPassColumns<NY>()) {  // (wider blocks are not used: more shared memory)
      for (auto* f : {yPassKernel<NY, false, TX>, yPassKernel<NY, true, TX>}) {
        check(cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   int(zPassSharedBytes<NY, TX>())),
              kOp, "cudaFuncSetAttribute");
      }
    }
  }
  template <int NZ, int TX>
  void setZShared() {
    check(cudaFuncSetAttribute(zPassKernel<NZ, TX>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(zPassSharedBytes<NZ, TX>())),
          kOp, "cudaFuncSetAttribute");
  }

  void release() {
    if (hasR2cx) cufftDestroy(r2cx);
    if (hasC2rx) cufftDestroy(c2rx);
    hasR2cx = hasC2rx = bandReady = false;
    if (twiddlesY) cudaFree(twiddlesY);
    twiddlesY = nullptr;
    if (hasR2c2) cufftDestroy(r2c2);
    if (hasC2r2) cufftDestroy(c2r2);
    hasR2c2 = hasC2r2 = false;
    if (twiddles) cudaFree(twiddles);
    twiddles = nullptr;
    if (hasR2c3) cufftDestroy(r2c3);
    if (hasC2r3) cufftDestroy(c2r3);
    if (hasR2c1) cufftDestroy(r2c1);
    if (hasC2r1) cufftDestroy(c2r1);
    hasR2c3 = hasC2r3 = hasR2c1 = hasC2r1 = false;
    if (cplx) cudaFree(cplx);
    if (tables) cudaFree(tables);
    cplx = nullptr;
    tables = nullptr;
  }

  // Makes a plan of `batch` transforms bound to the stream; *made records that it needs destroying.
  void plan(cufftHandle* h, bool* made, cufftType type, int batch) {
    checkFft(cufftPlanMany(h, rank, dims, nullptr, 1, 0, nullptr, 1, 0, type, batch), "cufftPlanMany");
    *made = true;
    checkFft(cufftSetStream(*h, stream), "cufftSetStream");
  }

  void ensureSingle() {
    if (!hasR2c1) plan(&r2c1, &hasR2c1, CUFFT_R2C, 1);
    if (!hasC2r1) plan(&c2r1, &hasC2r1, CUFFT_C2R, 1);
  }
};

// Process-wide cache by (size, device, stream); keeps the 4 most recently created entries.
std::shared_ptr<CufftPlans> getPlans(const Vec3Di& size, cudaStream_t st) {
  int device = 0;
  check(cudaGetDevice(&device), kOp, "cudaGetDevice");
  using Key = std::tuple<int, int, int, int, std::size_t>;
  static auto* mutex = new std::mutex;
  static auto* cache = new std::map<Key, std::shared_ptr<CufftPlans>>;
  static auto* order = new std::deque<Key>;
  const Key key{size.x, size.y, size.z, device, reinterpret_cast<std::size_t>(st)};
  std::lock_guard<std::mutex> lk(*mutex);
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  auto plans = std::make_shared<CufftPlans>(size, st);
  (*cache)[key] = plans;
  order->push_back(key);
  if (order->size() > 4) {
    cache->erase(order->front());  // freed when its last user lets go
    order->pop_front();
  }
  return plans;
}

// dot (may be null): adds <in, out> (math::parsevalTerm) to *dot.
__global__ void fluidKernel(cufftComplex* __restrict__ X, cufftComplex* __restrict__ Y,
                            cufftComplex* __restrict__ Z, int nx, int ny, int nz,
                            const float* __restrict__ tab, float isx, float isy, float isz,
                            math::FluidParams P, float scale, double* __restrict__ dot) {
  const int nxh = nx / 2 + 1;
  double sum = 0.0;
  const std::size_t n = std::size_t(nxh) * ny * nz;
  for (std::size_t i = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += std::size_t(gridDim.x) * blockDim.x) {
    const std::size_t r = i / nxh;
    const int kx = int(i - r * nxh), ky = int(r % ny), kz = int(r / ny);
    const cufftComplex x = X[i], y = Y[i], z = Z[i];
    float re[3] = {x.x, y.x, z.x};
    float im[3] = {x.y, y.y, z.y};
    sum += fluidAtFrequency(P, tab, nx, ny, nz, kx, ky, kz, isx, isy, isz, scale, dot != nullptr, re, im);
    X[i] = make_cuFloatComplex(re[0], im[0]);
    Y[i] = make_cuFloatComplex(re[1], im[1]);
    Z[i] = make_cuFloatComplex(re[2], im[2]);
  }
  if (dot) blockAddSum<kZPassThreads>(dot, sum);
}

}  // namespace

void FluidApply(float* const out[3], const float* const in[3], const GridInfo& grid,
                const math::FluidParams& p, double* dot) {
  const Vec3Di s = grid.size();
  cudaStream_t st = stream();
  std::shared_ptr<CufftPlans> plans = getPlans(s, st);
  CufftPlans& P = *plans;
  std::lock_guard<std::mutex> lk(P.use);
  const std::size_t nR = P.nReal, nC = P.nCplx;
  cufftComplex* C[3] = {P.cplx, P.cplx + nC, P.cplx + 2 * nC};

  const Vec3Df sp = grid.spacing();
  const bool inJoined = in[1] == in[0] + nR && in[2] == in[1] + nR;
  const bool outJoined = out[1] == out[0] + nR && out[2] == out[1] + nR;
  const int nxh = s.x / 2 + 1, plane = nxh * s.y;
  const float scale = float(1.0 / double(nR));
  const long target = 2L * P.sms;  // blocks: two per SM at least, where the columns allow
  auto zPassOn = [&](const ZColumns& cols, int tx) {
    withZPass(s.z, [&](auto nz) {
      constexpr int NZ = decltype(nz)::value;
      withColumns(tx, [&](auto c) {
        constexpr int TX = zPassWidth<NZ, decltype(c)::value>();
        const unsigned blocks = unsigned((cols.perRow * cols.rows + TX - 1) / TX);
        zPassKernel<NZ, TX><<<blocks, kZPassThreads, zPassSharedBytes<NZ, TX>(), st>>>(
            C[0], nC, plane, s.x, s.y, cols, P.twiddles, P.tables, 1.f / sp.x, 1.f / sp.y, 1.f / sp.z, p,
            scale, dot);
      });
    });
    pyca::checkLaunch(kOp);
  };
  if (P.yPass && inJoined && outJoined && math::bandActive(p, s.x, s.y, s.z)) {
    // A band: x and y together (fft_xy.cuh) where they apply, else x by cuFFT and y (the columns kx
    // <= bx, the rows |ky| <= by); z on the band alone.
    P.ensureBand();
    const int nkx = math::axisBanded(p, 0, s.x) ? p.band[0] + 1 : nxh;
    const bool yBand = math::axisBanded(p, 1, s.y);
    const int rows = yBand ? 2 * p.band[1] + 1 : s.y, by = yBand ? p.band[1] : s.y - 1;
    auto yPassOn = [&](auto inv, int columns) {
      withZPass(s.y, [&](auto ny) {
        constexpr int NY = decltype(ny)::value;
        withColumns(bandColumns(NY, columns, s.z, target), [&](auto c) {
          constexpr int TX = zPassWidth<NY, decltype(c)::value>();
          yPassKernel<NY, decltype(inv)::value, TX>
              <<<dim3(unsigned((columns + TX - 1) / TX), unsigned(s.z)), kZPassThreads,
                 zPassSharedBytes<NY, TX>(), st>>>(C[0], nC, plane, nxh, nkx, rows, by, P.twiddlesY);
        });
      });
      pyca::checkLaunch(kOp);
    };
    const ZColumns band{nkx, rows, by, s.y, nxh, false};
    const int zCols = bandColumns(s.z, long(nkx) * rows, 1, target);
    const std::size_t xyBytes = xySharedBytes(s.x, nkx);
    if (xyBytes <= P.xyCap) {  // x and y together (fft_xy.cuh)
      const dim3 grid(unsigned(s.z), 3u);
      withXY(s.y, [&](auto n) {
        constexpr int N = decltype(n)::value;
        xyForwardKernel<N>
            <<<grid, kZPassThreads, xyBytes, st>>>(in[0], C[0], nR, nC, nkx, rows, by, P.twiddlesY);
      });
      pyca::checkLaunch(kOp);
      zPassOn(band, zCols);
      withXY(s.y, [&](auto n) {
        constexpr int N = decltype(n)::value;
        xyInverseKernel<N>
            <<<grid, kZPassThreads, xyBytes, st>>>(C[0], out[0], nR, nC, nkx, rows, by, P.twiddlesY);
      });
      pyca::checkLaunch(kOp);
      return;
    }
    P.ensureRows();
    checkFft(cufftExecR2C(P.r2cx, const_cast<float*>(in[0]), C[0]), "cufftExecR2C");
    yPassOn(std::false_type{}, nkx);
    zPassOn(band, zCols);
    yPassOn(std::true_type{}, nkx);
    if (nkx < nxh) {  // the columns outside the band, which the R2C filled, as zeros
      const unsigned nRows = unsigned(3L * s.y * s.z);
      const unsigned blocks = std::min(std::max(nRows / 8u, 1u), unsigned(16 * P.sms));
      zeroColumnsKernel<<<blocks, 256, 0, st>>>(C[0], nRows, nxh, nkx);
      pyca::checkLaunch(kOp);
    }
    checkFft(cufftExecC2R(P.c2rx, C[0], out[0]), "cufftExecC2R");
    return;
  }
  if (P.zPass && inJoined && outJoined) {  // x, y by cuFFT per z-plane; z and the operator in one pass
    checkFft(cufftExecR2C(P.r2c2, const_cast<float*>(in[0]), C[0]), "cufftExecR2C");
    zPassOn(ZColumns::every(nxh, s.y), 16);
    checkFft(cufftExecC2R(P.c2r2, C[0], out[0]), "cufftExecC2R");
    return;
  }

  // Forward transforms (R2C keeps its input, so `in` is left alone).
  if (inJoined) {
    checkFft(cufftExecR2C(P.r2c3, const_cast<float*>(in[0]), C[0]), "cufftExecR2C");
  } else {
    P.ensureSingle();
    for (int c = 0; c < 3; ++c)
      checkFft(cufftExecR2C(P.r2c1, const_cast<float*>(in[c]), C[c]), "cufftExecR2C");
  }

  const int block = kZPassThreads;  // (blockAddSum<kZPassThreads> reduces blocks of this size)
  const std::size_t blocks = std::min<std::size_t>((nC + block - 1) / block, std::size_t(1) << 20);
  fluidKernel<<<unsigned(std::max<std::size_t>(blocks, 1)), block, 0, st>>>(
      C[0], C[1], C[2], s.x, s.y, s.z, P.tables, 1.f / sp.x, 1.f / sp.y, 1.f / sp.z, p, scale, dot);
  pyca::checkLaunch(kOp);

  // Inverse transforms (C2R overwrites the complex buffer, which is ours).
  if (outJoined) {
    checkFft(cufftExecC2R(P.c2r3, C[0], out[0]), "cufftExecC2R");
  } else {
    P.ensureSingle();
    for (int c = 0; c < 3; ++c) checkFft(cufftExecC2R(P.c2r1, C[c], out[c]), "cufftExecC2R");
  }
}

int CurrentDevice() {
  int d = 0;
  check(cudaGetDevice(&d), kOp, "cudaGetDevice");
  return d;
}

}  // namespace cuda_impl
}  // namespace pyca
