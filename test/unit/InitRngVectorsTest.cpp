// The test vectors of docs/rng.md, asserted bit for bit. If this test
// fails, either the generators changed (and every checkpoint initialized by
// shardc changes with them: update docs/rng.md deliberately) or a kernel broke.
#include "runtime/Philox.h"
#include "runtime/init/CpuDispatch.h"
#include "runtime/init/Generators.h"
#include "runtime/init/Pointwise.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

using namespace shardc::runtime;
using namespace shardc::runtime::init;
namespace plan = shardc::plan;

namespace {

struct Vector {
  GeneratorKind kind;
  uint64_t seed;
  uint32_t position;
  uint32_t f32[8];
  uint64_t f64[4];
  uint16_t f16[4];
  uint16_t bf16[4];
};

GeneratorSpec specOf(const Vector &v) {
  GeneratorSpec spec;
  spec.kind = v.kind;
  spec.shape = {8};
  spec.seed = v.seed;
  spec.streamHash = philox::fnv1a32("h.0.attn.weight", 15);
  spec.position = v.position;
  if (v.kind == GeneratorKind::Uniform) { spec.low = -1; spec.high = 1; }
  if (v.kind == GeneratorKind::TruncNormal) { spec.mean = 0; spec.std = 1; spec.low = -2; spec.high = 2; }
  return spec;
}

template <typename Bits, size_t N>
std::vector<Bits> generated(const GeneratorSpec &spec, plan::DType dtype) {
  std::vector<Bits> bits(N);
  generateRange(spec, dtype, 0, N, bits.data());
  return bits;
}

// uniform(-1, 1), normal(0, 1), trunc_normal(0, 1, -2, 2); elements 0..7 (f32), 0..3 (others).
const Vector kVectors[] = {
    {GeneratorKind::Uniform, 0, 0,
     {0xbf1d52f0u, 0xbf3a8de4u, 0xbf5bcd8eu, 0xbf616494u, 0x3f047152u, 0xbf34a0ceu, 0xbf3d48fcu, 0xbf4f775cu},
     {0xbfe3aa5dc0f751beull, 0xbfeb79b1b6bc2c94ull, 0x3fe08e2a71096be6ull, 0xbfe7a91f4179eeecull},
     {0xb8eb, 0xb9d4, 0xbade, 0xbb0b},
     {0xbf1d, 0xbf3b, 0xbf5c, 0xbf61}},
    {GeneratorKind::Uniform, 0, 1,
     {0xbebe75d8u, 0xbf7546c4u, 0xbd67b1c0u, 0xbf49997cu, 0x3eee1270u, 0x3f23260eu, 0x3e335420u, 0x3e895d44u},
     {0xbfd7ceba8ffd51b4ull, 0xbfacf6355f933300ull, 0x3fddc24e0fe8c980ull, 0x3fc66a8432a25750ull},
     {0xb5f4, 0xbbaa, 0xab3e, 0xba4d},
     {0xbebe, 0xbf75, 0xbd68, 0xbf4a}},
    {GeneratorKind::Uniform, 42, 0,
     {0xbf799376u, 0xbf4628f8u, 0x3d3b10c0u, 0xbdffdf00u, 0x3e4c0ae8u, 0xbe425610u, 0x3f2dd18eu, 0xbc3d1700u},
     {0xbfef326e94b8c520ull, 0x3fa76218b5c00840ull, 0x3fc9815dba67b538ull, 0x3fe5ba31e0dfa174ull},
     {0xbbcd, 0xba31, 0x29d9, 0xafff},
     {0xbf7a, 0xbf46, 0x3d3b, 0xbe00}},
    {GeneratorKind::Uniform, 42, 1,
     {0xbef91328u, 0x3cd31e00u, 0xbe916e3cu, 0xbebbc3b4u, 0xbf5d3e36u, 0x3da0c580u, 0xbe95d8b4u, 0x3f374738u},
     {0xbfdf2264b43e59c4ull, 0xbfd22dc75f577878ull, 0xbfeba7c6a75d7ceaull, 0xbfd2bb1606922e34ull},
     {0xb7c9, 0x2699, 0xb48b, 0xb5de},
     {0xbef9, 0x3cd3, 0xbe91, 0xbebc}},
    {GeneratorKind::Normal, 0, 0,
     {0x3f98e8acu, 0x3faed859u, 0x40090ceeu, 0x3f582baau, 0x3ee506b6u, 0x3f17f0e8u, 0x3fd5eb19u, 0x3f90f8adu},
     {0x3ffa377ba0a5424cull, 0x3fe8f45b56ed7749ull, 0x3fe03f52994c2627ull, 0x3fe15e23a25d8476ull},
     {0x3cc7, 0x3d77, 0x4048, 0x3ac1},
     {0x3f99, 0x3faf, 0x4009, 0x3f58}},
    {GeneratorKind::Normal, 0, 1,
     {0x3fc123fdu, 0x3e4c8471u, 0x3f7672e2u, 0x3f424969u, 0x3ea8e7c4u, 0xbf377efbu, 0xbf2fa746u, 0xbf45183bu},
     {0xbff7f839016c57fcull, 0x3fd1384dac07aa35ull, 0xbfe586118a477662ull, 0xbfda6721e96f7c27ull},
     {0x3e09, 0x3264, 0x3bb4, 0x3a12},
     {0x3fc1, 0x3e4d, 0x3f76, 0x3f42}},
    {GeneratorKind::Normal, 42, 0,
     {0x400fa5a6u, 0x3ff6d6d8u, 0xbf86affeu, 0x3edf085fu, 0xbf563dd0u, 0x3f116226u, 0xbf1755dcu, 0x3cafa998u},
     {0xc0076e112d6979abull, 0xbfdb145570b92f23ull, 0x3fe140f84e3d4601ull, 0xbfeb61a26a6d7ecbull},
     {0x407d, 0x3fb7, 0xbc35, 0x36f8},
     {0x4010, 0x3ff7, 0xbf87, 0x3edf}},
    {GeneratorKind::Normal, 42, 1,
     {0xbfd26177u, 0xbe088fdeu, 0xbf152f88u, 0x3fa79fdau, 0xc00ff42eu, 0xbf10f569u, 0x3f679ea6u, 0xbf8fb106u},
     {0xbff08ee463f7ded4ull, 0x3ff48a8fd6075825ull, 0xbff67fc7bafa7ab1ull, 0x3ffd836d10b4f510ull},
     {0xbe93, 0xb044, 0xb8a9, 0x3d3d},
     {0xbfd2, 0xbe09, 0xbf15, 0x3fa8}},
    {GeneratorKind::TruncNormal, 0, 0,
     {0xbf5161c8u, 0xbf837418u, 0xbfab6f59u, 0xbfb40361u, 0x3f2a2f99u, 0xbf7b2bc4u, 0xbf8640acu, 0xbf9ad1e6u},
     {0xbfea2c38a19121a6ull, 0xbff56deaee7dcdb7ull, 0x3fe545f35811109full, 0xbff0c81551d22466ull},
     {0xba8b, 0xbc1c, 0xbd5b, 0xbda0},
     {0xbf51, 0xbf83, 0xbfab, 0xbfb4}},
    {GeneratorKind::TruncNormal, 0, 1,
     {0xbeebefa8u, 0xbfdc1fccu, 0xbd8ab147u, 0xbf93c3a0u, 0x3f16aa4fu, 0x3f5b465au, 0x3e581f5fu, 0x3ea74147u},
     {0xbfdd7df439dc491dull, 0xbfb1562783c26197ull, 0x3fe2d549bef2e209ull, 0x3fcb03ec17bb752bull},
     {0xb75f, 0xbee1, 0xac56, 0xbc9e},
     {0xbeec, 0xbfdc, 0xbd8b, 0xbf94}},
    {GeneratorKind::TruncNormal, 42, 0,
     {0xbfe86138u, 0xbf8fd414u, 0x3d5fe542u, 0xbe199f40u, 0x3e7673d5u, 0xbe6a841eu, 0x3f6e4e3cu, 0xbc62368cu},
     {0xbffd0c269eec22ecull, 0x3fabfca96ebf0299ull, 0x3fcece7ba55e357eull, 0x3fedc9c80a0445c7ull},
     {0xbf43, 0xbc7f, 0x2aff, 0xb0cd},
     {0xbfe8, 0xbf90, 0x3d60, 0xbe1a}},
    {GeneratorKind::TruncNormal, 42, 1,
     {0xbf1e9040u, 0x3cfc98d2u, 0xbeb177a3u, 0xbee85b09u, 0xbfad9221u, 0x3dc09cd0u, 0xbeb7167fu, 0x3f802d1fu},
     {0xbfe3d207b0a52155ull, 0xbfd62ef415023e2eull, 0xbff5b243ddd754d0ull, 0xbfd6e2cf103adcb3ull},
     {0xb8f5, 0x27e5, 0xb58c, 0xb743},
     {0xbf1f, 0x3cfd, 0xbeb1, 0xbee8}},
};

}  // namespace

