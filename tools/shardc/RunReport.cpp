//===- RunReport.cpp - what `shardc run` tells about memory ---------------===//
#include "tools/shardc/RunReport.h"

#include "runtime/GroupedDigits.h"
#include "runtime/InitOps.h"
#include "runtime/MemoryModel.h"
#include "runtime/PlanQueries.h"
#include "runtime/RankSubset.h"
#include "runtime/ResidentMemory.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace shardc::cli {
namespace {

using runtime::groupedDigits;

std::string pad(const std::string &text, size_t width, bool right = true) {
  if (text.size() >= width)
    return text;
  std::string fill(width - text.size(), ' ');
  return right ? fill + text : text + fill;
}

std::string mib(int64_t bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f MiB", bytes / 1048576.0);
  return buffer;
}

bool phaseHolds(const runtime::PhaseReport &phase) {
  return phase.peakBytes == phase.predictedPeakBytes &&
         phase.endBytes == phase.predictedEndBytes &&
         phase.liveAtPeak == phase.predictedLiveAtPeak;
}

/// Category totals, then the largest allocations: a 175B model has
/// thousands of live buffers at its peak.
void explainLive(std::ostringstream &out,
                 const std::vector<runtime::LiveAllocation> &allLive) {
  // A 0-byte buffer holds nothing (the io buffer of a same-dtype load).
  std::vector<runtime::LiveAllocation> live;
  for (const runtime::LiveAllocation &entry : allLive)
    if (entry.bytes > 0) live.push_back(entry);
  constexpr size_t kListed = 12;
  if (live.size() <= kListed) {
    for (const runtime::LiveAllocation &entry : live)
      out << "  " << pad(plan::categoryName(entry.category), 12, false) << " "
          << pad(entry.label, 40, false) << " " << pad(groupedDigits(entry.bytes), 16) << "\n";
    return;
  }
  std::map<std::string, std::pair<int64_t, int64_t>> byCategory;
  for (const runtime::LiveAllocation &entry : live) {
    auto &[count, bytes] = byCategory[plan::categoryName(entry.category)];
    ++count;
    bytes += entry.bytes;
  }
  for (const auto &[category, totals] : byCategory)
    out << "  " << pad(category, 12, false) << " "
        << pad(std::to_string(totals.first) + " buffer(s)", 40, false) << " "
        << pad(groupedDigits(totals.second), 16) << "\n";
  std::vector<runtime::LiveAllocation> largest = live;
  std::stable_sort(largest.begin(), largest.end(),
                   [](const auto &a, const auto &b) { return a.bytes > b.bytes; });
  out << "  largest:\n";
  for (size_t i = 0; i < kListed; ++i)
    out << "  " << pad(plan::categoryName(largest[i].category), 12, false) << " "
        << pad(largest[i].label, 40, false) << " " << pad(groupedDigits(largest[i].bytes), 16)
        << "\n";
}

void explainPeak(std::ostringstream &out, const char *phase, int64_t rankFrom,
                 int64_t rankTo, const runtime::PhaseReport &report,
                 const std::string &rankList = "") {
  out << "\n" << phase << " peak on rank" << (rankFrom == rankTo ? " " : "s ");
  if (!rankList.empty())  // not every rank in between was run (--ranks)
    out << rankList;
  else
    out << rankFrom << (rankTo != rankFrom ? ".." + std::to_string(rankTo) : "");
  out << ": " << groupedDigits(report.peakBytes) << " bytes (" << mib(report.peakBytes)
      << "), predicted " << groupedDigits(report.predictedPeakBytes) << "\n";
  explainLive(out, report.liveAtPeak);
}

/// Explains each run of consecutive ranks with identical live-at-peak lists.
void explainPhase(std::ostringstream &out, const char *phase,
                  const runtime::RunResult &result, bool forward) {
  const auto &ranks = result.ranks;
  size_t first = 0;
  for (size_t i = 1; i <= ranks.size(); ++i) {
    auto phaseOf = [&](size_t r) -> const runtime::PhaseReport & {
      return forward ? *ranks[r].forward : ranks[r].init;
    };
    if (i < ranks.size() && phaseOf(i).liveAtPeak == phaseOf(first).liveAtPeak)
      continue;
    std::vector<int64_t> group;
    for (size_t r = first; r < i; ++r)
      group.push_back(ranks[r].rank);
    const bool gaps = group.back() - group.front() + 1 != static_cast<int64_t>(group.size());
    explainPeak(out, phase, group.front(), group.back(), phaseOf(first),
                gaps ? runtime::formatRankList(group) : "");
    first = i;
  }
}

nlohmann::json liveJson(const std::vector<runtime::LiveAllocation> &list) {
  nlohmann::json out = nlohmann::json::array();
  for (const runtime::LiveAllocation &live : list)
    out.push_back({{"label", live.label},
                   {"category", plan::categoryName(live.category)},
                   {"bytes", live.bytes}});
  return out;
}

nlohmann::json phaseJson(const runtime::PhaseReport &phase) {
  return {{"peak_bytes", phase.peakBytes},
          {"predicted_peak_bytes", phase.predictedPeakBytes},
          {"live_at_peak", liveJson(phase.liveAtPeak)},
          {"predicted_live_at_peak", liveJson(phase.predictedLiveAtPeak)},
          {"end_bytes", phase.endBytes},
          {"predicted_end_bytes", phase.predictedEndBytes},
          {"seconds", phase.seconds},
          {"large_blocks",
           {{"fresh", phase.freshLargeBlocks},
            {"reused", phase.reusedLargeBlocks},
            {"first_touch_bytes", phase.firstTouchBytes}}},
          {"held_peak_bytes", phase.heldPeakBytes}};
}

/// --profile: each op kind's calls and seconds, per forward.
nlohmann::json profileJson(const runtime::OpProfile &profile) {
  const double forwards = static_cast<double>(std::max<int64_t>(profile.functions, 1));
  nlohmann::json ops = nlohmann::json::array();
  for (const auto &[op, time] : profile.byOp)
    ops.push_back({{"op", op},
                   {"calls", static_cast<double>(time.calls) / forwards},
                   {"seconds", time.seconds / forwards}});
  return {{"forwards", profile.functions}, {"ops", ops}};
}

/// --profile: rank 0's op kinds, slowest first, per forward.
std::string formatProfile(const runtime::RankReport &rank) {
  const runtime::OpProfile &profile = *rank.forwardProfile;
  const double forwards = static_cast<double>(std::max<int64_t>(profile.functions, 1));
  std::vector<std::pair<std::string, runtime::OpTime>> ops(profile.byOp.begin(),
                                                           profile.byOp.end());
  std::stable_sort(ops.begin(), ops.end(), [](const auto &a, const auto &b) {
    return a.second.seconds > b.second.seconds;
  });
  const double total = profile.totalSeconds() / forwards;
  std::ostringstream out;
  out << "\nforward op times on rank " << rank.rank << " (per forward, over "
      << profile.functions << (profile.functions == 1 ? " forward" : " forwards")
      << "; each op timed to its end):\n";
  // The name column as wide as the longest op name (moe_experts_gated_grad).
  int width = 20;
  for (const auto &entry : ops) width = std::max(width, static_cast<int>(entry.first.size()));
  char line[200];
  std::snprintf(line, sizeof line, "  %-*s %8s %10s %6s\n", width, "op", "calls", "seconds", "%");
  out << line;
  for (const auto &[op, time] : ops) {
    const double seconds = time.seconds / forwards;
    std::snprintf(line, sizeof line, "  %-*.*s %8.0f %10.4f %6.1f\n", width, 120, op.c_str(),
                  static_cast<double>(time.calls) / forwards, seconds,
                  total > 0 ? 100.0 * seconds / total : 0.0);
    out << line;
  }
  std::snprintf(line, sizeof line, "  %-*s %8s %10.4f\n", width, "total", "", total);
  out << line;
  return out.str();
}

std::vector<int64_t> ranksRun(const runtime::RunResult &result) {
  std::vector<int64_t> ranks;
  for (const runtime::RankReport &rank : result.ranks)
    ranks.push_back(rank.rank);
  return ranks;
}

/// The sum of the ranks' accounted peaks (init's or forward's, whichever
/// is higher on each rank): what the OS should see on top of the baseline.
int64_t accountedPeakSum(const runtime::RunResult &result) {
  int64_t total = 0;
  for (const runtime::RankReport &rank : result.ranks)
    total += std::max(rank.init.peakBytes, rank.forward ? rank.forward->peakBytes : 0);
  return total;
}

/// The OS's view beside the accounting: RSS before the rank threads
/// started (code, compiler leftovers, the plan), its peak while they ran,
/// and what the peak adds beyond the baseline and the accounted bytes.
std::string formatProcessMemory(const runtime::RunResult &result) {
  const runtime::ProcessMemoryReport &process = result.process;
  if (process.peakResident < 0 || process.residentBefore < 0)
    return "\nOS resident memory: /proc/self/status is not readable\n";
  // The growth beside the ledger's figures is residentMemoryLine's.
  std::ostringstream out;
  out << "\nOS peak RSS "
      << (process.peakSinceStart ? "since the process started" : "while the ranks ran") << ": "
      << groupedDigits(process.peakResident) << " bytes (" << mib(process.peakResident)
      << "); RSS before: " << groupedDigits(process.residentBefore) << " ("
      << mib(process.residentBefore) << ")\n";
  return out.str();
}

nlohmann::json processJson(const runtime::RunResult &result) {
  return {{"rss_before_bytes", result.process.residentBefore},
          {"peak_rss_bytes", result.process.peakResident},
          {"peak_rss_since_start", result.process.peakSinceStart},
          {"accounted_peak_bytes", accountedPeakSum(result)}};
}

} // namespace

