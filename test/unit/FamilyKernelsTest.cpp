// The unary, normalization, pooling and reduction kernels of the op
// families (runtime/cpu/FamilyKernels.h) against naive double-precision
// references written here, against numbers torch 2.15 printed for the same
// inputs (written down, marked "torch:"), for batch and thread invariance,
// 16-bit storage and error messages.
//
// Tolerances (each check states which):
//   - float32 math of a few libm calls (unary): within 8 ulps, i.e.
//     1e-6 * (1 + |want|).
//   - a double accumulation rounded once (sum, mean, var, avg pool): half an
//     ulp of the storage dtype, 2^-24 relative for float32 (2^-23 allowed).
//   - y = x * scale + shift with scale and shift folded in double and
//     rounded to float (batch/group norm): 8 * 2^-24 times |x * scale| + |shift|.
//   - 16-bit storage adds the rounding of the result: 2^-8 (bfloat16),
//     2^-11 (float16) relative.
//   - max, min, argmax: exact.
#include "FamilyTestSupport.h"
#include "MoeReference.h"

#include "runtime/ForwardKernels.h"
#include "runtime/RuntimeError.h"
#include "runtime/cpu/FamilyKernels.h"
#include "runtime/cpu/KernelSupport.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <limits>

using namespace shardc::runtime;
using namespace shardc::runtime::familytest;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

/// got equals want exactly, NaN matching NaN.
void checkExact(const TT &got, const std::vector<double> &want) {
  REQUIRE(int64_t(want.size()) == got.numel());
  for (int64_t i = 0; i < got.numel(); ++i) {
    INFO("element " << i << " got " << got.at(i) << " want " << want[i]);
    if (std::isnan(want[i])) CHECK(std::isnan(got.at(i)));
    else CHECK(got.at(i) == want[i]);
  }
}

void checkWithin(const TT &got, const std::vector<double> &want,
                 const std::function<double(int64_t)> &tol) {
  REQUIRE(int64_t(want.size()) == got.numel());
  for (int64_t i = 0; i < got.numel(); ++i) {
    INFO("element " << i << " got " << got.at(i) << " want " << want[i]);
    if (std::isnan(want[i])) REQUIRE(std::isnan(got.at(i)));
    else if (std::isinf(want[i])) REQUIRE(got.at(i) == want[i]);
    else REQUIRE(std::abs(got.at(i) - want[i]) <= tol(i));
  }
}

// ------------------------------------------------------------------ unary --

struct UnaryCase {
  UnaryOp op;
  double a, b, lo, hi;  // parameters; input range
  double (*ref)(double x, double a, double b);
};

const UnaryCase kUnary[] = {
    {UnaryOp::Sigmoid, 0, 0, -6, 6, [](double x, double, double) { return 1 / (1 + std::exp(-x)); }},
    {UnaryOp::Tanh, 0, 0, -4, 4, [](double x, double, double) { return std::tanh(x); }},
    {UnaryOp::Exp, 0, 0, -4, 4, [](double x, double, double) { return std::exp(x); }},
    {UnaryOp::Log, 0, 0, 0.05, 5, [](double x, double, double) { return std::log(x); }},
    {UnaryOp::Sqrt, 0, 0, 0, 5, [](double x, double, double) { return std::sqrt(x); }},
    {UnaryOp::Rsqrt, 0, 0, 0.05, 5, [](double x, double, double) { return 1 / std::sqrt(x); }},
    {UnaryOp::Neg, 0, 0, -4, 4, [](double x, double, double) { return -x; }},
    {UnaryOp::Abs, 0, 0, -4, 4, [](double x, double, double) { return std::fabs(x); }},
    {UnaryOp::Erf, 0, 0, -3, 3, [](double x, double, double) { return std::erf(x); }},
    {UnaryOp::Sin, 0, 0, -3, 3, [](double x, double, double) { return std::sin(x); }},
    {UnaryOp::Cos, 0, 0, -3, 3, [](double x, double, double) { return std::cos(x); }},
    {UnaryOp::Reciprocal, 0, 0, 0.1, 4, [](double x, double, double) { return 1 / x; }},
    {UnaryOp::Hardswish, 0, 0, -5, 5,
     [](double x, double, double) { return x <= -3 ? 0 : x >= 3 ? x : x * (x + 3) / 6; }},
    {UnaryOp::Hardsigmoid, 0, 0, -5, 5,
     [](double x, double, double) { return x <= -3 ? 0 : x >= 3 ? 1 : (x + 3) / 6; }},
    {UnaryOp::Mish, 0, 0, -5, 5,
     [](double x, double, double) { return x * std::tanh(std::log(1 + std::exp(x))); }},
    {UnaryOp::Clamp, -0.5, 0.7, -2, 2,
     [](double x, double a, double b) { return x < a ? a : x > b ? b : x; }},
    {UnaryOp::LeakyRelu, 0.01, 0, -3, 3, [](double x, double a, double) { return x > 0 ? x : a * x; }},
    {UnaryOp::Elu, 1.3, 1, -4, 3,
     [](double x, double a, double b) { return x > 0 ? x : a * (std::exp(b * x) - 1); }},
    {UnaryOp::Elu, 0.5, 2, -4, 3,  // celu(alpha 0.5): input scale 1 / alpha
     [](double x, double a, double b) { return x > 0 ? x : a * (std::exp(b * x) - 1); }},
    {UnaryOp::PowScalar, 2, 0, -3, 3, [](double x, double a, double) { return std::pow(x, a); }},
    {UnaryOp::PowScalar, 3, 0, -3, 3, [](double x, double a, double) { return std::pow(x, a); }},
    {UnaryOp::PowScalar, 0.5, 0, 0, 4, [](double x, double a, double) { return std::pow(x, a); }},
    {UnaryOp::PowScalar, -1, 0, 0.2, 4, [](double x, double a, double) { return std::pow(x, a); }},
    {UnaryOp::PowScalar, 1.7, 0, 0, 4, [](double x, double a, double) { return std::pow(x, a); }},
    {UnaryOp::Softplus, 2, 3, -4, 4,
     [](double x, double a, double b) { return x * a > b ? x : std::log(1 + std::exp(a * x)) / a; }},
};

// ------------------------------------------------------------- pool reference --

/// torch's pooling by its definition: window cells inside the input count;
/// for avg, cells inside input + padding count toward count_include_pad's divisor.
std::vector<double> poolReference(const PoolParams &p, const TT &x, const Shape &yShape) {
  // Every size and parameter as 3-d: the missing leading dims have size 1,
  // kernel 1, stride 1, no padding.
  const int lead = 3 - p.spatialDims;
  const auto s = p.stride.empty() ? p.kernel : p.stride;
  int64_t in[3], out[3], k[3], st[3], pad[3], dil[3];
  for (int d = 0; d < 3; ++d) {
    const bool real = d >= lead;
    const size_t e = size_t(d - lead);
    in[d] = real ? x.shape[x.shape.size() - 3 + size_t(d)] : 1;
    out[d] = real ? yShape[yShape.size() - 3 + size_t(d)] : 1;
    k[d] = real ? p.kernel[e] : 1;
    st[d] = real ? s[e] : 1;
    pad[d] = real ? p.padding[e] : 0;
    dil[d] = real && !p.dilation.empty() ? p.dilation[e] : 1;
  }
  const int64_t inPlane = in[0] * in[1] * in[2];
  const int64_t planes = x.numel() / inPlane;
  std::vector<double> result;
  for (int64_t pl = 0; pl < planes; ++pl)
    for (int64_t od = 0; od < out[0]; ++od)
      for (int64_t oh = 0; oh < out[1]; ++oh)
        for (int64_t ow = 0; ow < out[2]; ++ow) {
          const int64_t o[3] = {od, oh, ow};
          double best = -kInf, sum = 0;
          int64_t inside = 0, padded = 0;
          for (int64_t t = 0; t < k[0] * k[1] * k[2]; ++t) {
            const int64_t kk[3] = {t / (k[1] * k[2]), (t / k[2]) % k[1], t % k[2]};
            int64_t q[3];
            bool inPad = true, inInput = true;
            for (int d = 0; d < 3; ++d) {
              q[d] = o[d] * st[d] - pad[d] + kk[d] * dil[d];
              inPad = inPad && q[d] >= -pad[d] && q[d] < in[d] + pad[d];
              inInput = inInput && q[d] >= 0 && q[d] < in[d];
            }
            if (inPad) ++padded;
            if (!inInput) continue;
            const double v = x.at(pl * inPlane + (q[0] * in[1] + q[1]) * in[2] + q[2]);
            if (std::isnan(v) || v > best) best = std::isnan(best) ? best : v;
            sum += v;
            ++inside;
          }
          if (p.kind == PoolKind::Max) result.push_back(best);
          else if (inside == 0) result.push_back(0);
          else
            result.push_back(sum / double(p.divisorOverride ? p.divisorOverride
                                          : p.countIncludePad ? padded
                                                              : inside));
        }
  return result;
}

PoolParams pool(PoolKind kind, int dims, std::vector<int64_t> k, std::vector<int64_t> s,
                std::vector<int64_t> pad, bool ceil = false) {
  PoolParams p;
  p.kind = kind;
  p.spatialDims = dims;
  p.kernel = std::move(k);
  p.stride = std::move(s);
  p.padding = std::move(pad);
  p.ceilMode = ceil;
  return p;
}

// --------------------------------------------------------- reduce reference --

struct ReduceRef {
  std::vector<double> value;
  std::vector<double> absSum;  // sum of |x| per output (the rounding scale of sums)
};

