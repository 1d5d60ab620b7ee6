// Range and gather drivers over the block kernels: aligned runs of whole
// blocks go straight into the output (float32) and everything else through a
// small stack stage, so no full-tensor temporary ever exists.
#include "runtime/init/Generators.h"

#include "runtime/RuntimeError.h"
#include "runtime/init/BlockKernels.h"
#include "runtime/init/CpuDispatch.h"
#include "runtime/init/DTypeRounding.h"
#include "runtime/init/ParallelFor.h"
#include "runtime/init/PreparedGenerator.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace shardc::runtime::init {
namespace {

constexpr int64_t kStageElements = 1024;  // 4 KiB of float, 8 KiB of double: stays in L1

void storeFloats(const float *values, int64_t n, plan::DType dtype, void *out) {
  switch (dtype) {
  case plan::DType::F32: std::memcpy(out, values, static_cast<size_t>(n) * sizeof(float)); break;
  case plan::DType::F16:
    for (int64_t k = 0; k < n; ++k) static_cast<uint16_t *>(out)[k] = floatToHalfBits(values[k]);
    break;
  case plan::DType::BF16:
    for (int64_t k = 0; k < n; ++k)
      static_cast<uint16_t *>(out)[k] = floatToBFloat16Bits(values[k]);
    break;
  case plan::DType::F64: break;  // the float64 path never stages floats
  default: break;  // non-float dtypes are rejected on entry
  }
}

/// One computed double (fill, eye, arange) rounded once into `dtype`.
void storeDouble(double value, plan::DType dtype, void *out, int64_t k) {
  switch (dtype) {
  case plan::DType::F32: static_cast<float *>(out)[k] = static_cast<float>(value); break;
  case plan::DType::F64: static_cast<double *>(out)[k] = value; break;
  case plan::DType::F16: static_cast<uint16_t *>(out)[k] = doubleToHalfBits(value); break;
  case plan::DType::BF16: static_cast<uint16_t *>(out)[k] = doubleToBFloat16Bits(value); break;
  default: break;  // non-float dtypes are rejected on entry
  }
}

void randomRangeF(const PreparedGenerator &g, plan::DType dtype, int64_t begin, int64_t count,
                  void *out) {
  const bool avx512 = useAvx512(), avx2 = useAvx2();
  static_assert(kAvx512BlocksPerStep == kAvx2BlocksPerStep, "one granule for both");
  const int64_t granule = (avx2 ? kAvx2BlocksPerStep : 1) * kElementsPerBlockF;
  auto kernel = [&](int64_t firstElement, int64_t elements, float *dst) {
    uint64_t firstBlock = static_cast<uint64_t>(firstElement / kElementsPerBlockF);
    int64_t blocks = elements / kElementsPerBlockF;
    if (avx512) avx512BlocksF(g, firstBlock, blocks, dst);
    else if (avx2) avx2BlocksF(g, firstBlock, blocks, dst);
    else scalarBlocksF(g, firstBlock, blocks, dst);
  };
  const int64_t size = plan::dtypeSize(dtype);
  char *bytes = static_cast<char *>(out);
  alignas(32) float stage[kStageElements];
  for (int64_t i = begin, end = begin + count; i < end;) {
    int64_t granuleStart = i / granule * granule;
    if (dtype == plan::DType::F32 && i == granuleStart && end - i >= granule) {
      int64_t n = (end - i) / granule * granule;
      kernel(i, n, reinterpret_cast<float *>(bytes + (i - begin) * size));
      i += n;
      continue;
    }
    int64_t stageEnd =
        std::min(granuleStart + kStageElements, (end + granule - 1) / granule * granule);
    kernel(granuleStart, stageEnd - granuleStart, stage);
    int64_t take = std::min(end, stageEnd) - i;
    storeFloats(stage + (i - granuleStart), take, dtype, bytes + (i - begin) * size);
    i += take;
  }
}

void randomRangeD(const PreparedGenerator &g, int64_t begin, int64_t count, double *out) {
  alignas(32) double stage[kStageElements];
  const int64_t granule = kElementsPerBlockD;
  for (int64_t i = begin, end = begin + count; i < end;) {
    int64_t granuleStart = i / granule * granule;
    int64_t stageEnd =
        std::min(granuleStart + kStageElements, (end + granule - 1) / granule * granule);
    scalarBlocksD(g, static_cast<uint64_t>(granuleStart / granule), (stageEnd - granuleStart) / granule,
                  stage);
    int64_t take = std::min(end, stageEnd) - i;
    std::memcpy(out + (i - begin), stage + (i - granuleStart), static_cast<size_t>(take) * sizeof(double));
    i += take;
  }
}

/// fill, eye, arange: exact formulas computed in double, rounded once.
double formulaValue(const PreparedGenerator &g, int64_t index) {
  switch (g.kind) {
  case GeneratorKind::Fill: return g.fillValue;
  case GeneratorKind::Eye: return index / g.eyeColumns == index % g.eyeColumns ? 1.0 : 0.0;
  case GeneratorKind::Arange: return math::fmaD(static_cast<double>(index), g.step, g.start);
  default: return 0;
  }
}

void fillRange(const PreparedGenerator &g, plan::DType dtype, int64_t count, void *out) {
  switch (dtype) {
  case plan::DType::F32: std::fill_n(static_cast<float *>(out), count, static_cast<float>(g.fillValue)); break;
  case plan::DType::F64: std::fill_n(static_cast<double *>(out), count, g.fillValue); break;
  case plan::DType::F16: std::fill_n(static_cast<uint16_t *>(out), count, doubleToHalfBits(g.fillValue)); break;
  case plan::DType::BF16:
    std::fill_n(static_cast<uint16_t *>(out), count, doubleToBFloat16Bits(g.fillValue));
    break;
  default: break;  // non-float dtypes are rejected on entry
  }
}

void generateSingleThread(const PreparedGenerator &g, plan::DType dtype, int64_t begin,
                          int64_t count, void *out) {
  if (count <= 0) return;
  if (g.kind == GeneratorKind::Fill) return fillRange(g, dtype, count, out);
  if (!isRandom(g.kind)) {
    for (int64_t k = 0; k < count; ++k) storeDouble(formulaValue(g, begin + k), dtype, out, k);
    return;
  }
  if (dtype == plan::DType::F64) return randomRangeD(g, begin, count, static_cast<double *>(out));
  randomRangeF(g, dtype, begin, count, out);
}

void requireFloatDType(plan::DType dtype, const char *what) {
  if (dtype != plan::DType::F32 && dtype != plan::DType::F64 && dtype != plan::DType::F16 &&
      dtype != plan::DType::BF16)
    throw RuntimeError(std::string(what) + ": dtype " + plan::dtypeName(dtype) +
                       " is not a floating-point type (init generators produce float32/64, float16, bfloat16)");
}

void checkIndex(const GeneratorSpec &spec, const PreparedGenerator &g, int64_t index, const char *what) {
  if (index < 0 || index >= g.elements)
    throw RuntimeError(std::string("init generator '") + generatorKindName(spec.kind) + "': " + what +
                       " " + std::to_string(index) + " is outside the tensor's " +
                       std::to_string(g.elements) + " elements");
}

}  // namespace