std::string formatNonShardable(const plan::Plan &plan) {
  std::vector<runtime::ScatteredParam> scattered = runtime::scatteredParams(plan);
  if (scattered.empty())
    return "";
  std::ostringstream out;
  out << scattered.size()
      << " parameter(s) not shardable (computed in full on an owner rank, "
         "then scattered):\n";
  for (const runtime::ScatteredParam &param : scattered)
    out << "  " << pad(param.name, 24, false) << " " << pad(groupedDigits(param.fullBytes), 16)
        << " bytes  owner rank " << param.owner << "\n";
  return out.str();
}

namespace {


} // namespace

std::string formatMemoryPlan(const plan::Plan &plan) {
  std::ostringstream out;
  out << "memory plan: " << plan.params.size() << " parameter(s), " << plan.worldSize
      << " rank(s); unsharded parameter bytes " << groupedDigits(runtime::unshardedParamBytes(plan))
      << "\n";
  out << formatNonShardable(plan);
  std::set<int64_t> special = runtime::ranksWithOwnWork(plan);
  std::vector<std::pair<std::string, int64_t>> groups; // description, rank
  for (int64_t rank : special)
    groups.emplace_back("rank " + std::to_string(rank), rank);
  for (int64_t rank = 0; rank < plan.worldSize; ++rank)
    if (!special.count(rank)) {
      int64_t others = plan.worldSize - static_cast<int64_t>(special.size());
      groups.emplace_back(special.empty()
                              ? "every rank (" + std::to_string(others) + ")"
                              : "every other rank (" + std::to_string(others) + ")",
                          rank);
      break;
    }
  for (const auto &[description, rank] : groups) {
    std::vector<runtime::LiveAllocation> carried;
    for (const plan::Function &function : plan.functions) {
      runtime::MemoryPrediction prediction =
          runtime::predictMemory(plan, function.name, rank, carried);
      out << "\n"
          << function.name << " on " << description << ": peak "
          << groupedDigits(prediction.peakBytes) << " bytes (" << mib(prediction.peakBytes) << "), "
          << groupedDigits(prediction.endBytes) << " at the end\n";
      explainLive(out, prediction.liveAtPeak);
      if (function.name == "init")
        carried = prediction.paramsAtEnd;
    }
  }
  return out.str();
}

