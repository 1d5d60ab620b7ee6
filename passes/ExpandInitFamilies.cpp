//===- ExpandInitFamilies.cpp - the tc-expand-init pass -------------------===//
//
// torch.nn.init's kaiming and xavier families are uniform or normal draws
// whose bounds depend on the tensor's fans. Expanding them early leaves the
// sharding pass and the runtime a small set of generators.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "mlir/IR/Builders.h"

#include <cmath>

namespace mlir::tc {
#define GEN_PASS_DEF_TCEXPANDINIT
#include "passes/Passes.h.inc"
} // namespace mlir::tc

using namespace mlir;
using namespace mlir::tc;

namespace {

struct Fans {
  double in = 0, out = 0;
};

/// torch.nn.init._calculate_fan_in_and_fan_out.
Fans computeFans(RankedTensorType type) {
  ArrayRef<int64_t> shape = type.getShape();
  double receptiveField = 1;
  for (int64_t dim : shape.drop_front(2))
    receptiveField *= static_cast<double>(dim);
  return {static_cast<double>(shape[1]) * receptiveField,
          static_cast<double>(shape[0]) * receptiveField};
}

/// torch.nn.init.calculate_gain(nonlinearity, param).
double calculateGain(StringRef nonlinearity, double negativeSlope) {
  if (nonlinearity == "tanh")
    return 5.0 / 3.0;
  if (nonlinearity == "relu")
    return std::sqrt(2.0);
  if (nonlinearity == "leaky_relu")
    return std::sqrt(2.0 / (1 + negativeSlope * negativeSlope));
  if (nonlinearity == "selu")
    return 3.0 / 4.0;
  return 1.0; // linear, conv*, conv_transpose*, sigmoid
}

template <typename FamilyOp>
LogicalResult fanOf(FamilyOp op, double fan) {
  if (fan > 0)
    return success();
  return op.emitOpError() << "has a zero fan for " << op.getType()
                          << ": the bounds would divide by zero";
}

/// Replaces a family op by uniform [-bound, bound) at the same position.
template <typename FamilyOp>
void replaceWithUniform(FamilyOp op, double bound) {
  OpBuilder builder(op);
  auto uniform = builder.create<UniformOp>(
      op.getLoc(), op.getType(), builder.getF64FloatAttr(-bound),
      builder.getF64FloatAttr(bound), op.getPositionAttr(),
      op.getFullTypeAttr(), op.getSourceTypeAttr(), op.getIndexMapAttr());
  op.getResult().replaceAllUsesWith(uniform.getResult());
  op.erase();
}

template <typename FamilyOp>
void replaceWithNormal(FamilyOp op, double std) {
  OpBuilder builder(op);
  auto normal = builder.create<NormalOp>(
      op.getLoc(), op.getType(), builder.getF64FloatAttr(0.0),
      builder.getF64FloatAttr(std), op.getPositionAttr(), op.getFullTypeAttr(),
      op.getSourceTypeAttr(), op.getIndexMapAttr());
  op.getResult().replaceAllUsesWith(normal.getResult());
  op.erase();
}

template <typename KaimingOp>
LogicalResult expandKaiming(KaimingOp op, bool uniform) {
  Fans fans = computeFans(op.getSourceTensorType());
  double fan = op.getMode() == "fan_in" ? fans.in : fans.out;
  if (failed(fanOf(op, fan)))
    return failure();
  double gain = calculateGain(op.getNonlinearity(), op.getA().convertToDouble());
  double std = gain / std::sqrt(fan);
  if (uniform)
    replaceWithUniform(op, std::sqrt(3.0) * std);
  else
    replaceWithNormal(op, std);
  return success();
}

template <typename XavierOp>
LogicalResult expandXavier(XavierOp op, bool uniform) {
  Fans fans = computeFans(op.getSourceTensorType());
  if (failed(fanOf(op, fans.in + fans.out)))
    return failure();
  double std = op.getGain().convertToDouble() *
               std::sqrt(2.0 / (fans.in + fans.out));
  if (uniform)
    replaceWithUniform(op, std::sqrt(3.0) * std);
  else
    replaceWithNormal(op, std);
  return success();
}

struct TcExpandInitPass : public tc::impl::TcExpandInitBase<TcExpandInitPass> {
  void runOnOperation() override {
    if (failed(verifyProgram(getOperation())))
      return signalPassFailure();
    SmallVector<Operation *> families;
    getOperation().walk([&](Operation *op) {
      if (isa<KaimingUniformOp, KaimingNormalOp, XavierUniformOp,
              XavierNormalOp>(op))
        families.push_back(op);
    });
    for (Operation *op : families) {
      LogicalResult result = success();
      if (auto kaiming = dyn_cast<KaimingUniformOp>(op))
        result = expandKaiming(kaiming, /*uniform=*/true);
      else if (auto kaiming = dyn_cast<KaimingNormalOp>(op))
        result = expandKaiming(kaiming, /*uniform=*/false);
      else if (auto xavier = dyn_cast<XavierUniformOp>(op))
        result = expandXavier(xavier, /*uniform=*/true);
      else
        result = expandXavier(cast<XavierNormalOp>(op), /*uniform=*/false);
      if (failed(result))
        return signalPassFailure();
    }
  }
};

} // namespace
