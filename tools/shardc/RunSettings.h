// `shardc run`'s command line (docs/cli.md): every option parsed and
// checked against the others before anything is compiled or run.
#pragma once

#include "compiler/DataParallel.h"
#include "compiler/Pipeline.h"
#include "runtime/checkpoint/ShardReader.h"
#include "tools/shardc/CheckpointOptions.h"
#include "tools/shardc/CommandLine.h"

#include <optional>
#include <string>
#include <vector>

namespace shardc::cli {

struct RunSettings {
  bool help = false;  // --help: print the usage, nothing else
  ParsedArgs parsed;
  int64_t worldSize = 1;
  int64_t maxGraphBytes = compiler::kDefaultMaxGraphBytes;
  std::string masterDtype;  // --master-dtype: empty, float32 or float64
  uint64_t seed = 0;
  std::string reportFormat, backend = "local";
  int64_t ioBufferBytes = runtime::checkpoint::kDefaultIoBufferBytes;
  std::vector<RenameRule> renames;
  double timeoutSeconds = 60;
  std::vector<int64_t> ranks;          // the ranks to run: every one unless --ranks
  int threads = 0;                     // kernel threads per rank; 0 = the default
  bool initOnly = false;               // --init-only: no forward
  int repeats = 0;                     // --repeat: warm forwards after the measured one
  std::string device = "cpu";          // --device
  compiler::BatchDims inputBatchDims;  // --batch-dim
  std::optional<compiler::OptimizerOptions> optimizer;  // --optimizer: a training step
  int steps = 1;                                        // --steps
  int64_t memoryBudget = 0;                             // --memory-budget: bytes per rank; 0 = none
};

/// `shardc run ARGS`, parsed. Throws UsageError for a bad value or a
/// combination of options that does not go together. With --backend mpi it
/// initializes MPI (the world size is MPI's).
RunSettings parseRunSettings(const std::vector<std::string> &args);

}  // namespace shardc::cli