bool predictionsHold(const runtime::RunResult &result) {
  for (const runtime::RankReport &rank : result.ranks) {
    if (!phaseHolds(rank.init))
      return false;
    if (rank.forward && !phaseHolds(*rank.forward))
      return false;
  }
  return true;
}

/// The OS's figure beside the ledger's (README.md, "Two memory figures").
static std::string residentMemoryLine(const runtime::RunResult &result, int64_t worldSize) {
  const int64_t ledger = runtime::ledgerPeakSumBytes(result);
  const int64_t copies = runtime::hostCopyBytes(result, worldSize);
  std::ostringstream out;
  out << "resident memory (the OS's count, not the ledger's): peak growth ";
  if (result.residentPeakGrowthBytes)
    out << groupedDigits(*result.residentPeakGrowthBytes) << " bytes ("
        << mib(*result.residentPeakGrowthBytes) << ")";
  else
    out << "unknown (/proc/self/status or clear_refs unavailable)";
  // On a GPU the ledgers count device memory: the host's RSS holds only the
  // host copies (outputs, staged saves), the driver's count is below.
  if (result.device != "cpu")
    out << "; host copies " << groupedDigits(copies) << " (the ledgers count " << result.device
        << "'s memory)\n";
  else
    out << "; ledger: ranks' peaks summed " << groupedDigits(ledger) << " (the host allocator's "
        << groupedDigits(runtime::heldPeakSumBytes(result))
        << ", with blocks kept for reuse) + host copies " << groupedDigits(copies) << "\n";
  return out.str();
}

