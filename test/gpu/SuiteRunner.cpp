// Catch2's runner for the backend suite inside shardc-gpu-tests (whose own
// main prints the GPU check table first).
#define CATCH_CONFIG_RUNNER
#include "SuiteRunner.h"

#include <catch2/catch.hpp>

int runBackendSuite(const char *argv0) {
  Catch::Session session;
  // -w NoTests: a tag that matches nothing fails, not "0 failures".
  const char *args[] = {argv0, "[backends]", "-w", "NoTests"};
  if (session.applyCommandLine(4, args) != 0) return 1;
  return session.run();
}
