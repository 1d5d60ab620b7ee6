#include "tools/shardc/RunSettings.h"

#include "runtime/DeviceName.h"
#include "runtime/RankSubset.h"
#include "runtime/RuntimeError.h"
#include "runtime/checkpoint/LoadPlan.h"
#include "tools/shardc/ModelGraph.h"
#include "tools/shardc/MpiRunCommand.h"
#include "tools/shardc/TrainOptions.h"

#include <limits>

namespace shardc::cli {

RunSettings parseRunSettings(const std::vector<std::string> &args) {
  RunSettings s;
  s.parsed =
      parseArgs(args, {{"--world-size",     "--seed",           "--inputs",          "--outputs",
                        "--save-params",    "--report",         "--timeout",         "--units",
                        "--max-graph-mib",  "--master-dtype",   "--backend",         "--load",
                        "--rename",         "--save",           "--io-buffer-mib",   "--ranks",
                        "--threads",        "--device",         "--repeat",          "--batch-dim",
                        "--grad",           "--steps",          "--optimizer",       "--lr",
                        "--momentum",       "--weight-decay",   "--betas",           "--eps",
                        "--load-optimizer", "--warmup-steps",   "--decay-steps",     "--min-lr",
                        "--save-optimizer", "--clip-grad-norm", "--no-weight-decay", "--accumulate",
                        "--memory-budget"},
                       {"--help", "-h", "--prefetch", "--init-only", "--data-parallel", "--profile",
                        "--nesterov", "--recompute-activations", "--fuse-linear-cross-entropy"}});
  if (s.parsed.has("--help") || s.parsed.has("-h")) {
    s.help = true;
    return s;
  }
  implyDataParallel(s.parsed);
  if (s.parsed.positional.size() != 1) throw UsageError("expected exactly one MODEL.json");
  // Local ranks are threads: more than a few thousand is a mistake.
  s.maxGraphBytes = s.parsed.getInt("--max-graph-mib", 256, 1, 1 << 20) << 20;
  s.masterDtype = masterDtypeOption(s.parsed);
  s.worldSize = s.parsed.getInt("--world-size", 1, 1, 4096);
  s.memoryBudget = s.parsed.getByteSize("--memory-budget");
  s.seed =
      static_cast<uint64_t>(s.parsed.getInt("--seed", 0, 0, std::numeric_limits<int64_t>::max()));
  s.timeoutSeconds = static_cast<double>(s.parsed.getInt("--timeout", 60, 1, 86400));
  s.ioBufferBytes = s.parsed.getInt("--io-buffer-mib", 64, 1, 1 << 20) << 20;
  s.threads = static_cast<int>(s.parsed.getInt("--threads", 0, 1, 1024));
  s.initOnly = s.parsed.has("--init-only");
  s.repeats = static_cast<int>(s.parsed.getInt("--repeat", 0, 0, 100000));
  for (const char *option : {"--repeat", "--profile"})
    if (s.parsed.has(option) && (s.initOnly || s.parsed.get("--backend", "local") != "local"))
      throw UsageError(std::string(option) +
                       (s.initOnly ? " is about forward, which --init-only does not run"
                                   : " is for the local backend"));
  for (const std::string &rule : s.parsed.all("--rename"))
    s.renames.push_back(parseRenameRule(rule));
  if (!s.renames.empty() && !s.parsed.has("--load")) throw UsageError("--rename needs --load");
  if (s.parsed.has("--save") && s.parsed.has("--save-params"))
    throw UsageError("--save and --save-params are the same option; give one");
  s.reportFormat = s.parsed.get("--report", "text");
  if (s.reportFormat != "text" && s.reportFormat != "json")
    throw UsageError("--report must be text or json, got '" + s.reportFormat + "'");
  s.backend = s.parsed.get("--backend", "local");
  if (s.backend != "local" && s.backend != "mpi")
    throw UsageError("--backend must be local or mpi, got '" + s.backend + "'");
  if (s.backend == "mpi" && (s.initOnly || s.parsed.has("--ranks") || s.parsed.has("--threads")))
    throw UsageError("--init-only, --ranks and --threads are for the local backend");
  if (s.backend == "mpi" && !mpiBackendAvailable())
    throw UsageError("--backend mpi: this shardc was built without MPI (install "
                     "libopenmpi-dev and reconfigure)");
  if (s.initOnly &&
      (s.parsed.has("--inputs") || s.parsed.has("--outputs") || s.parsed.has("--data-parallel")))
    throw UsageError(std::string(s.parsed.has("--inputs")    ? "--inputs"
                                 : s.parsed.has("--outputs") ? "--outputs"
                                                             : "--data-parallel") +
                     " needs forward, which --init-only does not run");
  requireGradForBackwardOptions(s.parsed);
  if (s.parsed.has("--grad") && s.initOnly)
    throw UsageError("--grad needs the forward; leave out --init-only");
  s.optimizer = parseOptimizerOptions(s.parsed);
  if (s.parsed.has("--grad") && s.parsed.has("--data-parallel") && !s.optimizer)
    throw UsageError("--grad with --data-parallel is a data-parallel training step: give "
                     "--optimizer (its gradients exist only summed into each rank's "
                     "shards; without --data-parallel, --grad returns them whole)");
  s.steps = static_cast<int>(s.parsed.getInt("--steps", 1, 1, 1000000));
  if (s.parsed.has("--steps") && !s.optimizer)
    throw UsageError("--steps counts optimizer steps; give --optimizer");
  if (s.optimizer && s.parsed.has("--repeat"))
    throw UsageError("--repeat reruns one forward unchanged; a training run takes --steps");
  if (s.parsed.has("--save-optimizer") && !s.optimizer)
    throw UsageError("--save-optimizer writes the optimizer's state; give --optimizer");
  if (s.parsed.has("--save-optimizer") && s.parsed.get("--backend", "local") != "local")
    throw UsageError("--save-optimizer is for the local backend");
  if (s.parsed.all("--inputs").size() > 1 && !s.optimizer)
    throw UsageError("several --inputs are the batches of training steps (step k takes the "
                     "k-th, cycling); give --optimizer");
  if (s.optimizer && static_cast<size_t>(s.steps) < s.parsed.all("--inputs").size())
    throw UsageError("--steps " + std::to_string(s.steps) + " would leave some of the " +
                     std::to_string(s.parsed.all("--inputs").size()) +
                     " --inputs batches unused; give --steps " +
                     std::to_string(s.parsed.all("--inputs").size()) + " or more");
  if (s.parsed.has("--batch-dim") && !s.parsed.has("--data-parallel"))
    throw UsageError("--batch-dim says where --data-parallel finds the batch; give "
                     "--data-parallel too");
  for (const std::string &spec : s.parsed.all("--batch-dim")) {
    const size_t eq = spec.find('=');
    int64_t dim = 0;
    size_t used = 0;
    try {
      if (eq != std::string::npos) dim = std::stoll(spec.substr(eq + 1), &used);
    } catch (const std::exception &) {
      used = 0;
    }
    if (eq == std::string::npos || eq == 0 || used == 0 || eq + 1 + used != spec.size())
      throw UsageError("--batch-dim takes NAME=DIM (an input's name and its batch dim), got '" +
                       spec + "'");
    s.inputBatchDims[spec.substr(0, eq)] = dim;
  }
  s.device = s.parsed.get("--device", "cpu");
  if (s.device != "cpu" && !runtime::cudaOrdinalOf(s.device))
    throw UsageError("--device must be cpu, cuda or cuda:N, got '" + s.device + "'");
  if (s.backend == "mpi" && s.device != "cpu" && s.device != "cuda")
    throw UsageError("--device " + s.device +
                     " picks one GPU for local ranks; with --backend "
                     "mpi each process takes its own (give --device cuda)");
  if (s.parsed.has("--ranks")) {
    try {
      s.ranks = runtime::parseRankList(s.parsed.get("--ranks", ""), s.worldSize);
    } catch (const runtime::RuntimeError &error) {
      throw UsageError(error.what());
    }
    if (static_cast<int64_t>(s.ranks.size()) < s.worldSize && !s.initOnly)
      throw UsageError("--ranks " + s.parsed.get("--ranks", "") +
                       " runs some ranks only, which needs --init-only (forward gathers "
                       "every rank's shards)");
  } else {
    for (int64_t r = 0; r < s.worldSize; ++r) s.ranks.push_back(r);
  }
  if (s.backend == "mpi") {
    // One rank per process: the world is MPI's (docs/mpi.md).
    int64_t processes = mpiInitialize();
    if (s.parsed.has("--world-size") && s.worldSize != processes)
      throw UsageError("--world-size " + std::to_string(s.worldSize) + " disagrees with the " +
                       std::to_string(processes) +
                       " MPI processes (leave it out with --backend mpi)");
    s.worldSize = processes;
  }
  return s;
}

}  // namespace shardc::cli