ReduceRef reduceReference(ReduceKind kind, const TT &x, const std::vector<int64_t> &dims,
                          int64_t correction) {
  const int64_t rank = int64_t(x.shape.size());
  std::vector<bool> red(size_t(rank), dims.empty());
  for (int64_t d : dims) red[size_t(d < 0 ? d + rank : d)] = true;
  // Group the elements by output index (kept dims, row-major).
  std::vector<std::vector<double>> groups;
  std::vector<int64_t> outIndexOf(size_t(x.numel()));
  Shape keptShape;
  for (int64_t d = 0; d < rank; ++d)
    if (!red[size_t(d)]) keptShape.push_back(x.shape[size_t(d)]);
  groups.resize(size_t(shardc::plan::numElements(keptShape)));
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rest = i, o = 0, mult = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      const int64_t c = rest % x.shape[size_t(d)];
      rest /= x.shape[size_t(d)];
      if (!red[size_t(d)]) {
        o += c * mult;
        mult *= x.shape[size_t(d)];
      }
    }
    groups[size_t(o)].push_back(x.at(i));
  }
  ReduceRef r;
  for (const auto &g : groups) {
    double sum = 0, abs = 0;
    for (double v : g) {
      sum += v;
      abs += std::abs(v);
    }
    const double n = double(g.size());
    double value = 0;
    switch (kind) {
    case ReduceKind::Sum: value = sum; break;
    case ReduceKind::Mean: value = sum / n; break;
    case ReduceKind::Var: {
      double sq = 0;
      for (double v : g) sq += (v - sum / n) * (v - sum / n);
      value = sq / std::max(0.0, n - double(correction));
      abs = sq;
      break;
    }
    case ReduceKind::Amax:
    case ReduceKind::Amin:
    case ReduceKind::Argmax:
    case ReduceKind::Argmin: {
      const bool mx = kind == ReduceKind::Amax || kind == ReduceKind::Argmax;
      size_t best = 0;
      for (size_t i = 1; i < g.size(); ++i) {
        if (std::isnan(g[best])) break;
        if (std::isnan(g[i]) || (mx ? g[i] > g[best] : g[i] < g[best])) best = i;
      }
      value = (kind == ReduceKind::Amax || kind == ReduceKind::Amin) ? g[best] : double(best);
      break;
    }
    }
    r.value.push_back(value);
    r.absSum.push_back(abs / std::max(1.0, kind == ReduceKind::Sum ? 1.0 : n));
  }
  return r;
}

}  // namespace

// ======================================================================= unary

TEST_CASE("unary ops match their double-precision formulas", "[family-kernels]") {
  for (const UnaryCase &c : kUnary)
    for (DType dtype : {DType::F32, DType::BF16, DType::F16, DType::F64}) {
      INFO(unaryOpName(c.op) << " a=" << c.a << " " << shardc::plan::dtypeName(dtype));
      TT x = random(dtype, {7, 33}, 11, c.lo, c.hi), y = zeros(dtype, x.shape);
      unaryKernel(c.op, c.a, c.b, x.k(), y.k(), 2);
      std::vector<double> want;
      for (int64_t i = 0; i < x.numel(); ++i) want.push_back(c.ref(x.at(i), c.a, c.b));
      const double math = dtype == DType::F64 ? 1e-13 : 1e-6;
      checkWithin(y, want, [&](int64_t i) {
        return math * (1 + std::abs(want[i])) + storageRounding(dtype) * std::abs(want[i]);
      });
    }
}

TEST_CASE("unary ops: torch's values, NaN and parameter edge cases", "[family-kernels]") {
  const std::vector<double> t = {-5, -3, -1, 0, 1, 3, 5, kNaN};
  auto run = [&](UnaryOp op, double a, double b) {
    TT x = fromValues(DType::F32, {8}, t), y = zeros(DType::F32, {8});
    unaryKernel(op, a, b, x.k(), y.k(), 1);
    return y;
  };
  const double ulp8 = 8 * std::ldexp(1.0, -24);
  auto near = [&](const TT &y, const std::vector<double> &want) {
    checkWithin(y, want, [&](int64_t i) { return ulp8 * (1 + std::abs(want[i])); });
  };
  // torch: F.hardswish, F.hardsigmoid, F.mish, F.softplus(beta=2, threshold=3),
  // F.elu(alpha=1.3), F.celu(alpha=0.5), torch.clamp(min=1, max=-1),
  // F.leaky_relu(0.1) on t.
  near(run(UnaryOp::Hardswish, 0, 0), {-0.0, -0.0, -0.3333333432674408, 0, 0.6666666865348816, 3, 5, kNaN});
  near(run(UnaryOp::Hardsigmoid, 0, 0), {0, 0, 0.3333333432674408, 0.5, 0.6666666865348816, 1, 1, kNaN});
  near(run(UnaryOp::Mish, 0, 0), {-0.03357623517513275, -0.14564746618270874, -0.3034014403820038, 0,
                                  0.8650983572006226, 2.98653507232666, 4.999552249908447, kNaN});
  near(run(UnaryOp::Softplus, 2, 3), {2.2699450710206293e-05, 0.0012378426035866141, 0.06346400082111359,
                                      0.3465735912322998, 1.0634640455245972, 3, 5, kNaN});
  near(run(UnaryOp::Elu, 1.3, 1), {-1.2912405729293823, -1.2352768182754517, -0.8217566609382629, 0, 1, 3, 5, kNaN});
  near(run(UnaryOp::Elu, 0.5, 2), {-0.4999772906303406, -0.4987606108188629, -0.4323323667049408, 0, 1, 3, 5, kNaN});
  checkExact(run(UnaryOp::Clamp, 1, -1), {-1, -1, -1, -1, -1, -1, -1, kNaN});
  checkExact(run(UnaryOp::LeakyRelu, 0.1, 0), {-0.5, -0.30000001192092896, -0.10000000149011612, 0, 1, 3, 5, kNaN});
  // An absent clamp bound is +-inf; a NaN bound gives NaN (torch propagates it).
  checkExact(run(UnaryOp::Clamp, -kInf, 2), {-5, -3, -1, 0, 1, 2, 2, kNaN});
  checkExact(run(UnaryOp::Clamp, kNaN, 2), std::vector<double>(8, kNaN));
  // y may alias x.
  TT x = fromValues(DType::BF16, {8}, t);
  unaryKernel(UnaryOp::Neg, 0, 0, x.k(), x.k(), 1);
  checkExact(x, {5, 3, 1, -0.0, -1, -3, -5, kNaN});
}

TEST_CASE("unary: thread count does not change bytes, bad operands rejected", "[family-kernels]") {
  TT x = random(DType::BF16, {5, 70001}, 3, -4, 4);
  TT y1 = zeros(DType::BF16, x.shape), y3 = zeros(DType::BF16, x.shape);
  unaryKernel(UnaryOp::Mish, 0, 0, x.k(), y1.k(), 1);
  unaryKernel(UnaryOp::Mish, 0, 0, x.k(), y3.k(), 3);
  CHECK(y1.bytes == y3.bytes);
  TT yf = zeros(DType::F32, x.shape), ys = zeros(DType::BF16, {5, 7}), xi = zeros(DType::I64, {2});
  CHECK_THROWS_WITH(unaryKernel(UnaryOp::Exp, 0, 0, x.k(), yf.k(), 1),
                    Catch::Equals("exp: output is float32, expected bfloat16"));
  CHECK_THROWS_WITH(unaryKernel(UnaryOp::Hardswish, 0, 0, x.k(), ys.k(), 1),
                    Catch::StartsWith("hardswish: output has shape [5, 7], expected [5, 70001]"));
  CHECK_THROWS_WITH(unaryKernel(UnaryOp::Sin, 0, 0, xi.k(), xi.k(), 1), Catch::Contains("sin: x is int64"));
}

// ========================================================== batch/group norm

TEST_CASE("batch_norm (eval) normalizes per channel with running stats", "[family-kernels]") {
  for (DType dtype : {DType::F32, DType::BF16, DType::F16})
    // [3000, 3]: a token layout's planes of one element, several to a task
    for (const Shape &shape : {Shape{2, 3, 4, 5}, Shape{4, 3}, Shape{2, 3, 17}, Shape{3000, 3}})
      for (bool affine : {true, false}) {
        INFO(shardc::plan::dtypeName(dtype) << " " << shapeToString(shape) << " affine " << affine);
        const int64_t C = 3;
        TT x = random(dtype, shape, 1, -3, 3), y = zeros(dtype, shape);
        // Running stats in float32 beside 16-bit activations, as torch keeps them.
        TT mean = random(DType::F32, {C}, 2), var = random(DType::F32, {C}, 3, 0.2, 2);
        TT w = random(dtype, {C}, 4), b = random(dtype, {C}, 5);
        KTensor wk = w.k(), bk = b.k();
        const double eps = 1e-5;
        batchNormKernel(x.k(), mean.k(), var.k(), affine ? &wk : nullptr, affine ? &bk : nullptr,
                        eps, y.k(), 2);
        const int64_t inner = x.numel() / (shape[0] * C);
        std::vector<double> want, scale;
        for (int64_t i = 0; i < x.numel(); ++i) {
          const int64_t c = (i / inner) % C;
          const double a = (affine ? w.at(c) : 1) / std::sqrt(var.at(c) + eps);
          want.push_back((x.at(i) - mean.at(c)) * a + (affine ? b.at(c) : 0));
          scale.push_back(std::abs(x.at(i) * a) + std::abs((affine ? b.at(c) : 0) - mean.at(c) * a));
        }
        checkWithin(y, want, [&](int64_t i) {
          return 8 * std::ldexp(1.0, -24) * scale[i] + storageRounding(dtype) * std::abs(want[i]);
        });
      }
}

