//===- MasterWeights.h - parameters stored wider than forward reads them -*- C++ -*-===//
//
// A graph parameter with "master_dtype" (docs/graph-format.md, "Master
// weights") is stored, initialized, sharded, updated and saved in that dtype
// and read by forward in its "dtype", as FSDP2's MixedPrecisionPolicy keeps
// float32 shards and computes in param_dtype. The graph file is expanded
// before anything reads it: the parameter's dtype becomes the master dtype
// and one `cast` node, first among the nodes, gives every reader the file's
// dtype. Autodiff's cast rule then returns the gradient in the master dtype
// (the optimizer step runs there, FSDP2's reduce_dtype float32; tc-fsdp's
// reduce_scatter reads the compute-dtype gradient and widens it as it sums,
// the same bytes without the cast's copy), and tc-fold-param-casts turns
// each read of the cast into a read of the parameter in the compute dtype,
// which tc-fsdp gathers in that dtype.
//
//===----------------------------------------------------------------------===//
#pragma once

#include "compiler/GraphReader.h"

#include <nlohmann/json.hpp>

#include <string>

namespace shardc::compiler {

/// Expands every "master_dtype" of `document` in place (nothing when it has
/// none); a bad one fails through `reader` with its JSON path. Idempotent:
/// the expanded document has no "master_dtype" left.
void expandMasterWeights(nlohmann::json &document, const GraphReader &reader);

/// The same on a graph file's text: `text` itself when it names no
/// "master_dtype" or is not JSON (parseGraph reports that), else the
/// expanded document. Every reader of a graph file's text sees the expanded
/// graph (readGraphText calls it), so autodiff's joint graph, which
/// re-reads the text, and the graph it was built from agree.
std::string expandMasterWeights(const std::string &text, const std::string &sourceName);

/// Whether `dtype` is a master dtype `--master-dtype` and
/// JitOptions::master_dtype take: float32 or float64. (One check for the
/// three surfaces that take it; each words its own error.)
inline bool isMasterDtypeName(const std::string &dtype) {
  return dtype == "float32" || dtype == "float64";
}

/// `text` with "master_dtype": `masterDtype` given to every parameter whose
/// dtype is float16 or bfloat16 and that names no master dtype of its own
/// (`shardc --master-dtype`, JitOptions::master_dtype): a 16-bit graph
/// trained as FSDP2's MixedPrecisionPolicy without editing the file.
/// `masterDtype` empty: `text` as it is; else float32 or float64 (a
/// GraphError names `sourceName` otherwise). Text that is not a JSON object
/// comes back as it is (parseGraph reports it).
std::string withMasterDtype(const std::string &text,
                            const std::string &masterDtype,
                            const std::string &sourceName);

} // namespace shardc::compiler
