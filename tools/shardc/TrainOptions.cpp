#include "tools/shardc/TrainOptions.h"

#include <cmath>
#include <cstdlib>
#include <regex>

namespace shardc::cli {
namespace {

/// A finite number, the whole text of it.
double parseNumber(const std::string &option, const std::string &text) {
  char *end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value))
    throw UsageError(option + " takes a number, got '" + text + "'");
  return value;
}

}  // namespace

std::optional<compiler::OptimizerOptions> parseOptimizerOptions(const ParsedArgs &parsed) {
  if (!parsed.has("--optimizer")) {
    for (const std::string &option : kTrainValueOptions)
      if (parsed.has(option))
        throw UsageError(option + " is an optimizer setting; give --optimizer sgd|adamw");
    return std::nullopt;
  }
  compiler::OptimizerOptions options;
  options.optimizer = parsed.get("--optimizer", "");
  if (options.optimizer != "sgd" && options.optimizer != "adamw")
    throw UsageError("--optimizer must be sgd or adamw, got '" + options.optimizer + "'");
  if (!parsed.has("--grad"))
    throw UsageError("--optimizer steps on the gradients of a loss; give --grad LOSS");
  if (!parsed.has("--lr")) throw UsageError("--optimizer needs --lr");
  options.lr = parseNumber("--lr", parsed.get("--lr", ""));
  if (!(options.lr > 0)) throw UsageError("--lr must be positive");
  const bool adamw = options.optimizer == "adamw";
  if (parsed.has("--momentum")) {
    if (adamw) throw UsageError("--momentum is SGD's; AdamW has --betas");
    options.momentum = parseNumber("--momentum", parsed.get("--momentum", ""));
    if (options.momentum < 0) throw UsageError("--momentum must not be negative");
  }
  if (parsed.has("--nesterov")) {
    if (adamw || options.momentum == 0)
      throw UsageError("--nesterov is SGD's Nesterov momentum; it needs --momentum");
    options.nesterov = true;
  }
  for (const char *option : {"--betas", "--eps"})
    if (parsed.has(option) && !adamw)
      throw UsageError(std::string(option) + " is AdamW's; give --optimizer adamw");
  if (parsed.has("--weight-decay")) {
    options.weightDecay = parseNumber("--weight-decay", parsed.get("--weight-decay", ""));
    if (options.weightDecay < 0) throw UsageError("--weight-decay must not be negative");
  }
  if (parsed.has("--betas")) {
    const std::string betas = parsed.get("--betas", "");
    const size_t comma = betas.find(',');
    if (comma == std::string::npos)
      throw UsageError("--betas takes B1,B2, got '" + betas + "'");
    options.beta1 = parseNumber("--betas", betas.substr(0, comma));
    options.beta2 = parseNumber("--betas", betas.substr(comma + 1));
    for (double beta : {options.beta1, options.beta2})
      if (!(beta >= 0 && beta < 1)) throw UsageError("--betas must lie in [0, 1)");
  }
  options.stateFile = parsed.get("--load-optimizer", "");
  if (parsed.has("--eps")) {
    options.eps = parseNumber("--eps", parsed.get("--eps", ""));
    if (!(options.eps > 0)) throw UsageError("--eps must be positive");
  }
  // The learning-rate schedule, by the optimizer's step count (SGD counts
  // its steps when it has a schedule).
  options.warmupSteps = parsed.getInt("--warmup-steps", 0, 0, int64_t{1} << 40);
  options.decaySteps = parsed.getInt("--decay-steps", 0, 0, int64_t{1} << 40);
  if (parsed.has("--min-lr")) {
    if (!parsed.has("--decay-steps"))
      throw UsageError("--min-lr is where the decay ends; give --decay-steps");
    options.minLr = parseNumber("--min-lr", parsed.get("--min-lr", ""));
    if (!(options.minLr >= 0 && options.minLr <= options.lr))
      throw UsageError("--min-lr must lie in [0, --lr]");
  }
  // Clipping (torch.nn.utils.clip_grad_norm_): one global norm per step.
  if (parsed.has("--clip-grad-norm")) {
    options.maxGradNorm = parseNumber("--clip-grad-norm", parsed.get("--clip-grad-norm", ""));
    if (!(options.maxGradNorm > 0))
      throw UsageError("--clip-grad-norm must be positive (the largest global gradient norm)");
  }
  // Gradient accumulation: K forward and backward passes per step.
  options.accumulate = parsed.getInt("--accumulate", 1, 1, int64_t{1} << 20);
  // Parameter groups without weight decay (biases, norms), by name.
  options.noWeightDecay = parsed.all("--no-weight-decay");
  for (const std::string &pattern : options.noWeightDecay) try {
      std::regex check(pattern, std::regex::extended);
    } catch (const std::regex_error &) {
      throw UsageError("--no-weight-decay takes a regex (POSIX extended), got '" + pattern + "'");
    }
  return options;
}

void implyDataParallel(ParsedArgs &parsed) {
  if (parsed.has("--accumulate")) parsed.flags.insert("--data-parallel");
}

void requireGradForBackwardOptions(const ParsedArgs &parsed) {
  if (parsed.has("--recompute-activations") && !parsed.has("--grad"))
    throw UsageError(
        "--recompute-activations needs --grad LOSS: it recomputes in the backward what the "
        "forward computed, and a forward alone keeps nothing for a backward");
}

}  // namespace shardc::cli
