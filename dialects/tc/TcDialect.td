//===- TcDialect.td - the tc dialect -----------------------*- tablegen -*-===//
//
// tc ("trace compiler") models a program that initializes and runs a model
// whose parameters are symbolic proxies: a `tc.param` has a name, a type and
// the device the user meant it for, and owns no storage. Storage appears only
// when the runtime executes `tc.materialize` (init) or `tc.all_gather`
// (forward, after sharding).
//
//===----------------------------------------------------------------------===//

#ifndef SHARDC_TC_DIALECT
#define SHARDC_TC_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"

def Tc_Dialect : Dialect {
  let name = "tc";
  let cppNamespace = "::mlir::tc";
  let summary = "Parameter proxies, init programs and model ops for shardc";
  let description = [{
    A tc module holds `tc.param` symbols, a `func.func @init` that
    materializes every parameter exactly once, and optionally a
    `func.func @forward` that reads parameters with `tc.use` (or, once
    sharded, `tc.all_gather`). See docs/ir.md.
  }];
  let useDefaultAttributePrinterParser = 1;
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

class Tc_Op<string mnemonic, list<Trait> traits = []>
    : Op<Tc_Dialect, mnemonic, traits>;

class Tc_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Tc_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

#endif // SHARDC_TC_DIALECT