TEST_CASE("the stream hash of the docs/rng.md example", "[init][rng-vectors]") {
  CHECK(philox::fnv1a32("h.0.attn.weight", 15) == 0xa161ce38u);
}

TEST_CASE("generators reproduce the docs/rng.md vectors bit for bit", "[init][rng-vectors]") {
  // Every kernel: AVX-512 (where the CPU has it), AVX2, scalar. Without
  // AVX-512, level 2 runs AVX2 again: the ctest test unit-cpu-features then
  // reports "Skipped" in the closing summary (CpuFeaturesTest.cpp).
  for (int level : {2, 1, 0}) {
    const bool avx2 = level >= 1;
    setAvx2Allowed(avx2);
    setAvx512Allowed(level == 2);
    INFO("kernel level " << level << ": AVX-512 " << (useAvx512() ? "on" : "off") << ", AVX2 "
                         << (useAvx2() ? "on" : "off"));
    CHECK(useAvx512() == (level == 2 && cpuHasAvx512() && useAvx2()));
    for (const Vector &v : kVectors) {
      GeneratorSpec spec = specOf(v);
      INFO(generatorKindName(v.kind) << " seed " << v.seed << " position " << v.position << " kernel level " << level);
      CHECK(generated<uint32_t, 8>(spec, plan::DType::F32) == std::vector<uint32_t>(v.f32, v.f32 + 8));
      CHECK(generated<uint64_t, 4>(spec, plan::DType::F64) == std::vector<uint64_t>(v.f64, v.f64 + 4));
      CHECK(generated<uint16_t, 4>(spec, plan::DType::F16) == std::vector<uint16_t>(v.f16, v.f16 + 4));
      CHECK(generated<uint16_t, 4>(spec, plan::DType::BF16) == std::vector<uint16_t>(v.bf16, v.bf16 + 4));
    }
  }
  setAvx2Allowed(true);
  setAvx512Allowed(true);
}