/// A GPU's own count beside the ledger's: the driver sees every rank's
/// shards plus what each rank's device keeps for itself (stream, cuBLAS
/// workspace, the allocator's pool).
static std::string driverMemoryLine(const runtime::RunResult &result) {
  if (!result.driverBytesHoldingShards) return "";
  int64_t held = 0;
  for (const runtime::RankReport &rank : result.ranks) held += rank.paramBytes;
  std::ostringstream out;
  out << "device memory (the driver's count, cudaMemGetInfo): "
      << groupedDigits(*result.driverBytesHoldingShards) << " bytes ("
      << mib(*result.driverBytesHoldingShards)
      << ") more in use while every rank held its shards than before init; ledger: params "
         "held summed "
      << groupedDigits(held) << "\n";
  if (result.driverBytesAfterForward) {
    int64_t live = 0;
    for (const runtime::RankReport &rank : result.ranks)
      live += rank.forward ? rank.forward->endBytes : 0;
    out << "device memory after forward (outputs live): "
        << groupedDigits(*result.driverBytesAfterForward) << " bytes ("
        << mib(*result.driverBytesAfterForward) << "); ledger: after forward summed "
        << groupedDigits(live) << "\n";
  }
  return out.str();
}

std::string formatTextReport(const RunSummary &summary) {
  const plan::Plan &plan = *summary.plan;
  const runtime::RunResult &result = *summary.result;
  std::ostringstream out;
  out << "shardc run " << summary.model << ": " << plan.params.size()
      << " parameter(s), ";
  if (static_cast<int64_t>(result.ranks.size()) < plan.worldSize)
    out << "ranks " << runtime::formatRankList(ranksRun(result)) << " of "
        << plan.worldSize << " run locally (--ranks)";
  else
    out << plan.worldSize << " local rank(s)";
  if (result.device != "cpu") out << " on " << result.device;
  out << ", seed " << summary.seed << "\n";
  out << "unsharded parameter bytes (what every rank would hold without "
         "sharding): "
      << groupedDigits(result.unshardedParamBytes) << "\n";
  out << formatNonShardable(plan) << "\n";

  // One row per run of consecutive ranks with the same figures ("0..4095"):
  // thousands of local ranks are mostly identical.
  const char *headers[] = {"rank", "params held", "init peak", "forward peak",
                           "after forward", "unsharded"};
  std::vector<std::array<std::string, 6>> rows;
  for (size_t i = 0; i < result.ranks.size(); ++i) {
    const runtime::RankReport &rank = result.ranks[i];
    std::array<std::string, 6> cells = {std::to_string(rank.rank),
                                        groupedDigits(rank.paramBytes),
                                        groupedDigits(rank.init.peakBytes),
                                        rank.forward ? groupedDigits(rank.forward->peakBytes) : "-",
                                        rank.forward ? groupedDigits(rank.forward->endBytes) : "-",
                                        groupedDigits(result.unshardedParamBytes)};
    if (!rows.empty() && std::equal(cells.begin() + 1, cells.end(), rows.back().begin() + 1) &&
        result.ranks[i - 1].rank + 1 == rank.rank) {
      std::string &label = rows.back()[0];
      label = label.substr(0, label.find("..")) + ".." + cells[0];
      continue;
    }
    rows.push_back(cells);
  }
  size_t widths[] = {4, 14, 14, 14, 14, 14};
  for (const auto &row : rows) widths[0] = std::max(widths[0], row[0].size());
  for (size_t i = 0; i < 6; ++i)
    out << (i ? "  " : "") << pad(headers[i], widths[i]);
  out << "\n";
  for (const auto &row : rows) {
    for (size_t i = 0; i < 6; ++i)
      out << (i ? "  " : "") << pad(row[i], widths[i]);
    out << "\n";
  }

  // The slowest rank is what a user waits for.
  double initSeconds = 0, forwardSeconds = 0;
  for (const runtime::RankReport &rank : result.ranks) {
    initSeconds = std::max(initSeconds, rank.init.seconds);
    if (rank.forward)
      forwardSeconds = std::max(forwardSeconds, rank.forward->seconds);
  }
  char timing[128];
  std::snprintf(timing, sizeof timing, "\nwall time (slowest rank): init %.3f s", initSeconds);
  out << timing;
  if (!result.ranks.empty() && result.ranks[0].forward) {
    std::snprintf(timing, sizeof timing, ", forward %.3f s", forwardSeconds);
    out << timing;
  }
  double saveSeconds = 0;
  for (const runtime::RankReport &rank : result.ranks)
    saveSeconds = std::max(saveSeconds, rank.saveSeconds);
  if (saveSeconds > 0) {
    std::snprintf(timing, sizeof timing, ", save %.3f s", saveSeconds);
    out << timing;
  }
  out << "\n";
  // --repeat: the median over repeats of the slowest rank's warm forward.
  if (!result.ranks.empty() && !result.ranks[0].repeats.empty()) {
    std::vector<double> warm(result.ranks[0].repeats.size(), 0.0);
    for (const runtime::RankReport &rank : result.ranks)
      for (size_t i = 0; i < rank.repeats.size() && i < warm.size(); ++i)
        warm[i] = std::max(warm[i], rank.repeats[i].seconds);
    std::sort(warm.begin(), warm.end());
    const size_t n = warm.size();
    const double median = n % 2 ? warm[n / 2] : (warm[n / 2 - 1] + warm[n / 2]) / 2;
    if (result.stepOutputs.empty())
      std::snprintf(timing, sizeof timing,
                    "forward repeated %zu times, outputs identical: median %.4f s, min %.4f s\n",
                    n, median, warm.front());
    else  // --steps: each later step is a repeat that trained on
      std::snprintf(timing, sizeof timing,
                    "training steps 2..%zu: median %.4f s, min %.4f s per step\n", n + 1,
                    median, warm.front());
    out << timing;
  }

  if (!result.ranks.empty() && result.ranks[0].forwardProfile)
    out << formatProfile(result.ranks[0]);

  explainPhase(out, "init", result, /*forward=*/false);
  if (!result.ranks.empty() && result.ranks[0].forward) {
    explainPhase(out, "forward", result, /*forward=*/true);
    const runtime::RankReport &rank0 = result.ranks[0];
    out << "\nafter forward on rank 0: " << groupedDigits(rank0.forward->endBytes) << " bytes ("
        << mib(rank0.forward->endBytes)
        << "): parameter shards + outputs + inputs; gathered parameters "
           "and temporaries are freed\n";
  }
  out << formatProcessMemory(result);
  out << "\npredicted == measured on every rank: "
      << (predictionsHold(result) ? "yes" : "NO") << "\n";
  out << residentMemoryLine(result, static_cast<int64_t>(result.ranks.size()));
  out << driverMemoryLine(result);
  return out.str();
}

