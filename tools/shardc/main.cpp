//===- main.cpp - the shardc command line ---------------------------------===//
//
//   shardc compile MODEL.json [...]   compile an exported graph
//   shardc run MODEL.json [...]       compile and run it on N local ranks
//
// Exit codes: 0 success, 1 runtime failure, 2 bad input or usage.
//
//===----------------------------------------------------------------------===//
#include "tools/shardc/CommandLine.h"
#include "tools/shardc/Commands.h"

#include <iostream>

namespace {

const char *const kUsage =
    "usage: shardc <command> [options]\n"
    "\n"
    "commands:\n"
    "  compile MODEL.json   compile a graph to tc IR, sharded IR or a plan\n"
    "  run MODEL.json       compile, then run init and forward on local ranks\n"
    "\n"
    "`shardc <command> --help` describes a command's options.\n"
    "Exit codes: 0 success, 1 runtime failure, 2 bad input or usage.\n";

} // namespace

int main(int argc, char **argv) {
  using namespace shardc::cli;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::cerr << kUsage;
    return kBadInput;
  }
  std::string command = args.front();
  args.erase(args.begin());
  if (command == "--help" || command == "-h" || command == "help") {
    std::cout << kUsage;
    return kSuccess;
  }
  if (command == "compile")
    return compileCommand(args);
  if (command == "run")
    return runCommand(args);
  std::cerr << "shardc: error: unknown command '" << command << "'\n\n"
            << kUsage;
  return kBadInput;
}
