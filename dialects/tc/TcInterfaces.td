//===- TcInterfaces.td - tc op interfaces ------------------*- tablegen -*-===//

#ifndef SHARDC_TC_INTERFACES
#define SHARDC_TC_INTERFACES

include "mlir/IR/OpBase.td"

def Tc_ViewOpInterface : OpInterface<"ViewOpInterface"> {
  let cppNamespace = "::mlir::tc";
  let description = [{
    An op whose result is its operand's elements rearranged (reshape,
    transpose, permute, slice). Its index map sends a result index to the
    operand index it reads, which is what lets tc-fsdp shard a chain through
    views by index arithmetic alone.
  }];
  let methods = [
    InterfaceMethod<"Result index -> operand index.",
      "::mlir::AffineMap", "getIndexMap">,
    InterfaceMethod<"The tensor the view reads.", "::mlir::Value", "getSource",
      (ins), [{ return $_op->getOperand(0); }]>,
  ];
}

def Tc_PointwiseInitOpInterface : OpInterface<"PointwiseInitOpInterface"> {
  let cppNamespace = "::mlir::tc";
  let description = [{
    An op that maps every element to a new value independently of its index
    (mul/add/sub/div by a scalar, clamp, erfinv, sqrt, neg, exp, log, expm1,
    inverse_softplus). It commutes with
    views and shards trivially: each rank applies it to its own elements.
  }];
  let methods = [
    InterfaceMethod<"The tensor it transforms.", "::mlir::Value", "getSource",
      (ins), [{ return $_op->getOperand(0); }]>,
  ];
}

def Tc_GeneratorOpInterface : OpInterface<"GeneratorOpInterface"> {
  let cppNamespace = "::mlir::tc";
  let description = [{
    An op that produces a tensor from nothing; element values depend only on
    the element's index (and, for random generators, the seed, the
    parameter's name and the op's position in its init chain).
  }];
}

#endif // SHARDC_TC_INTERFACES