TEST_CASE("group_norm normalizes per (sample, group)", "[family-kernels]") {
  for (DType dtype : {DType::F32, DType::BF16})
    for (int64_t groups : {1, 2, 6})
      for (bool affine : {true, false}) {
        INFO(shardc::plan::dtypeName(dtype) << " groups " << groups << " affine " << affine);
        const Shape shape{3, 6, 5, 7};
        const int64_t C = 6, inner = 35, per = C / groups;
        TT x = random(dtype, shape, 7, -2, 3), y = zeros(dtype, shape);
        TT w = random(dtype, {C}, 8), b = random(dtype, {C}, 9);
        KTensor wk = w.k(), bk = b.k();
        const double eps = 1e-5;
        groupNormKernel(x.k(), groups, affine ? &wk : nullptr, affine ? &bk : nullptr, eps, y.k(), 3);
        std::vector<double> want(size_t(x.numel())), scale(size_t(x.numel()));
        for (int64_t n = 0; n < 3; ++n)
          for (int64_t g = 0; g < groups; ++g) {
            const int64_t base = (n * C + g * per) * inner, count = per * inner;
            double sum = 0, sq = 0;
            for (int64_t i = 0; i < count; ++i) sum += x.at(base + i);
            const double mean = sum / double(count);
            for (int64_t i = 0; i < count; ++i) sq += (x.at(base + i) - mean) * (x.at(base + i) - mean);
            const double rstd = 1 / std::sqrt(sq / double(count) + eps);
            for (int64_t i = 0; i < count; ++i) {
              const int64_t c = g * per + i / inner;
              const double wc = affine ? w.at(c) : 1, bc = affine ? b.at(c) : 0;
              want[size_t(base + i)] = (x.at(base + i) - mean) * rstd * wc + bc;
              scale[size_t(base + i)] = std::abs(x.at(base + i) * rstd * wc) + std::abs(bc - mean * rstd * wc);
            }
          }
        checkWithin(y, want, [&](int64_t i) {
          return 8 * std::ldexp(1.0, -24) * scale[size_t(i)] + storageRounding(dtype) * std::abs(want[size_t(i)]);
        });
      }
}

TEST_CASE("norms: a sample's bytes do not depend on batch or threads, bad operands", "[family-kernels]") {
  TT x = random(DType::BF16, {3, 8, 40, 40}, 1), mean = random(DType::F32, {8}, 2);
  TT var = random(DType::F32, {8}, 3, 0.5, 2), w = random(DType::BF16, {8}, 4);
  KTensor wk = w.k();
  TT x1 = firstRows(x, 1);
  for (int which = 0; which < 2; ++which) {
    INFO((which == 0 ? "batch_norm" : "group_norm"));
    TT y3 = zeros(DType::BF16, x.shape), y1 = zeros(DType::BF16, x1.shape), y3b = zeros(DType::BF16, x.shape);
    auto run = [&](TT &in, TT &out, int threads) {
      if (which == 0) batchNormKernel(in.k(), mean.k(), var.k(), &wk, nullptr, 1e-5, out.k(), threads);
      else groupNormKernel(in.k(), 4, &wk, nullptr, 1e-5, out.k(), threads);
    };
    run(x, y3, 3);
    run(x1, y1, 1);
    run(x, y3b, 1);
    CHECK(y1.bytes == y3.slice(0, y1.numel()));
    CHECK(y3b.bytes == y3.bytes);
  }
  TT y = zeros(DType::BF16, x.shape), m5 = zeros(DType::F32, {5});
  CHECK_THROWS_WITH(batchNormKernel(x.k(), m5.k(), var.k(), nullptr, nullptr, 1e-5, y.k(), 1),
                    Catch::StartsWith("batch_norm: running_mean should contain 8 elements"));
  CHECK_THROWS_WITH(groupNormKernel(x.k(), 3, nullptr, nullptr, 1e-5, y.k(), 1),
                    Catch::Contains("divisible by num_groups"));
  TT yf = zeros(DType::F32, x.shape);
  CHECK_THROWS_WITH(groupNormKernel(x.k(), 4, nullptr, nullptr, 1e-5, yf.k(), 1),
                    Catch::Equals("group_norm: output is float32, expected bfloat16"));
}

// ==================================================================== pooling

TEST_CASE("pooling matches torch's numbers on a 5x5 ramp", "[family-kernels]") {
  std::vector<double> ramp;
  for (int i = 1; i <= 25; ++i) ramp.push_back(i);
  std::vector<double> alternating;  // x * [1, -1, 1, ...]
  for (int i = 1; i <= 25; ++i) alternating.push_back(i % 2 ? i : -i);
  auto run = [&](const PoolParams &p, const std::vector<double> &values) {
    TT x = fromValues(DType::F32, {1, 1, 5, 5}, values), y = zeros(DType::F32, poolShape(p, x.shape));
    poolKernel(p, x.k(), y.k(), 1);
    return y;
  };
  // torch: F.avg_pool2d(x, 2, 2, 1, ceil_mode=True, count_include_pad=True / False)
  PoolParams avg = pool(PoolKind::Avg, 2, {2, 2}, {2, 2}, {1, 1}, true);
  checkExact(run(avg, ramp), {0.25, 1.25, 2.25, 4.25, 10, 12, 9.25, 20, 22});
  avg.countIncludePad = false;
  checkExact(run(avg, ramp), {1, 2.5, 4.5, 8.5, 10, 12, 18.5, 20, 22});
  // torch: F.avg_pool2d(x, 3, 2, 1, divisor_override=7) (float32 results)
  PoolParams div = pool(PoolKind::Avg, 2, {3, 3}, {2, 2}, {1, 1});
  div.divisorOverride = 7;
  checkExact(run(div, ramp), {2.2857143878936768, 4.714285850524902, 4, 9.857142448425293,
                              16.714284896850586, 12.428571701049805, 10.857142448425293,
                              17.571428298950195, 12.571428298950195});
  // torch: F.avg_pool2d(x, 3, 2, 0, ceil_mode=True): the last windows are clipped
  checkExact(run(pool(PoolKind::Avg, 2, {3, 3}, {2, 2}, {0, 0}, true), ramp), {7, 9, 17, 19});
  // torch: F.max_pool2d(-x, 2, 2, 1, ceil_mode=True)
  std::vector<double> neg;
  for (double v : ramp) neg.push_back(-v);
  checkExact(run(pool(PoolKind::Max, 2, {2, 2}, {2, 2}, {1, 1}, true), neg),
             {-1, -2, -4, -6, -7, -9, -16, -17, -19});
  // torch: F.max_pool2d(alternating, 2, 1, 0, dilation=2)
  PoolParams dil = pool(PoolKind::Max, 2, {2, 2}, {1, 1}, {0, 0});
  dil.dilation = {2, 2};
  checkExact(run(dil, alternating), {13, -2, 15, -6, 19, -8, 23, -12, 25});
  // torch: F.adaptive_avg_pool2d(x, 3), F.adaptive_max_pool2d(alternating, (2, 3))
  TT x = fromValues(DType::F32, {1, 1, 5, 5}, ramp), y = zeros(DType::F32, {1, 1, 3, 3});
  adaptivePoolKernel(PoolKind::Avg, {3, 3}, x.k(), y.k(), 1);
  checkExact(y, {4, 5.5, 7, 11.5, 13, 14.5, 19, 20.5, 22});
  TT xa = fromValues(DType::F32, {1, 1, 5, 5}, alternating), ya = zeros(DType::F32, {1, 1, 2, 3});
  adaptivePoolKernel(PoolKind::Max, {2, 3}, xa.k(), ya.k(), 1);
  checkExact(ya, {11, 13, 15, 21, 23, 25});
}

