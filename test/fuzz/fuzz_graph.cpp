// Fuzzes the graph reader: any bytes must either parse or be rejected with
// a GraphError; never crash, hang, leak, or trip a sanitizer.
#include "compiler/Graph.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    shardc::compiler::parseGraph(
        std::string(reinterpret_cast<const char *>(data), size), "fuzz.json");
  } catch (const shardc::compiler::GraphError &) {
  }
  return 0;
}
