//===- MpiRunCommand.cpp - `shardc run --backend mpi` ---------------------===//
#include "tools/shardc/MpiRunCommand.h"

#include "runtime/DataParallel.h"
#include "runtime/GroupedDigits.h"

#include "tools/shardc/Commands.h"
#include "tools/shardc/RunReport.h"

#ifdef SHARDC_HAVE_MPI
#include "runtime/RankError.h"
#include "runtime/RuntimeError.h"
#include "runtime/Safetensors.h"
#include "runtime/mpi/MpiRun.h"
#ifdef SHARDC_HAVE_MPI_CUDA
#include "runtime/cuda/MpiGpuRank.h"
#endif

#include <nlohmann/json.hpp>

#include <iomanip>
#include <iostream>
#include <sstream>
#endif

namespace shardc::cli {

#ifndef SHARDC_HAVE_MPI

bool mpiBackendAvailable() { return false; }
int64_t mpiInitialize() { return 1; }
int64_t mpiRank() { return 0; }
int runMpiBackend(const ParsedArgs &, const std::string &, uint64_t, double,
                  const std::string &, const plan::Plan &, runtime::RunOptions &,
                  const std::string &, const std::map<std::string, int64_t> &) {
  return kBadInput;
}

#else

bool mpiBackendAvailable() { return true; }
int64_t mpiInitialize() { return runtime::mpi::initialize(); }
int64_t mpiRank() { return runtime::mpi::worldRank(); }

namespace {

using runtime::groupedDigits;

std::string mib(int64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return out.str();
}

/// Accounted tensor bytes next to what the OS saw, one line per process.
std::string formatRss(const runtime::mpi::MpiRunResult &result) {
  std::ostringstream out;
  out << "\nper-process memory: accounted (tensor bytes the runtime allocated) beside the OS's "
         "peak RSS\n(getrusage ru_maxrss: code, MPI buffers and the compiler included)\n";
  const char *headers[] = {"rank", "init peak", "peak RSS after init", "run peak",
                           "peak RSS at end"};
  const int widths[] = {4, 16, 20, 16, 20};
  for (int i = 0; i < 5; ++i) out << (i ? "  " : "") << std::setw(widths[i]) << headers[i];
  out << "\n";
  for (size_t i = 0; i < result.run.ranks.size(); ++i) {
    const runtime::RankReport &rank = result.run.ranks[i];
    int64_t peak = rank.init.peakBytes;
    if (rank.forward) peak = std::max(peak, rank.forward->peakBytes);
    std::string cells[] = {std::to_string(rank.rank), groupedDigits(rank.init.peakBytes),
                           groupedDigits(result.memory[i].peakRssAfterInit), groupedDigits(peak),
                           groupedDigits(result.memory[i].peakRss)};
    for (int c = 0; c < 5; ++c) out << (c ? "  " : "") << std::setw(widths[c]) << cells[c];
    out << "   (" << mib(result.memory[i].peakRss) << ")\n";
  }
  return out.str();
}

[[noreturn]] void fail(const std::string &message, int64_t rank = runtime::mpi::worldRank()) {
  std::cerr << "shardc: error: rank " << rank << ": " << message << std::endl;
  runtime::mpi::abortWorld(kRuntimeFailure);
}

} // namespace

int runMpiBackend(const ParsedArgs &parsed, const std::string &model, uint64_t seed,
                  double timeoutSeconds, const std::string &reportFormat,
                  const plan::Plan &plan, runtime::RunOptions &options,
                  const std::string &device,
                  const std::map<std::string, int64_t> &outputBatchDims) {
  // --save / --save-params: every rank writes its own rows into the one
  // file (runtime/checkpoint/CooperativeWriter.h), as the local backend.
  options.savePath = parsed.has("--save") ? parsed.get("--save", "")
                                          : parsed.get("--save-params", "");
  options.seed = seed;
  options.timeout = std::chrono::duration<double>(timeoutSeconds);
  // --steps K: K training steps, step k on the k-th --inputs batch.
  if (parsed.has("--optimizer")) {
    options.trainingSteps = true;
    options.forwardRepeats = static_cast<int>(parsed.getInt("--steps", 1, 1, 1000000)) - 1;
  }
  runtime::mpi::MpiRunResult result;
  runtime::mpi::MpiRankFactory rankRuntime;  // empty: the CPU
  if (device == "cuda") {
#ifdef SHARDC_HAVE_MPI_CUDA
    rankRuntime = runtime::cuda::gpuMpiRanks(options.timeout);
#else
    fail("--device cuda: this shardc was built without the CUDA runtime");
#endif
  }
  try {
    result = runtime::mpi::runMpi(plan, options, rankRuntime);
  } catch (const runtime::RankError &error) {  // names the rank it happened on
    fail(error.what(), error.rank());
  } catch (const std::exception &error) {
    fail(error.what());
  }
  if (runtime::mpi::worldRank() == 0) {
    RunSummary summary{model, seed, &plan, &result.run, {}};
    if (parsed.has("--optimizer")) {  // each step's loss; --outputs gets the last step's
      summary.trainingSteps = trainingStepScalars(result.run);
      if (reportFormat == "text") std::cout << formatTrainingSteps(summary.trainingSteps);
      if (!result.run.stepOutputs.empty())
        result.run.outputs = std::move(result.run.stepOutputs.back());
    }
    try {
      runtime::restoreBatchDims(result.run.outputs, outputBatchDims);
      if (parsed.has("--outputs"))
        runtime::writeSafetensors(parsed.get("--outputs", ""), result.run.outputs);
    } catch (const std::exception &error) {
      fail(error.what());
    }
    if (reportFormat == "json") {
      nlohmann::json report = nlohmann::json::parse(formatJsonReport(summary));
      report["backend"] = "mpi";
      report["device"] = device;
      for (size_t i = 0; i < result.memory.size() && i < report["ranks"].size(); ++i) {
        report["ranks"][i]["peak_rss_after_init_bytes"] = result.memory[i].peakRssAfterInit;
        report["ranks"][i]["peak_rss_bytes"] = result.memory[i].peakRss;
      }
      std::cout << report.dump(2) << "\n";
    } else {
      std::string text = formatTextReport(summary);
      const std::string local = " local rank(s)";
      if (size_t at = text.find(local); at != std::string::npos)
        text.replace(at, local.size(), " MPI process(es)");
      if (device == "cuda") text += "device: cuda, one GPU per MPI process, collectives over NCCL\n";
      std::cout << text << formatRss(result);
    }
    std::cout.flush();
  }
  runtime::mpi::finalize();
  return kSuccess;
}

#endif

} // namespace shardc::cli
