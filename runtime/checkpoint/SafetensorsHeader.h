// The safetensors header: one parser and validator for every reader
// (runtime/Safetensors.cpp reads whole files through it, the checkpoint
// readers read byte ranges of tensors it describes).
//
//   8 bytes little-endian N, N bytes of JSON {name: {"dtype", "shape",
//   "data_offsets": [begin, end]}, "__metadata__"?: {str: str}}, data.
//
// Validation (each failure names the file, the tensor when there is one, and
// the reason): header length beyond the file or above 100 MiB, header not
// JSON or not an object, duplicate keys, unknown dtype, bad shape, offsets
// not matching shape * dtype size, offsets beyond the file (truncated),
// overlapping tensors, holes or trailing bytes in the data section.
#pragma once

#include "runtime/Plan.h"
#include "runtime/RuntimeError.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardc::runtime::checkpoint {

/// A bad checkpoint or index file (the user's input: shardc exits 2). The
/// message reads "FILE: tensor 'x': reason" or "FILE: reason".
class CheckpointError : public RuntimeError {
public:
  using RuntimeError::RuntimeError;
};

/// Header lengths above this are refused (the reference implementation's bound).
inline constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;

struct TensorEntry {
  std::string name;
  plan::DType dtype = plan::DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // relative to the start of the data section
};

struct SafetensorsHeader {
  uint64_t headerLength = 0;
  uint64_t fileSize = 0;
  std::vector<TensorEntry> entries;  // in data-offset order
  std::map<std::string, size_t> byName;
  std::map<std::string, std::string> metadata;

  uint64_t dataStart() const { return 8 + headerLength; }
  const TensorEntry *find(const std::string &name) const {
    auto it = byName.find(name);
    return it == byName.end() ? nullptr : &entries[it->second];
  }
};

/// "F32", "F64", "F16", "BF16", "I64".
const char *safetensorsDTypeName(plan::DType dtype);
std::optional<plan::DType> parseSafetensorsDTypeName(const std::string &name);

/// The 8-byte length prefix, checked against the file size (>= 8 bytes) and
/// kMaxHeaderBytes. `errorPrefix` starts every message ("model.safetensors: ").
uint64_t checkHeaderLength(const unsigned char *prefix8, uint64_t fileSize,
                           const std::string &errorPrefix);

/// Parses and validates the JSON header of a file of `fileSize` bytes whose
/// header length is `json.size()`. Throws CheckpointError.
SafetensorsHeader parseSafetensorsHeader(std::string_view json, uint64_t fileSize,
                                         const std::string &errorPrefix);

}  // namespace shardc::runtime::checkpoint
