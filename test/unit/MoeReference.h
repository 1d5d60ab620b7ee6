// moe_experts by its definition, in double (runtime/OpFamilies.h): the
// reference of the forward kernel's test and, through finite differences
// of it, of the backward kernel's (MoeBackwardTest.cpp).
#pragma once

#include "runtime/OpFamilies.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace shardc::runtime::familytest {

/// A mixture of experts' operands as doubles: x [T, H], index [T, k],
/// weights [T, k], gateUp [E, 2I, H], down [E, H, I].
struct MoeValues {
  int64_t T = 0, H = 0, k = 0, E = 0, I = 0;
  std::vector<double> x, weights, gateUp, down;
  std::vector<int64_t> index;
  GateActivation act = GateActivation::Silu;
};

inline double gateActivationReference(GateActivation act, double v) {
  switch (act) {
  case GateActivation::Silu: return v / (1 + std::exp(-v));
  case GateActivation::Relu: return std::max(v, 0.0);
  case GateActivation::Gelu: return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
  case GateActivation::GeluTanh:
    return 0.5 * v * (1 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
  }
  return 0;
}

/// y [T, H]: each token's experts in slot order, act(gate) * up, down,
/// weighted and summed.
inline std::vector<double> moeOutputReference(const MoeValues &m) {
  const int64_t T = m.T, H = m.H, k = m.k, I = m.I;
  std::vector<double> y(size_t(T * H), 0.0), h(static_cast<size_t>(I));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = 0; s < k; ++s) {
      const int64_t e = m.index[size_t(t * k + s)];
      for (int64_t i = 0; i < I; ++i) {
        double gate = 0, up = 0;
        for (int64_t j = 0; j < H; ++j) {
          gate += m.gateUp[size_t((e * 2 * I + i) * H + j)] * m.x[size_t(t * H + j)];
          up += m.gateUp[size_t((e * 2 * I + I + i) * H + j)] * m.x[size_t(t * H + j)];
        }
        h[size_t(i)] = gateActivationReference(m.act, gate) * up;
      }
      for (int64_t j = 0; j < H; ++j) {
        double d = 0;
        for (int64_t i = 0; i < I; ++i) d += m.down[size_t((e * H + j) * I + i)] * h[size_t(i)];
        y[size_t(t * H + j)] += m.weights[size_t(t * k + s)] * d;
      }
    }
  return y;
}

}  // namespace shardc::runtime::familytest
