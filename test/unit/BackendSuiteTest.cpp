// The backend suite (BackendSuite.h): one world-size-1 plan per op of the
// op table, run through the executor core on every backend under test.
// Each run must match the CPU backend (bit for bit for init ops, invariant
// 2; within a dtype's tolerance for forward ops), and its measured init and
// forward peaks and live-at-peak lists must equal MemoryModel's prediction.
// An op in a backend's unsupported list must instead fail naming the op.
// A last case checks that the suite covers every op in the table.
#include "BackendSuite.h"

#include "runtime/CpuBackend.h"
#include "runtime/DeterministicInput.h"
#include "runtime/Executor.h"
#include "runtime/HalfFloat.h"
#include "runtime/InitOps.h"
#include "runtime/Kernels.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/OpRules.h"
#include "runtime/RuntimeError.h"
#include "runtime/Safetensors.h"
#include "runtime/checkpoint/LoadPlan.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <tuple>
#include <unistd.h>

namespace shardc::test::suite {

using namespace shardc::plan;
using runtime::HostTensor;

SuiteRun runSuitePlan(const BackendUnderTest &under, const Plan &plan,
                      const std::vector<HostTensor> &inputs, uint64_t seed) {
  BackendInstance instance = under.make();
  runtime::RankState state(0);
  SuiteRun run;
  try {
    runtime::runFunction(plan, "init", *instance.backend, *instance.comm, state, {}, seed,
                         "suite");
    run.initPeak = instance.device->peakBytes();
    run.initLiveAtPeak = instance.device->liveAtPeak();
    state.releaseFunctionBuffers();
    instance.device->resetPeak();  // params only, as predictMemory's carriedIn
    for (const runtime::TensorView &view :
         runtime::runFunction(plan, "forward", *instance.backend, *instance.comm, state, inputs,
                              seed, "suite")) {
      HostTensor t{view.name, view.dtype, view.shape, {}};
      t.data.resize(static_cast<size_t>(t.expectedBytes()));
      instance.backend->copyToHost(t.data.data(), view.data, t.data.size());
      run.outputs.push_back(std::move(t));
    }
    run.forwardPeak = instance.device->peakBytes();
    run.forwardLiveAtPeak = instance.device->liveAtPeak();
  } catch (...) {
    state.releaseAll();
    throw;
  }
  state.releaseAll();
  return run;
}

namespace {

// ---- plans -----------------------------------------------------------------

/// One case: a world-size-1 plan, its forward inputs, and how close a
/// backend's outputs must be to the CPU backend's (0: bit for bit).
struct SuiteCase {
  std::string name;
  Plan plan;
  std::vector<HostTensor> inputs;
  double tolerance = 0;
};

Plan emptyPlan() {
  Plan plan;
  plan.worldSize = 1;
  plan.functions.resize(2);
  plan.functions[0].name = "init";
  plan.functions[1].name = "forward";
  return plan;
}

int32_t addBuffer(Function &f, const std::string &name, DType dtype, std::vector<int64_t> shape,
                  Category category, std::optional<int32_t> param = std::nullopt) {
  const int32_t id = static_cast<int32_t>(f.buffers.size());
  const int64_t bytes = numElements(shape) * dtypeSize(dtype);
  f.buffers.push_back({id, name, dtype, std::move(shape), bytes, category, param});
  return id;
}

void emit(Function &f, OpCode op, std::vector<int32_t> in, std::vector<int32_t> out,
          std::map<std::string, AttrValue> attrs = {}) {
  f.body.push_back({op, std::move(in), std::move(out), std::move(attrs),
                    "suite:" + std::to_string(f.body.size())});
}

double tolerance(DType dtype) {
  return dtype == DType::BF16 ? 2e-2 : dtype == DType::F16 ? 3e-3 : dtype == DType::F64 ? 1e-12 : 2e-4;
}

/// forward(inputs) = op(inputs) into one fresh activation `out`.
SuiteCase forwardCase(std::string name, OpCode op, std::vector<HostTensor> inputs,
                      DType outDtype, std::vector<int64_t> outShape,
                      std::map<std::string, AttrValue> attrs = {}) {
  SuiteCase c{std::move(name), emptyPlan(), std::move(inputs), tolerance(outDtype)};
  Function &f = c.plan.functions[1];
  std::vector<int32_t> ins;
  for (const HostTensor &t : c.inputs) {
    ins.push_back(addBuffer(f, t.name, t.dtype, t.shape, Category::IO));
    f.inputs.push_back(ins.back());
  }
  const int32_t out = addBuffer(f, "out", outDtype, std::move(outShape), Category::Activation);
  emit(f, OpCode::Alloc, {}, {out});
  emit(f, op, ins, {out}, std::move(attrs));
  f.outputs = {out};
  return c;
}

/// A param `p` sharded at N = 1, initialised by `chain` (instructions on
/// its buffer id 0); forward all-gathers it and returns the full tensor.
SuiteCase initCase(std::string name, DType dtype, std::vector<int64_t> shape,
                   const std::function<void(Plan &, Function &, int32_t)> &chain) {
  SuiteCase c{std::move(name), emptyPlan(), {}, 0.0};
  Param p;
  p.name = "p";
  p.dtype = dtype;
  p.shape = shape;
  p.device = "cpu";
  p.chunkRows = shape.empty() ? 0 : shape[0];
  c.plan.params.push_back(p);
  Function &init = c.plan.functions[0];
  const int32_t storage =
      addBuffer(init, "p", dtype, p.localShape(), Category::Parameter, int32_t{0});
  chain(c.plan, init, storage);
  Function &f = c.plan.functions[1];
  const int32_t shard = addBuffer(f, "p", dtype, p.localShape(), Category::Parameter, int32_t{0});
  const int32_t full = addBuffer(f, "p.gathered", dtype, shape, Category::Gathered);
  emit(f, OpCode::Alloc, {}, {full});
  emit(f, OpCode::AllGather, {shard}, {full});
  f.outputs = {full};
  return c;
}

HostTensor input(const std::string &name, DType dtype, std::vector<int64_t> shape,
                 std::optional<int64_t> bound = std::nullopt) {
  return runtime::makeDeterministicInput(name, dtype, shape, 7, bound);
}

/// An optimizer step: param `p` [4, 3] (random) with `states` state
/// params (random moments: exp_avg of either sign, exp_avg_sq positive)
/// and, for adamw_step, a step count of 3; forward updates them in place
/// from the gradient input `g` once, then returns p and its first state.
/// With `clip`, the step first clips `g` by its norm (grad_norm).
SuiteCase optimizerCase(std::string name, DType dtype, OpCode op, int states,
                        std::map<std::string, AttrValue> attrs, bool clip = false) {
  SuiteCase c{std::move(name), emptyPlan(), {input("g", dtype, {4, 3})}, tolerance(dtype)};
  Function &init = c.plan.functions[0], &f = c.plan.functions[1];
  std::vector<int32_t> stored;  // forward's buffer of each param
  auto addParam = [&](const std::string &param, std::vector<int64_t> shape, bool isBuffer,
                      const char *kind, double low) {
    Param p;
    p.name = param;
    p.dtype = isBuffer ? DType::F32 : dtype;
    p.shape = shape;
    p.device = "cpu";
    p.isBuffer = isBuffer;
    p.chunkRows = isBuffer ? 0 : shape[0];
    const int32_t index = static_cast<int32_t>(c.plan.params.size());
    c.plan.params.push_back(p);
    const int32_t id =
        addBuffer(init, param, p.dtype, p.localShape(), Category::Parameter, index);
    emit(init, OpCode::Alloc, {}, {id});
    if (std::string(kind) == "fill") {
      emit(init, OpCode::Fill, {}, {id}, {{"value", low}});
    } else {
      std::map<std::string, AttrValue> generate{{"kind", std::string(kind)},
                                                {"stream", param},
                                                {"position", int64_t{0}},
                                                {"low", low},
                                                {"high", 1.0}};
      emit(init, OpCode::Generate, {}, {id}, generate);
    }
    stored.push_back(addBuffer(f, param, p.dtype, p.localShape(), Category::Parameter, index));
  };
  addParam("p", {4, 3}, false, "uniform", -1.0);
  for (int s = 0; s < states; ++s)
    addParam("optim.state" + std::to_string(s) + ".p", {4, 3}, false, "uniform",
             s == 0 ? -1.0 : 0.0);
  // AdamW's step count, and a scheduled SGD's.
  if (op == OpCode::AdamwStep || attrs.count("warmup_steps"))
    addParam("optim.step", {}, true, "fill", 3.0);
  const int32_t g = addBuffer(f, "g", dtype, {4, 3}, Category::IO);
  f.inputs = {g};
  std::vector<int32_t> operands{stored[0], g};
  operands.insert(operands.end(), stored.begin() + 1, stored.end());
  if (clip) {  // the gradients' norm first (grad_norm), then the clipped step
    const int32_t norm = addBuffer(f, "norm", DType::F64, {}, Category::Activation);
    emit(f, OpCode::Alloc, {}, {norm});
    emit(f, OpCode::GradNorm, {g}, {norm});
    operands.push_back(norm);
    attrs["max_grad_norm"] = 0.5;  // below the gradient's norm: it clips
  }
  emit(f, op, operands, {stored[0]}, std::move(attrs));
  for (int k = 0; k < std::min(states, 1) + 1; ++k) {
    const int32_t out = addBuffer(f, "out" + std::to_string(k), dtype, {4, 3}, Category::Gathered);
    emit(f, OpCode::Alloc, {}, {out});
    emit(f, OpCode::AllGather, {stored[k]}, {out});
    f.outputs.push_back(out);
  }
  return c;
}

/// Element i of a float tensor set to v (rounded to its dtype).
void setFloat(HostTensor &t, int64_t i, float v) {
  switch (t.dtype) {
  case DType::F32: t.as<float>()[i] = v; break;
  case DType::F64: t.as<double>()[i] = v; break;
  case DType::BF16: t.as<uint16_t>()[i] = runtime::floatToBFloat16Bits(v); break;
  case DType::F16: t.as<uint16_t>()[i] = runtime::floatToHalfBits(v); break;
  default: throw std::logic_error("setFloat: not a float dtype");
  }
}

/// Values from {-2, ..., 2} (exact in every float dtype) with a NaN every
/// 11th element unless `nans` is false: rows full of ties, as a router's
/// rounded scores have, where topk's (and argmax's) choice among equal
/// values shows.
HostTensor tiedInput(const std::string &name, DType dtype, std::vector<int64_t> shape,
                     bool nans = true) {
  HostTensor t{name, dtype, shape, {}};
  t.data.resize(static_cast<size_t>(t.expectedBytes()));
  for (int64_t i = 0; i < t.numElements(); ++i)
    setFloat(t, i, nans && i % 11 == 3 ? std::nanf("") : static_cast<float>((i * 7) % 5 - 2));
  return t;
}

/// An additive attention mask over scores [B, H, T, S] (any dim may be 1):
/// 0 for allowed keys, -inf for padded ones (key s >= 4 + b, a padded
/// batch) and for every key of query row 2 of sample 0 when T > 2 (a fully
/// padded row, which gives zeros).
HostTensor paddingMask(DType dtype, std::vector<int64_t> shape) {
  HostTensor t{"mask", dtype, shape, {}};
  t.data.resize(static_cast<size_t>(t.expectedBytes()));
  const int64_t H = shape[1], T = shape[2], S = shape[3];
  for (int64_t i = 0; i < t.numElements(); ++i) {
    const int64_t s = i % S, tq = i / S % T, b = i / (S * T * H);
    const bool padded = s >= 4 + b || (b == 0 && T > 2 && tq == 2);
    setFloat(t, i, padded ? -INFINITY : 0.0f);
  }
  return t;
}

std::map<std::string, AttrValue> stream(const char *kind, int64_t position = 0) {
  return {{"kind", std::string(kind)}, {"stream", std::string("p")}, {"position", position}};
}

/// A safetensors file for the `load` case, removed with the process.
std::string checkpointFile() {
  static const std::string path = [] {
    const std::string file = (std::filesystem::temp_directory_path() /
                              ("shardc-suite-" + std::to_string(getpid()) + ".safetensors"))
                                 .string();
    runtime::writeSafetensors(file, {input("w", DType::F32, {5, 3})});
    std::atexit([] { std::filesystem::remove(std::filesystem::temp_directory_path() /
                                             ("shardc-suite-" + std::to_string(getpid()) +
                                              ".safetensors")); });
    return file;
  }();
  return path;
}

/// An int64 tensor holding `values`.
HostTensor indices(const std::string &name, std::vector<int64_t> shape,
                   const std::vector<int64_t> &values) {
  HostTensor t{name, DType::I64, std::move(shape), {}};
  t.data.resize(static_cast<size_t>(t.expectedBytes()));
  REQUIRE(static_cast<int64_t>(values.size()) == t.numElements());
  std::copy(values.begin(), values.end(), t.as<int64_t>());
  return t;
}

std::vector<SuiteCase> suiteCases() {
  std::vector<SuiteCase> cases;
  // ---- init: generators, pointwise chains, orthogonal + scatter, load ----
  for (DType dt : {DType::F32, DType::BF16, DType::F16, DType::F64}) {
    const std::string d = std::string(" ") + dtypeName(dt);
    cases.push_back(initCase("fill" + d, dt, {5, 3}, [](Plan &, Function &f, int32_t p) {
      emit(f, OpCode::Alloc, {}, {p});
      emit(f, OpCode::Fill, {}, {p}, {{"value", 0.3}});
    }));
    for (const char *kind : {"uniform", "normal", "trunc_normal", "eye", "arange", "fill"})
      cases.push_back(initCase(std::string("generate ") + kind + d, dt, {7, 5},
                               [kind](Plan &, Function &f, int32_t p) {
                                 auto attrs = stream(kind, 3);
                                 attrs.insert({{"low", -2.0}, {"high", 1.5}, {"mean", 0.1},
                                               {"std", 0.7}, {"start", -1.0}, {"step", 0.25},
                                               {"value", 0.5}});
                                 emit(f, OpCode::Alloc, {}, {p});
                                 emit(f, OpCode::Generate, {}, {p}, attrs);
                               }));
    cases.push_back(initCase("generate with index_map (transpose)" + d, dt, {4, 6},
                             [](Plan &, Function &f, int32_t p) {
                               auto attrs = stream("normal");
                               attrs.insert({{"mean", 0.0}, {"std", 1.0}});
                               attrs["source_shape"] = std::vector<int64_t>{6, 4};
                               attrs["index_map"] = std::vector<int64_t>{2, 2, 0, 1, 2, 0, 0};
                               emit(f, OpCode::Alloc, {}, {p});
                               emit(f, OpCode::Generate, {}, {p}, attrs);
                             }));
    // A corner of a larger source (the identity map), and a map through
    // floordiv/mod/ceildiv arithmetic (a reshape of a transposed source).
    cases.push_back(initCase("generate a slice of a larger source" + d, dt, {5, 3},
                             [](Plan &, Function &f, int32_t p) {
                               auto attrs = stream("uniform", 2);
                               attrs.insert({{"low", -1.0}, {"high", 1.0}});
                               attrs["source_shape"] = std::vector<int64_t>{9, 7};
                               emit(f, OpCode::Alloc, {}, {p});
                               emit(f, OpCode::Generate, {}, {p}, attrs);
                             }));
    // Output [6, 4] element (i, j), flat f = 4i + j, reads source [8, 3]
    // element (f mod 8, f floordiv 8 + (j ceildiv 4) * 0).
    cases.push_back(initCase("generate with index_map (floordiv, mod, ceildiv)" + d, dt, {6, 4},
                             [](Plan &, Function &f, int32_t p) {
                               auto attrs = stream("normal", 5);
                               attrs.insert({{"mean", 0.0}, {"std", 1.0}});
                               attrs["source_shape"] = std::vector<int64_t>{8, 3};
                               attrs["index_map"] = std::vector<int64_t>{
                                   2,
                                   // (4 * d0 + d1) mod 8
                                   11, 1, 4, 0, 0, 3, 0, 1, 2, 1, 8, 5,
                                   // (4 * d0 + d1) floordiv 8 + d1 ceildiv 4 * 0
                                   20, 1, 4, 0, 0, 3, 0, 1, 2, 1, 8, 4, 0, 1, 1, 4, 6, 1, 0, 3, 2};
                               emit(f, OpCode::Alloc, {}, {p});
                               emit(f, OpCode::Generate, {}, {p}, attrs);
                             }));
    cases.push_back(initCase("pointwise chain" + d, dt, {6, 4}, [](Plan &, Function &f, int32_t p) {
      auto attrs = stream("uniform");
      attrs.insert({{"low", 0.05}, {"high", 0.95}});
      emit(f, OpCode::Alloc, {}, {p});
      emit(f, OpCode::Generate, {}, {p}, attrs);
      emit(f, OpCode::MulScalar, {p}, {p}, {{"value", 2.0}});
      emit(f, OpCode::SubScalar, {p}, {p}, {{"value", 1.0}});
      emit(f, OpCode::Clamp, {p}, {p}, {{"min", -0.9}, {"max", 0.9}});
      emit(f, OpCode::Erfinv, {p}, {p});
      emit(f, OpCode::Neg, {p}, {p});
      emit(f, OpCode::AddScalar, {p}, {p}, {{"value", 3.0}});
      emit(f, OpCode::DivScalar, {p}, {p}, {{"value", 4.0}});
      emit(f, OpCode::Sqrt, {p}, {p});
    }));
    // Mamba's dt bias, then log and expm1: the ops computed in double.
    cases.push_back(initCase("transcendental pointwise chain" + d, dt, {6, 4},
                             [](Plan &, Function &f, int32_t p) {
                               auto attrs = stream("uniform");
                               attrs.insert({{"low", 0.0}, {"high", 1.0}});
                               emit(f, OpCode::Alloc, {}, {p});
                               emit(f, OpCode::Generate, {}, {p}, attrs);
                               emit(f, OpCode::MulScalar, {p}, {p}, {{"value", 4.6}});
                               emit(f, OpCode::AddScalar, {p}, {p}, {{"value", -6.9}});
                               emit(f, OpCode::InitExp, {p}, {p});
                               emit(f, OpCode::InverseSoftplus, {p}, {p});
                               emit(f, OpCode::Neg, {p}, {p});
                               emit(f, OpCode::InitLog, {p}, {p});
                               emit(f, OpCode::InitExpm1, {p}, {p});
                             }));
  }
  cases.push_back(initCase("orthogonal + scatter float32", DType::F32, {6, 4},
                           [](Plan &, Function &f, int32_t p) {
                             const int32_t full =
                                 addBuffer(f, "p.full", DType::F32, {6, 4}, Category::Activation);
                             emit(f, OpCode::Alloc, {}, {p});
                             emit(f, OpCode::Alloc, {}, {full});
                             auto attrs = stream("normal");
                             attrs.erase("kind");
                             attrs["gain"] = 1.5;
                             emit(f, OpCode::Orthogonal, {}, {full}, attrs);
                             emit(f, OpCode::Scatter, {full}, {p}, {{"root", int64_t{0}}});
                             emit(f, OpCode::Free, {full}, {});
                           }));
  cases.push_back(initCase("norm_of a generated param float32", DType::F32, {1, 3},
                           [](Plan &plan, Function &f, int32_t p) {
                             Param v;
                             v.name = "v";
                             v.dtype = DType::F32;
                             v.shape = {5, 3};
                             v.device = "cpu";
                             v.chunkRows = 5;
                             plan.params.push_back(v);
                             const int32_t vb = addBuffer(f, "v", DType::F32, {5, 3},
                                                          Category::Parameter, int32_t{1});
                             auto attrs = stream("normal");
                             attrs["stream"] = std::string("v");
                             attrs.insert({{"mean", 0.0}, {"std", 1.0}});
                             emit(f, OpCode::Alloc, {}, {vb});
                             emit(f, OpCode::Generate, {}, {vb}, attrs);
                             emit(f, OpCode::MulScalar, {vb}, {vb}, {{"value", 2.0}});
                             emit(f, OpCode::Alloc, {}, {p});
                             emit(f, OpCode::NormOf, {}, {p},
                                  {{"source", std::string("v")},
                                   {"dims", std::vector<int64_t>{0}}});
                           }));
  cases.push_back(initCase("load float32 into bfloat16", DType::BF16, {5, 3},
                           [](Plan &, Function &f, int32_t p) {
                             const int32_t io = addBuffer(f, runtime::checkpoint::kIoBufferName,
                                                          DType::F32, {4}, Category::IO);
                             emit(f, OpCode::Alloc, {}, {p});
                             emit(f, OpCode::Alloc, {}, {io});
                             emit(f, OpCode::Load, {io}, {p},
                                  {{"file", checkpointFile()}, {"tensor", std::string("w")}});
                             emit(f, OpCode::Free, {io}, {});
                           }));
  // ---- init: fill_rows (nn.Embedding's padding_idx row) ----
  for (DType dt : {DType::F32, DType::BF16}) {
    cases.push_back(initCase(std::string("fill_rows ") + dtypeName(dt), dt, {6, 4},
                             [](Plan &, Function &f, int32_t p) {
                               auto attrs = stream("normal");
                               attrs.insert({{"mean", 0.0}, {"std", 1.0}});
                               emit(f, OpCode::Alloc, {}, {p});
                               emit(f, OpCode::Generate, {}, {p}, attrs);
                               emit(f, OpCode::FillRows, {p}, {p},
                                    {{"value", -2.5}, {"start", int64_t{2}},
                                     {"end", int64_t{4}}});
                             }));
  }
  // ---- forward ----
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    const std::string d = std::string(" ") + dtypeName(dt);
    if (dt != DType::F16)
      for (OpCode op : {OpCode::Add, OpCode::Sub, OpCode::Mul, OpCode::Div})
        cases.push_back(forwardCase(std::string(opName(op)) + " broadcast" + d, op,
                                    {input("a", dt, {4, 1, 9}), input("b", dt, {5, 1})}, dt,
                                    {4, 5, 9}));
    cases.push_back(forwardCase("linear" + d, OpCode::Linear,
                                {input("x", dt, {3, 5, 16}), input("w", dt, {12, 16}),
                                 input("b", dt, {12})},
                                dt, {3, 5, 12}));
    cases.push_back(forwardCase("matmul broadcast" + d, OpCode::Matmul,
                                {input("a", dt, {2, 3, 7, 8}), input("b", dt, {3, 8, 5})}, dt,
                                {2, 3, 7, 5}));
    // Operands stored transposed, read in place (a lowered-out transpose).
    cases.push_back(forwardCase("matmul transpose_a" + d, OpCode::Matmul,
                                {input("a", dt, {2, 3, 8, 7}), input("b", dt, {3, 8, 5})}, dt,
                                {2, 3, 7, 5}, {{"transpose_a", int64_t{1}}}));
    cases.push_back(forwardCase("matmul transpose_b" + d, OpCode::Matmul,
                                {input("a", dt, {2, 3, 7, 8}), input("b", dt, {3, 5, 8})}, dt,
                                {2, 3, 7, 5}, {{"transpose_b", int64_t{1}}}));
    cases.push_back(forwardCase("matmul transpose_a transpose_b" + d, OpCode::Matmul,
                                {input("a", dt, {8, 7}), input("b", dt, {2, 5, 8})}, dt, {2, 7, 5},
                                {{"transpose_a", int64_t{1}}, {"transpose_b", int64_t{1}}}));
    cases.push_back(forwardCase("gelu tanh" + d, OpCode::Gelu, {input("x", dt, {9, 7})}, dt,
                                {9, 7}, {{"approximate", std::string("tanh")}}));
    cases.push_back(forwardCase("gelu" + d, OpCode::Gelu, {input("x", dt, {9, 7})}, dt, {9, 7}));
    cases.push_back(forwardCase("silu" + d, OpCode::Silu, {input("x", dt, {9, 7})}, dt, {9, 7}));
    cases.push_back(forwardCase("relu" + d, OpCode::Relu, {input("x", dt, {9, 7})}, dt, {9, 7}));
    cases.push_back(forwardCase("layer_norm" + d, OpCode::LayerNorm,
                                {input("x", dt, {6, 40}), input("w", dt, {40}), input("b", dt, {40})},
                                dt, {6, 40}, {{"eps", 1e-5}}));
    cases.push_back(forwardCase("rms_norm" + d, OpCode::RmsNorm,
                                {input("x", dt, {6, 40}), input("w", dt, {40})}, dt, {6, 40},
                                {{"eps", 1e-6}}));
    cases.push_back(forwardCase("softmax dim 1" + d, OpCode::Softmax, {input("x", dt, {4, 9, 5})},
                                dt, {4, 9, 5}, {{"dim", int64_t{1}}}));
    cases.push_back(forwardCase("sdpa causal" + d, OpCode::Sdpa,
                                {input("q", dt, {2, 2, 6, 8}), input("k", dt, {2, 2, 6, 8}),
                                 input("v", dt, {2, 2, 6, 4})},
                                dt, {2, 2, 6, 4}, {{"causal", int64_t{1}}}));
    // A padded batch: one mask row per query (with a fully padded row), one
    // per sample broadcast over queries, and a float bias per head.
    for (std::vector<int64_t> maskShape : {std::vector<int64_t>{2, 1, 6, 6}, {2, 1, 1, 6}})
      cases.push_back(forwardCase("sdpa mask " + runtime::shapeToString(maskShape) + d, OpCode::Sdpa,
                                  {input("q", dt, {2, 2, 6, 8}), input("k", dt, {2, 2, 6, 8}),
                                   input("v", dt, {2, 2, 6, 4}), paddingMask(dt, maskShape)},
                                  dt, {2, 2, 6, 4}));
    cases.push_back(forwardCase("sdpa bias causal" + d, OpCode::Sdpa,
                                {input("q", dt, {2, 2, 6, 8}), input("k", dt, {2, 2, 6, 8}),
                                 input("v", dt, {2, 2, 6, 4}), input("bias", dt, {1, 2, 6, 6})},
                                dt, {2, 2, 6, 4}, {{"causal", int64_t{1}}}));
    // Grouped-query attention: 6 query heads read 2 key / value heads in place.
    cases.push_back(forwardCase("sdpa grouped heads causal" + d, OpCode::Sdpa,
                                {input("q", dt, {2, 6, 6, 8}), input("k", dt, {2, 2, 6, 8}),
                                 input("v", dt, {2, 2, 6, 4}), paddingMask(dt, {2, 1, 1, 6})},
                                dt, {2, 6, 6, 4}, {{"causal", int64_t{1}}}));
    cases.push_back(forwardCase("rope" + d, OpCode::Rope, {input("x", dt, {1, 2, 5, 8})}, dt,
                                {1, 2, 5, 8}, {{"theta", 10000.0}}));
    cases.push_back(forwardCase("strided_copy transpose" + d, OpCode::StridedCopy,
                                {input("x", dt, {4, 6})}, dt, {6, 4},
                                {{"strides", std::vector<int64_t>{1, 6}}}));
    cases.push_back(forwardCase("cat dim 1" + d, OpCode::Cat,
                                {input("a", dt, {3, 2}), input("b", dt, {3, 5})}, dt, {3, 7},
                                {{"dim", int64_t{1}}}));
    cases.push_back(forwardCase("embedding" + d, OpCode::Embedding,
                                {input("w", dt, {11, 6}), input("ids", DType::I64, {2, 3}, 11)},
                                dt, {2, 3, 6}));
  }
  cases.push_back(forwardCase("cross_entropy float32", OpCode::CrossEntropy,
                              {input("logits", DType::F32, {4, 7}),
                               input("targets", DType::I64, {4}, 7)},
                              DType::F32, {}, {{"ignore_index", int64_t{-100}}}));
  // Rows wider than a block of threads, and more rows than one pass of a
  // backend's row buffer (CudaLoss.cu: 65532), some ignored.
  cases.push_back(forwardCase("cross_entropy 5000 classes float32", OpCode::CrossEntropy,
                              {input("logits", DType::F32, {3, 5000}),
                               input("targets", DType::I64, {3}, 5000)},
                              DType::F32, {}, {{"ignore_index", int64_t{-100}}}));
  cases.push_back(forwardCase("cross_entropy 70000 rows ignore_index 2 float32",
                              OpCode::CrossEntropy,
                              {input("logits", DType::F32, {70000, 3}),
                               input("targets", DType::I64, {70000}, 3)},
                              DType::F32, {}, {{"ignore_index", int64_t{2}}}));
  // ---- the op families (SHARDC_FAMILY_OP): one case per op and dtype, the
  // output type from the family's rule (runtime/OpRules.h) ----
  for (DType dt : {DType::F32, DType::BF16}) {
    for (const OpInfo &info : allOps()) {
      if (!info.generic()) continue;
      std::vector<HostTensor> in;
      std::map<std::string, AttrValue> attrs;
      using L = std::vector<int64_t>;
      switch (info.family) {
      case OpFamily::Conv:  // grouped, strided, padded, with bias
        attrs = {{"stride", L{2, 2}}, {"padding", L{1, 1}}, {"dilation", L{1, 1}},
                 {"groups", int64_t{2}}};
        if (static_cast<runtime::ConvKind>(info.variant) == runtime::ConvKind::WeightGrad) {
          // that convolution's weight gradient: x and its output's gradient
          in = {input("x", dt, {2, 4, 7, 7}), input("g", dt, {2, 6, 4, 4})};
          attrs["kernel"] = L{3, 3};
          break;
        }
        in = {input("x", dt, {2, 4, 7, 7}), input("w", dt, {6, 2, 3, 3}), input("b", dt, {6})};
        break;
      case OpFamily::Pool:
        in = {input("x", dt, {2, 3, 7, 7})};
        attrs = {{"kernel", L{3, 3}}, {"stride", L{2, 2}}, {"padding", L{1, 1}}};
        if (info.code == OpCode::MaxPoolBackward)  // and that pool's output gradient
          in.push_back(input("g", dt, {2, 3, 4, 4}));
        break;
      case OpFamily::AdaptivePool:
        in = {input("x", dt, {2, 3, 7, 5})};
        attrs = {{"output_size", L{3, 2}}};
        break;
      case OpFamily::BatchNorm:  // eps keeps var + eps positive for these inputs
        in = {input("x", dt, {2, 3, 4, 5}), input("mean", dt, {3}), input("var", dt, {3}),
              input("w", dt, {3}), input("b", dt, {3})};
        attrs = {{"eps", 8.0}};
        break;
      case OpFamily::GroupNorm:
        in = {input("x", dt, {2, 6, 5}), input("w", dt, {6}), input("b", dt, {6})};
        attrs = {{"groups", int64_t{3}}, {"eps", 1e-5}};
        break;
      case OpFamily::Reduce:
        in = {input("x", dt, {3, 4, 5})};
        attrs = {{"dims", L{1}}};
        break;
      case OpFamily::Unary:
        in = {input("x", dt, {9, 7})};
        if (info.attr("min")) attrs = {{"min", -0.5}, {"max", 0.5}};
        if (info.attr("exponent")) attrs = {{"exponent", 3.0}};
        if (info.attr("negative_slope")) attrs = {{"negative_slope", 0.2}};
        break;
      case OpFamily::View:  // negative and positive strides, an offset
        in = {input("x", dt, {4, 5})};
        attrs = {{"size", L{3, 2, 2}}, {"stride", L{-5, 1, 2}}, {"offset", int64_t{12}}};
        break;
      case OpFamily::Experts:  // 5 tokens, 2 of 3 experts each (I = 6, H = 8)
        in = {input("x", dt, {5, 8}), input("i", DType::I64, {5, 2}, 3), input("w", dt, {5, 2}),
              input("gate_up", dt, {3, 12, 8}), input("down", dt, {3, 8, 6})};
        if (info.code == OpCode::MoeExpertsHidden) {  // x, index, gate_up
          in = {in[0], in[1], in[3]};
          break;
        }
        if (info.code == OpCode::MoeExpertsGatedGrad) {  // grad, index, down
          in = {input("g", dt, {5, 8}), in[1], in[4]};
          break;
        }
        if (info.code == OpCode::MoeExpertsBackward) {  // the other wrt below
          in.push_back(input("g", dt, {5, 8}));
          attrs = {{"wrt", std::string("gate_up")}, {"activation", std::string("gelu")}};
        }
        break;
      case OpFamily::Index:  // topk along the last dim; gather along dim 0, index smaller;
                             // embedding_backward; cross_entropy_backward
        if (info.code == OpCode::TopK) {
          in = {input("x", dt, {4, 9})};
          attrs = {{"k", int64_t{3}}, {"dim", int64_t{-1}}};
        } else if (info.code == OpCode::EmbeddingBackward) {  // 7 rows into 4, row 1 kept 0
          in = {input("src", dt, {7, 5}), input("i", DType::I64, {7}, 4)};
          attrs = {{"rows", int64_t{4}}, {"padding_idx", int64_t{1}}};
        } else if (info.code == OpCode::CrossEntropyBackward) {  // 6 rows of 9 classes
          in = {input("logits", dt, {6, 9}), input("t", DType::I64, {6}, 9)};
        } else {
          in = {input("x", dt, {4, 5}), input("i", DType::I64, {6, 3}, 4)};
          attrs = {{"dim", int64_t{0}}};
        }
        break;
      case OpFamily::LossHead:  // 6 rows of 8 into 9 classes; the weight's gradient
        in = {input("x", dt, {6, 8}), input("t", DType::I64, {6}, 9), input("w", dt, {9, 8})};
        if (info.code == OpCode::LinearCrossEntropyBackward) {
          in.push_back(input("scale", dt, {6, 1}));
          attrs = {{"wrt", std::string("weight")}};
        }
        break;
      case OpFamily::Attention:  // k's gradient, 4 query heads reading 2, causal, a mask
        in = {input("q", dt, {2, 4, 5, 8}), input("k", dt, {2, 2, 6, 8}),
              input("v", dt, {2, 2, 6, 4}), input("g", dt, {2, 4, 5, 4}),
              input("mask", dt, {2, 1, 1, 6})};
        attrs = {{"wrt", std::string("k")}, {"scale", 0.35}, {"causal", int64_t{1}}};
        break;
      case OpFamily::Compare:  // ties and NaNs (tiedInput), broadcast
        in = {tiedInput("a", dt, {4, 1, 9}), tiedInput("b", dt, {3, 1})};
        break;
      case OpFamily::Where:  // a [4, 1] condition over [4, 9] and [9], NaNs copied
        in = {input("c", DType::I64, {4, 1}, 2), tiedInput("a", dt, {4, 9}),
              tiedInput("b", dt, {9})};
        break;
      case OpFamily::Cast:  // to int64: truncation, and NaN's INT64_MIN
        in = {tiedInput("x", dt, {9, 7})};
        attrs = {{"dtype", std::string("int64")}};
        break;
      case OpFamily::Scan:
        in = {input("x", dt, {3, 4, 5})};
        attrs = {{"dim", int64_t{1}}};
        break;
      case OpFamily::Sample:  // positions in [-1, 1]: between pixels and at the edges
        in = {input("x", dt, {2, 3, 5, 6}), input("grid", dt, {2, 4, 3, 2})};
        if (info.code == OpCode::GridSampleBackward) {  // and that sampling's gradient
          in.push_back(input("g", dt, {2, 3, 4, 3}));
          attrs = {{"wrt", std::string("input")}};
        }
        break;
      case OpFamily::Random: {  // dropout at step 5, a data-parallel rank's offset
        HostTensor step{"step", DType::F32, {}, {}};
        step.data.resize(4);
        setFloat(step, 0, 5.0f);
        in = {input("x", dt, {7, 9}), step};
        attrs = {{"p", 0.3},
                 {"stream", int64_t{0x9e3779b9}},
                 {"global_rows", int64_t{21}},
                 {"row_elements", int64_t{9}}};
        break;
      }
      case OpFamily::AllReduce:  // one rank here: the gathered copy summed alone
        in = {input("x", dt, {5, 7})};
        break;
      case OpFamily::None: break;
      }
      std::vector<runtime::TensorType> types;
      for (const HostTensor &t : in) types.push_back({t.shape, t.dtype});
      const runtime::TensorType out = runtime::resultType(info, types, attrs);
      cases.push_back(forwardCase(std::string(info.name) + " " + dtypeName(dt), info.code,
                                  std::move(in), out.dtype, out.shape, std::move(attrs)));
      if (out.dtype == DType::I64) cases.back().tolerance = 0;  // indices: exact
    }
  }
  // ---- the families' other paths (a backend may take another kernel for
  // each: depthwise, transposed, 1-d, all dims, keepdim, ...), float32 ----
  auto familyCase = [&](std::string name, OpCode op, std::vector<HostTensor> in,
                        std::map<std::string, AttrValue> attrs) {
    std::vector<runtime::TensorType> types;
    for (const HostTensor &t : in) types.push_back({t.shape, t.dtype});
    const runtime::TensorType out = runtime::resultType(opInfo(op), types, attrs);
    cases.push_back(forwardCase(std::move(name) + " float32", op, std::move(in), out.dtype,
                                out.shape, std::move(attrs)));
    if (out.dtype == DType::I64) cases.back().tolerance = 0;
  };
  using L = std::vector<int64_t>;
  const DType f = DType::F32;
  // int64 values: position ids from token ids (RoBERTa's ne, cumsum, mul, add)
  const DType i64 = DType::I64;
  familyCase("ne int64 scalar", OpCode::Ne, {input("ids", i64, {3, 17}, 4)}, {{"value", 1.0}});
  familyCase("lt int64 fraction", OpCode::Lt, {input("ids", i64, {3, 17}, 4)}, {{"value", 1.5}});
  familyCase("ge int64 broadcast", OpCode::Ge,
             {input("a", i64, {3, 17}, 4), input("b", i64, {17}, 4)}, {});
  familyCase("eq float scalar", OpCode::Eq, {tiedInput("x", f, {5, 9})}, {{"value", 1.0}});
  // grid_sample's other taps and paddings (RAFT: bilinear, align_corners)
  for (const char *padding : {"zeros", "border", "reflection"})
    for (const char *mode : {"bilinear", "nearest"})
      familyCase(std::string("grid_sample ") + mode + " " + padding + " aligned",
                 OpCode::GridSample, {input("x", f, {1, 2, 4, 5}), input("grid", f, {1, 3, 3, 2})},
                 {{"mode", std::string(mode)}, {"padding_mode", std::string(padding)},
                  {"align_corners", int64_t{1}}});
  familyCase("where int64 values", OpCode::Where,
             {input("c", i64, {3, 1, 5}, 2), input("a", i64, {2, 5}, 100), input("b", i64, {1}, 100)},
             {});
  familyCase("cumsum int64", OpCode::Cumsum, {input("m", i64, {3, 17}, 2)}, {{"dim", int64_t{-1}}});
  familyCase("cumsum reverse", OpCode::Cumsum, {input("x", f, {4, 6, 3})},
             {{"dim", int64_t{1}}, {"reverse", int64_t{1}}});
  familyCase("cast int64 to bfloat16", OpCode::Cast, {input("ids", i64, {4, 9}, 1000)},
             {{"dtype", std::string("bfloat16")}});
  familyCase("cast float32 to float16", OpCode::Cast, {input("x", f, {4, 9})},
             {{"dtype", std::string("float16")}});
  for (OpCode op : {OpCode::Add, OpCode::Sub, OpCode::Mul}) {
    cases.push_back(forwardCase(std::string(opName(op)) + " int64 broadcast", op,
                                {input("a", i64, {3, 17}, 50), input("b", i64, {3, 1}, 50)}, i64,
                                {3, 17}));
    cases.back().tolerance = 0;
  }
  familyCase("conv depthwise", OpCode::Conv, {input("x", f, {2, 4, 6, 6}), input("w", f, {4, 1, 3, 3})},
             {{"stride", L{1, 1}}, {"padding", L{1, 1}}, {"dilation", L{1, 1}}, {"groups", int64_t{4}}});
  familyCase("conv transposed", OpCode::Conv,
             {input("x", f, {2, 4, 5, 5}), input("w", f, {4, 3, 3, 3}), input("b", f, {6})},
             {{"stride", L{2, 2}}, {"padding", L{1, 1}}, {"dilation", L{1, 1}},
              {"groups", int64_t{2}}, {"transposed", int64_t{1}}, {"output_padding", L{1, 1}}});
  familyCase("conv 3d transposed, grouped, dilated", OpCode::Conv,
             {input("x", f, {2, 4, 3, 4, 3}), input("w", f, {4, 2, 2, 3, 2}), input("b", f, {4})},
             {{"stride", L{2, 1, 2}},
              {"padding", L{1, 0, 1}},
              {"dilation", L{1, 2, 1}},
              {"groups", int64_t{2}},
              {"transposed", int64_t{1}},
              {"output_padding", L{1, 1, 0}}});
  familyCase("conv 1d dilated", OpCode::Conv, {input("x", f, {2, 3, 10}), input("w", f, {5, 3, 3})},
             {{"stride", L{1}}, {"padding", L{2}}, {"dilation", L{2}}, {"groups", int64_t{1}}});
  familyCase("conv 3d strided, grouped, with bias", OpCode::Conv,
             {input("x", f, {2, 4, 5, 6, 5}), input("w", f, {6, 2, 3, 3, 1}), input("b", f, {6})},
             {{"stride", L{2, 1, 1}}, {"padding", L{1, 1, 0}}, {"dilation", L{1, 2, 1}},
              {"groups", int64_t{2}}});
  familyCase("conv 3d depthwise", OpCode::Conv,
             {input("x", f, {1, 3, 4, 5, 5}), input("w", f, {3, 1, 3, 3, 3})},
             {{"stride", L{1, 1, 1}}, {"padding", L{1, 1, 1}}, {"dilation", L{1, 1, 1}},
              {"groups", int64_t{3}}});
  // conv_weight_grad: 1-d dilated; 3-d; a plane of 40000 pixels (a backend
  // may cut it into several im2col blocks, CudaConv.cu's scratch of 1 MiB).
  familyCase("conv_weight_grad 1d dilated", OpCode::ConvWeightGrad,
             {input("x", f, {3, 3, 10}), input("g", f, {3, 5, 10})},
             {{"stride", L{1}},
              {"padding", L{2}},
              {"dilation", L{2}},
              {"groups", int64_t{1}},
              {"kernel", L{3}}});
  familyCase("conv_weight_grad 3d strided", OpCode::ConvWeightGrad,
             {input("x", f, {2, 4, 5, 6, 5}), input("g", f, {2, 6, 3, 4, 5})},
             {{"stride", L{2, 1, 1}},
              {"padding", L{1, 1, 0}},
              {"dilation", L{1, 2, 1}},
              {"groups", int64_t{2}},
              {"kernel", L{3, 3, 1}}});
  familyCase("conv_weight_grad several pixel blocks", OpCode::ConvWeightGrad,
             {input("x", f, {1, 1, 200, 200}), input("g", f, {1, 2, 200, 200})},
             {{"stride", L{1, 1}},
              {"padding", L{1, 1}},
              {"dilation", L{1, 1}},
              {"groups", int64_t{1}},
              {"kernel", L{3, 3}}});
  familyCase("max_pool 3d", OpCode::MaxPool, {input("x", f, {2, 3, 5, 7, 6})},
             {{"kernel", L{3, 3, 3}}, {"stride", L{2, 2, 2}}, {"padding", L{1, 1, 1}}});
  familyCase("avg_pool 3d ceil_mode without padding count", OpCode::AvgPool,
             {input("x", f, {2, 3, 5, 7, 6})},
             {{"kernel", L{2, 3, 2}}, {"stride", L{2, 2, 1}}, {"padding", L{1, 1, 0}},
              {"ceil_mode", int64_t{1}}, {"count_include_pad", int64_t{0}}});
  familyCase("adaptive_avg_pool 3d", OpCode::AdaptiveAvgPool, {input("x", f, {2, 3, 5, 7, 4})},
             {{"output_size", L{2, 3, 1}}});
  familyCase("avg_pool ceil_mode without padding count", OpCode::AvgPool,
             {input("x", f, {2, 3, 7, 6})},
             {{"kernel", L{3, 2}}, {"stride", L{2, 2}}, {"padding", L{1, 1}},
              {"ceil_mode", int64_t{1}}, {"count_include_pad", int64_t{0}}});
  familyCase("max_pool 1d dilated", OpCode::MaxPool, {input("x", f, {2, 3, 11})},
             {{"kernel", L{3}}, {"stride", L{2}}, {"padding", L{1}}, {"dilation", L{2}}});
  familyCase("max_pool_backward 2d overlapping windows", OpCode::MaxPoolBackward,
             {input("x", f, {2, 3, 9, 8}), input("g", f, {2, 3, 9, 8})},
             {{"kernel", L{3, 3}}, {"stride", L{1, 1}}, {"padding", L{1, 1}}});
  familyCase("max_pool_backward 1d dilated", OpCode::MaxPoolBackward,
             {input("x", f, {2, 3, 11}), input("g", f, {2, 3, 5})},
             {{"kernel", L{3}}, {"stride", L{2}}, {"padding", L{1}}, {"dilation", L{2}}});
  // grid_sample's gradient with respect to the grid, by every padding
  for (const char *padding : {"zeros", "border", "reflection"})
    familyCase(
        std::string("grid_sample_backward grid ") + padding, OpCode::GridSampleBackward,
        {input("x", f, {1, 2, 4, 5}), input("grid", f, {1, 3, 3, 2}), input("g", f, {1, 2, 3, 3})},
        {{"wrt", std::string("grid")}, {"padding_mode", std::string(padding)}});
  familyCase("adaptive_max_pool 1d", OpCode::AdaptiveMaxPool, {input("x", f, {3, 10})},
             {{"output_size", L{4}}});
  familyCase("group_norm 4d", OpCode::GroupNorm, {input("x", f, {2, 4, 3, 5})},
             {{"groups", int64_t{2}}, {"eps", 1e-5}});
  familyCase("sum all dims keepdim", OpCode::Sum, {input("x", f, {3, 4, 5})},
             {{"keepdim", int64_t{1}}});
  familyCase("var dims 0, 2 correction 0", OpCode::Var, {input("x", f, {3, 4, 5})},
             {{"dims", L{0, -1}}, {"correction", int64_t{0}}});
  familyCase("argmin flattened", OpCode::Argmin, {input("x", f, {3, 4, 5})}, {});
  familyCase("amax dims 0, 1", OpCode::Amax, {input("x", f, {3, 4, 5})}, {{"dims", L{0, 1}}});
  familyCase("pow_scalar 2.5", OpCode::PowScalar, {input("x", f, {9, 7})}, {{"exponent", 2.5}});
  familyCase("clamp min only", OpCode::ClampOut, {input("x", f, {9, 7})},
             {{"min", -0.25}});
  familyCase("softplus beta 2 threshold 1", OpCode::Softplus, {input("x", f, {9, 7})},
             {{"beta", 2.0}, {"threshold", 1.0}});
  familyCase("elu alpha 0.5", OpCode::Elu, {input("x", f, {9, 7})}, {{"alpha", 0.5}});
  familyCase("elu input_scale 2 (celu)", OpCode::Elu, {input("x", f, {9, 7})},
             {{"alpha", 0.5}, {"input_scale", 2.0}});
  familyCase("topk smallest dim 0", OpCode::TopK, {input("x", f, {6, 4, 3})},
             {{"k", int64_t{2}}, {"dim", int64_t{0}}, {"largest", int64_t{0}}});
  // Ties and NaNs: the indices must be the CPU's (torch's CPU selection),
  // by partial_sort (k * 64 <= n) and by nth_element, largest and smallest.
  for (DType dt : {DType::F32, DType::BF16})
    for (auto [n, k, largest] : {std::tuple<int64_t, int64_t, int64_t>{8, 2, 1},
                                 {8, 3, 0},
                                 {200, 2, 1},
                                 {200, 3, 0}}) {
      const std::string name = "topk ties n " + std::to_string(n) + " k " + std::to_string(k) +
                               (largest ? " largest " : " smallest ") + dtypeName(dt);
      cases.push_back(forwardCase(name, OpCode::TopK, {tiedInput("x", dt, {16, n})}, DType::I64,
                                  {16, k},
                                  {{"k", k}, {"dim", int64_t{-1}}, {"largest", largest}}));
      cases.back().tolerance = 0;
    }
  // sdpa over no keys: zeros (the CPU's and torch's), not 0/0.
  cases.push_back(forwardCase("sdpa no keys float32", OpCode::Sdpa,
                              {input("q", f, {1, 2, 3, 8}), input("k", f, {1, 2, 0, 8}),
                               input("v", f, {1, 2, 0, 4})},
                              f, {1, 2, 3, 4}));
  // Many elements into few outputs: a backend may reduce each output with a
  // whole block of threads (CudaReduce.cu), combining partial results in a
  // tree; the extremes must still be the first ones, NaN and ties included.
  for (OpCode op : {OpCode::Sum, OpCode::Mean, OpCode::Var, OpCode::Amax, OpCode::Amin,
                    OpCode::Argmax, OpCode::Argmin})
    familyCase(std::string(opName(op)) + " of 3000 elements per output", op,
               {input("x", f, {2, 3000})}, {{"dims", L{1}}});
  for (OpCode op : {OpCode::Amax, OpCode::Argmax, OpCode::Argmin})
    for (bool nans : {true, false}) {
      familyCase(std::string(opName(op)) + " of 3000 tied elements per output" +
                     (nans ? " with NaNs" : ""),
                 op, {tiedInput("x", f, {2, 3000}, nans)}, {{"dims", L{1}}});
      cases.back().tolerance = 0;  // the first extreme's bits (or index)
    }
  // moe_experts_backward's other operands: 600 tokens, so each expert's rows
  // (about 300) span two of the kernel's 256-row blocks
  for (const char *wrt : {"x", "weights", "down"})
    familyCase(std::string("moe_experts_backward wrt ") + wrt, OpCode::MoeExpertsBackward,
               {input("x", f, {600, 8}), input("i", DType::I64, {600, 1}, 2),
                input("w", f, {600, 1}), input("gate_up", f, {2, 12, 8}),
                input("down", f, {2, 8, 6}), input("g", f, {600, 8})},
               {{"wrt", std::string(wrt)}});
  // ... and reading moe_experts_hidden's rows (an input here)
  familyCase("moe_experts_backward wrt x with hidden", OpCode::MoeExpertsBackward,
             {input("x", f, {6, 8}), input("i", DType::I64, {6, 2}, 3), input("w", f, {6, 2}),
              input("gate_up", f, {3, 12, 8}), input("down", f, {3, 8, 6}), input("g", f, {6, 8}),
              input("hidden", f, {6, 2, 12})},
             {{"wrt", std::string("x")}});
  // ... and moe_experts_gated_grad's too
  for (const char *wrt : {"x", "weights", "gate_up"})
    familyCase(std::string("moe_experts_backward wrt ") + wrt + " with hidden and gated_grad",
               OpCode::MoeExpertsBackward,
               {input("x", f, {6, 8}), input("i", DType::I64, {6, 2}, 3), input("w", f, {6, 2}),
                input("gate_up", f, {3, 12, 8}), input("down", f, {3, 8, 6}), input("g", f, {6, 8}),
                input("hidden", f, {6, 2, 12}), input("gated", f, {6, 2, 6})},
               {{"wrt", std::string(wrt)}});
  familyCase("gather last dim", OpCode::Gather,
             {input("x", f, {3, 4, 5}), input("i", DType::I64, {2, 4, 7}, 5)},
             {{"dim", int64_t{-1}}});
  // ---- training (docs/training.md) ----
  // A master weight's 16-bit gradient into its wider shard: widened exactly.
  for (auto [from, to] : {std::pair{DType::BF16, DType::F32},
                          {DType::F16, DType::F32},
                          {DType::BF16, DType::F64},
                          {DType::F32, DType::F64}}) {
    cases.push_back(
        forwardCase(std::string("reduce_scatter ") + dtypeName(from) + " into " + dtypeName(to),
                    OpCode::ReduceScatter, {input("g", from, {5, 3})}, to, {5, 3}));
    cases.back().tolerance = 0;
  }
  for (DType dt : {DType::F32, DType::BF16, DType::F16, DType::F64}) {
    const std::string d = std::string(" ") + dtypeName(dt);
    // At world size 1 the mean over ranks is the gradient itself.
    cases.push_back(forwardCase("reduce_scatter" + d, OpCode::ReduceScatter,
                                {input("g", dt, {5, 3})}, dt, {5, 3}));
    cases.back().tolerance = 0;
    // Rows summed by index in order, in double: the same bits on every
    // backend. Row 2 is the padding row; a table too large for the CUDA
    // scratch's sort takes the host path.
    cases.push_back(forwardCase("embedding_backward" + d, OpCode::EmbeddingBackward,
                                {input("g", dt, {7, 5}), input("i", DType::I64, {7}, 6)}, dt,
                                {6, 5}, {{"rows", int64_t{6}}, {"padding_idx", int64_t{2}}}));
    cases.back().tolerance = 0;
    // Softmax minus one at each target (softmax's dtypes); row 1's target
    // is ignore_index (zeros), row 3's is set by ignore_index 5 in the
    // second case.
    if (dt != DType::F64) {
      cases.push_back(forwardCase("cross_entropy_backward" + d, OpCode::CrossEntropyBackward,
                                  {input("logits", dt, {4, 6}), indices("t", {4}, {2, -100, 0, 5})},
                                  dt, {4, 6}));
      cases.push_back(forwardCase("cross_entropy_backward ignore_index 5" + d,
                                  OpCode::CrossEntropyBackward,
                                  {input("logits", dt, {4, 6}), indices("t", {4}, {2, 1, 0, 5})},
                                  dt, {4, 6}, {{"ignore_index", int64_t{5}}}));
    }
    cases.push_back(forwardCase("embedding_backward, 140000 rows" + d, OpCode::EmbeddingBackward,
                                {input("g", dt, {6, 2}), input("i", DType::I64, {6}, 140000)}, dt,
                                {140000, 2}, {{"rows", int64_t{140000}}}));
    cases.back().tolerance = 0;
    // The same sums added to acc (a tied table's other gradient): `add`'s
    // arithmetic, on the device's path and the host's.
    cases.push_back(forwardCase(
        "embedding_backward with acc" + d, OpCode::EmbeddingBackward,
        {input("g", dt, {7, 5}), input("i", DType::I64, {7}, 6), input("acc", dt, {6, 5})}, dt,
        {6, 5}, {{"rows", int64_t{6}}, {"padding_idx", int64_t{2}}}));
    cases.back().tolerance = 0;
    cases.push_back(forwardCase("embedding_backward with acc, 140000 rows" + d,
                                OpCode::EmbeddingBackward,
                                {input("g", dt, {6, 2}), input("i", DType::I64, {6}, 140000),
                                 input("acc", dt, {140000, 2})},
                                dt, {140000, 2}, {{"rows", int64_t{140000}}}));
    cases.back().tolerance = 0;
    cases.push_back(forwardCase("reduce_scatter sum" + d, OpCode::ReduceScatter,
                                {input("g", dt, {5, 3})}, dt, {5, 3}, {{"sum", int64_t{1}}}));
    cases.back().tolerance = 0;
    cases.push_back(optimizerCase("sgd_step with momentum" + d, dt, OpCode::SgdStep, 1,
                                  {{"lr", 0.1}, {"momentum", 0.9}, {"weight_decay", 0.01}}));
    cases.push_back(optimizerCase("sgd_step" + d, dt, OpCode::SgdStep, 0, {{"lr", 0.5}}));
    cases.push_back(optimizerCase("sgd_step nesterov" + d, dt, OpCode::SgdStep, 1,
                                  {{"lr", 0.1}, {"momentum", 0.9}, {"nesterov", int64_t{1}}}));
    cases.push_back(optimizerCase("sgd_step scheduled" + d, dt, OpCode::SgdStep, 1,
                                  {{"lr", 0.1},
                                   {"momentum", 0.9},
                                   {"warmup_steps", int64_t{5}},
                                   {"decay_steps", int64_t{9}},
                                   {"min_lr", 0.001}}));
    cases.push_back(optimizerCase("sgd_step clipped" + d, dt, OpCode::SgdStep, 1,
                                  {{"lr", 0.1}, {"momentum", 0.9}}, /*clip=*/true));
    cases.push_back(optimizerCase(
        "adamw_step clipped" + d, dt, OpCode::AdamwStep, 2,
        {{"lr", 0.01}, {"beta1", 0.9}, {"beta2", 0.999}, {"eps", 1e-8}, {"weight_decay", 0.01}},
        /*clip=*/true));
    // The exact sum: the same bits on every backend.
    cases.push_back(forwardCase("grad_norm" + d, OpCode::GradNorm,
                                {input("g", dt, {5, 3}), input("h", dt, {7})}, DType::F64, {}));
    cases.back().tolerance = 0;
    cases.push_back(optimizerCase("adamw_step" + d, dt, OpCode::AdamwStep, 2,
                                  {{"lr", 0.01}, {"beta1", 0.9}, {"beta2", 0.999},
                                   {"eps", 1e-8}, {"weight_decay", 0.01}}));
    cases.push_back(optimizerCase("adamw_step scheduled" + d, dt, OpCode::AdamwStep, 2,
                                  {{"lr", 0.01},
                                   {"beta1", 0.9},
                                   {"beta2", 0.999},
                                   {"eps", 1e-8},
                                   {"weight_decay", 0.01},
                                   {"warmup_steps", int64_t{5}},
                                   {"decay_steps", int64_t{9}},
                                   {"min_lr", 0.001}}));
  }
  return cases;
}

/// One case per op that reads an index: several indices out of range (too
/// large and negative), so a backend that checks on the device must still
/// name the first one, as the CPU does.
std::vector<SuiteCase> badIndexCases() {
  const DType f = DType::F32;
  std::vector<SuiteCase> cases;
  cases.push_back(forwardCase("embedding id 11 of V = 11", OpCode::Embedding,
                              {input("w", f, {11, 6}), indices("ids", {2, 3}, {0, 3, 10, 11, -1, 12})},
                              f, {2, 3, 6}));
  cases.push_back(forwardCase("embedding id -1 with empty rows (D = 0)", OpCode::Embedding,
                              {input("w", f, {11, 0}), indices("ids", {3}, {2, -1, 11})}, f,
                              {3, 0}));
  cases.push_back(forwardCase("cross_entropy target 9 of C = 7", OpCode::CrossEntropy,
                              {input("logits", f, {4, 7}), indices("targets", {4}, {1, -100, 9, -3})},
                              f, {}, {{"ignore_index", int64_t{-100}}}));
  cases.push_back(forwardCase(
      "cross_entropy_backward target 9 of C = 7", OpCode::CrossEntropyBackward,
      {input("logits", f, {4, 7}), indices("targets", {4}, {1, -100, 9, -3})}, f, {4, 7}));
  cases.push_back(forwardCase("gather index 4 of 4 rows", OpCode::Gather,
                              {input("x", f, {4, 5}),
                               indices("i", {2, 3}, {0, 1, 3, 2, 4, -1})},
                              f, {2, 3}, {{"dim", int64_t{0}}}));
  cases.push_back(forwardCase("embedding_backward index 4 of 4 rows", OpCode::EmbeddingBackward,
                              {input("src", f, {5, 3}), indices("i", {5}, {0, 3, 4, -1, 1})}, f,
                              {4, 3}, {{"rows", int64_t{4}}}));
  cases.push_back(forwardCase(
      "moe_experts expert 3 of 3", OpCode::MoeExperts,
      {input("x", f, {4, 8}), indices("i", {4, 2}, {0, 1, 2, 0, 1, 3, -1, 2}),
       input("w", f, {4, 2}), input("gate_up", f, {3, 12, 8}), input("down", f, {3, 8, 6})},
      f, {4, 8}));
  return cases;
}

/// Largest |a - b| / max(1, |b|) over the elements; bits compared exactly
/// for int64.
double maxRelativeError(const HostTensor &a, const HostTensor &b) {
  double worst = 0;
  const int64_t n = numElements(a.shape);
  for (int64_t i = 0; i < n; ++i) {
    const double x = runtime::loadAsDouble(a.dtype, a.data.data(), i);
    const double y = runtime::loadAsDouble(b.dtype, b.data.data(), i);
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
    if (!std::isnan(x)) worst = std::max(worst, std::abs(x - y) / std::max(1.0, std::abs(y)));
  }
  return worst;
}

}  // namespace