TEST_CASE("pooling matches its definition: 1-d, 2-d, 3-d, unbatched, bf16, NaN", "[family-kernels]") {
  struct Case {
    const char *name;
    PoolParams p;
    Shape x;
  };
  PoolParams dilated = pool(PoolKind::Max, 2, {3, 2}, {2, 1}, {1, 1}, true);
  dilated.dilation = {2, 3};
  PoolParams excl = pool(PoolKind::Avg, 2, {3, 3}, {2, 2}, {1, 1}, true);
  excl.countIncludePad = false;
  PoolParams override1d = pool(PoolKind::Avg, 1, {4}, {3}, {2});
  override1d.divisorOverride = 3;
  PoolParams dilated3d = pool(PoolKind::Max, 3, {2, 3, 2}, {1, 2, 2}, {1, 1, 0}, true);
  dilated3d.dilation = {2, 1, 2};
  PoolParams excl3d = pool(PoolKind::Avg, 3, {3, 2, 3}, {2, 2, 1}, {1, 1, 1}, true);
  excl3d.countIncludePad = false;
  const Case cases[] = {
      {"max 3x3/2 pad 1 (resnet stem)", pool(PoolKind::Max, 2, {3, 3}, {2, 2}, {1, 1}), {2, 3, 12, 11}},
      {"max dilated ceil", dilated, {1, 2, 13, 14}},
      {"max 1d ceil", pool(PoolKind::Max, 1, {3}, {2}, {1}, true), {2, 3, 10}},
      {"max unbatched", pool(PoolKind::Max, 2, {2, 2}, {}, {0, 0}), {3, 7, 9}},
      {"avg include pad ceil", pool(PoolKind::Avg, 2, {3, 3}, {2, 2}, {1, 1}, true), {2, 2, 9, 10}},
      {"avg exclude pad ceil", excl, {2, 2, 9, 10}},
      {"avg 1d divisor_override", override1d, {2, 3, 17}},
      {"max 3d 1x3x3/1,2,2 pad 0,1,1 (video stem)", pool(PoolKind::Max, 3, {1, 3, 3}, {1, 2, 2}, {0, 1, 1}), {2, 3, 4, 9, 8}},
      {"max 3d dilated ceil", dilated3d, {1, 2, 7, 9, 8}},
      {"max 3d unbatched", pool(PoolKind::Max, 3, {2, 2, 2}, {}, {0, 0, 0}), {3, 4, 5, 6}},
      {"avg 3d include pad ceil", pool(PoolKind::Avg, 3, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, true), {2, 2, 5, 6, 7}},
      {"avg 3d exclude pad ceil", excl3d, {1, 3, 6, 5, 7}},
  };
  for (const Case &c : cases)
    for (DType dtype : {DType::F32, DType::BF16}) {
      INFO(c.name << " " << shardc::plan::dtypeName(dtype));
      TT x = random(dtype, c.x, 5, -3, 3);
      x.set(7, kNaN);  // one NaN: max pooling propagates it
      if (c.p.kind == PoolKind::Avg) x.set(7, 0.5);
      TT y = zeros(dtype, poolShape(c.p, x.shape));
      poolKernel(c.p, x.k(), y.k(), 2);
      const std::vector<double> want = poolReference(c.p, x, y.shape);
      checkWithin(y, want, [&](int64_t i) {
        return std::ldexp(1.0, -23) * std::abs(want[size_t(i)]) + storageRounding(dtype) * std::abs(want[size_t(i)]);
      });
    }
}

TEST_CASE("max_pool_backward matches torch's gradients: ties, NaN, -inf windows",
          "[family-kernels]") {
  // torch: x.grad after max_pool1d(x, k, s, p, ceil_mode).backward(g),
  // g = [1, 10, 100, ...].
  auto run = [](const PoolParams &p, const std::vector<double> &x) {
    TT xt = fromValues(DType::F32, {1, 1, int64_t(x.size())}, x);
    const Shape ys = poolShape(p, xt.shape);
    std::vector<double> g;
    for (int64_t i = 0; i < ys.back(); ++i) g.push_back(std::pow(10.0, double(i)));
    TT gt = fromValues(DType::F32, ys, g), dx = zeros(DType::F32, xt.shape);
    maxPoolBackwardKernel(p, xt.k(), gt.k(), dx.k(), 1);
    return dx;
  };
  // Overlapping windows, a tie goes to the first maximum:
  // torch: [0, 11, 0, 100, 0]
  checkExact(run(pool(PoolKind::Max, 1, {3}, {1}, {0}), {1, 3, 2, 3, 0}), {0, 11, 0, 100, 0});
  // A NaN is the maximum, the last one when several: torch: [0, 0, 1]
  checkExact(run(pool(PoolKind::Max, 1, {3}, {1}, {0}), {kNaN, 1, kNaN}), {0, 0, 1});
  // Windows of -inf (and padding) give the first tap inside the input:
  // torch: [11, 0]
  checkExact(run(pool(PoolKind::Max, 1, {3}, {1}, {1}), {-kInf, -kInf}), {11, 0});
  // ceil_mode's last window overhangs: torch: [0, 1, 0, 10, 100]
  checkExact(run(pool(PoolKind::Max, 1, {2}, {2}, {0}, true), {1, 5, 2, 4, 3}), {0, 1, 0, 10, 100});
}

TEST_CASE("max_pool_backward: 2-d and 3-d, dilation, bf16, thread invariance, errors",
          "[family-kernels]") {
  PoolParams dilated = pool(PoolKind::Max, 2, {3, 2}, {2, 1}, {1, 1}, true);
  dilated.dilation = {2, 3};
  PoolParams dilated3d = pool(PoolKind::Max, 3, {2, 3, 2}, {1, 2, 2}, {1, 1, 0}, true);
  dilated3d.dilation = {2, 1, 2};
  const std::pair<PoolParams, Shape> cases[] = {
      {pool(PoolKind::Max, 2, {3, 3}, {1, 1}, {1, 1}), {2, 3, 9, 8}},  // GoogLeNet's branch pool
      {pool(PoolKind::Max, 2, {3, 3}, {2, 2}, {0, 0}, true), {2, 3, 12, 11}},
      {dilated, {1, 2, 13, 14}},
      {dilated3d, {1, 2, 7, 9, 8}},
      {pool(PoolKind::Max, 2, {2, 2}, {}, {0, 0}), {3, 7, 9}}};  // unbatched
  for (const auto &[p, xs] : cases)
    for (DType dtype : {DType::F32, DType::BF16}) {
      INFO(shapeToString(xs) << " " << shardc::plan::dtypeName(dtype));
      // Few distinct values: ties in most windows.
      TT x = random(dtype, xs, 8, -2, 2);
      for (int64_t i = 0; i < x.numel(); ++i) x.set(i, std::round(x.at(i) * 2));
      x.set(5, kNaN);
      const Shape ys = poolShape(p, xs);
      TT g = random(dtype, ys, 9, -1, 1), dx = zeros(dtype, xs), dx3 = dx;
      maxPoolBackwardKernel(p, x.k(), g.k(), dx.k(), 1);
      maxPoolBackwardKernel(p, x.k(), g.k(), dx3.k(), 3);
      CHECK(dx.bytes == dx3.bytes);
      // Reference: per output, the window's taps in row-major order (the
      // first inside the input, then any larger or NaN), g added there in
      // float in output order.
      const int lead = 3 - p.spatialDims;
      const auto st = p.stride.empty() ? p.kernel : p.stride;
      int64_t in[3], out[3], k[3], s3[3], pad[3], dil[3];
      for (int d = 0; d < 3; ++d) {
        const bool real = d >= lead;
        const size_t e = size_t(d - lead);
        in[d] = real ? xs[xs.size() - 3 + size_t(d)] : 1;
        out[d] = real ? ys[ys.size() - 3 + size_t(d)] : 1;
        k[d] = real ? p.kernel[e] : 1;
        s3[d] = real ? st[e] : 1;
        pad[d] = real ? p.padding[e] : 0;
        dil[d] = real && !p.dilation.empty() ? p.dilation[e] : 1;
      }
      const int64_t inPlane = in[0] * in[1] * in[2], outPlane = out[0] * out[1] * out[2];
      std::vector<float> want(size_t(x.numel()), 0.0f);
      for (int64_t pl = 0; pl < x.numel() / inPlane; ++pl)
        for (int64_t o = 0; o < outPlane; ++o) {
          const int64_t oi[3] = {o / (out[1] * out[2]), o / out[2] % out[1], o % out[2]};
          int64_t at = -1;
          double best = -kInf;
          for (int64_t t = 0; t < k[0] * k[1] * k[2]; ++t) {
            const int64_t kk[3] = {t / (k[1] * k[2]), (t / k[2]) % k[1], t % k[2]};
            int64_t q[3];
            bool inside = true;
            for (int d = 0; d < 3; ++d) {
              q[d] = oi[d] * s3[d] - pad[d] + kk[d] * dil[d];
              inside = inside && q[d] >= 0 && q[d] < in[d];
            }
            if (!inside) continue;
            const int64_t i = pl * inPlane + (q[0] * in[1] + q[1]) * in[2] + q[2];
            if (at < 0) at = i;
            if (x.at(i) > best || std::isnan(x.at(i))) {
              best = x.at(i);
              at = i;
            }
          }
          want[size_t(at)] += float(g.at(pl * outPlane + o));
        }
      TT expected = zeros(dtype, xs);
      for (int64_t i = 0; i < x.numel(); ++i) expected.set(i, double(want[size_t(i)]));
      CHECK(dx.bytes == expected.bytes);
    }
  const PoolParams p = pool(PoolKind::Max, 2, {2, 2}, {2, 2}, {0, 0});
  TT x = random(DType::F32, {1, 2, 4, 4}, 1), g = random(DType::F32, {1, 2, 3, 2}, 2),
     dx = zeros(DType::F32, {1, 2, 4, 4});
  CHECK_THROWS_WITH(maxPoolBackwardKernel(p, x.k(), g.k(), dx.k(), 1),
                    Catch::Equals("max_pool_backward: the gradient has shape [1, 2, 3, 2], "
                                  "max_pool of x [1, 2, 4, 4] gives [1, 2, 2, 2]"));
}

