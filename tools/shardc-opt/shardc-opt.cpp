//===- shardc-opt.cpp - mlir-opt for the tc dialect -----------------------===//
//
// Parses, verifies, transforms and prints tc modules; drives the lit tests.
//
//===----------------------------------------------------------------------===//
#include "dialects/tc/TcDialect.h"
#include "passes/Passes.h"
#include "tools/shardc-opt/PrintPlanPass.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::tc::registerTcPasses();
  shardc::registerPrintPlanPass();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();

  mlir::DialectRegistry registry;
  registry.insert<mlir::tc::TcDialect, mlir::func::FuncDialect,
                  mlir::arith::ArithDialect>();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "shardc optimizer driver\n", registry));
}