std::string formatJsonReport(const RunSummary &summary) {
  const plan::Plan &plan = *summary.plan;
  const runtime::RunResult &result = *summary.result;
  nlohmann::json ranks = nlohmann::json::array();
  for (const runtime::RankReport &rank : result.ranks) {
    nlohmann::json entry = {{"rank", rank.rank},
                            {"param_bytes", rank.paramBytes},
                            {"init_seconds", rank.init.seconds},
                            {"init", phaseJson(rank.init)},
                            {"save_seconds", rank.saveSeconds}};
    if (rank.forward) {
      entry["forward_seconds"] = rank.forward->seconds;
      entry["forward_thread_cpu_seconds"] = rank.forward->threadCpuSeconds;  // LocalRun.h
      entry["forward"] = phaseJson(*rank.forward);
    }
    if (!rank.repeats.empty()) {  // --repeat: the warm forwards after the measured one
      nlohmann::json repeats = nlohmann::json::array();
      for (const runtime::RankReport::Repeat &repeat : rank.repeats)
        repeats.push_back({{"seconds", repeat.seconds},
                           {"thread_cpu_seconds", repeat.threadCpuSeconds},
                           {"fresh_blocks", repeat.freshLargeBlocks},
                           {"first_touch_bytes", repeat.firstTouchBytes}});
      entry["forward_repeats"] = repeats;
    }
    if (rank.forwardProfile) entry["forward_profile"] = profileJson(*rank.forwardProfile);
    ranks.push_back(entry);
  }
  nlohmann::json nonShardable = nlohmann::json::array();
  for (const runtime::ScatteredParam &param : runtime::scatteredParams(plan))
    nonShardable.push_back({{"name", param.name},
                            {"bytes", param.fullBytes},
                            {"owner", param.owner}});
  nlohmann::json report = {{"model", summary.model},
                           {"world_size", plan.worldSize},
                           {"seed", summary.seed},
                           {"device", result.device},
                           {"driver_bytes_holding_shards",
                            result.driverBytesHoldingShards
                                ? nlohmann::json(*result.driverBytesHoldingShards)
                                : nlohmann::json(nullptr)},
                           {"driver_bytes_after_forward",
                            result.driverBytesAfterForward
                                ? nlohmann::json(*result.driverBytesAfterForward)
                                : nlohmann::json(nullptr)},
                           {"unsharded_param_bytes", result.unshardedParamBytes},
                           {"predictions_hold", predictionsHold(result)},
                           {"resident_peak_growth_bytes",
                            result.residentPeakGrowthBytes
                                ? nlohmann::json(*result.residentPeakGrowthBytes)
                                : nlohmann::json(nullptr)},
                           {"ledger_peak_sum_bytes", runtime::ledgerPeakSumBytes(result)},
                           {"held_peak_sum_bytes", runtime::heldPeakSumBytes(result)},
                           {"host_copy_bytes", runtime::hostCopyBytes(result, static_cast<int64_t>(result.ranks.size()))},
                           {"non_shardable", nonShardable},
                           {"ranks_run", ranksRun(result)},
                           {"process", processJson(result)},
                           {"ranks", ranks}};
  if (!summary.trainingSteps.empty()) {  // --steps: each step's loss
    nlohmann::json steps = nlohmann::json::array();
    for (const StepScalars &step : summary.trainingSteps) {
      nlohmann::json values = nlohmann::json::object();
      for (const auto &[name, value] : step) values[name] = value;
      steps.push_back(values);
    }
    report["training_steps"] = steps;
  }
  return report.dump(2) + "\n";
}