TEST_CASE("adaptive pooling windows, batch and thread invariance, errors", "[family-kernels]") {
  // window i covers [floor(i*in/out), ceil((i+1)*in/out)): checked by definition.
  for (PoolKind kind : {PoolKind::Avg, PoolKind::Max})
    for (auto [in, out] : {std::pair<int64_t, int64_t>{10, 4}, {7, 7}, {5, 1}, {3, 5}}) {
      INFO("in " << in << " out " << out);
      TT x = random(DType::F32, {2, 3, in}, 1), y = zeros(DType::F32, {2, 3, out});
      adaptivePoolKernel(kind, {out}, x.k(), y.k(), 1);
      std::vector<double> want;
      for (int64_t pl = 0; pl < 6; ++pl)
        for (int64_t i = 0; i < out; ++i) {
          const int64_t a = (i * in) / out, b = ((i + 1) * in + out - 1) / out;
          double s = 0, m = -kInf;
          for (int64_t j = a; j < b; ++j) {
            s += x.at(pl * in + j);
            m = std::max(m, x.at(pl * in + j));
          }
          want.push_back(kind == PoolKind::Avg ? s / double(b - a) : m);
        }
      checkWithin(y, want, [&](int64_t i) { return std::ldexp(1.0, -23) * std::abs(want[size_t(i)]); });
    }
  // 3-d: window (d, i, j) covers the product of the per-dim windows.
  for (PoolKind kind : {PoolKind::Avg, PoolKind::Max}) {
    const int64_t in[3] = {5, 7, 4}, out[3] = {2, 3, 4};
    TT x = random(DType::F32, {2, 3, in[0], in[1], in[2]}, 9);
    TT y = zeros(DType::F32, {2, 3, out[0], out[1], out[2]});
    adaptivePoolKernel(kind, {out[0], out[1], out[2]}, x.k(), y.k(), 2);
    auto lo = [&](int d, int64_t i) { return (i * in[d]) / out[d]; };
    auto hi = [&](int d, int64_t i) { return ((i + 1) * in[d] + out[d] - 1) / out[d]; };
    std::vector<double> want;
    for (int64_t pl = 0; pl < 6; ++pl)
      for (int64_t a = 0; a < out[0]; ++a)
        for (int64_t b = 0; b < out[1]; ++b)
          for (int64_t c = 0; c < out[2]; ++c) {
            double sum = 0, m = -kInf;
            int64_t count = 0;
            for (int64_t i = lo(0, a); i < hi(0, a); ++i)
              for (int64_t j = lo(1, b); j < hi(1, b); ++j)
                for (int64_t l = lo(2, c); l < hi(2, c); ++l) {
                  const double v = x.at(((pl * in[0] + i) * in[1] + j) * in[2] + l);
                  sum += v;
                  m = std::max(m, v);
                  ++count;
                }
            want.push_back(kind == PoolKind::Avg ? sum / double(count) : m);
          }
    INFO("3-d adaptive " << (kind == PoolKind::Avg ? "avg" : "max"));
    checkWithin(y, want, [&](int64_t i) { return std::ldexp(1.0, -23) * std::abs(want[size_t(i)]); });
  }
  TT x = random(DType::BF16, {3, 16, 30, 30}, 2);
  TT x1 = firstRows(x, 1);
  PoolParams mp = pool(PoolKind::Max, 2, {3, 3}, {2, 2}, {1, 1});
  TT y3 = zeros(DType::BF16, poolShape(mp, x.shape)), y1 = zeros(DType::BF16, poolShape(mp, x1.shape));
  TT y3b = y3;
  poolKernel(mp, x.k(), y3.k(), 3);
  poolKernel(mp, x1.k(), y1.k(), 1);
  poolKernel(mp, x.k(), y3b.k(), 1);
  CHECK(y1.bytes == y3.slice(0, y1.numel()));
  CHECK(y3b.bytes == y3.bytes);
  TT a3 = zeros(DType::BF16, {3, 16, 4, 4}), a1 = zeros(DType::BF16, {1, 16, 4, 4});
  adaptivePoolKernel(PoolKind::Avg, {4, 4}, x.k(), a3.k(), 3);
  adaptivePoolKernel(PoolKind::Avg, {4, 4}, x1.k(), a1.k(), 1);
  CHECK(a1.bytes == a3.slice(0, a1.numel()));
  // A batched 1-d input [N, C, L] pooled over L equals the same values pooled
  // as 2-d over (C, L) with windows of one channel.
  TT l = random(DType::F32, {2, 3, 11}, 6), l1 = zeros(DType::F32, {2, 3, 4}), l2 = l1;
  adaptivePoolKernel(PoolKind::Avg, {4}, l.k(), l1.k(), 1);
  adaptivePoolKernel(PoolKind::Avg, {3, 4}, l.k(), l2.k(), 1);
  CHECK(l1.bytes == l2.bytes);
  TT bad = zeros(DType::BF16, {3, 16, 14, 14});
  CHECK_THROWS_WITH(poolKernel(mp, x.k(), bad.k(), 1),
                    Catch::Equals("max_pool: output has shape [3, 16, 14, 14], expected [3, 16, 15, 15]"));
  TT badDtype = zeros(DType::F32, {3, 16, 4, 4});
  CHECK_THROWS_WITH(adaptivePoolKernel(PoolKind::Avg, {4, 4}, x.k(), badDtype.k(), 1),
                    Catch::Equals("adaptive_avg_pool: output is float32, expected bfloat16"));
}

// ================================================================= reductions

TEST_CASE("reductions match a double reference over any dims", "[family-kernels]") {
  const std::vector<std::vector<int64_t>> dimSets = {{}, {0}, {-1}, {1}, {0, 2}, {2, 0}, {0, 1, 2}};
  const ReduceKind kinds[] = {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Amax, ReduceKind::Amin,
                              ReduceKind::Var, ReduceKind::Argmax, ReduceKind::Argmin};
  for (DType dtype : {DType::F32, DType::BF16, DType::F64})
    for (ReduceKind kind : kinds)
      for (const auto &dims : dimSets)
        for (bool keepdim : {false, true}) {
          const bool arg = kind == ReduceKind::Argmax || kind == ReduceKind::Argmin;
          if (arg && dims.size() > 1) continue;
          INFO(shardc::plan::dtypeName(dtype) << " kind " << int(kind) << " dims "
                                              << shapeToString(dims) << " keepdim " << keepdim);
          TT x = random(dtype, {3, 4, 5}, 9, -2, 3);
          TT y = zeros(arg ? DType::I64 : dtype, reduceShape(kind, x.shape, dims, keepdim));
          reduceKernel(kind, x.k(), dims, 1, y.k(), 2);
          const ReduceRef r = reduceReference(kind, x, dims, 1);
          if (arg || kind == ReduceKind::Amax || kind == ReduceKind::Amin) {
            checkExact(y, r.value);
            continue;
          }
          const double rel = dtype == DType::F64 ? 1e-15 : dtype == DType::F32 ? std::ldexp(1.0, -23) : std::ldexp(1.0, -8);
          checkWithin(y, r.value, [&](int64_t i) {
            return rel * std::abs(r.value[size_t(i)]) + 1e-15 * r.absSum[size_t(i)];
          });
        }
  // Many reduced dims: the walk's odometer on the stack (8 dims) and on the
  // heap (9), every reduced dim of size 2 or 3 so each one carries.
  const Shape many{2, 3, 2, 2, 3, 2, 2, 3, 2, 5};
  for (const std::vector<int64_t> &dims : {std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 8},
                                           std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}})
    for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Amax, ReduceKind::Var}) {
      INFO("dims " << shapeToString(dims) << " kind " << int(kind));
      TT x = random(DType::F32, many, 10, -2, 3);
      TT y = zeros(DType::F32, reduceShape(kind, x.shape, dims, false));
      reduceKernel(kind, x.k(), dims, 1, y.k(), 2);
      const ReduceRef r = reduceReference(kind, x, dims, 1);
      if (kind == ReduceKind::Amax) {
        checkExact(y, r.value);
        continue;
      }
      checkWithin(y, r.value, [&](int64_t i) {
        return std::ldexp(1.0, -23) * std::abs(r.value[size_t(i)]) + 1e-15 * r.absSum[size_t(i)];
      });
    }
}

TEST_CASE("reductions: torch's NaN, tie, correction and empty rules", "[family-kernels]") {
  auto run = [](ReduceKind kind, const TT &x, std::vector<int64_t> dims, int64_t correction) {
    const bool arg = kind == ReduceKind::Argmax || kind == ReduceKind::Argmin;
    TT y = zeros(arg ? DType::I64 : x.dtype, reduceShape(kind, x.shape, dims, false));
    reduceKernel(kind, x.k(), dims, correction, y.k(), 1);
    return y;
  };
  // torch: v.argmax(1) -> [1, 1], v.argmin(1) -> [3, 1], v.amax(1) -> [3, nan]
  TT v = fromValues(DType::F32, {2, 4}, {1, 3, 3, -2, 0.5, kNaN, 7, kNaN});
  checkExact(run(ReduceKind::Argmax, v, {1}, 0), {1, 1});
  checkExact(run(ReduceKind::Argmin, v, {1}, 0), {3, 1});
  checkExact(run(ReduceKind::Amax, v, {1}, 0), {3, kNaN});
  checkExact(run(ReduceKind::Argmax, v, {}, 0), {5});  // flattened
  // torch: w.var(1, correction=0) -> [7.1875, 0], correction=1 -> [9.583333, 0],
  // correction=4 or 5 (count 4) -> [inf, nan]
  TT w = fromValues(DType::F32, {2, 4}, {1, 2, 4, 8, 3, 3, 3, 3});
  checkExact(run(ReduceKind::Var, w, {1}, 0), {7.1875, 0});
  checkExact(run(ReduceKind::Var, w, {1}, 1), {9.583333015441895, 0});
  checkExact(run(ReduceKind::Var, w, {1}, 4), {kInf, kNaN});
  checkExact(run(ReduceKind::Var, w, {1}, 5), {kInf, kNaN});
  // torch: zeros(2, 0).sum(1) -> [0, 0], .mean(1) -> [nan, nan]
  TT e = zeros(DType::F32, {2, 0});
  checkExact(run(ReduceKind::Sum, e, {1}, 0), {0, 0});
  checkExact(run(ReduceKind::Mean, e, {1}, 0), {kNaN, kNaN});
  // A 0-d tensor reduces to itself.
  TT s = fromValues(DType::F32, {}, {2.5});
  checkExact(run(ReduceKind::Sum, s, {0}, 0), {2.5});
  checkExact(run(ReduceKind::Argmax, s, {}, 0), {0});
}

