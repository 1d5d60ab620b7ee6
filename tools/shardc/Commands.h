//===- Commands.h - the shardc subcommands ----------------------*- C++ -*-===//
#pragma once

#include <string>
#include <vector>

namespace shardc::cli {

/// `shardc compile`: graph -> tc | sharded tc | plan. Returns the exit code.
int compileCommand(const std::vector<std::string> &args);
extern const char *const kCompileUsage;

/// `shardc run`: compile, then init + forward on N local ranks.
int runCommand(const std::vector<std::string> &args);
extern const char *const kRunUsage;

} // namespace shardc::cli