std::vector<StepScalars> trainingStepScalars(const runtime::RunResult &result) {
  auto scalars = [](const std::vector<runtime::HostTensor> &outputs) {
    StepScalars step;
    for (const runtime::HostTensor &t : outputs)
      if (t.shape.empty() && t.dtype != plan::DType::I64 &&
          t.data.size() == static_cast<size_t>(plan::dtypeSize(t.dtype)))
        step.emplace_back(t.name, runtime::loadAsDouble(t.dtype, t.data.data(), 0));
    return step;
  };
  std::vector<StepScalars> steps{scalars(result.outputs)};
  for (const std::vector<runtime::HostTensor> &outputs : result.stepOutputs)
    steps.push_back(scalars(outputs));
  return steps;
}

std::string formatTrainingSteps(const std::vector<StepScalars> &steps) {
  std::ostringstream out;
  for (size_t i = 0; i < steps.size(); ++i) {
    out << "step " << i + 1 << ":";
    const char *separator = " ";
    for (const auto &[name, value] : steps[i]) {
      char text[64];
      // float32 values round-trip with 9 digits; a float64 one needs 17.
      std::snprintf(text, sizeof text, static_cast<double>(static_cast<float>(value)) == value
                                           ? "%.9g" : "%.17g", value);
      out << separator << name << " = " << text;
      separator = ", ";
    }
    out << "\n";
  }
  return out.str();
}

} // namespace shardc::cli