TEST_CASE("reductions: batch and thread invariance, bad operands", "[family-kernels]") {
  for (const std::vector<int64_t> &dims : {std::vector<int64_t>{2}, {1}, {1, 2}}) {
    INFO("dims " << shapeToString(dims));
    TT x = random(DType::F32, {3, 64, 700}, 4), x1 = firstRows(x, 1);
    TT y3 = zeros(DType::F32, reduceShape(ReduceKind::Mean, x.shape, dims, false));
    TT y1 = zeros(DType::F32, reduceShape(ReduceKind::Mean, x1.shape, dims, false)), y3b = y3;
    reduceKernel(ReduceKind::Mean, x.k(), dims, 0, y3.k(), 3);
    reduceKernel(ReduceKind::Mean, x1.k(), dims, 0, y1.k(), 1);
    reduceKernel(ReduceKind::Mean, x.k(), dims, 0, y3b.k(), 1);
    CHECK(y1.bytes == y3.slice(0, y1.numel()));
    CHECK(y3b.bytes == y3.bytes);
  }
  TT x = random(DType::F32, {2, 3}, 1), yf = zeros(DType::F32, {2}), y5 = zeros(DType::F32, {5});
  CHECK_THROWS_WITH(reduceKernel(ReduceKind::Argmax, x.k(), {1}, 0, yf.k(), 1),
                    Catch::Equals("argmax: output is float32, expected int64"));
  CHECK_THROWS_WITH(reduceKernel(ReduceKind::Sum, x.k(), {1}, 0, y5.k(), 1),
                    Catch::Equals("sum: output has shape [5], expected [2] or, with keepdim, [2, 1]"));
  CHECK_THROWS_WITH(reduceKernel(ReduceKind::Sum, x.k(), {1, -1}, 0, yf.k(), 1),
                    Catch::Contains("appears multiple times"));
  TT xi = zeros(DType::I64, {2, 3});
  CHECK_THROWS_WITH(reduceKernel(ReduceKind::Sum, xi.k(), {1}, 0, yf.k(), 1),
                    Catch::Contains("sum: x is int64"));
}

/// Output o of reducing x over `dims` as the kernel's header states it,
/// in float storage: the runs of the innermost reduced dim in index order,
/// each in pieces of 4096 summed by cpu::sumLanes (or, given a mean,
/// cpu::sumSquaredDeviationsLanes), the pieces added in order in double.
std::vector<double> runSums(const TT &x, const std::vector<int64_t> &dims,
                            const std::vector<double> *mean) {
  const int64_t rank = int64_t(x.shape.size());
  std::vector<bool> red(size_t(rank), false);
  for (int64_t d : dims) red[size_t(d)] = true;
  // Each element's output and reduced index; sorted, they give every
  // output's elements in index order, a new run starting whenever the
  // innermost reduced dim's index returns to 0.
  std::vector<int64_t> index(size_t(rank), 0);
  std::vector<std::pair<int64_t, std::vector<int64_t>>> order;  // (output, reduced index)
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rest = i, o = 0, mult = 1;
    for (int64_t d = rank - 1; d >= 0; --d) {
      index[size_t(d)] = rest % x.shape[size_t(d)];
      rest /= x.shape[size_t(d)];
      if (!red[size_t(d)]) {
        o += index[size_t(d)] * mult;
        mult *= x.shape[size_t(d)];
      }
    }
    std::vector<int64_t> r;
    for (int64_t d = 0; d < rank; ++d)
      if (red[size_t(d)]) r.push_back(index[size_t(d)]);
    order.push_back({o, r});
  }
  std::vector<int64_t> perm(order.size());
  for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(i);
  std::stable_sort(perm.begin(), perm.end(),
                   [&](int64_t a, int64_t b) { return order[size_t(a)] < order[size_t(b)]; });
  std::vector<double> out;
  int64_t current = -1;
  std::vector<float> run;
  double total = 0;
  auto flush = [&](int64_t o) {
    for (size_t j0 = 0; j0 < run.size(); j0 += 4096) {
      const int64_t m = std::min<int64_t>(4096, int64_t(run.size() - j0));
      total += mean ? cpu::sumSquaredDeviationsLanes(run.data() + j0, m, (*mean)[size_t(o)])
                    : cpu::sumLanes(run.data() + j0, m);
    }
    run.clear();
  };
  for (int64_t p : perm) {
    const auto &[o, r] = order[size_t(p)];
    if (o != current) {
      if (current >= 0) {
        flush(current);
        out.push_back(total);
      }
      current = o;
      total = 0;
    } else if (r.back() == 0) {
      flush(o);
    }
    run.push_back(float(x.at(p)));
  }
  flush(current);
  out.push_back(total);
  return out;
}

TEST_CASE("reductions keeping the last dim have the bits of the per-output order",
          "[family-kernels]") {
  // sumColumns reduces neighbouring outputs together; each must still be
  // the sum of its runs, pieces and lanes, in order.
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
  };
  const std::vector<Case> cases = {
      {{2, 128, 96}, {0, 1}},   // a norm weight's gradient over the tokens
      {{2, 2, 3, 9, 67}, {2}},  // grouped-query heads; 67 = a block + 3
      {{3, 5000, 5}, {1}},      // runs of 5000: two pieces
      {{4, 3, 130}, {0}},       // three blocks of outputs
      {{2, 6, 4, 1}, {1, 3}}};  // a reduced trailing dim of size 1
  for (DType dtype : {DType::F32, DType::BF16})
    for (const Case &c : cases)
      for (ReduceKind kind : {ReduceKind::Sum, ReduceKind::Mean, ReduceKind::Var}) {
        INFO(shardc::plan::dtypeName(dtype) << " " << shapeToString(c.shape) << " dims "
                                            << shapeToString(c.dims) << " kind " << int(kind));
        // Each output's first two elements are +2^60 and -2^60: the values
        // added in the same partial sum as either are lost, so another
        // order of additions shows in the rounded result (small values
        // alone sum exactly in double, whatever the order).
        TT x = random(dtype, c.shape, 17, -3, 2);
        for (int64_t i = 0; i < x.numel(); ++i) {
          int64_t rest = i, reduced = 0, scale = 1;
          for (int64_t d = int64_t(c.shape.size()) - 1; d >= 0; --d) {
            const int64_t at = rest % c.shape[size_t(d)];
            rest /= c.shape[size_t(d)];
            if (std::find(c.dims.begin(), c.dims.end(), d) != c.dims.end()) {
              reduced += at * scale;
              scale *= c.shape[size_t(d)];
            }
          }
          if (reduced < 2) x.set(i, reduced == 0 ? 0x1p60 : -0x1p60);
        }
        TT y = zeros(dtype, reduceShape(kind, x.shape, c.dims, false)), y1 = y;
        reduceKernel(kind, x.k(), c.dims, 1, y.k(), 2);
        reduceKernel(kind, x.k(), c.dims, 1, y1.k(), 1);
        CHECK(y.bytes == y1.bytes);
        std::vector<double> want = runSums(x, c.dims, nullptr);
        double count = 1;
        for (int64_t d : c.dims) count *= double(c.shape[size_t(d)]);
        if (kind != ReduceKind::Sum)
          for (double &v : want) v /= count;
        if (kind == ReduceKind::Var) {
          const std::vector<double> mean = want;
          want = runSums(x, c.dims, &mean);
          for (double &v : want) v /= std::max(0.0, count - 1);
        }
        TT expected = zeros(dtype, y.shape);
        for (int64_t i = 0; i < y.numel(); ++i) expected.set(i, double(float(want[size_t(i)])));
        CHECK(y.bytes == expected.bytes);
      }
}

TEST_CASE("as_strided gathers Swin's relative position bias as torch indexes it", "[family-kernels]") {
  // The executor runs the view family's as_strided with the strided copy
  // kernel. torch: table = arange(18.).reshape(9, 2) (window 2, 2 heads),
  // table[relative_position_index] with the index torchvision builds for a
  // 2x2 window ([4, 3, 1, 0, 5, 4, 2, 1, 7, 6, 4, 3, 8, 7, 5, 4]).
  const std::vector<double> torchValues = {8, 9, 6, 7, 2, 3, 0, 1, 10, 11, 8, 9, 4, 5, 2, 3,
                                           14, 15, 12, 13, 8, 9, 6, 7, 16, 17, 14, 15, 10, 11, 8, 9};
  for (DType dt : {DType::F32, DType::BF16, DType::F64}) {
    TT table = zeros(dt, {9, 2});
    for (int64_t i = 0; i < 18; ++i) table.set(i, double(i));
    const std::vector<int64_t> size{2, 2, 2, 2, 2}, stride{6, 2, -6, -2, 1};
    REQUIRE(asStridedShape(table.shape, size, stride, 8) == Shape(size));
    TT y = zeros(dt, size);
    stridedCopyKernel(table.k(), stride, 8, y.k());
    for (int64_t i = 0; i < y.numel(); ++i) {
      INFO("element " << i);
      CHECK(y.at(i) == torchValues[size_t(i)]);
    }
  }
}

