//===- CommandLine.h - the shardc CLI's argument parsing --------*- C++ -*-===//
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardc::cli {

/// Exit codes, documented in docs/cli.md.
enum ExitCode : int { kSuccess = 0, kRuntimeFailure = 1, kBadInput = 2 };

/// A usage mistake: reported with the command's usage line, exit code 2.
class UsageError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// One command's options: those that take a value and plain flags.
struct OptionSpec {
  std::set<std::string> withValue; // e.g. "--world-size", "-o"
  std::set<std::string> flags;     // e.g. "--help"
};

struct ParsedArgs {
  std::vector<std::string> positional;
  std::map<std::string, std::vector<std::string>> values;
  std::set<std::string> flags;

  bool has(const std::string &option) const;
  /// The last value given for `option`, or `fallback`.
  std::string get(const std::string &option, const std::string &fallback) const;
  const std::vector<std::string> &all(const std::string &option) const;
  /// An integer option in [min, max]; UsageError names the option otherwise.
  int64_t getInt(const std::string &option, int64_t fallback, int64_t min,
                 int64_t max) const;
  /// A size in bytes ("80GiB", "1.5e9", "800MB"), 0 when `option` is not
  /// given; UsageError names the option and the units otherwise.
  int64_t getByteSize(const std::string &option) const;
};

/// Accepts "--opt value" and "--opt=value". Throws UsageError.
ParsedArgs parseArgs(const std::vector<std::string> &args,
                     const OptionSpec &spec);

} // namespace shardc::cli