TEST_CASE("the float32 uniform recipe by hand from the Philox words", "[init][rng-vectors]") {
  // seed 42, position 0, element 5 = block 1, word 1: counter (1, 0, hash, 0), key (42, 0).
  uint32_t hash = philox::fnv1a32("h.0.attn.weight", 15);
  uint32_t word = philox::philox4x32_10({{1, 0, hash, 0}}, {{42, 0}}).v[1];
  float u = static_cast<float>(word >> 8) * 0x1p-24f;
  float expected = __builtin_fmaf(2.0f, u, -1.0f);
  GeneratorSpec spec = specOf(kVectors[2]);
  float got[8];
  generateRange(spec, plan::DType::F32, 0, 8, got);
  CHECK(std::memcmp(&got[5], &expected, 4) == 0);
}

TEST_CASE("Mamba's dt bias chain reproduces the docs/rng.md vectors bit for bit", "[init][rng-vectors]") {
  // uniform(0, 1) seed 0 position 0, then mul, add, exp, clamp(min 1e-4),
  // inverse_softplus: the chain the exporter writes for Mamba's dt_proj.bias.
  auto chain = [](plan::DType dtype, void *data, int64_t n) {
    GeneratorSpec spec = specOf(kVectors[0]);
    spec.low = 0;
    spec.high = 1;
    generateRange(spec, dtype, 0, n, data);
    applyPointwise(PointwiseKind::Mul, 4.605170185988092, 0, dtype, data, n);
    applyPointwise(PointwiseKind::Add, -6.907755278982137, 0, dtype, data, n);
    applyPointwise(PointwiseKind::Exp, 0, 0, dtype, data, n);
    applyPointwise(PointwiseKind::Clamp, 1e-4, INFINITY, dtype, data, n);
    applyPointwise(PointwiseKind::InverseSoftplus, 0, 0, dtype, data, n);
  };
  const uint32_t wantF32[8] = {0xc0c09ba9u, 0xc0c907bbu, 0xc0d29b90u, 0xc0d437b9u,
                               0xc0596f48u, 0xc0c752a8u, 0xc0c9d122u, 0xc0cf0de5u};
  const uint64_t wantF64[4] = {0xc018137516826b72ull, 0xc01a5371f0ffaacaull,
                               0xc00b2de8ee26ba24ull, 0xc0193a241a0a6e7bull};
  for (int level : {2, 1, 0}) {  // the generator's kernels; the transcendental ops are scalar
    setAvx2Allowed(level >= 1);
    setAvx512Allowed(level == 2);
    INFO("kernel level " << level);
    uint32_t f32[8];
    uint64_t f64[4];
    chain(plan::DType::F32, f32, 8);
    chain(plan::DType::F64, f64, 4);
    CHECK(std::vector<uint32_t>(f32, f32 + 8) == std::vector<uint32_t>(wantF32, wantF32 + 8));
    CHECK(std::vector<uint64_t>(f64, f64 + 4) == std::vector<uint64_t>(wantF64, wantF64 + 4));
  }
  setAvx2Allowed(true);
  setAvx512Allowed(true);
}