TEST_CASE("topk picks torch.topk's indices: NaN largest, ties as torch, smallest first", "[family-kernels]") {
  // torch 2.15 (CPU, every float dtype): x = [[1, 3, 3, nan, -inf], [0, 0, 2, 0, -1]];
  // torch.topk(x, 3).indices = [[3, 1, 2], [2, 1, 3]];
  // torch.topk(x, 2, largest=False).indices = [[4, 0], [4, 1]].
  for (DType dt : {DType::F32, DType::BF16, DType::F16, DType::F64}) {
    INFO(shardc::plan::dtypeName(dt));
    TT x = fromValues(dt, {2, 5}, {1, 3, 3, kNaN, -kInf, 0, 0, 2, 0, -1});
    IndexParams largest{-1, 3, true};
    TT top = zeros(DType::I64, topkShape(x.shape, largest));
    topkKernel(largest, x.k(), top.k(), 1);
    checkExact(top, {3, 1, 2, 2, 1, 3});
    IndexParams smallest{1, 2, false};
    TT low = zeros(DType::I64, topkShape(x.shape, smallest));
    topkKernel(smallest, x.k(), low.k(), 1);
    checkExact(low, {4, 0, 4, 1});
  }
  // k * 64 <= n takes the partial-sort path: x = arange(130) % 5 gives
  // torch.topk(x, 2).indices = [9, 4], largest=False [5, 0].
  TT ramp = zeros(DType::F32, {130});
  for (int64_t i = 0; i < 130; ++i) ramp.set(i, double(i % 5));
  for (bool largest : {true, false}) {
    IndexParams p{0, 2, largest};
    TT top = zeros(DType::I64, {2});
    topkKernel(p, ramp.k(), top.k(), 1);
    checkExact(top, largest ? std::vector<double>{9, 4} : std::vector<double>{5, 0});
  }
  // Along dim 0 of [3, 2]: per column.
  TT x = fromValues(DType::F32, {3, 2}, {5, -1, 7, -3, 6, -2});
  IndexParams p{0, 2, true};
  TT top = zeros(DType::I64, topkShape(x.shape, p));
  topkKernel(p, x.k(), top.k(), 1);
  checkExact(top, {1, 0, 2, 2});
}

TEST_CASE("gather reads torch.gather's elements, exactly, and checks its indices", "[family-kernels]") {
  // torch.gather(x, 1, [[2, 0], [1, 1]]) and along dim 0 with a smaller index.
  TT x = fromValues(DType::BF16, {2, 3}, {10, 11, 12, 20, 21, 22});
  TT i1 = fromValues(DType::I64, {2, 2}, {2, 0, 1, 1});
  TT y1 = zeros(DType::BF16, {2, 2});
  gatherKernel({1}, x.k(), i1.k(), y1.k(), 1);
  checkExact(y1, {12, 10, 21, 21});
  TT i0 = fromValues(DType::I64, {3, 2}, {1, 0, 0, 0, 1, 1});
  TT y0 = zeros(DType::BF16, {3, 2});
  gatherKernel({0}, x.k(), i0.k(), y0.k(), 2);
  checkExact(y0, {20, 11, 10, 11, 20, 21});
  // topk's indices gathered give the values in order (torch.topk's values).
  TT r = random(DType::F32, {7, 33}, 5);
  IndexParams p{-1, 4, true};
  TT idx = zeros(DType::I64, topkShape(r.shape, p));
  topkKernel(p, r.k(), idx.k(), 2);
  TT v = zeros(DType::F32, idx.shape);
  gatherKernel(p, r.k(), idx.k(), v.k(), 2);
  for (int64_t row = 0; row < 7; ++row) {
    double rowMax = -kInf;
    for (int64_t j = 0; j < 33; ++j) rowMax = std::max(rowMax, r.at(row * 33 + j));
    CHECK(v.at(row * 4) == rowMax);
    for (int64_t j = 1; j < 4; ++j) CHECK(v.at(row * 4 + j - 1) >= v.at(row * 4 + j));
  }
  TT bad = fromValues(DType::I64, {2, 2}, {0, 3, 1, 1});
  CHECK_THROWS_WITH(gatherKernel({1}, x.k(), bad.k(), y1.k(), 1),
                    "gather: index 3 at element 1 is out of bounds for dimension 1 with size 3");
  TT negative = fromValues(DType::I64, {2, 2}, {0, -1, 1, 1});
  CHECK_THROWS_WITH(gatherKernel({1}, x.k(), negative.k(), y1.k(), 1),
                    "gather: index -1 at element 1 is out of bounds for dimension 1 with size 3");
}

TEST_CASE("embedding_backward sums rows by index, in order, and checks its indices",
          "[family-kernels]") {
  // Powers of two: every sum exact. Row 1 read by nobody, row 3 the padding.
  TT src = fromValues(DType::F32, {5, 2}, {1, 10, 2, 20, 4, 40, 8, 80, 16, 160});
  TT idx = fromValues(DType::I64, {5}, {2, 0, 2, 3, 0});
  TT y = zeros(DType::F32, {4, 2});
  IndexParams p;
  p.rows = 4;
  p.paddingIdx = 3;
  embeddingBackwardKernel(p, src.k(), idx.k(), y.k(), 1);
  checkExact(y, {2 + 16, 20 + 160, 0, 0, 1 + 4, 10 + 40, 0, 0});
  // Random bfloat16 rows into 11 rows: the double sum rounded once, and the
  // same bytes at every thread count.
  TT r = random(DType::BF16, {300, 37}, 3);
  std::vector<double> ids;
  for (int i = 0; i < 300; ++i) ids.push_back((i * 7 + i / 13) % 11);
  TT index = fromValues(DType::I64, {300}, ids);
  IndexParams q;
  q.rows = 11;
  TT one = zeros(DType::BF16, {11, 37}), four = zeros(DType::BF16, {11, 37});
  embeddingBackwardKernel(q, r.k(), index.k(), one.k(), 1);
  embeddingBackwardKernel(q, r.k(), index.k(), four.k(), 4);
  CHECK(one.bytes == four.bytes);
  for (int64_t v = 0; v < 11; ++v)
    for (int64_t c = 0; c < 37; ++c) {
      double want = 0;
      for (int64_t m = 0; m < 300; ++m)
        if (static_cast<int64_t>(ids[size_t(m)]) == v) want += r.at(m * 37 + c);
      INFO("row " << v << " column " << c);
      CHECK(std::abs(one.at(v * 37 + c) - want) <= std::ldexp(std::abs(want), -8) + 1e-30);
    }
  // A table of few rows next to the reads is sorted by counting, one of many
  // by comparison: the same order, so the same bytes (float32 and the
  // generic path's bfloat16).
  for (DType dt : {DType::F32, DType::BF16}) {
    TT rows = random(dt, {300, 37}, 4);
    IndexParams wide;
    wide.rows = 4 * 300 + 65536 + 1;
    TT few = zeros(dt, {11, 37}), many = zeros(dt, {wide.rows, 37});
    embeddingBackwardKernel(q, rows.k(), index.k(), few.k(), 3);
    embeddingBackwardKernel(wide, rows.k(), index.k(), many.k(), 3);
    many.bytes.resize(few.bytes.size());
    CHECK(few.bytes == many.bytes);
  }
  TT bad = fromValues(DType::I64, {5}, {0, 4, 1, -1, 2});
  CHECK_THROWS_WITH(embeddingBackwardKernel(p, src.k(), bad.k(), y.k(), 1),
                    "embedding_backward: index 4 at element 1 is out of range for 4 rows");
  CHECK_THROWS_WITH(embeddingBackwardShape({5, 2}, {4}, p),
                    Catch::Contains("takes src [M, D] and index [M]"));
}

TEST_CASE("embedding_backward with acc is `add` of acc and its sums, bit for bit, also in place",
          "[family-kernels]") {
  // 13 rows: 11 read (row 3 the padding), 11 and 12 read by nobody; acc
  // holds -0 in an unread row (add's +0 makes it +0) and a NaN.
  std::vector<double> ids;
  for (int i = 0; i < 300; ++i) ids.push_back((i * 7 + i / 13) % 11);
  TT index = fromValues(DType::I64, {300}, ids);
  IndexParams p;
  p.rows = 13;
  p.paddingIdx = 3;
  for (DType dt : {DType::F32, DType::F64, DType::BF16}) {
    INFO(shardc::plan::dtypeName(dt));
    TT src = random(dt, {300, 37}, 5, -4, 4), acc = random(dt, {13, 37}, 6, -50, 50);
    acc.set(12 * 37 + 5, -0.0);
    acc.set(2 * 37 + 1, kNaN);
    TT sums = zeros(dt, {13, 37}), want = zeros(dt, {13, 37});
    embeddingBackwardKernel(p, src.k(), index.k(), sums.k(), 1);
    binaryKernel(BinaryOp::Add, acc.k(), sums.k(), want.k(), 1);
    CHECK(want.at(12 * 37 + 5) == 0.0);
    CHECK_FALSE(std::signbit(want.at(12 * 37 + 5)));
    for (int threads : {1, 3}) {
      TT apart = zeros(dt, {13, 37});
      const KTensor accTensor = acc.k();
      embeddingBackwardKernel(p, src.k(), index.k(), apart.k(), threads, &accTensor);
      CHECK(apart.bytes == want.bytes);
      TT inPlace = acc;  // y is acc's own buffer, as the lowering plans it
      const KTensor both = inPlace.k();
      embeddingBackwardKernel(p, src.k(), index.k(), both, threads, &both);
      CHECK(inPlace.bytes == want.bytes);
    }
  }
  TT src = random(DType::F32, {300, 37}, 5), y = zeros(DType::F32, {13, 37});
  TT shortAcc = zeros(DType::F32, {12, 37}), halfAcc = zeros(DType::BF16, {13, 37});
  CHECK_THROWS_WITH(embeddingBackwardShape({300, 37}, {300}, p, &shortAcc.shape),
                    "embedding_backward: acc must have the result's shape [13, 37], got [12, 37]");
  const KTensor halfTensor = halfAcc.k();
  CHECK_THROWS_WITH(embeddingBackwardKernel(p, src.k(), index.k(), y.k(), 1, &halfTensor),
                    Catch::Contains("embedding_backward: operands do not fit") &&
                        Catch::Contains("acc [13, 37]"));
}

