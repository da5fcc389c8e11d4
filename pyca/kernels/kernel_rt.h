// Run-time helpers of the C++ that pyca.kernels generates from Python kernels (one source for the
// host compiler and for NVRTC). Python's semantics where C's differ: floor division and modulo,
// min/max/abs, integer powers; the boundary rule of image reads (indices clamped to the grid) and
// memory-safe writes (outside the grid: not done; the CPU loop reports them).
#pragma once
#include <pyca/kernel.cuh>

namespace pyca_k {

// Errors of a CPU call: code << 24 | source line of the last offence. The loops give each row (or
// each thread) an Err of its own, which the compiler keeps in a register, and merge it into the
// call's at the end, so that reporting does not keep the loop from being vectorised.
enum { kErrWrite = 1, kErrDivZero = 2, kErrRange = 3, kErrInt = 4, kErrAxis = 6 };
struct Err {
  int v;
};
PYCA_HD void report(Err* e, int code, int line) {
#if !defined(__CUDA_ARCH__)
  if (e) e->v = (code << 24) | (line & 0xffffff);
#else
  (void)e;
  (void)code;
  (void)line;
#endif
}
#if !defined(__CUDACC__)
// Merges a row's errors into the call's (host compilers only).
inline void merge(Err* call, const Err& row) {
  if (row.v) {
#pragma omp atomic write
    call->v = row.v;
  }
}
#endif

// At the top of the body of every loop of a kernel (for, while): on the host, an empty asm statement
// that keeps the compiler from vectorising that loop on its own (a sum over taps would become an
// in-order vector reduction of gathers, twice as slow as the scalar loop); the voxel loop around it
// is what is vectorised, where it can be.
#if defined(__CUDACC__)
#define PYCA_K_SCALAR_LOOP
#else
#define PYCA_K_SCALAR_LOOP __asm__ volatile("")
#endif

// Before a loop of known step: on the GPU at most 4 iterations unrolled. A loop of constant length
// was otherwise unrolled whole, with every tap's address held in registers (a 17-tap Gaussian pass:
// 164 registers, 5-7x slower than unrolled by 4).
#if defined(__CUDA_ARCH__)
#define PYCA_K_UNROLL _Pragma("unroll 4")
#else
#define PYCA_K_UNROLL
#endif

// A helper's return of 2 to 8 numbers (return a, b, c; unpacked by the caller: x, y, z = f(...)).
template <class T, int N>
struct Tup {
  T v[N];
};

// Branch-free (max then min), so that loops of reads vectorise.
PYCA_HD int clampi(int v, int n) {
  const int a = v > 0 ? v : 0;
  return a < n - 1 ? a : n - 1;
}

// The linear index of (i, j, k) in a grid, in Idx arithmetic: int when every array of the call has
// fewer than 2^31 voxels (on the CPU the compiler can then vectorise the reads as gathers; on the GPU
// it takes a fraction of the instructions), long long otherwise.
// On the GPU a sum of three products, so that the terms that do not change in a loop (j and k in a
// stencil along x, ...) are added once outside it.
template <class Idx, class View>
PYCA_HD Idx lin(const View& a, int i, int j, int k) {
#if defined(__CUDA_ARCH__)
  return Idx(k) * (Idx(a.size.y) * Idx(a.size.x)) + Idx(j) * Idx(a.size.x) + Idx(i);
#else
  return (Idx(k) * Idx(a.size.y) + Idx(j)) * Idx(a.size.x) + Idx(i);
#endif
}
// A load; RO: through the read-only data cache on the GPU (__ldg), for arrays the kernel never
// stores into, read before any store of the thread (the translator decides).
template <bool RO>
PYCA_HD float load(const float* p) {
#if defined(__CUDA_ARCH__)
  if (RO) return __ldg(p);
#endif
  return *p;
}
// im[i, j, k]: indices clamped to the grid (the border voxel's value outside it).
template <class Idx, bool RO = false>
PYCA_HD float rd(const pyca::ImageView& a, int i, int j, int k) {
  return load<RO>(a.data + lin<Idx>(a, clampi(i, a.size.x), clampi(j, a.size.y), clampi(k, a.size.z)));
}
PYCA_HD const float* plane(const pyca::FieldView& a, int c) { return c <= 0 ? a.x : (c == 1 ? a.y : a.z); }
template <class Idx, bool RO = false>
PYCA_HD float rdf(const pyca::FieldView& a, int i, int j, int k, int c) {
  return load<RO>(plane(a, c) + lin<Idx>(a, clampi(i, a.size.x), clampi(j, a.size.y), clampi(k, a.size.z)));
}
// The same reads without the clamps, for indices known to lie in the grid: the GPU's interior copies
// of loops (pyca/kernels/interior.py), compiled where PYCA_K_INTERIOR is 1.
#if defined(__CUDA_ARCH__) && !defined(PYCA_K_INTERIOR)
#define PYCA_K_INTERIOR 1
#elif !defined(PYCA_K_INTERIOR)
#define PYCA_K_INTERIOR 0
#endif
template <class Idx, bool RO = false>
PYCA_HD float rdu(const pyca::ImageView& a, int i, int j, int k) {
  return load<RO>(a.data + lin<Idx>(a, i, j, k));
}
template <class Idx, bool RO = false>
PYCA_HD float rdfu(const pyca::FieldView& a, int i, int j, int k, int c) {
  return load<RO>(plane(a, c) + lin<Idx>(a, i, j, k));
}
// Whether (i, j, k) lies in a grid: & rather than && (no branches, so that loops vectorise).
template <class View>
PYCA_HD bool inside(const View& a, int i, int j, int k) {
  return (i >= 0) & (j >= 0) & (k >= 0) & (i < a.size.x) & (j < a.size.y) & (k < a.size.z);
}
// out[i, j, k] = v, only inside the grid. On the GPU a conditional store. On the CPU an
// unconditional store at the clamped voxel of its own value when (i, j, k) is outside (so that the
// voxel loop vectorises: a conditional store would make the reads before it conditional gathers),
// and the error record says so (the call then raises).
template <class Idx>
PYCA_HD void wr(const pyca::ImageView& a, int i, int j, int k, float v, Err* e, int line) {
  const bool ok = inside(a, i, j, k);
#if !defined(__CUDA_ARCH__)
  const Idx q = lin<Idx>(a, clampi(i, a.size.x), clampi(j, a.size.y), clampi(k, a.size.z));
  const float old = a.data[q];
  a.data[q] = ok ? v : old;
  e->v = ok ? e->v : ((kErrWrite << 24) | line);
#else
  if (ok) a.data[lin<Idx>(a, i, j, k)] = v;
  (void)e;
  (void)line;
#endif
}
template <class Idx>
PYCA_HD void wrf(const pyca::FieldView& a, int i, int j, int k, int c, float v, Err* e, int line) {
  const bool ok = inside(a, i, j, k) & (c >= 0) & (c <= 2);
  float* p = const_cast<float*>(plane(a, c));
#if !defined(__CUDA_ARCH__)
  const Idx q = lin<Idx>(a, clampi(i, a.size.x), clampi(j, a.size.y), clampi(k, a.size.z));
  const float old = p[q];
  p[q] = ok ? v : old;
  e->v = ok ? e->v : ((kErrWrite << 24) | line);
#else
  if (ok) p[lin<Idx>(a, i, j, k)] = v;
  (void)e;
  (void)line;
#endif
}

// out[i, j, k] = v at the voxel (i, j, k) of ca.index() of the grid the kernel visits (always inside
// it): on the GPU a plain store, on the CPU wr's (the same code as any other store there).
template <class Idx>
PYCA_HD void wrown(const pyca::ImageView& a, int i, int j, int k, float v, Err* e, int line) {
#if defined(__CUDA_ARCH__)
  a.data[lin<Idx>(a, i, j, k)] = v;
  (void)e;
  (void)line;
#else
  wr<Idx>(a, i, j, k, v, e, line);
#endif
}
template <class Idx>
PYCA_HD void wrfown(const pyca::FieldView& a, int i, int j, int k, int c, float v, Err* e, int line) {
#if defined(__CUDA_ARCH__)
  if ((c >= 0) & (c <= 2)) const_cast<float*>(plane(a, c))[lin<Idx>(a, i, j, k)] = v;
  (void)e;
  (void)line;
#else
  wrf<Idx>(a, i, j, k, c, v, e, line);
#endif
}

#if !defined(__CUDACC__)
// The strip bodies of the CPU (pyca/kernels/strip.py): up to PYCA_K_W voxels of a row at a time, each
// statement that varies along x a loop over the strip's lanes.
#define PYCA_K_W 256
#if defined(__clang__)
#define PYCA_K_LANES _Pragma("clang loop vectorize(assume_safety)")
#else
#define PYCA_K_LANES _Pragma("GCC ivdep")
#endif
// Rows of clamped values for reads im[i + u, j', k'] whose strip crosses the grid's x border: one per
// read of the source, filled once per strip and row with PYCA_K_PAD values beyond each end, so that the
// taps of a stencil along x (u = -r .. r) share one copy.
#define PYCA_K_PAD 32
struct RowCache {
  const float* row = nullptr;
  long long i0 = 0;
  float v[PYCA_K_W + 2 * PYCA_K_PAD];
};
// v[t] = row[clamp(x0 + t)] for t < m (row of nx values).
inline void clampedCopy(float* v, const float* row, long long nx, long long x0, long long m) {
  const long long a = x0 < 0 ? (-x0 < m ? -x0 : m) : 0;  // [0, a) before the row, [a, b) in it, [b, m) after
  const long long e = nx - x0, b = e < a ? a : (e > m ? m : e);
  for (long long t = 0; t < a; ++t) v[t] = row[0];
  if (b > a) __builtin_memcpy(v + a, row + x0 + a, sizeof(float) * static_cast<unsigned long>(b - a));
  for (long long t = b; t < m; ++t) v[t] = row[nx - 1];
}
// The n values a[x0 + l, j, k] (l < n), clamped to the grid as rd: a pointer into the image when they
// lie in the row, else into c (the strip starts at i0).
inline const float* rowOf(const float* base, const pyca::Vec3Di& s, long long x0, int j, int k, int n,
                          long long i0, RowCache& c) {
  const float* row =
      base + (static_cast<long long>(clampi(k, s.z)) * s.y + clampi(j, s.y)) * static_cast<long long>(s.x);
  if (x0 >= 0 && x0 + n <= s.x) return row + x0;
  const long long u = x0 - i0;
  if (u >= -PYCA_K_PAD && u <= PYCA_K_PAD) {
    if (c.row != row || c.i0 != i0) {
      clampedCopy(c.v, row, s.x, i0 - PYCA_K_PAD, n + 2 * PYCA_K_PAD);
      c.row = row;
      c.i0 = i0;
    }
    return c.v + PYCA_K_PAD + u;
  }
  c.row = nullptr;
  clampedCopy(c.v, row, s.x, x0, n);
  return c.v;
}
template <class Idx>
inline const float* rdrow(const pyca::ImageView& a, int x0, int j, int k, int n, int i0, RowCache& c) {
  return rowOf(a.data, a.size, x0, j, k, n, i0, c);
}
template <class Idx>
inline const float* rdfrow(const pyca::FieldView& a, int x0, int j, int k, int comp, int n, int i0,
                           RowCache& c) {
  return rowOf(plane(a, comp), a.size, x0, j, k, n, i0, c);
}
// The row a[i0 .. i0 + n - 1, j, k] to store into when it lies inside the grid, else nullptr (the
// strip then stores voxel by voxel with wr's checks).
template <class Idx>
inline float* wrrow(const pyca::ImageView& a, int i0, int j, int k, int n) {
  if (!(inside(a, i0, j, k) & (static_cast<long long>(i0) + n <= a.size.x))) return nullptr;
  return a.data + lin<long long>(a, i0, j, k);
}
template <class Idx>
inline float* wrfrow(const pyca::FieldView& a, int i0, int j, int k, int c, int n) {
  if (!(inside(a, i0, j, k) & (c >= 0) & (c <= 2) & (static_cast<long long>(i0) + n <= a.size.x)))
    return nullptr;
  return const_cast<float*>(plane(a, c)) + lin<long long>(a, i0, j, k);
}
#endif

// Python's // and % (the result of % has the divisor's sign); integer division by zero gives 0
// (and the CPU call raises ZeroDivisionError).
PYCA_HD int floordiv(int a, int b, Err* e, int line) {
  if (b == 0) {
    report(e, kErrDivZero, line);
    return 0;
  }
  int q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
PYCA_HD int mod(int a, int b, Err* e, int line) {
  if (b == 0) {
    report(e, kErrDivZero, line);
    return 0;
  }
  int r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
PYCA_HD float floordiv(float a, float b) { return floorf(a / b); }
PYCA_HD double floordiv(double a, double b) { return floor(a / b); }
PYCA_HD float mod(float a, float b) {
  float r = fmodf(a, b);
  if (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) r += b;
  return r;
}
PYCA_HD double mod(double a, double b) {
  double r = fmod(a, b);
  if (r != 0.0 && ((r < 0.0) != (b < 0.0))) r += b;
  return r;
}
// Python's min/max: the first of equal values; abs; int ** non-negative int.
template <class T>
PYCA_HD T min2(T a, T b) {
  return b < a ? b : a;
}
template <class T>
PYCA_HD T max2(T a, T b) {
  return b > a ? b : a;
}
template <class T>
PYCA_HD T sq(T a) {
  return a * a;
}
PYCA_HD int absv(int a) { return a < 0 ? -a : a; }
PYCA_HD float absv(float a) { return fabsf(a); }
PYCA_HD double absv(double a) { return fabs(a); }
PYCA_HD int ipow(int a, int n) {
  int r = 1;
  while (n > 0) {
    if (n & 1) r *= a;
    a *= a;
    n >>= 1;
  }
  return r;
}
// float -> int as Python's int() (toward zero). NaN and values beyond the 32-bit range give 0, which
// the CPU reports (ValueError after the call; Python raises); the select keeps the loop branch-free.
PYCA_HD int toint(float v, Err* e, int line) {
  const bool ok = (v == v) & (v >= -2147483648.0f) & (v < 2147483648.0f);
#if !defined(__CUDA_ARCH__)
  e->v = ok ? e->v : ((kErrInt << 24) | line);
#else
  (void)e;
  (void)line;
#endif
  return int(ok ? v : 0.0f);
}
PYCA_HD int toint(double v, Err* e, int line) {
  const bool ok = (v == v) & (v >= -2147483648.0) & (v < 2147483648.0);
#if !defined(__CUDA_ARCH__)
  e->v = ok ? e->v : ((kErrInt << 24) | line);
#else
  (void)e;
  (void)line;
#endif
  return int(ok ? v : 0.0);
}
PYCA_HD int toint(int v, Err*, int) { return v; }
PYCA_HD int toint(bool v, Err*, int) { return v; }
#if defined(__CUDACC__)
PYCA_HD float finf() { return __int_as_float(0x7f800000); }
PYCA_HD float fnan() { return __int_as_float(0x7fffffff); }
#else
PYCA_HD float finf() { return __builtin_inff(); }
PYCA_HD float fnan() { return __builtin_nanf(""); }
#endif

// ca.line(im, axis, radius): t[d] is im at this voxel moved d along axis, clamped to the grid as any
// read. On the GPU, compiled with PYCA_K_TILES (opt-in), a kernel with a line stages per block a tile
// of im with `radius` voxels of halo along the axis in shared memory (lineTiles); t[d] with
// |d| <= radius then reads the tile, any other d (and the CPU, and the GPU without a tile) reads the
// image (pyca/kernels/line.py).
struct Line {
  const float* s;  // this voxel's value in the tile, or nullptr (no tile)
  int stride;      // floats between neighbours along the axis in the tile
  int r;           // offsets -r .. r are in the tile
};
template <class Idx, bool RO = false>
PYCA_HD float line_rd(const Line& L, const pyca::ImageView& a, int i, int j, int k, int ax, int d) {
#if defined(__CUDA_ARCH__)
  if (L.s != nullptr && unsigned(d + L.r) <= unsigned(2 * L.r)) return L.s[d * L.stride];
#else
  (void)L;
#endif
  return rd<Idx, RO>(a, ax == 0 ? i + d : i, ax == 1 ? j + d : j, ax == 2 ? k + d : k);
}
// An axis other than 0, 1, 2: the CPU call raises; t[d] reads this voxel for every d.
PYCA_HD void line_check(int ax, Err* e, int line) {
  if (ax < 0 || ax > 2) report(e, kErrAxis, line);
}

#if defined(__CUDA_ARCH__)
// The tiles of the GPU's line kernels: the largest radius staged and the tile (floats, static shared
// memory, 16 KiB). Along x a tile is 128 x 8 voxels (x, y) of one plane; along y (z) 32 x-columns of
// 64 voxels along y (z). A warp loads rows of the tile (coalesced) and computes 32 neighbouring voxels
// of x at a time (consecutive banks).
#define PYCA_K_LINE_RMAX 32
#define PYCA_K_LINE_SMEM (32 * (64 + 2 * PYCA_K_LINE_RMAX))
// Whether a block of this launch can run lineTiles: its threads a whole number of warps.
__device__ __forceinline__ bool lineBlockOk() {
  const unsigned n = blockDim.x * blockDim.y * blockDim.z;
  return n % 32u == 0u;
}
// Runs body(i, j, k, Line) for every voxel of the grid `dom`, tile by tile; each block takes the
// tiles of its linear index, stepping by the number of blocks (blocks beyond the tiles exit). Every
// thread of the block reaches each __syncthreads (the tile loop's bounds are the block's).
template <int AX, class F>
__device__ __forceinline__ void lineTilesAx(float* sh, const pyca::Vec3Di& dom, const pyca::ImageView& im,
                                            int r, F body) {
  constexpr int TX = AX == 0 ? 128 : 32, TY = AX == 0 ? 8 : (AX == 1 ? 64 : 1), TZ = AX == 2 ? 64 : 1;
  const int tid = int(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  const int lane = tid & 31, wid = tid >> 5;
  const int nw = int(blockDim.x * blockDim.y * blockDim.z) >> 5;
  const int ntx = (dom.x + TX - 1) / TX, nty = (dom.y + TY - 1) / TY, ntz = (dom.z + TZ - 1) / TZ;
  const long long nt = (long long)ntx * nty * ntz;
  const long long nb = (long long)gridDim.x * gridDim.y * gridDim.z;
  const int W = AX == 0 ? TX + 2 * r : 32;  // floats per row of the tile
  for (long long t = blockIdx.x + (long long)gridDim.x * (blockIdx.y + (long long)gridDim.y * blockIdx.z);
       t < nt; t += nb) {
    const int tx = int(t % ntx), rest = int(t / ntx), ty = rest % nty, tz = rest / nty;
    const int x0 = tx * TX, y0 = ty * TY, z0 = tz * TZ;
    __syncthreads();  // the previous tile's reads are done
    if (AX == 0) {
      for (int ly = wid; ly < TY; ly += nw)
        for (int lx = lane; lx < W; lx += 32) sh[ly * W + lx] = rd<int, true>(im, x0 - r + lx, y0 + ly, z0);
    } else {
      for (int la = wid; la < (AX == 1 ? TY : TZ) + 2 * r; la += nw)
        sh[la * 32 + lane] = AX == 1 ? rd<int, true>(im, x0 + lane, y0 - r + la, z0)
                                     : rd<int, true>(im, x0 + lane, y0, z0 - r + la);
    }
    __syncthreads();
    if (AX == 0) {
      for (int ly = wid; ly < TY; ly += nw)
        for (int lx = lane; lx < TX; lx += 32) {
          const int i = x0 + lx, j = y0 + ly;
          if (i < dom.x && j < dom.y) body(i, j, z0, Line{sh + ly * W + r + lx, 1, r});
        }
    } else {
      const int i = x0 + lane;
      for (int la = wid; la < (AX == 1 ? TY : TZ); la += nw) {
        const int j = AX == 1 ? y0 + la : y0, k = AX == 2 ? z0 + la : z0;
        if (i < dom.x && j < dom.y && k < dom.z) body(i, j, k, Line{sh + (la + r) * 32 + lane, 32, r});
      }
    }
  }
}
// The first voxel (linear index) of this thread and the step between a thread's voxels, over the whole
// launch: blocks and their threads in one linear order, consecutive threads on consecutive voxels of x.
__device__ __forceinline__ long long linearThread() {
  const long long b = blockIdx.x + (long long)gridDim.x * (blockIdx.y + (long long)gridDim.y * blockIdx.z);
  return b * (blockDim.x * blockDim.y * blockDim.z) + threadIdx.x +
         blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}
__device__ __forceinline__ long long linearThreads() {
  return (long long)gridDim.x * gridDim.y * gridDim.z * (blockDim.x * blockDim.y * blockDim.z);
}
template <class F>
__device__ __forceinline__ void lineTiles(const pyca::Vec3Di& dom, const pyca::ImageView& im, int ax, int r,
                                          F body) {
  __shared__ float sh[PYCA_K_LINE_SMEM];  // one array for the three axes
  if (ax == 0)
    lineTilesAx<0>(sh, dom, im, r, body);
  else if (ax == 1)
    lineTilesAx<1>(sh, dom, im, r, body);
  else
    lineTilesAx<2>(sh, dom, im, r, body);
}
#endif

// The voxel loop of a kernel's device entry (X, Y, Z: int indices of the grid sz; Idx: int, or long long
// for arrays of 2^31 voxels or more). A kernel with ca.line's tiles (PYCA_K_TILES) is launched with a
// linear grid of one block per LINE_VOXELS_PER_THREAD x block voxels (pyca/kernels/voxel.py), which
// PYCA_FOR_EACH_VOXEL's 3-D grid-stride loop would cover with the blocks of x only (about nx x 8 threads,
// ~100x slower); where its tiles cannot run (a radius beyond PYCA_K_LINE_RMAX, a block that is not whole
// warps, 64-bit indices) its threads step through the voxels by their linear index instead, any launch
// covering every voxel once.
#if defined(PYCA_K_TILES) && defined(__CUDA_ARCH__)
#define PYCA_K_FOR_EACH_VOXEL(Idx, sz, X, Y, Z)                                                      \
  for (long long pyca_v = pyca_k::linearThread(), pyca_n = (long long)(sz).x * (sz).y * (sz).z,      \
                 pyca_st = pyca_k::linearThreads();                                                  \
       pyca_v < pyca_n; pyca_v += pyca_st)                                                           \
    for (int X = int(static_cast<Idx>(pyca_v) % (sz).x),                                             \
             Y = int(static_cast<Idx>(pyca_v) / (sz).x % (sz).y),                                    \
             Z = int(static_cast<Idx>(pyca_v) / (static_cast<Idx>((sz).x) * (sz).y)), pyca_once = 1; \
         pyca_once; pyca_once = 0)
#else
#define PYCA_K_FOR_EACH_VOXEL(Idx, sz, X, Y, Z) PYCA_FOR_EACH_VOXEL(sz, X, Y, Z)
#endif

}  // namespace pyca_k
