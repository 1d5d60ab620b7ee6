// A GeneratorSpec checked and turned into the constants the kernels use:
// done once per call on the host, so the per-element code does no
// validation and no double -> float conversions.
#pragma once

#include "runtime/init/Generators.h"
#include "runtime/init/Recipes.h"

namespace shardc::runtime::init {

struct PreparedGenerator {
  GeneratorKind kind = GeneratorKind::Fill;
  RngStream stream;
  UniformConstants<float> uniformF{};
  UniformConstants<double> uniformD{};
  NormalConstants<float> normalF{};
  NormalConstants<double> normalD{};
  TruncNormalConstants<float> truncF{};
  TruncNormalConstants<double> truncD{};
  double fillValue = 0;
  double start = 0, step = 1;  // arange
  int64_t eyeColumns = 0;
  int64_t elements = 0;        // of the full generated tensor
};

/// Validates (throws RuntimeError naming the op and the reason) and prepares.
PreparedGenerator prepareGenerator(const GeneratorSpec &spec);

/// Whether the kind draws from Philox (and so uses the block kernels).
inline bool isRandom(GeneratorKind kind) {
  return kind == GeneratorKind::Uniform || kind == GeneratorKind::Normal ||
         kind == GeneratorKind::TruncNormal;
}

}  // namespace shardc::runtime::init