TEST_CASE("cross_entropy_backward is softmax minus a one-hot, without the one-hot",
          "[family-kernels]") {
  // Each dtype: the softmax kernel's rows with one subtracted at the target
  // in float, rounded once (the bits of `sub` of a one-hot, what the
  // gradient rule built before), zeros where the target is ignored, within
  // float rounding of softmax - one-hot in double, and the same bytes at
  // any thread count.
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    INFO(shardc::plan::dtypeName(dt));
    TT x = random(dt, {5, 7}, 11);
    TT t = fromValues(DType::I64, {5}, {3, -100, 0, 6, 2});
    TT y = zeros(dt, {5, 7}), four = zeros(dt, {5, 7}), probs = zeros(dt, {5, 7});
    IndexParams p;
    crossEntropyBackwardKernel(p, x.k(), t.k(), y.k(), 1);
    crossEntropyBackwardKernel(p, x.k(), t.k(), four.k(), 4);
    CHECK(y.bytes == four.bytes);
    softmaxKernel(x.k(), 1, probs.k(), 1);
    TT expected = probs;
    for (int64_t n : {0, 2, 3, 4}) {
      const int64_t at = n * 7 + static_cast<int64_t>(t.at(n));
      float v = static_cast<float>(probs.at(at)) - 1.0f;
      cpu::storeFloats(dt, &v, 1, expected.bytes.data(), at);
    }
    for (int64_t c = 0; c < 7; ++c) {  // the ignored row
      float zero = 0;
      cpu::storeFloats(dt, &zero, 1, expected.bytes.data(), 7 + c);
    }
    CHECK(y.bytes == expected.bytes);
    for (int64_t n = 0; n < 5; ++n) {
      double mx = -1e300, sum = 0;
      for (int64_t c = 0; c < 7; ++c) mx = std::max(mx, x.at(n * 7 + c));
      for (int64_t c = 0; c < 7; ++c) sum += std::exp(x.at(n * 7 + c) - mx);
      for (int64_t c = 0; c < 7; ++c) {
        const double want = n == 1 ? 0.0
                                   : std::exp(x.at(n * 7 + c) - mx) / sum -
                                         (c == static_cast<int64_t>(t.at(n)) ? 1.0 : 0.0);
        INFO("row " << n << " class " << c);
        CHECK(std::abs(y.at(n * 7 + c) - want) <= (dt == DType::BF16  ? 8e-3
                                                   : dt == DType::F16 ? 1e-3
                                                                      : 1e-6));
      }
    }
  }
  // Another ignore_index; a target outside [0, C) that is not it fails.
  TT x = random(DType::F32, {3, 4}, 2);
  TT y = zeros(DType::F32, {3, 4});
  IndexParams p;
  p.ignoreIndex = 1;
  crossEntropyBackwardKernel(p, x.k(), fromValues(DType::I64, {3}, {1, 0, 3}).k(), y.k(), 1);
  for (int64_t c = 0; c < 4; ++c) CHECK(y.at(c) == 0.0);
  CHECK(y.at(4 + 0) < 0);
  CHECK_THROWS_WITH(crossEntropyBackwardKernel(IndexParams{}, x.k(),
                                               fromValues(DType::I64, {3}, {1, 4, -1}).k(), y.k(),
                                               1),
                    "cross_entropy_backward: target 4 of row 1 is out of range for 4 classes "
                    "(ignore_index -100)");
  CHECK_THROWS_WITH(crossEntropyBackwardShape({3, 4}, {4}),
                    Catch::Contains("takes logits [N, C] and target [N]"));
}

namespace {

/// moe_experts by its definition, in double (MoeReference.h), on the
/// values the kernel sees.
std::vector<double> moeReference(const TT &x, const TT &index, const TT &w, const TT &gateUp,
                                 const TT &down, GateActivation act) {
  MoeValues m;
  m.T = x.shape[0], m.H = x.shape[1], m.k = index.shape[1], m.E = gateUp.shape[0];
  m.I = gateUp.shape[1] / 2, m.act = act;
  auto values = [](const TT &t) {
    std::vector<double> v(size_t(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i) v[size_t(i)] = t.at(i);
    return v;
  };
  m.x = values(x), m.weights = values(w), m.gateUp = values(gateUp), m.down = values(down);
  for (int64_t i = 0; i < index.numel(); ++i) m.index.push_back(int64_t(index.at(i)));
  return moeOutputReference(m);
}

}  // namespace

TEST_CASE("moe_experts: the definition, any batch split or thread count, bad indices", "[family-kernels]") {
  // 300 tokens (more than one 256-row block for the busiest expert), 2 of 5
  // experts each, H = 24, I = 40.
  const int64_t T = 300, k = 2, E = 5, H = 24, I = 40;
  for (GateActivation act : {GateActivation::Silu, GateActivation::Gelu, GateActivation::Relu}) {
    TT x = random(DType::F32, {T, H}, 1), w = random(DType::F32, {T, k}, 2, 0, 1);
    TT gateUp = random(DType::F32, {E, 2 * I, H}, 3, -0.3, 0.3);
    TT down = random(DType::F32, {E, H, I}, 4, -0.3, 0.3);
    TT index = zeros(DType::I64, {T, k});
    for (int64_t t = 0; t < T; ++t) {  // two distinct experts, most tokens on expert 1
      index.set(t * k, double(t % 7 == 0 ? 0 : 1));
      index.set(t * k + 1, double(2 + t % 3));
    }
    const MoeParams p{act};
    auto run = [&](const TT &xs, const TT &is, const TT &ws, int threads) {
      const int64_t n = xs.shape[0];
      TT y = zeros(DType::F32, {n, H});
      std::vector<std::byte> work(size_t(moeExpertsWorkBytes(n, k, H, I, DType::F32)));
      moeExpertsKernel(p, xs.k(), is.k(), ws.k(), gateUp.k(), down.k(), y.k(), work.data(),
                       threads);
      return y;
    };
    const TT y = run(x, index, w, 2);
    const std::vector<double> want = moeReference(x, index, w, gateUp, down, act);
    for (int64_t i = 0; i < T * H; ++i) {
      INFO("element " << i);
      REQUIRE(std::abs(y.at(i) - want[size_t(i)]) <= 1e-5 * (1 + std::abs(want[size_t(i)])));
    }
    CHECK(run(x, index, w, 1).bytes == y.bytes);
    // Tokens 100..109 alone give their rows of the whole batch, bit for bit.
    auto rows = [&](const TT &t, int64_t first, int64_t count) {
      TT part = zeros(t.dtype, {count, t.shape[1]});
      const int64_t size = shardc::plan::dtypeSize(t.dtype) * t.shape[1];
      std::memcpy(part.bytes.data(), t.bytes.data() + first * size, size_t(count * size));
      return part;
    };
    CHECK(run(rows(x, 100, 10), rows(index, 100, 10), rows(w, 100, 10), 1).bytes ==
          rows(y, 100, 10).bytes);
  }
  // bfloat16 through a float accumulator: within bf16's rounding of the float32 result.
  {
    TT x = random(DType::BF16, {6, 8}, 5), w = random(DType::BF16, {6, 2}, 6, 0, 1);
    TT gateUp = random(DType::BF16, {3, 8, 8}, 7), down = random(DType::BF16, {3, 8, 4}, 8);
    TT index = fromValues(DType::I64, {6, 2}, {0, 1, 1, 2, 2, 0, 0, 2, 1, 0, 2, 1});
    TT y = zeros(DType::BF16, {6, 8});
    std::vector<std::byte> work(size_t(moeExpertsWorkBytes(6, 2, 8, 4, DType::BF16)));
    moeExpertsKernel({}, x.k(), index.k(), w.k(), gateUp.k(), down.k(), y.k(), work.data(), 1);
    const std::vector<double> want = moeReference(x, index, w, gateUp, down, GateActivation::Silu);
    for (int64_t i = 0; i < 48; ++i)
      CHECK(std::abs(y.at(i) - want[size_t(i)]) <= 1e-2 * (1 + std::abs(want[size_t(i)])));
  }
  TT x = random(DType::F32, {2, 4}, 1), w = random(DType::F32, {2, 1}, 2);
  TT gateUp = random(DType::F32, {3, 4, 4}, 3), down = random(DType::F32, {3, 4, 2}, 4);
  TT bad = fromValues(DType::I64, {2, 1}, {1, 3});
  TT y = zeros(DType::F32, {2, 4});
  std::vector<std::byte> work(size_t(moeExpertsWorkBytes(2, 1, 4, 2, DType::F32)));
  CHECK_THROWS_WITH(moeExpertsKernel({}, x.k(), bad.k(), w.k(), gateUp.k(), down.k(), y.k(),
                                     work.data(), 1),
                    "moe_experts: expert index 3 of token 1 (slot 0) is out of range for 3 experts");
  CHECK_THROWS_WITH(moeExpertsShape({2, 4}, {2, 1}, {2, 1}, {3, 4, 4}, {3, 4, 3}),
                    "moe_experts: down must be [E, H, I] = [3, 4, 2], got [3, 4, 3]");
}
