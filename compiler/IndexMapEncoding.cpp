//===- IndexMapEncoding.cpp - affine index maps for the runtime -----------===//
#include "compiler/IndexMapEncoding.h"

#include "mlir/IR/AffineExpr.h"
#include "llvm/Support/ErrorHandling.h"

using namespace mlir;

namespace shardc::compiler {
namespace {

void encodeExpr(AffineExpr expr, std::vector<int64_t> &out) {
  if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
    out.insert(out.end(), {0, static_cast<int64_t>(dim.getPosition())});
    return;
  }
  if (auto constant = dyn_cast<AffineConstantExpr>(expr)) {
    out.insert(out.end(), {1, constant.getValue()});
    return;
  }
  auto binary = cast<AffineBinaryOpExpr>(expr);
  encodeExpr(binary.getLHS(), out);
  encodeExpr(binary.getRHS(), out);
  switch (expr.getKind()) {
  case AffineExprKind::Add:
    out.push_back(2);
    return;
  case AffineExprKind::Mul:
    out.push_back(3);
    return;
  case AffineExprKind::FloorDiv:
    out.push_back(4);
    return;
  case AffineExprKind::Mod:
    out.push_back(5);
    return;
  case AffineExprKind::CeilDiv:
    out.push_back(6);
    return;
  default:
    llvm_unreachable("index maps of views have no symbols");
  }
}

} // namespace

std::vector<int64_t> encodeIndexMap(AffineMap map) {
  std::vector<int64_t> out{static_cast<int64_t>(map.getNumResults())};
  for (AffineExpr result : map.getResults()) {
    std::vector<int64_t> tokens;
    encodeExpr(result, tokens);
    out.push_back(static_cast<int64_t>(tokens.size()));
    out.insert(out.end(), tokens.begin(), tokens.end());
  }
  return out;
}

} // namespace shardc::compiler
