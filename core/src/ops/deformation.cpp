// The deformation family (ops/deformation.yaml): argument checks, then the CPU loops
// (deformation_cpu.cpp) or the CUDA kernels (cuda/src/ops/deformation*.cu). Semantics:
// docs/operations/deformation.md.
#include "pyca/math/deformation.h"

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "ops/deformation_cuda.h"
#include "pyca/array3d.h"
#include "pyca/detail/checks.h"
#include "pyca/errors.h"
#include "pyca/ops/deformation.h"

namespace pyca {

namespace {

using deformation_impl::GatherJob;
using deformation_impl::SplatJob;

const char* bgName(BackgroundStrategy bg) {
  switch (bg) {
    case BACKGROUND_STRATEGY_PARTIAL_ID:
      return "BACKGROUND_STRATEGY_PARTIAL_ID";
    case BACKGROUND_STRATEGY_ID:
      return "BACKGROUND_STRATEGY_ID";
    case BACKGROUND_STRATEGY_PARTIAL_ZERO:
      return "BACKGROUND_STRATEGY_PARTIAL_ZERO";
    case BACKGROUND_STRATEGY_ZERO:
      return "BACKGROUND_STRATEGY_ZERO";
    case BACKGROUND_STRATEGY_CLAMP:
      return "BACKGROUND_STRATEGY_CLAMP";
    case BACKGROUND_STRATEGY_WRAP:
      return "BACKGROUND_STRATEGY_WRAP";
    case BACKGROUND_STRATEGY_VAL:
      return "BACKGROUND_STRATEGY_VAL";
  }
  return nullptr;
}

std::string allowedList(unsigned set) {
  std::string s;
  for (int b = 0; b < 7; ++b) {
    if (!(set & math::bgBit(BackgroundStrategy(b)))) continue;
    if (!s.empty()) s += ", ";
    s += bgName(BackgroundStrategy(b));
  }
  return s;
}

// Throws ValueError unless bg is in `set`; `what` says what is interpolated ("an image").
void checkBg(const char* op, BackgroundStrategy bg, unsigned set, const char* what) {
  if (math::bgAllowed(set, bg)) return;
  const char* name = bgName(bg);
  throw ValueError(std::string(op) + ": background strategy " +
                   (name ? std::string(name) : "#" + std::to_string(int(bg))) + " is not supported for " +
                   what + " (use one of " + allowedList(set) + ")");
}

void checkInterp(const char* op, InterpT interp) {
  if (interp != INTERP_NN && interp != INTERP_LINEAR && interp != INTERP_CUBIC) {
    throw ValueError(std::string(op) + ": unknown interpolation method #" + std::to_string(int(interp)) +
                     " (use INTERP_NN, INTERP_LINEAR or INTERP_CUBIC)");
  }
}

constexpr unsigned kImageNoValBgs = math::kLinearBgs;

void setPlanes(float* p[3], Image3D& im) { p[0] = im.data(); }
void setPlanes(float* p[3], Field3D& f) {
  p[0] = f.x();
  p[1] = f.y();
  p[2] = f.z();
}
void setPlanes(const float* p[3], const Image3D& im) { p[0] = im.data(); }
void setPlanes(const float* p[3], const Field3D& f) {
  p[0] = f.x();
  p[1] = f.y();
  p[2] = f.z();
}
int ncOf(const Image3D&) { return 1; }
int ncOf(const Field3D&) { return 3; }

math::PosSpec posH(const Field3D& h) {
  math::PosSpec s;
  s.mode = math::POS_H;
  s.fx = h.x();
  s.fy = h.y();
  s.fz = h.z();
  return s;
}
// p = x + sign * delta * v / sp (sp: the spacing of the output's grid, the project's rule)
math::PosSpec posV(const Field3D& v, float signedDelta, const Vec3Df& sp) {
  math::PosSpec s;
  s.mode = math::POS_V;
  s.fx = v.x();
  s.fy = v.y();
  s.fz = v.z();
  s.scale = Vec3Df(signedDelta / sp.x, signedDelta / sp.y, signedDelta / sp.z);
  return s;
}

template <class A>
GatherJob gatherJob(A& out, const A& src, BackgroundStrategy bg, InterpT interp, float bgVal = 0.f) {
  GatherJob j;
  j.nc = ncOf(out);
  setPlanes(j.out, out);
  setPlanes(j.src, src);
  j.outSize = out.size();
  j.srcSize = src.size();
  j.bg = bg;
  j.interp = interp;
  j.bgVal = bgVal;
  return j;
}

// The source may have any size: h (on out's grid) holds voxel coordinates of the source's own grid,
// and the background strategy applies at the source's borders (docs/operations/deformation.md).
template <class A>
void applyH(const char* op, A& out, const A& src, const Field3D& h, BackgroundStrategy bg, InterpT interp,
            float bgVal, unsigned bgs, const char* what, const char* srcName) {
  const bool dev = detail::onDevice(op, {{"out", &out}, {srcName, &src}, {"h", &h}});
  detail::checkSameSize(op, {{"out", &out}, {"h", &h}});
  detail::checkNoAlias(op, {"out", &out}, {srcName, &src});
  checkBg(op, bg, bgs, what);
  checkInterp(op, interp);
  GatherJob j = gatherJob(out, src, bg, interp, bgVal);
  j.pos = posH(h);
  PYCA_BACKEND_RUN(dev, op, gather(j, op));
}

template <class A>
void applyV(const char* op, A& out, const A& src, const Field3D& v, float signedDelta, BackgroundStrategy bg,
            InterpT interp, float bgVal, unsigned bgs, const char* what, const char* srcName) {
  const bool dev = detail::prepare(op, {{"out", &out}, {srcName, &src}, {"v", &v}});
  detail::checkNoAlias(op, {"out", &out}, {srcName, &src});
  checkBg(op, bg, bgs, what);
  checkInterp(op, interp);
  GatherJob j = gatherJob(out, src, bg, interp, bgVal);
  j.pos = posV(v, signedDelta, out.spacing());
  PYCA_BACKEND_RUN(dev, op, gather(j, op));
}

void convertHV(const char* op, Field3D& out, const Field3D& in, bool toV, const char* outName,
               const char* inName) {
  const bool dev = detail::prepare(op, {{outName, &out}, {inName, &in}});
  float* o[3];
  const float* i[3];
  setPlanes(o, out);
  setPlanes(i, in);
  const Vec3Df sp = out.spacing();
  PYCA_BACKEND_RUN(dev, op, convertHV(o, i, out.size(), sp, toV, op));
}

// out(x) = g(x) +- delta * v(g(x)) / spacing
void composeVH(const char* op, Field3D& out, const Field3D& v, const Field3D& g, float signedDelta,
               BackgroundStrategy bg) {
  const bool dev = detail::prepare(op, {{"out", &out}, {"v", &v}, {"g", &g}});
  detail::checkNoAlias(op, {"out", &out}, {"v", &v});
  checkBg(op, bg, math::kLinearBgs, "a V-field");
  GatherJob j = gatherJob(out, v, bg, INTERP_LINEAR);
  j.pos = posH(g);
  const Vec3Df& sp = out.spacing();
  j.post.mul = Vec3Df(signedDelta / sp.x, signedDelta / sp.y, signedDelta / sp.z);
  j.post.addPos = true;
  PYCA_BACKEND_RUN(dev, op, gather(j, op));
}

// out(x) = g(x +- delta * v(x) / spacing)
void composeHV(const char* op, Field3D& out, const Field3D& g, const Field3D& v, float signedDelta,
               BackgroundStrategy bg) {
  const bool dev = detail::prepare(op, {{"out", &out}, {"g", &g}, {"v", &v}});
  detail::checkNoAlias(op, {"out", &out}, {"g", &g});
  checkBg(op, bg, math::kFieldBgs, "an H-field");
  GatherJob j = gatherJob(out, g, bg, INTERP_LINEAR);
  j.pos = posV(v, signedDelta, out.spacing());
  PYCA_BACKEND_RUN(dev, op, gather(j, op));
}

template <class A>
void splatH(const char* op, A& out, const Field3D& h, const A& src, bool normalize, const char* srcName) {
  const bool dev = detail::prepare(op, {{"out", &out}, {"h", &h}, {srcName, &src}});
  detail::checkNoAlias(op, {"out", &out}, {"h", &h});
  detail::checkNoAlias(op, {"out", &out}, {srcName, &src});
  SplatJob j;
  j.nc = ncOf(out);
  setPlanes(j.out, out);
  setPlanes(j.val, src);
  j.outSize = out.size();
  j.inSize = src.size();
  j.pos = posH(h);
  j.bg = BACKGROUND_STRATEGY_PARTIAL_ZERO;
  j.normalize = normalize;
  if (dev) {
    std::optional<Image3D> weights;  // device scratch for the normalisation
    if (normalize) j.weights = weights.emplace(out.grid(), MEM_DEVICE).data();
    PYCA_CUDA_CALL(op, cuda_impl::splat(j, op));
  } else {
    cpu_impl::splat(j, op);
  }
}

template <class A>
void composeTranslation(A& out, const A& src, const Vec3Df& t, BackgroundStrategy bg, unsigned bgs,
                        const char* what, const char* srcName) {
  const char* op = "ComposeTranslation";
  const bool dev = detail::prepare(op, {{"out", &out}, {srcName, &src}});
  detail::checkNoAlias(op, {"out", &out}, {srcName, &src});
  checkBg(op, bg, bgs, what);
  GatherJob j = gatherJob(out, src, bg, INTERP_LINEAR);
  j.pos.mode = math::POS_AFFINE;  // p = x + t (voxel units)
  j.pos.offset = t;
  PYCA_BACKEND_RUN(dev, op, gather(j, op));
}

using detail::vecStr;

// Throws IndexError unless the box [start, start + extent) lies inside a grid of `size`.
void checkBox(const char* op, const Vec3Di& start, const Vec3Di& extent, const Vec3Di& size,
              const char* boxName, const char* inName) {
  for (int a = 0; a < 3; ++a) {
    if (start[a] < 0 || long(start[a]) + long(extent[a]) > long(size[a])) {
      throw IndexError(std::string(op) + ": the box of '" + boxName + "' at start " + vecStr(start) +
                       " with size " + vecStr(extent) + " does not fit in '" + inName + "' of size " +
                       vecStr(size));
    }
  }
}

template <class A>
void subVol(const char* op, A& out, const A& src, const Vec3Di& start, const char* srcName) {
  const bool dev = detail::onDevice(op, {{"out", &out}, {srcName, &src}});
  detail::checkNoAlias(op, {"out", &out}, {srcName, &src});
  checkBox(op, start, out.size(), src.size(), "out", srcName);
  float* d[3];
  const float* s[3];
  setPlanes(d, out);
  setPlanes(s, src);
  PYCA_BACKEND_RUN(dev, op,
                   copyBox(ncOf(out), d, out.size(), Vec3Di(0, 0, 0), s, src.size(), start, out.size(), op));
}

template <class A>
void setSubVol(const char* op, A& out, const A& sub, const Vec3Di& start) {
  const bool dev = detail::onDevice(op, {{"out", &out}, {"sub", &sub}});
  detail::checkNoAlias(op, {"out", &out}, {"sub", &sub});
  checkBox(op, start, sub.size(), out.size(), "sub", "out");
  float* d[3];
  const float* s[3];
  setPlanes(d, out);
  setPlanes(s, sub);
  PYCA_BACKEND_RUN(dev, op,
                   copyBox(ncOf(out), d, out.size(), start, s, sub.size(), Vec3Di(0, 0, 0), sub.size(), op));
}

// Resample (index space) from src onto out; `rescale` divides field components by r.
template <class A>
void resampleRun(const char* op, bool dev, A& out, const A& src, BackgroundStrategy bg, InterpT interp,
                 bool useOriginOffset, bool rescale) {
  if (out.size() == src.size() && useOriginOffset) {
    out.copyFrom(src);
    return;
  }
  GatherJob j = gatherJob(out, src, bg, interp);
  j.pos = math::resampleMapping(out.size(), src.size(), useOriginOffset);
  if (rescale) {
    for (int a = 0; a < 3; ++a) j.post.mul[a] = 1.f / j.pos.scale[a];
  }
  PYCA_BACKEND_RUN(dev, op, gather(j, op));
}

template <class A>
void resample(const char* op, A& out, const A& src, BackgroundStrategy bg, InterpT interp,
              bool useOriginOffset, bool rescale, unsigned bgs, const char* what, const char* srcName) {
  const bool dev = detail::onDevice(op, {{"out", &out}, {srcName, &src}});
  detail::checkNoAlias(op, {"out", &out}, {srcName, &src});
  checkBg(op, bg, bgs, what);
  checkInterp(op, interp);
  resampleRun(op, dev, out, src, bg, interp, useOriginOffset, rescale);
}

// The normalised Gaussian of sigma = r / 2 voxels, radius ceil(3 sigma).
std::vector<float> aaKernel(float r, int& radius) {
  const double sigma = 0.5 * double(r);
  // r <= the source's size on the axis, so this fits an int (checked: the cast would be undefined).
  const double rad = std::ceil(3.0 * sigma);
  if (!(rad < double(1 << 30)))
    throw ValueError("anti-aliasing kernel radius " + std::to_string(rad) + " is too large");
  radius = int(rad);
  std::vector<double> w(std::size_t(2 * radius + 1));
  double sum = 0.0;
  for (int k = -radius; k <= radius; ++k)
    sum += w[std::size_t(k + radius)] = std::exp(-0.5 * k * k / (sigma * sigma));
  std::vector<float> f(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) f[i] = float(w[i] / sum);
  return f;
}

template <class A>
void resampleAA(const char* op, A& out, const A& src, BackgroundStrategy bg, InterpT interp, bool rescale,
                unsigned bgs, const char* what, const char* srcName) {
  const bool dev = detail::onDevice(op, {{"out", &out}, {srcName, &src}});
  detail::checkNoAlias(op, {"out", &out}, {srcName, &src});
  checkBg(op, bg, bgs, what);
  checkInterp(op, interp);
  const MemoryType mem = dev ? MEM_DEVICE : MEM_HOST;
  // Smooth along each downsampled axis, ping-ponging between two temporaries.
  std::optional<A> tmp[2];
  const A* cur = &src;
  int nextTmp = 0;
  for (int a = 0; a < 3; ++a) {
    const float r = float(src.size()[a]) / float(out.size()[a]);
    if (!(r > 1.f) || src.size()[a] == 1) continue;
    int radius = 0;
    const std::vector<float> w = aaKernel(r, radius);
    if (!tmp[nextTmp]) tmp[nextTmp].emplace(src.grid(), mem);
    A& dst = *tmp[nextTmp];
    float* d[3];
    const float* s[3];
    setPlanes(d, dst);
    setPlanes(s, *cur);
    PYCA_BACKEND_RUN(dev, op, convolveAxis(ncOf(out), d, s, src.size(), a, w.data(), radius, op));
    cur = &dst;
    nextTmp ^= 1;
  }
  resampleRun(op, dev, out, *cur, bg, interp, true, rescale);
}

void splatWorld(const char* op, Image3D& out, const Image3D& im, Image3D* w, BackgroundStrategy bg) {
  bool dev;
  if (w) {
    dev = detail::onDevice(op, {{"out", &out}, {"im", &im}, {"w", w}});
    detail::checkSameSize(op, {{"out", &out}, {"w", w}});
    detail::checkNoAlias(op, {"w", w}, {"im", &im});
    detail::checkNoAlias(op, {"w", w}, {"out", &out});
  } else {
    dev = detail::onDevice(op, {{"out", &out}, {"im", &im}});
  }
  detail::checkNoAlias(op, {"out", &out}, {"im", &im});
  checkBg(op, bg, math::kLinearBgs, "splatting");
  SplatJob j;
  j.nc = 1;
  j.out[0] = out.data();
  j.val[0] = im.data();
  j.weights = w ? w->data() : nullptr;
  j.outSize = out.size();
  j.inSize = im.size();
  j.pos = math::worldMapping(im.grid(), out.grid());
  j.bg = bg;
  PYCA_BACKEND_RUN(dev, op, splat(j, op));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// H- and V-fields

void SetToIdentity(Field3D& h) {
  const bool dev = detail::onDevice("SetToIdentity", {{"h", &h}});
  float* p[3];
  setPlanes(p, h);
  PYCA_BACKEND_RUN(dev, "SetToIdentity", setToIdentity(p, h.size(), "SetToIdentity"));
}

void HtoV(Field3D& v, const Field3D& h) { convertHV("HtoV", v, h, true, "v", "h"); }
void HtoV_I(Field3D& h) { convertHV("HtoV_I", h, h, true, "h", "h"); }
void VtoH(Field3D& h, const Field3D& v) { convertHV("VtoH", h, v, false, "h", "v"); }
void VtoH_I(Field3D& v) { convertHV("VtoH_I", v, v, false, "v", "v"); }

// ---------------------------------------------------------------------------------------------
// Deforming images and fields

void ApplyH(Image3D& out, const Image3D& im, const Field3D& h, BackgroundStrategy bg, InterpT interp,
            float bgVal) {
  applyH("ApplyH", out, im, h, bg, interp, bgVal, math::kImageBgs, "an image", "im");
}
void ApplyH(Field3D& out, const Field3D& src, const Field3D& h, BackgroundStrategy bg, InterpT interp) {
  applyH("ApplyH", out, src, h, bg, interp, 0.f, math::kFieldBgs, "a field", "src");
}
void ApplyV(Image3D& out, const Image3D& im, const Field3D& v, float delta, BackgroundStrategy bg,
            InterpT interp, float bgVal) {
  applyV("ApplyV", out, im, v, delta, bg, interp, bgVal, math::kImageBgs, "an image", "im");
}
void ApplyV(Field3D& out, const Field3D& src, const Field3D& v, BackgroundStrategy bg, float delta,
            InterpT interp) {
  applyV("ApplyV", out, src, v, delta, bg, interp, 0.f, math::kFieldBgs, "a field", "src");
}
void ApplyVInv(Image3D& out, const Image3D& im, const Field3D& v, float delta, BackgroundStrategy bg,
               InterpT interp, float bgVal) {
  applyV("ApplyVInv", out, im, v, -delta, bg, interp, bgVal, math::kImageBgs, "an image", "im");
}
void ApplyVInv(Field3D& out, const Field3D& src, const Field3D& v, BackgroundStrategy bg, float delta,
               InterpT interp) {
  applyV("ApplyVInv", out, src, v, -delta, bg, interp, 0.f, math::kFieldBgs, "a field", "src");
}

// ---------------------------------------------------------------------------------------------
// Composition

void ComposeHH(Field3D& out, const Field3D& f, const Field3D& g, BackgroundStrategy bg) {
  const char* op = "ComposeHH";
  const bool dev = detail::prepare(op, {{"out", &out}, {"f", &f}, {"g", &g}});
  detail::checkNoAlias(op, {"out", &out}, {"f", &f});
  checkBg(op, bg, math::kFieldBgs, "an H-field");
  GatherJob j = gatherJob(out, f, bg, INTERP_LINEAR);
  j.pos = posH(g);
  PYCA_BACKEND_RUN(dev, op, gather(j, op));
}
void ComposeHHBorder(Field3D& out, const Field3D& f, const Field3D& g) {
  const char* op = "ComposeHHBorder";
  const bool dev = detail::onDevice(op, {{"out", &out}, {"f", &f}, {"g", &g}});
  detail::checkSameSize(op, {{"out", &out}, {"g", &g}});
  detail::checkNoAlias(op, {"out", &out}, {"f", &f});  // f is read at other voxels
  float* o[3];
  const float *fp[3], *gp[3];
  setPlanes(o, out);
  setPlanes(fp, f);
  setPlanes(gp, g);
  PYCA_BACKEND_RUN(dev, op, composeBorder(o, out.size(), fp, f.size(), gp, op));
}
void ApplyHUnblurred(Image3D& out, const Image3D& im, const Field3D& curv, const Field3D& h) {
  const char* op = "ApplyHUnblurred";
  const bool dev = detail::onDevice(op, {{"out", &out}, {"im", &im}, {"curv", &curv}, {"h", &h}});
  detail::checkSameSize(op, {{"out", &out}, {"h", &h}});
  detail::checkSameSize(op, {{"im", &im}, {"curv", &curv}});
  detail::checkNoAlias(op, {"out", &out}, {"im", &im});  // (out is an image: it cannot be curv or h)
  const float* src[4] = {im.data(), curv.x(), curv.y(), curv.z()};
  const float* hp[3];
  setPlanes(hp, h);
  PYCA_BACKEND_RUN(dev, op, unblurred(out.data(), out.size(), src, im.size(), hp, op));
}
void ComposeVH(Field3D& out, const Field3D& v, const Field3D& g, float delta, BackgroundStrategy bg) {
  composeVH("ComposeVH", out, v, g, delta, bg);
}
void ComposeVInvH(Field3D& out, const Field3D& v, const Field3D& g, float delta, BackgroundStrategy bg) {
  composeVH("ComposeVInvH", out, v, g, -delta, bg);
}
void ComposeHV(Field3D& out, const Field3D& g, const Field3D& v, float delta, BackgroundStrategy bg) {
  composeHV("ComposeHV", out, g, v, delta, bg);
}
void ComposeHVInv(Field3D& out, const Field3D& g, const Field3D& v, float delta, BackgroundStrategy bg) {
  composeHV("ComposeHVInv", out, g, v, -delta, bg);
}
void ComposeTranslation(Image3D& out, const Image3D& im, const Vec3Df& t, BackgroundStrategy bg) {
  composeTranslation(out, im, t, bg, kImageNoValBgs, "an image", "im");
}
void ComposeTranslation(Field3D& out, const Field3D& f, const Vec3Df& t, BackgroundStrategy bg) {
  composeTranslation(out, f, t, bg, math::kFieldBgs, "a field", "f");
}

// ---------------------------------------------------------------------------------------------
// Inverting H-fields

void FixedPointInverse(Field3D& ginv, const Field3D& g, unsigned int numIter) {
  const char* op = "FixedPointInverse";
  const bool dev = detail::prepare(op, {{"ginv", &ginv}, {"g", &g}});
  detail::checkNoAlias(op, {"ginv", &ginv}, {"g", &g});
  float* o[3];
  const float* gp[3];
  setPlanes(o, ginv);
  setPlanes(gp, g);
  PYCA_BACKEND_RUN(dev, op, fixedPointInverse(o, gp, ginv.size(), numIter, op));
}

void UpdateInverse(Field3D& ginv0t1, Field3D& scratchV, const Field3D& ginv0t, const Field3D& w,
                   unsigned int numIter) {
  const char* op = "UpdateInverse";
  const bool dev =
      detail::prepare(op, {{"ginv0t1", &ginv0t1}, {"scratchV", &scratchV}, {"ginv0t", &ginv0t}, {"w", &w}});
  detail::checkNoAlias(op, {"ginv0t1", &ginv0t1}, {"ginv0t", &ginv0t});
  detail::checkNoAlias(op, {"ginv0t1", &ginv0t1}, {"w", &w});
  detail::checkNoAlias(op, {"ginv0t1", &ginv0t1}, {"scratchV", &scratchV});
  detail::checkNoAlias(op, {"scratchV", &scratchV}, {"ginv0t", &ginv0t});
  detail::checkNoAlias(op, {"scratchV", &scratchV}, {"w", &w});
  float *o[3], *sc[3];
  const float *g0[3], *wp[3];
  setPlanes(o, ginv0t1);
  setPlanes(sc, scratchV);
  setPlanes(g0, ginv0t);
  setPlanes(wp, w);
  const Vec3Df sp = ginv0t1.spacing();
  PYCA_BACKEND_RUN(dev, op, updateInverse(o, sc, g0, wp, ginv0t1.size(), sp, numIter, op));
}

void ReprojectToUnitVec(Field3D& f) {
  const char* op = "ReprojectToUnitVec";
  const bool dev = detail::onDevice(op, {{"f", &f}});
  float* p[3];
  setPlanes(p, f);
  PYCA_BACKEND_RUN(dev, op, reprojectToUnitVec(p, f.size(), op));
}

// ---------------------------------------------------------------------------------------------
// Splatting and the actions of diffeomorphisms

void Splat(Image3D& out, const Field3D& h, const Image3D& im, bool normalize) {
  splatH("Splat", out, h, im, normalize, "im");
}
void Splat(Field3D& out, const Field3D& h, const Field3D& src, bool normalize) {
  splatH("Splat", out, h, src, normalize, "src");
}
void SplatField(Field3D& out, const Field3D& src, const Field3D& h, bool normalize) {
  splatH("SplatField", out, h, src, normalize, "src");
}

void Ad(Field3D& out, const Field3D& g, const Field3D& v, BackgroundStrategy bg) {
  const char* op = "Ad";
  const bool dev = detail::prepare(op, {{"out", &out}, {"g", &g}, {"v", &v}});
  detail::checkNoAlias(op, {"out", &out}, {"g", &g});
  detail::checkNoAlias(op, {"out", &out}, {"v", &v});
  checkBg(op, bg, math::kLinearBgs, "splatting");
  float* o[3];
  const float *gp[3], *vp[3];
  setPlanes(o, out);
  setPlanes(gp, g);
  setPlanes(vp, v);
  PYCA_BACKEND_RUN(dev, op, ad(o, gp, vp, out.size(), out.spacing(), bg, op));
}

void CoAd(Field3D& out, const Field3D& g, const Field3D& m, BackgroundStrategy bg) {
  const char* op = "CoAd";
  const bool dev = detail::prepare(op, {{"out", &out}, {"g", &g}, {"m", &m}});
  detail::checkNoAlias(op, {"out", &out}, {"g", &g});
  detail::checkNoAlias(op, {"out", &out}, {"m", &m});
  checkBg(op, bg, math::kLinearBgs, "a momentum field");
  float* o[3];
  const float *gp[3], *mp[3];
  setPlanes(o, out);
  setPlanes(gp, g);
  setPlanes(mp, m);
  PYCA_BACKEND_RUN(dev, op, coad(o, gp, mp, out.size(), out.spacing(), bg, op));
}

// ---------------------------------------------------------------------------------------------
// Resampling and sub-volumes

void Resample(Image3D& out, const Image3D& im, BackgroundStrategy bg, InterpT interp, bool useOriginOffset) {
  resample("Resample", out, im, bg, interp, useOriginOffset, false, kImageNoValBgs, "an image", "im");
}
void Resample(Field3D& out, const Field3D& src, BackgroundStrategy bg, bool rescaleVector, InterpT interp) {
  resample("Resample", out, src, bg, interp, true, rescaleVector, math::kFieldBgs, "a field", "src");
}
void ResampleAA(Image3D& out, const Image3D& im, BackgroundStrategy bg, InterpT interp) {
  resampleAA("ResampleAA", out, im, bg, interp, false, kImageNoValBgs, "an image", "im");
}
void ResampleAA(Field3D& out, const Field3D& src, BackgroundStrategy bg, bool rescaleVector, InterpT interp) {
  resampleAA("ResampleAA", out, src, bg, interp, rescaleVector, math::kFieldBgs, "a field", "src");
}

void ResampleWorld(Image3D& out, const Image3D& im, BackgroundStrategy bg, InterpT interp) {
  const char* op = "ResampleWorld";
  const bool dev = detail::onDevice(op, {{"out", &out}, {"im", &im}});
  detail::checkNoAlias(op, {"out", &out}, {"im", &im});
  checkBg(op, bg, kImageNoValBgs, "an image");
  checkInterp(op, interp);
  GatherJob j = gatherJob(out, im, bg, interp);
  j.pos = math::worldMapping(out.grid(), im.grid());
  PYCA_BACKEND_RUN(dev, op, gather(j, op));
}

void SplatWorld(Image3D& out, const Image3D& im, BackgroundStrategy bg) {
  splatWorld("SplatWorld", out, im, nullptr, bg);
}
void SplatWorld(Image3D& out, const Image3D& im, Image3D& w, BackgroundStrategy bg) {
  splatWorld("SplatWorld", out, im, &w, bg);
}

void SubVol(Image3D& out, const Image3D& im, const Vec3Di& start) { subVol("SubVol", out, im, start, "im"); }
void SubVol(Field3D& out, const Field3D& src, const Vec3Di& start) {
  subVol("SubVol", out, src, start, "src");
}
void SetSubVol_I(Image3D& out, const Image3D& sub, const Vec3Di& start) {
  setSubVol("SetSubVol_I", out, sub, start);
}
void SetSubVol_I(Field3D& out, const Field3D& sub, const Vec3Di& start) {
  setSubVol("SetSubVol_I", out, sub, start);
}

}  // namespace pyca