void generateRange(const GeneratorSpec &spec, plan::DType dtype, int64_t begin, int64_t count,
                   void *out, int threads) {
  PreparedGenerator g = prepareGenerator(spec);
  requireFloatDType(dtype, "init generator");
  if (count < 0) throw RuntimeError("init generator: negative element count " + std::to_string(count));
  if (count == 0) return;
  checkIndex(spec, g, begin, "range start");
  checkIndex(spec, g, begin + count - 1, "range end");
  const int64_t size = plan::dtypeSize(dtype);
  parallelFor(count, threads, [&](int64_t partBegin, int64_t partCount) {
    generateSingleThread(g, dtype, begin + partBegin, partCount,
                         static_cast<char *>(out) + partBegin * size);
  });
}

void generateAt(const GeneratorSpec &spec, plan::DType dtype, const int64_t *indices,
                int64_t count, void *out) {
  PreparedGenerator g = prepareGenerator(spec);
  requireFloatDType(dtype, "init generator");
  for (int64_t k = 0; k < count; ++k) checkIndex(spec, g, indices[k], "index");
  if (!isRandom(g.kind)) {
    for (int64_t k = 0; k < count; ++k) storeDouble(formulaValue(g, indices[k]), dtype, out, k);
    return;
  }
  // Views often visit indices of one block in a row: keep the last block.
  const bool f64 = dtype == plan::DType::F64;
  const int64_t perBlock = f64 ? kElementsPerBlockD : kElementsPerBlockF;
  int64_t cachedBlock = -1;
  float blockF[kElementsPerBlockF];
  double blockD[kElementsPerBlockD];
  for (int64_t k = 0; k < count; ++k) {
    int64_t block = indices[k] / perBlock, word = indices[k] % perBlock;
    if (block != cachedBlock) {
      if (f64) scalarBlocksD(g, static_cast<uint64_t>(block), 1, blockD);
      else scalarBlocksF(g, static_cast<uint64_t>(block), 1, blockF);
      cachedBlock = block;
    }
    if (f64) static_cast<double *>(out)[k] = blockD[word];
    else storeFloats(&blockF[word], 1, dtype, static_cast<char *>(out) + k * plan::dtypeSize(dtype));
  }
}

}  // namespace shardc::runtime::init
