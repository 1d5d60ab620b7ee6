// Fuzzes the safetensors reader: any bytes are read or rejected with a
// RuntimeError naming the file, the tensor and the reason.
#include "runtime/RuntimeError.h"
#include "runtime/Safetensors.h"

#include <cstddef>
#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  try {
    shardc::runtime::parseSafetensors(
        std::string(reinterpret_cast<const char *>(data), size), "fuzz.safetensors");
  } catch (const shardc::runtime::RuntimeError &) {
  }
  return 0;
}
