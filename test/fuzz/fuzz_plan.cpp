// Fuzzes the Plan deserializer (and its semantic check): any bytes are a
// valid plan or a RuntimeError naming the JSON path.
#include "runtime/PlanJson.h"
#include "runtime/RuntimeError.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    shardc::runtime::planFromJson(
        std::string(reinterpret_cast<const char *>(data), size), "fuzz.plan.json");
  } catch (const shardc::runtime::RuntimeError &) {
  }
  return 0;
}
