// Kernel lab: variants of pyca's bandwidth-critical CUDA kernels timed side by side with CUDA events
// on one GPU (256^3 floats), each checked against the library's own kernel. Not part of the build;
// benchmarks/lab/run.sh compiles and runs it (and profiles it with ncu). Notes: benchmarks/lab/notes.md.
//
// The library's deformation kernels are used directly (the .cu file is included, with the two
// runtime functions it calls defined here); the reductions are called through their entry points.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cub/device/device_reduce.cuh>
#include <functional>
#include <random>
#include <vector>

#include "../../cuda/src/ops/arithmetic_map.cuh"
#include "../../cuda/src/ops/deformation.cu"
#include "ops/reductions_cuda.h"

namespace pyca {
std::size_t currentStream() { return 0; }
void checkLaunch(const char* op) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", op, cudaGetErrorString(e));
    std::exit(1);
  }
}
}  // namespace pyca

using namespace pyca;

#define CK(x)                                                                                 \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

static bool gProfile = false;  // one launch per variant (under ncu)

// Median time in ms of fn() with events (reps launches, each timed on its own).
static float timeEvents(const std::function<void()>& fn, int reps = 30) {
  if (gProfile) {
    fn();
    CK(cudaDeviceSynchronize());
    return 0.f;
  }
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) fn();
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a));
    fn();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Median host wall time in ms of fn() (which synchronises itself).
