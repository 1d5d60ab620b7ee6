// Init generators: fill, uniform, normal, trunc_normal, eye, arange.
//
// Every element's value is a pure function of (seed, streamHash, position,
// flat index, op arguments) -- docs/design.md invariant 2, specified exactly in
// docs/rng.md. That is what lets each rank generate only its own shard, at
// any offset, with any thread count, and still agree bit for bit with N = 1.
#pragma once

#include "runtime/Plan.h"

#include <cstdint>
#include <vector>

namespace shardc::runtime::init {

enum class GeneratorKind { Fill, Uniform, Normal, TruncNormal, Eye, Arange };

struct GeneratorSpec {
  GeneratorKind kind = GeneratorKind::Fill;
  double value = 0;                 // fill
  double low = 0, high = 1;         // uniform [low, high); trunc_normal bounds a, b (absolute, like torch)
  double mean = 0, std = 1;         // normal, trunc_normal
  double start = 0, step = 1;       // arange: element i = start + i * step
  std::vector<int64_t> shape;       // full shape of the generated tensor (eye: 2-D, element (r,c) = r==c)
  uint64_t seed = 0;
  uint32_t streamHash = 0;          // philox::fnv1a32 of the parameter's full name
  uint32_t position = 0;            // the op's position in the parameter's init chain
};

const char *generatorKindName(GeneratorKind kind);

/// Throws RuntimeError when the spec cannot be generated (eye on a non-2-D
/// shape, trunc_normal with low >= high, std < 0, non-finite arguments ...).
void validateGeneratorSpec(const GeneratorSpec &spec);

/// Elements with row-major flat indices [begin, begin+count) of the generated tensor, written as `dtype` into `out`.
/// `threads` > 1 splits the range over that many threads (results identical to threads == 1).
void generateRange(const GeneratorSpec &spec, plan::DType dtype, int64_t begin, int64_t count,
                   void *out, int threads = 1);

/// The elements at arbitrary flat indices (used when views permute indices); out[k] = element indices[k].
void generateAt(const GeneratorSpec &spec, plan::DType dtype, const int64_t *indices,
                int64_t count, void *out);

}  // namespace shardc::runtime::init
