// Catch2's main, alone in its file so the test files recompile quickly.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
