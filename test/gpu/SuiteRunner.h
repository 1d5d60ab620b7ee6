// Runs the Catch2 backend suite compiled into shardc-gpu-tests.
#pragma once

/// Runs the "[backends]" test cases; returns the number of failed ones.
int runBackendSuite(const char *argv0);