BackendUnderTest cpuBackendUnderTest(int threads) {
  return {"cpu", [threads] {
            BackendInstance instance;
            auto device = std::make_unique<runtime::CpuDevice>();
            instance.backend = std::make_unique<runtime::CpuBackend>(*device, threads);
            instance.device = std::move(device);
            auto group = std::make_shared<runtime::LocalGroup>(1);
            instance.comm = std::make_unique<runtime::LocalCommunicator>(*group, 0);
            instance.context = group;
            return instance;
          }};
}

TEST_CASE("backend suite: every op on every backend, predicted == measured", "[backends]") {
  const std::vector<SuiteCase> cases = suiteCases();
  const BackendUnderTest reference = cpuBackendUnderTest(1);  // one kernel thread
  for (const BackendUnderTest &backend : backendsUnderTest()) {
    const std::span<const OpCode> missing = backend.make().backend->unsupportedOps();
    for (const SuiteCase &c : cases) {
      INFO("backend " << backend.name << ", case '" << c.name << "'");
      // An op the backend lacks: the run fails naming it, whatever else runs.
      std::optional<OpCode> lacking;
      for (const Function &f : c.plan.functions)
        for (const Instruction &inst : f.body)
          if (!lacking && std::find(missing.begin(), missing.end(), inst.op) != missing.end())
            lacking = inst.op;
      if (lacking) {
        CHECK_THROWS_WITH(runSuitePlan(backend, c.plan, c.inputs, 11),
                          Catch::Contains(std::string("op '") + opName(*lacking) +
                                          "' is not supported by the " + backend.name +
                                          " backend"));
        continue;
      }
      const SuiteRun run = runSuitePlan(backend, c.plan, c.inputs, 11);
      const runtime::MemoryPrediction init = runtime::predictMemory(c.plan, "init", 0);
      const runtime::MemoryPrediction forward =
          runtime::predictMemory(c.plan, "forward", 0, init.paramsAtEnd);
      CHECK(run.initPeak == init.peakBytes);
      CHECK(run.initLiveAtPeak == init.liveAtPeak);
      CHECK(run.forwardPeak == forward.peakBytes);
      CHECK(run.forwardLiveAtPeak == forward.liveAtPeak);
      const SuiteRun expected = runSuitePlan(reference, c.plan, c.inputs, 11);
      REQUIRE(run.outputs.size() == expected.outputs.size());
      for (size_t i = 0; i < run.outputs.size(); ++i) {
        CHECK(run.outputs[i].shape == expected.outputs[i].shape);
        if (c.tolerance == 0) {
          CHECK(run.outputs[i].data == expected.outputs[i].data);  // bit for bit
        } else {
          CHECK(maxRelativeError(run.outputs[i], expected.outputs[i]) <= c.tolerance);
        }
      }
    }
  }
}

