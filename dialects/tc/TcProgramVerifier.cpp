//===- TcProgramVerifier.cpp - module-wide rules of a tc program ----------===//
//
// A parameter must be materialized exactly once, in func @init. No single op
// can check this without walking the whole module, so it runs on a verified
// module: -tc-verify-program (passes/VerifyProgram.cpp) and the first thing
// every tc pass does.
//
//===----------------------------------------------------------------------===//
#include "dialects/tc/TcOps.h"

#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace mlir::tc;

LogicalResult mlir::tc::verifyProgram(ModuleOp module) {
  auto init = module.lookupSymbol<func::FuncOp>(kInitFunctionName);
  llvm::StringMap<MaterializeOp> firstMaterialize;
  bool ok = true;
  if (init) {
    init.walk([&](MaterializeOp op) {
      auto [it, inserted] =
          firstMaterialize.try_emplace(op.getParam(), op);
      if (!inserted) {
        InFlightDiagnostic diag = op.emitOpError()
                                  << "materializes parameter "
                                  << op.getParamAttr() << " a second time";
        diag.attachNote(it->second.getLoc()) << "first materialized here";
        ok = false;
      }
    });
  }
  for (ParamOp param : module.getOps<ParamOp>()) {
    if (firstMaterialize.contains(param.getSymName()))
      continue;
    param.emitOpError() << "parameter @" << param.getSymName()
                        << " is never materialized"
                        << (init ? " in func @init" : ": the module has no func @init");
    ok = false;
  }
  return success(ok);
}
