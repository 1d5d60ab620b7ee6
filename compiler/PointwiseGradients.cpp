//===- PointwiseGradients.cpp - the elementwise functions' rules ---------===//
//
// y = f(x) element by element: the input's gradient is g f'(x), with f'
// written from x or y (whichever the formula needs, as torch's
// derivatives.yaml picks) and masks as 0/1 comparisons cast to g's dtype.
//
//===----------------------------------------------------------------------===//
#include "compiler/GradientRuleSets.h"

#include <cmath>

namespace shardc::compiler::gradients {
namespace {

Grads geluRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &x = s.input(0);
  auto it = s.node.strings.find("approximate");
  const bool tanhForm = it != s.node.strings.end() && it->second == "tanh";
  std::string d;
  if (!tanhForm) { // Phi(x) + x phi(x)
    std::string cdf =
        b.scale(b.shift(b.op("erf", {b.scale(x, M_SQRT1_2)}), 1.0), 0.5);
    std::string pdf = b.scale(b.op("exp", {b.scale(b.mul(x, x), -0.5)}),
                              0.5 * M_2_SQRTPI * M_SQRT1_2);
    d = b.add(cdf, b.mul(x, pdf));
  } else {
    // 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2), t = tanh(k (x + c x^3))
    const double k = M_SQRT2 * M_2_SQRTPI * 0.5, c = 0.044715;
    std::string x2 = b.mul(x, x);
    std::string inner = b.scale(b.add(x, b.scale(b.mul(x2, x), c)), k);
    std::string t = b.op("tanh", {inner});
    std::string left = b.scale(b.shift(t, 1.0), 0.5);
    std::string slope = b.scale(b.shift(b.scale(x2, 3 * c), 1.0), 0.5 * k);
    d = b.add(left, b.mul(b.mul(x, b.oneMinus(b.mul(t, t))), slope));
  }
  return pointwise(s, b.mul(s.grad(), d));
}

/// silu' = s (1 + x (1 - s)), s = sigmoid(x).
Grads siluRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &x = s.input(0);
  std::string sig = b.op("sigmoid", {x});
  std::string d = b.mul(sig, b.shift(b.mul(x, b.oneMinus(sig)), 1.0));
  return pointwise(s, b.mul(s.grad(), d));
}

/// A 0/1 mask (as g's dtype) of x compared with `value`.
std::string compared(GradientBuilder &b, const char *op, const std::string &x,
                     double value) {
  return b.asFloat(b.op(op, {x}, {{"value", value}}), b.dtype(x));
}

/// mish' = t + x sigmoid(x) (1 - t^2), t = tanh(softplus(x)) (torch's
/// mish_backward). softplus's threshold (x > 20 gives x) changes nothing:
/// tanh is 1 in float there either way.
Grads mishRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &x = s.input(0);
  std::string t = b.op("tanh", {b.op("softplus", {x})});
  std::string d =
      b.add(t, b.mul(b.mul(x, b.op("sigmoid", {x})), b.oneMinus(b.mul(t, t))));
  return pointwise(s, b.mul(s.grad(), d));
}

/// elu' = 1 where x > 0, else alpha s exp(s x), s = input_scale (torch's
/// elu_backward from the input). exp reads min(x, 0): exp of a large x
/// would be inf, and inf times the mask's 0 NaN.
Grads eluRule(GradientBuilder &b, const GradientStep &s) {
  const std::string &x = s.input(0);
  const double alpha = floatAttr(s.node, "alpha", 1.0),
               inputScale = floatAttr(s.node, "input_scale", 1.0);
  std::string up = compared(b, "gt", x, 0.0);
  std::string negative = b.op("clamp_out", {x}, {{"max", 0.0}});
  if (inputScale != 1.0)
    negative = b.scale(negative, inputScale);
  std::string below = b.mul(
      b.oneMinus(up), b.scale(b.op("exp", {negative}), alpha * inputScale));
  return pointwise(s, b.mul(s.grad(), b.add(up, below)));
}

} // namespace