static float timeHost(const std::function<void()>& fn, int reps = 200) {
  if (gProfile) {
    fn();
    return 0.f;
  }
  for (int i = 0; i < 5; ++i) fn();
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

static float* devUpload(const std::vector<float>& h) {
  float* d = nullptr;
  CK(cudaMalloc(&d, h.size() * sizeof(float)));
  CK(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}
static std::vector<float> download(const float* d, std::size_t n) {
  std::vector<float> h(n);
  CK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
  return h;
}
static double relErr(const std::vector<float>& x, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double d = double(x[i]) - double(ref[i]);
    num += d * d;
    den += double(ref[i]) * double(ref[i]);
    if (std::isnan(x[i]) != std::isnan(ref[i])) return INFINITY;
  }
  return std::sqrt(num / (den > 0 ? den : 1));
}

static void row(const char* what, float ms, double bytes, const char* note = "") {
  std::printf("| %-44s | %8.4f | %7.0f GB/s | %s\n", what, ms, bytes / (ms * 1e-3) / 1e9, note);
}

// ---------------------------------------------------------------------------------------------
// ApplyH variants (linear, CLAMP, image)

// Hand-written: lerps with fmaf (other rounding than the library's weights), 32-bit offsets.
__global__ void applyHFast(float* __restrict__ out, const float* __restrict__ im,
                           const float* __restrict__ hx, const float* __restrict__ hy,
                           const float* __restrict__ hz, Vec3Di n) {
  const int x = int(blockIdx.x * blockDim.x + threadIdx.x), y = int(blockIdx.y * blockDim.y + threadIdx.y);
  if (x >= n.x || y >= n.y) return;
  for (int z = int(blockIdx.z); z < n.z; z += int(gridDim.z)) {
    const unsigned id = (unsigned(z) * unsigned(n.y) + unsigned(y)) * unsigned(n.x) + unsigned(x);
    const float px = fminf(fmaxf(__ldg(hx + id), 0.f), float(n.x - 1));
    const float py = fminf(fmaxf(__ldg(hy + id), 0.f), float(n.y - 1));
    const float pz = fminf(fmaxf(__ldg(hz + id), 0.f), float(n.z - 1));
    const int i = int(px), j = int(py), k = int(pz);
    const float fx = px - float(i), fy = py - float(j), fz = pz - float(k);
    const unsigned dx = i < n.x - 1 ? 1u : 0u, dy = j < n.y - 1 ? unsigned(n.x) : 0u,
                   dz = k < n.z - 1 ? unsigned(n.x) * unsigned(n.y) : 0u;
    const float* b = im + (unsigned(k) * unsigned(n.y) + unsigned(j)) * unsigned(n.x) + unsigned(i);
    const float c00 = fmaf(fx, __ldg(b + dx) - __ldg(b), __ldg(b));
    const float c10 = fmaf(fx, __ldg(b + dy + dx) - __ldg(b + dy), __ldg(b + dy));
    const float c01 = fmaf(fx, __ldg(b + dz + dx) - __ldg(b + dz), __ldg(b + dz));
    const float c11 = fmaf(fx, __ldg(b + dz + dy + dx) - __ldg(b + dz + dy), __ldg(b + dz + dy));
    const float c0 = fmaf(fy, c10 - c00, c00), c1 = fmaf(fy, c11 - c01, c01);
    out[id] = fmaf(fz, c1 - c0, c0);
  }
}

// ---------------------------------------------------------------------------------------------
// Splat without the z-runs (a lab variant, for comparison): x-merge through a shuffle only,
// one slice per thread, scalar atomics. Image, no weights.
template <BackgroundStrategy BG>
__global__ void splatXMergeOnly(float* out, Vec3Di outSize, Vec3Di inSize, const float* val,
                                math::PosSpec pos) {
  constexpr unsigned kFull = 0xffffffffu;
  const int x = int(blockIdx.x * blockDim.x + threadIdx.x);
  const int y = int(blockIdx.y * blockDim.y + threadIdx.y);
  if (y >= inSize.y) return;
  const bool inX = x < inSize.x;
  const unsigned lane = threadIdx.x & 31u;
  const std::size_t nx = std::size_t(outSize.x), nxy = nx * std::size_t(outSize.y);
  for (int z = int(blockIdx.z); z < inSize.z; z += int(gridDim.z)) {
    Vec3Df p(0.f, 0.f, 0.f);
    float v = 0.f;
    if (inX) {
      const std::size_t id = math::linearIndex(x, y, z, inSize);
      p = pos.at(x, y, z, id);
      v = val[id];
    }
    math::AxisTaps<2> tx{}, ty{}, tz{};
    bool active = inX;
    if (active) {
      active = math::axisTaps<INTERP_LINEAR, BG>(p.x, outSize.x, tx) &
               math::axisTaps<INTERP_LINEAR, BG>(p.y, outSize.y, ty) &
               math::axisTaps<INTERP_LINEAR, BG>(p.z, outSize.z, tz);
    }
    for (int kz = 0; kz < 2; ++kz) {
      for (int ky = 0; ky < 2; ++ky) {
        const bool row = active && tz.w[kz] != 0.f && tz.ok[kz] && ty.w[ky] != 0.f && ty.ok[ky];
        const float wzy = tz.w[kz] * ty.w[ky];
        const std::size_t base = std::size_t(tz.idx[kz]) * nxy + std::size_t(ty.idx[ky]) * nx;
        const bool a0 = row && tx.w[0] != 0.f && tx.ok[0];
        const bool a1 = row && tx.w[1] != 0.f && tx.ok[1];
        const long long addr0 = a0 ? (long long)(base + std::size_t(tx.idx[0])) : -1;
        const long long addr1 = a1 ? (long long)(base + std::size_t(tx.idx[1])) : -2;
        const float w0 = wzy * tx.w[0], w1 = wzy * tx.w[1];
        const long long prevAddr1 = __shfl_up_sync(kFull, addr1, 1);
        const long long nextAddr0 = __shfl_down_sync(kFull, addr0, 1);
        const bool take = lane != 0 && a0 && prevAddr1 == addr0;
        const bool give = lane != 31 && a1 && nextAddr0 == addr1;
        const float prev = __shfl_up_sync(kFull, w1 * v, 1);
        if (a0) atomicAdd(out + addr0, w0 * v + (take ? prev : 0.f));
        if (a1 && !give) atomicAdd(out + addr1, w1 * v);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------

static std::vector<float> smoothH(int n, float amp, unsigned seed, bool noise) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> U(0.f, 1.f);
  const std::size_t nv = std::size_t(n) * n * n;
  std::vector<float> h(3 * nv);
  for (int c = 0; c < 3; ++c) {
    float f[3], ph[3];
    for (int a = 0; a < 3; ++a) {
      f[a] = 0.8f + 1.2f * U(rng);
      ph[a] = 6.2831853f * U(rng);
    }
    for (int z = 0; z < n; ++z)
      for (int y = 0; y < n; ++y)
        for (int x = 0; x < n; ++x) {
          const int q[3] = {x, y, z};
          float d = amp;
          if (noise) {
            d = amp * (2.f * U(rng) - 1.f);
          } else {
            for (int a = 0; a < 3; ++a) d *= std::sin(6.2831853f * f[a] * float(q[a]) / float(n) + ph[a]);
          }
          h[c * nv + (std::size_t(z) * n + y) * n + x] = float(q[c]) + d;
        }
  }
  return h;
}

int main(int argc, char** argv) {
  gProfile = argc > 1 && std::string(argv[1]) == "--profile";
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row as soon as it is measured
  const int n = 256;
  const std::size_t nv = std::size_t(n) * n * n;
  const double B = 4.0 * double(nv);  // bytes of one image
  const Vec3Di N(n, n, n);
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs, L2 %d MB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  {  // as pyca's runtime does: keep freed stream-ordered memory in the pool
    cudaMemPool_t pool;
    CK(cudaDeviceGetDefaultMemPool(&pool, 0));
    std::uint64_t keep = UINT64_MAX;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  }

  std::vector<float> hostA(nv), hostB(nv);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> U(0.f, 1.f);
  for (auto& v : hostA) v = U(rng);
  for (auto& v : hostB) v = U(rng);
  float* a = devUpload(hostA);
  float* b = devUpload(hostB);
  float *o, *o2, *big, *big2;
  CK(cudaMalloc(&o, nv * 4));
  CK(cudaMalloc(&o2, nv * 4));
  CK(cudaMalloc(&big, 3 * nv * 4));
  CK(cudaMalloc(&big2, 3 * nv * 4));

  std::printf("\n| variant | ms | rate | note\n|---|---|---|---|\n");
  // ---- bandwidth
  row("memcpy D2D 1 image (read+write)",
      timeEvents([&] { CK(cudaMemcpyAsync(o, a, nv * 4, cudaMemcpyDeviceToDevice)); }), 2 * B);
  row("memcpy D2D 3 images (read+write)",
      timeEvents([&] { CK(cudaMemcpyAsync(big2, big, 3 * nv * 4, cudaMemcpyDeviceToDevice)); }), 6 * B);

  // ---- elementwise: the library's map kernel for Add
  {
    cuda_impl::MapTarget t{o, nv, 1, nv, nullptr};
    cuda_impl::MapOperand in[2] = {{a, nv, {0, 0, 0}}, {b, nv, {0, 0, 0}}};
    row("Add image (library map)", timeEvents([&] { cuda_impl::map<math::Add>("Add", t, in); }), 3 * B);
    cuda_impl::MapTarget tf{big2, nv, 3, nv, nullptr};
    cuda_impl::MapOperand inf[2] = {{big, nv, {0, 0, 0}}, {big, nv, {0, 0, 0}}};
    row("Add field (library map)", timeEvents([&] { cuda_impl::map<math::Add>("Add", tf, inf); }), 9 * B);
  }

  // ---- reductions, host-timed (each call waits for its result)
  {
    float lo = 0, hi = 0;
    double s = 0;
    void* temp = nullptr;
    std::size_t tb = 0;
    math::MinMaxAcc* dres = nullptr;
    CK(cub::DeviceReduce::TransformReduce(nullptr, tb, a, dres, nv, math::MinMaxCombine{}, math::MinMaxOf{},
                                          math::MinMaxAcc{INFINITY, -INFINITY}, 0));
    auto cubMinMax = [&] {  // what reductions.cu did before: CUB, pageable copy back, wait
      CK(cudaMallocAsync(&temp, tb + 256, 0));
      dres = static_cast<math::MinMaxAcc*>(temp);
      CK(cub::DeviceReduce::TransformReduce(static_cast<char*>(temp) + 256, tb, a, dres, nv,
                                            math::MinMaxCombine{}, math::MinMaxOf{},
                                            math::MinMaxAcc{INFINITY, -INFINITY}, 0));
      math::MinMaxAcc r;
      CK(cudaMemcpyAsync(&r, dres, sizeof r, cudaMemcpyDeviceToHost, 0));
      CK(cudaFreeAsync(temp, 0));
      CK(cudaStreamSynchronize(0));
      lo = r.lo;
      hi = r.hi;
    };
    row("MinMax CUB + pageable copy (before)", timeHost(cubMinMax), B);
    const float cl = lo, ch = hi;
    row("MinMax two kernels + mapped result (now)",
        timeHost([&] { cuda_impl::reduceMinMax("MinMax", a, nv, 1, nv, &lo, &hi); }), B);
    std::printf("  MinMax check: cub (%g, %g) new (%g, %g)\n", cl, ch, lo, hi);
    row("Sum two kernels (now)", timeHost([&] {
          cuda_impl::reduceSum("Sum", cuda_impl::SumKind::kSum, a, nv, nullptr, 0, 1, nv, &s);
        }),
        B);
    double ref = 0;
    for (float v : hostA) ref += v;
    std::printf("  Sum check: %.10g vs host %.10g\n", s, ref);
    row("Dot two kernels (now)",
        timeHost([&] { cuda_impl::reduceSum("Dot", cuda_impl::SumKind::kDot, a, nv, b, nv, 1, nv, &s); }),
        2 * B);
    row("empty stream sync (floor of any reduction)", timeHost([&] { CK(cudaStreamSynchronize(0)); }), 0);
  }

  // ---- ApplyH
  for (int pass = 0; pass < 1; ++pass) {
    std::vector<float> hh = smoothH(n, 3.f, 7, false);
    float* h = devUpload(hh);
    const float* hp[3] = {h, h + nv, h + 2 * nv};
    deformation_impl::GatherJob j;
    j.nc = 1;
    j.out[0] = o;
    j.outSize = N;
    j.src[0] = a;
    j.srcSize = N;
    j.pos.mode = math::POS_H;
    j.pos.fx = hp[0];
    j.pos.fy = hp[1];
    j.pos.fz = hp[2];
    const double bytes = 5 * B;  // h (3 images) + image + out
    float ms = timeEvents([&] { cuda_impl::gather(j, "ApplyH"); });
    row("ApplyH library gather() (now)", ms, bytes, "before: 0.1926 ms");
    const std::vector<float> ref = download(o, nv);
    auto variant = [&](const char* name, const std::function<void()>& fn) {
      CK(cudaMemset(o, 0xff, nv * 4));
      const float t = timeEvents(fn);
      char note[64];
      std::snprintf(note, sizeof note, "rel err vs gather() %.2e", relErr(download(o, nv), ref));
      row(name, t, bytes, note);
    };
    const dim3 blk(32, 8);
    for (int zt : {1, 2, 4}) {
      const dim3 grd(n / 32, n / 8, n / zt);
      char name[96];
      std::snprintf(name, sizeof name, "ApplyH gatherKernel uint32, %d z/thread", zt);
      variant(name, [&] {
        cuda_impl::gatherKernel<INTERP_LINEAR, BACKGROUND_STRATEGY_CLAMP, 1, std::uint32_t>
            <<<grd, blk>>>(math::MutPlanes<1>{{o}}, math::Planes<1>{{a}}, N, N, j.pos, j.post, 0.f);
      });
    }
    variant("ApplyH gatherKernel size_t, 2 z/thread", [&] {
      cuda_impl::gatherKernel<INTERP_LINEAR, BACKGROUND_STRATEGY_CLAMP, 1, std::size_t>
          <<<dim3(n / 32, n / 8, n / 2), blk>>>(math::MutPlanes<1>{{o}}, math::Planes<1>{{a}}, N, N, j.pos,
                                                j.post, 0.f);
    });
    variant("ApplyH hand-written fmaf lerps 32x4 (run 1)",
            [&] { applyHFast<<<dim3(n / 32, n / 4, n), dim3(32, 4)>>>(o, a, hp[0], hp[1], hp[2], N); });
    CK(cudaFree(h));
  }

  // ---- Splat (PARTIAL_ZERO, image, no weights), smooth and noisy: the kernel before z-runs, the
  // library's launchSplat with several z-runs (slices per thread) and vector widths.
  for (int noise = 0; noise < 2; ++noise) {
    std::vector<float> hh = smoothH(n, 3.f, 11, noise != 0);
    float* h = devUpload(hh);
    math::PosSpec pos;
    pos.mode = math::POS_H;
    pos.fx = h;
    pos.fy = h + nv;
    pos.fz = h + 2 * nv;
    const char* kind = noise ? "noise +-3" : "smooth";
    const dim3 blk(32, 8);
    auto before = [&] {
      CK(cudaMemsetAsync(o, 0, nv * 4));
      splatXMergeOnly<BACKGROUND_STRATEGY_PARTIAL_ZERO><<<dim3(n / 32, n / 8, n), blk>>>(o, N, N, a, pos);
    };
    char name[96];
    std::snprintf(name, sizeof name, "Splat x-merge only, scalar (before; %s)", kind);
    row(name, timeEvents(before), 5 * B);
    before();
    const std::vector<float> ref = download(o, nv);
    const cuda_impl::ValueSource<1> src{math::Planes<1>{{a}}, pos, N};
    auto variant = [&](int zrun, const std::function<void()>& launch) {
      CK(cudaMemset(o, 0xff, nv * 4));
      auto fn = [&] {
        CK(cudaMemsetAsync(o, 0, nv * 4));
        launch();
      };
      const float t = timeEvents(fn);
      char nm[96], note[64];
      std::snprintf(nm, sizeof nm, "Splat z-run %d (%s)", zrun, kind);
      std::snprintf(note, sizeof note, "rel err vs before %.2e", relErr(download(o, nv), ref));
      row(nm, t, 5 * B, note);
    };
#define PYCA_LAB_SPLAT(Z)                                                                                \
  variant(Z, [&] {                                                                                       \
    cuda_impl::launchSplat<1, cuda_impl::ValueSource<1>, Z>(math::MutPlanes<1>{{o}}, nullptr, N, N, src, \
                                                            BACKGROUND_STRATEGY_PARTIAL_ZERO, "Splat");  \
  })
    PYCA_LAB_SPLAT(1);
    PYCA_LAB_SPLAT(4);
    PYCA_LAB_SPLAT(8);
    PYCA_LAB_SPLAT(16);
#undef PYCA_LAB_SPLAT
    // The library's entry point (zeroing included), field with weights (normalised)
    deformation_impl::SplatJob sj;
    sj.nc = 1;
    sj.out[0] = o;
    sj.outSize = N;
    sj.inSize = N;
    sj.val[0] = a;
    sj.pos = pos;
    sj.bg = BACKGROUND_STRATEGY_PARTIAL_ZERO;
    std::snprintf(name, sizeof name, "Splat library splat() (%s)", kind);
    row(name, timeEvents([&] { cuda_impl::splat(sj, "Splat"); }), 5 * B);
    sj.nc = 3;
    sj.out[0] = big2;
    sj.out[1] = big2 + nv;
    sj.out[2] = big2 + 2 * nv;
    sj.val[0] = h;
    sj.val[1] = h + nv;
    sj.val[2] = h + 2 * nv;
    sj.weights = o2;
    sj.normalize = true;
    std::snprintf(name, sizeof name, "Splat library splat() field, normalised (%s)", kind);
    row(name, timeEvents([&] { cuda_impl::splat(sj, "Splat"); }), 11 * B);
    CK(cudaFree(h));
  }
  CK(cudaDeviceSynchronize());
  std::printf("done\n");
  return 0;
}
