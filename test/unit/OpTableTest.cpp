// The op table (runtime/OpTable.def): names round-trip, every entry is
// documented in docs/ops.md with its attributes and its CUDA status, and the
// memory model and executor core act on the table's memory column.
#include "runtime/OpFamilies.h"
#include "runtime/OpTable.h"
#include "runtime/cuda/UnsupportedOps.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

using namespace shardc::plan;

namespace {

std::string readDoc(const std::string &name) {
  std::ifstream in(std::string(SHARDC_SOURCE_DIR) + "/docs/" + name);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// The docs/ops.md table row of `op` ("| `name` | ..."), or "".
std::string rowOf(const std::string &doc, const std::string &op) {
  const std::string start = "\n| `" + op + "` |";
  const size_t at = doc.find(start);
  if (at == std::string::npos) return "";
  return doc.substr(at + 1, doc.find('\n', at + 1) - at - 1);
}

}  // namespace

TEST_CASE("op names and codes round-trip; unknown names are rejected", "[optable]") {
  std::set<std::string> names;
  for (const OpInfo &info : allOps()) {
    CHECK(names.insert(info.name).second);  // unique
    REQUIRE(parseOpCode(info.name) == info.code);
    CHECK(&opInfo(info.code) == &info);
    CHECK(info.minInputs >= 0);
    CHECK((info.maxInputs == kAny || info.maxInputs >= info.minInputs));
    std::set<std::string> attrs;
    for (const AttrSpec &spec : info.attrs) CHECK(attrs.insert(spec.name).second);
    CHECK(info.attr("rank") == nullptr);  // `rank` is every op's, not one op's
  }
  CHECK_FALSE(parseOpCode("conv2d"));
  CHECK_FALSE(parseOpCode(""));
  CHECK_FALSE(parseOpCode("Alloc"));
  CHECK(opInfo(OpCode::AllGather).memory == OpMemory::Collective);
  CHECK(opInfo(OpCode::Neg).memory == OpMemory::InPlace);
  CHECK(opInfo(OpCode::Orthogonal).workspace != nullptr);
}

TEST_CASE("every op in the table is documented in docs/ops.md", "[optable]") {
  const std::string doc = readDoc("ops.md");
  const std::span<const OpCode> cudaMissing = shardc::runtime::cuda::kCudaUnsupportedOps;
  size_t rows = 0;
  for (const OpInfo &info : allOps()) {
    INFO("op " << info.name);
    const std::string row = rowOf(doc, info.name);
    REQUIRE_FALSE(row.empty());
    ++rows;
    for (const AttrSpec &spec : info.attrs) {
      INFO("attribute " << spec.name);
      CHECK(row.find(std::string("`") + spec.name + (spec.required ? "`:" : "`?:")) !=
            std::string::npos);
    }
    CHECK(row.find(opMemoryName(info.memory)) != std::string::npos);
    const bool cudaLacks =
        std::find(cudaMissing.begin(), cudaMissing.end(), info.code) != cudaMissing.end();
    CHECK((row.find("| unsupported |") != std::string::npos) == cudaLacks);
  }
  // No row for an op the table does not have.
  size_t documented = 0;
  for (size_t at = doc.find("\n| `"); at != std::string::npos; at = doc.find("\n| `", at + 1))
    ++documented;
  CHECK(documented == rows);
}

TEST_CASE("family ops name their family's variant, once each", "[optable]") {
  using shardc::runtime::PoolKind;
  using shardc::runtime::UnaryOp;
  std::set<int> unary;
  for (const OpInfo &info : allOps()) {
    INFO("op " << info.name);
    CHECK(info.generic() == (info.family != OpFamily::None));
    if (!info.generic()) continue;
    CHECK(info.outputs == 1);
    // all_reduce_sum writes its output too, on every rank at once: a
    // collective, which must never carry `rank` (runtime/PlanCheck.h).
    CHECK(info.memory == (info.family == OpFamily::AllReduce ? OpMemory::Collective
                                                             : OpMemory::WritesOutput));
    const std::string name = info.name;
    switch (info.family) {
    case OpFamily::Unary: {
      // The table name is the kernel's (sqrt_out, clamp_out, pow_scalar:
      // the kernel's name and a suffix).
      const std::string kernel = shardc::runtime::unaryOpName(static_cast<UnaryOp>(info.variant));
      CHECK(name.rfind(kernel, 0) == 0);
      CHECK(unary.insert(info.variant).second);
      break;
    }
    case OpFamily::Pool:
    case OpFamily::AdaptivePool:
      CHECK((name.find("max") != std::string::npos) ==
            (static_cast<PoolKind>(info.variant) == PoolKind::Max));
      break;
    default: break;
    }
  }
  // Every UnaryOp has its table op.
  CHECK(unary.size() == static_cast<size_t>(UnaryOp::Softplus) + 1);
}
