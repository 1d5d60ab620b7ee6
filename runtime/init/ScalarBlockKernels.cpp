// The portable reference kernels: one Philox call per block, the recipes of
// Recipes.h per element.
#include "runtime/init/BlockKernels.h"

namespace shardc::runtime::init {

void scalarBlocksF(const PreparedGenerator &g, uint64_t firstBlock, int64_t blocks, float *out) {
  for (int64_t k = 0; k < blocks; ++k, out += kElementsPerBlockF) {
    philox::Counter w = blockWords(g.stream, firstBlock + static_cast<uint64_t>(k));
    switch (g.kind) {
    case GeneratorKind::Uniform:
      for (int j = 0; j < 4; ++j) out[j] = uniformValueF(g.uniformF, w.v[j]);
      break;
    case GeneratorKind::Normal:
      normalPairF(g.normalF, w.v[0], w.v[1], &out[0], &out[1]);
      normalPairF(g.normalF, w.v[2], w.v[3], &out[2], &out[3]);
      break;
    case GeneratorKind::TruncNormal:
      for (int j = 0; j < 4; ++j) out[j] = truncNormalValueF(g.truncF, w.v[j]);
      break;
    default:
      break;  // not random: never called for it
    }
  }
}

void scalarBlocksD(const PreparedGenerator &g, uint64_t firstBlock, int64_t blocks, double *out) {
  for (int64_t k = 0; k < blocks; ++k, out += kElementsPerBlockD) {
    philox::Counter w = blockWords(g.stream, firstBlock + static_cast<uint64_t>(k));
    switch (g.kind) {
    case GeneratorKind::Uniform:
      out[0] = uniformValueD(g.uniformD, w.v[0], w.v[1]);
      out[1] = uniformValueD(g.uniformD, w.v[2], w.v[3]);
      break;
    case GeneratorKind::Normal:
      normalPairD(g.normalD, w, &out[0], &out[1]);
      break;
    case GeneratorKind::TruncNormal:
      out[0] = truncNormalValueD(g.truncD, w.v[0], w.v[1]);
      out[1] = truncNormalValueD(g.truncD, w.v[2], w.v[3]);
      break;
    default:
      break;
    }
  }
}

}  // namespace shardc::runtime::init
