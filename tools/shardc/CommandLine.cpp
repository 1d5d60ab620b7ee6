//===- CommandLine.cpp - the shardc CLI's argument parsing ----------------===//
#include "tools/shardc/CommandLine.h"

#include <charconv>

namespace shardc::cli {

bool ParsedArgs::has(const std::string &option) const {
  return flags.count(option) || values.count(option);
}

std::string ParsedArgs::get(const std::string &option,
                            const std::string &fallback) const {
  auto it = values.find(option);
  return it == values.end() ? fallback : it->second.back();
}

const std::vector<std::string> &ParsedArgs::all(const std::string &option) const {
  static const std::vector<std::string> none;
  auto it = values.find(option);
  return it == values.end() ? none : it->second;
}

int64_t ParsedArgs::getInt(const std::string &option, int64_t fallback,
                           int64_t min, int64_t max) const {
  if (!values.count(option))
    return fallback;
  const std::string text = get(option, "");
  int64_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size())
    throw UsageError(option + " expects an integer, got '" + text + "'");
  if (value < min || value > max)
    throw UsageError(option + " must be between " + std::to_string(min) +
                     " and " + std::to_string(max) + ", got " + text);
  return value;
}

int64_t ParsedArgs::getByteSize(const std::string &option) const {
  if (!values.count(option)) return 0;
  const std::string text = get(option, "");
  double count = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), count);
  const std::string unit(end, text.data() + text.size());
  // Binary units as memory is sold in GPUs and `free -h`; decimal ones as
  // disks and datasheets count.
  static const std::map<std::string, double> kUnits{{"", 1},
                                                    {"B", 1},
                                                    {"KB", 1e3},
                                                    {"MB", 1e6},
                                                    {"GB", 1e9},
                                                    {"TB", 1e12},
                                                    {"KiB", 1024.0},
                                                    {"MiB", 1048576.0},
                                                    {"GiB", 1073741824.0},
                                                    {"TiB", 1099511627776.0}};
  auto scale = kUnits.find(unit);
  if (error != std::errc() || end == text.data() || scale == kUnits.end())
    throw UsageError(option +
                     " expects a size in bytes, optionally with a unit (KB, MB, GB, "
                     "TB, KiB, MiB, GiB, TiB), such as 80GiB; got '" +
                     text + "'");
  const double bytes = count * scale->second;
  if (!(bytes >= 1) || bytes > 9.2e18)
    throw UsageError(option + " must be at least 1 byte and at most 8 EiB, got '" + text + "'");
  return static_cast<int64_t>(bytes);
}

ParsedArgs parseArgs(const std::vector<std::string> &args,
                     const OptionSpec &spec) {
  ParsedArgs parsed;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg.size() < 2 || arg[0] != '-') {
      parsed.positional.push_back(arg);
      continue;
    }
    std::string name = arg;
    std::string value;
    bool inlineValue = false;
    if (auto eq = arg.find('='); eq != std::string::npos && arg.rfind("--", 0) == 0) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    if (spec.flags.count(name)) {
      if (inlineValue)
        throw UsageError(name + " takes no value");
      parsed.flags.insert(name);
    } else if (spec.withValue.count(name)) {
      if (!inlineValue) {
        if (i + 1 >= args.size())
          throw UsageError(name + " expects a value");
        value = args[++i];
      }
      parsed.values[name].push_back(value);
    } else {
      throw UsageError("unknown option '" + name + "'");
    }
  }
  return parsed;
}

} // namespace shardc::cli
