// Helpers shared by the Init*Test files: specs for every generator kind and
// byte buffers for every dtype.
#pragma once

#include "runtime/Philox.h"
#include "runtime/Plan.h"
#include "runtime/init/Generators.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace shardc::runtime::init::testing {

inline uint32_t streamOf(const std::string &name) { return philox::fnv1a32(name.data(), name.size()); }

inline GeneratorSpec specFor(GeneratorKind kind, std::vector<int64_t> shape, uint64_t seed = 42,
                             const std::string &name = "h.0.attn.weight", uint32_t position = 0) {
  GeneratorSpec spec;
  spec.kind = kind;
  spec.shape = std::move(shape);
  spec.seed = seed;
  spec.streamHash = streamOf(name);
  spec.position = position;
  switch (kind) {
  case GeneratorKind::Fill: spec.value = 0.1; break;
  case GeneratorKind::Uniform: spec.low = -1; spec.high = 1; break;
  case GeneratorKind::Normal: spec.mean = 0; spec.std = 1; break;
  case GeneratorKind::TruncNormal: spec.mean = 0; spec.std = 1; spec.low = -2; spec.high = 2; break;
  case GeneratorKind::Eye: break;
  case GeneratorKind::Arange: spec.start = -3.5; spec.step = 0.25; break;
  }
  return spec;
}

inline const std::vector<GeneratorKind> &allKinds() {
  static const std::vector<GeneratorKind> kinds = {GeneratorKind::Fill, GeneratorKind::Uniform,
                                                   GeneratorKind::Normal, GeneratorKind::TruncNormal,
                                                   GeneratorKind::Eye, GeneratorKind::Arange};
  return kinds;
}

inline const std::vector<plan::DType> &allDTypes() {
  static const std::vector<plan::DType> dtypes = {plan::DType::F32, plan::DType::F64, plan::DType::F16,
                                                  plan::DType::BF16};
  return dtypes;
}

/// Bytes of `count` elements [begin, begin + count) generated with `threads`.
inline std::vector<unsigned char> generateBytes(const GeneratorSpec &spec, plan::DType dtype, int64_t begin,
                                                int64_t count, int threads = 1) {
  std::vector<unsigned char> bytes(static_cast<size_t>(count * plan::dtypeSize(dtype)));
  generateRange(spec, dtype, begin, count, bytes.data(), threads);
  return bytes;
}

template <typename T> std::vector<T> generateValues(const GeneratorSpec &spec, int64_t count) {
  plan::DType dtype = sizeof(T) == 8 ? plan::DType::F64 : plan::DType::F32;
  std::vector<T> values(static_cast<size_t>(count));
  generateRange(spec, dtype, 0, count, values.data());
  return values;
}

}  // namespace shardc::runtime::init::testing