RuleTable pointwiseRules() {
  using B = GradientBuilder;
  using S = GradientStep;
  return {
      {"relu",
       [](B &b, const S &s) {
         std::string positive = b.op("gt", {s.input(0)}, {{"value", 0.0}});
         return pointwise(
             s, b.mul(s.grad(), b.asFloat(positive, b.dtype(s.grad()))));
       }},
      {"gelu", geluRule},
      {"silu", siluRule},
      {"mish", mishRule},
      {"elu", eluRule},
      {"sigmoid",
       [](B &b, const S &s) {
         return pointwise(
             s, b.mul(s.grad(), b.mul(s.result(), b.oneMinus(s.result()))));
       }},
      {"tanh",
       [](B &b, const S &s) {
         return pointwise(
             s, b.mul(s.grad(), b.oneMinus(b.mul(s.result(), s.result()))));
       }},
      {"exp",
       [](B &b, const S &s) {
         return pointwise(s, b.mul(s.grad(), s.result()));
       }},
      {"log",
       [](B &b, const S &s) {
         return pointwise(s, b.div(s.grad(), s.input(0)));
       }},
      {"neg_out",
       [](B &b, const S &s) {
         return pointwise(s, b.op("neg_out", {s.grad()}));
       }},
      {"sqrt_out", // g / (2 sqrt(x))
       [](B &b, const S &s) {
         return pointwise(s, b.div(b.scale(s.grad(), 0.5), s.result()));
       }},
      {"rsqrt", // -0.5 g y^3
       [](B &b, const S &s) {
         std::string y3 = b.mul(b.mul(s.result(), s.result()), s.result());
         return pointwise(s, b.scale(b.mul(s.grad(), y3), -0.5));
       }},
      {"reciprocal", // -g y^2
       [](B &b, const S &s) {
         return pointwise(
             s,
             b.op("neg_out", {b.mul(s.grad(), b.mul(s.result(), s.result()))}));
       }},
      {"pow_scalar", // g e x^(e-1)
       [](B &b, const S &s) {
         double e = std::get<double>(s.node.attrs.at("exponent"));
         std::string power =
             b.op("pow_scalar", {s.input(0)}, {{"exponent", e - 1.0}});
         return pointwise(s, b.scale(b.mul(s.grad(), power), e));
       }},
      {"cast", // a floating value's gradient in its own dtype
       [](B &b, const S &s) {
         return pointwise(s, b.asFloat(s.grad(), b.dtype(s.input(0))));
       }},
      {"abs",
       [](B &b, const S &s) {
         const std::string &x = s.input(0);
         std::string sign =
             b.sub(compared(b, "gt", x, 0.0), compared(b, "lt", x, 0.0));
         return pointwise(s, b.mul(s.grad(), sign));
       }},
      {"erf", // 2 / sqrt(pi) exp(-x^2)
       [](B &b, const S &s) {
         const std::string &x = s.input(0);
         std::string d =
             b.scale(b.op("exp", {b.op("neg_out", {b.mul(x, x)})}), M_2_SQRTPI);
         return pointwise(s, b.mul(s.grad(), d));
       }},
      {"sin",
       [](B &b, const S &s) {
         return pointwise(s, b.mul(s.grad(), b.op("cos", {s.input(0)})));
       }},
      {"cos",
       [](B &b, const S &s) {
         return pointwise(
             s, b.op("neg_out", {b.mul(s.grad(), b.op("sin", {s.input(0)}))}));
       }},
      {"clamp_out", // torch 2's clamp and hardtanh (ReLU6): the gradient
                    // passes where min < x < max, none at a bound (torch
                    // 1.13's clamp passed it there; a ReLU6 of an exact 0,
                    // batch norm's bias on a zero map, tells them apart)
       [](B &b, const S &s) {
         const std::string &x = s.input(0);
         std::string pass = s.grad();
         if (attr(s.node, "min"))
           pass =
               b.mul(pass, compared(b, "gt", x, floatAttr(s.node, "min", 0)));
         if (attr(s.node, "max"))
           pass =
               b.mul(pass, compared(b, "lt", x, floatAttr(s.node, "max", 0)));
         return pointwise(s, pass);
       }},
      {"dropout", // the same mask, recomputed (same stream, step and indices):
                  // g's kept elements scaled by 1 / (1 - p), the rest 0; the
                  // counter none
       [](B &b, const S &s) {
         json attrs = {{"p", floatAttr(s.node, "p", 0.5)},
                       {"stream", std::get<int64_t>(*attr(s.node, "stream"))}};
         for (const char *key :
              {"global_rows", "row_elements", "row_offset"}) // data-parallel
           if (const plan::AttrValue *value = attr(s.node, key))
             attrs[key] = std::get<int64_t>(*value);
         return Grads{b.op("dropout", {s.grad(), s.input(1)}, attrs), ""};
       }},
      {"all_reduce_sum", // every rank's output is the sum of all ranks' x,
                         // so each x gets every rank's gradient, summed
       [](B &b, const S &s) {
         return Grads{b.op("all_reduce_sum", {s.grad()}), ""};
       }},
      {"leaky_relu", // 1 where x > 0, else the slope
       [](B &b, const S &s) {
         const double slope = floatAttr(s.node, "negative_slope", 0.01);
         std::string up = compared(b, "gt", s.input(0), 0.0);
         return pointwise(
             s, b.mul(s.grad(), b.shift(b.scale(up, 1.0 - slope), slope)));
       }},
      {"hardsigmoid", // 1/6 where -3 < x < 3
       [](B &b, const S &s) {
         const std::string &x = s.input(0);
         std::string inside =
             b.mul(compared(b, "gt", x, -3.0), compared(b, "lt", x, 3.0));
         return pointwise(s, b.scale(b.mul(s.grad(), inside), 1.0 / 6.0));
       }},
      {"hardswish", // 0 below -3, x/3 + 1/2 up to 3, 1 above (torch's bounds)
       [](B &b, const S &s) {
         const std::string &x = s.input(0);
         std::string middle =
             b.mul(compared(b, "ge", x, -3.0), compared(b, "le", x, 3.0));
         std::string slope = b.mul(middle, b.shift(b.scale(x, 1.0 / 3.0), 0.5));
         return pointwise(
             s, b.mul(s.grad(), b.add(slope, compared(b, "gt", x, 3.0))));
       }},
      {"softplus", // sigmoid(beta x), 1 where beta x > threshold
       [](B &b, const S &s) {
         const std::string &x = s.input(0);
         const double beta = floatAttr(s.node, "beta", 1.0),
                      threshold = floatAttr(s.node, "threshold", 20.0);
         std::string bx = b.scale(x, beta);
         std::string linear = compared(b, "gt", bx, threshold);
         std::string d =
             b.add(b.mul(b.op("sigmoid", {bx}), b.oneMinus(linear)), linear);
         return pointwise(s, b.mul(s.grad(), d));
       }},
  };
}

} // namespace shardc::compiler::gradients
