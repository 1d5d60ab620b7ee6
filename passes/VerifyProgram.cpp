//===- VerifyProgram.cpp - the tc-verify-program pass ---------------------===//
//
// The module-wide rules of a tc program (verifyProgram, TcProgramVerifier.cpp)
// as a verification pass: it runs on a module whose ops have all verified,
// so it may read any of them. The other tc passes call verifyProgram first.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

namespace mlir::tc {
#define GEN_PASS_DEF_TCVERIFYPROGRAM
#include "passes/Passes.h.inc"
} // namespace mlir::tc

using namespace mlir;

namespace {

struct TcVerifyProgramPass
    : public tc::impl::TcVerifyProgramBase<TcVerifyProgramPass> {
  void runOnOperation() override {
    if (failed(tc::verifyProgram(getOperation())))
      signalPassFailure();
    markAllAnalysesPreserved();
  }
};

} // namespace