TEST_CASE("backend suite: an index out of range fails as on the CPU", "[backends]") {
  const BackendUnderTest reference = cpuBackendUnderTest(1);
  auto failure = [](const BackendUnderTest &backend, const SuiteCase &c) -> std::string {
    try {
      runSuitePlan(backend, c.plan, c.inputs, 11);
    } catch (const std::exception &e) {
      return e.what();
    }
    return "(no error)";
  };
  for (const BackendUnderTest &backend : backendsUnderTest()) {
    const std::span<const OpCode> missing = backend.make().backend->unsupportedOps();
    for (const SuiteCase &c : badIndexCases()) {
      const OpCode op = c.plan.functions[1].body.back().op;
      if (std::find(missing.begin(), missing.end(), op) != missing.end())
        continue;  // the main suite case checks the "not supported" error
      INFO("backend " << backend.name << ", case '" << c.name << "'");
      const std::string expected = failure(reference, c);
      CHECK_THAT(expected, Catch::Contains(" of range ") || Catch::Contains(" of bounds "));
      CHECK(failure(backend, c) == expected);
    }
  }
}

TEST_CASE("backend suite covers every op of the table", "[backends][optable]") {
  std::set<OpCode> covered;
  for (const SuiteCase &c : suiteCases())
    for (const Function &f : c.plan.functions)
      for (const Instruction &inst : f.body) covered.insert(inst.op);
  for (const OpInfo &info : allOps()) {
    INFO("op " << info.name << " has no case in the backend suite");
    CHECK(covered.count(info.code) == 1);
  }
}

}  // namespace shardc::test::suite
