#include "runtime/checkpoint/SafetensorsHeader.h"

#include "runtime/PlanCheck.h"
#include "runtime/checkpoint/StrictJson.h"

#include <algorithm>
#include <climits>

namespace shardc::runtime::checkpoint {
using plan::DType;
using nlohmann::json;

const char *safetensorsDTypeName(DType dtype) {
  switch (dtype) {
  case DType::F32: return "F32";
  case DType::F64: return "F64";
  case DType::F16: return "F16";
  case DType::BF16: return "BF16";
  case DType::I64: return "I64";
  }
  return "?";
}

std::optional<DType> parseSafetensorsDTypeName(const std::string &name) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64})
    if (name == safetensorsDTypeName(d)) return d;
  return std::nullopt;
}

uint64_t checkHeaderLength(const unsigned char *prefix, uint64_t fileSize,
                           const std::string &errorPrefix) {
  auto fail = [&](const std::string &reason) { throw CheckpointError(errorPrefix + reason); };
  if (fileSize < 8)
    fail("file is " + std::to_string(fileSize) +
         " bytes, shorter than the 8-byte header length");
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= static_cast<uint64_t>(prefix[i]) << (8 * i);
  if (length > fileSize - 8)
    fail("header length " + std::to_string(length) + " extends beyond the file (" +
         std::to_string(fileSize) + " bytes)");
  if (length > kMaxHeaderBytes)
    fail("header length " + std::to_string(length) + " exceeds the 100 MiB limit");
  return length;
}

SafetensorsHeader parseSafetensorsHeader(std::string_view text, uint64_t fileSize,
                                         const std::string &errorPrefix) {
  auto fail = [&](const std::string &reason) { throw CheckpointError(errorPrefix + reason); };
  json header = parseStrictJson(text, errorPrefix, "header");
  if (!header.is_object())
    fail(std::string("header is not a JSON object but ") + header.type_name());

  SafetensorsHeader result;
  result.headerLength = text.size();
  result.fileSize = fileSize;
  const uint64_t dataSize = fileSize - 8 - text.size();

  for (const auto &item : header.items()) {
    const std::string &name = item.key();
    const json &value = item.value();
    auto tensorFail = [&](const std::string &reason) { fail("tensor '" + name + "': " + reason); };
    if (name == "__metadata__") {
      if (!value.is_object()) fail("__metadata__ is not an object");
      for (const auto &m : value.items()) {
        if (!m.value().is_string()) fail("__metadata__ value for '" + m.key() + "' is not a string");
        result.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!value.is_object()) tensorFail("entry is not an object");
    for (const auto &field : value.items())
      if (field.key() != "dtype" && field.key() != "shape" && field.key() != "data_offsets")
        tensorFail("unknown key '" + field.key() + "'");
    if (!value.contains("dtype") || !value["dtype"].is_string())
      tensorFail("missing or non-string 'dtype'");
    const std::string dtypeText = value["dtype"].get<std::string>();
    auto dtype = parseSafetensorsDTypeName(dtypeText);
    if (!dtype)
      tensorFail("unsupported dtype '" + dtypeText + "' (supported: F32, F64, F16, BF16, I64)");
    if (!value.contains("shape") || !value["shape"].is_array())
      tensorFail("missing or non-array 'shape'");
    std::vector<int64_t> shape;
    for (const json &d : value["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
        tensorFail("shape " + value["shape"].dump() +
                   " has a dimension that is not a non-negative integer");
      shape.push_back(d.get<int64_t>());
    }
    const json &offsets = value.contains("data_offsets") ? value["data_offsets"] : json();
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      tensorFail("'data_offsets' must be an array of two non-negative integers");
    uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end)
      tensorFail("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                 "] has begin after end");
    int64_t expected = checkedLogicalBytes(shape, *dtype);
    if (expected < 0) tensorFail("shape " + value["shape"].dump() + " is too large");
    if (end - begin != static_cast<uint64_t>(expected))
      tensorFail("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                 "] cover " + std::to_string(end - begin) + " bytes but shape " +
                 value["shape"].dump() + " of " + dtypeText + " needs " +
                 std::to_string(expected));
    if (end > dataSize)
      tensorFail("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                 "] extend beyond the end of the file (data section is " +
                 std::to_string(dataSize) + " bytes): truncated file?");
    result.entries.push_back({name, *dtype, std::move(shape), begin, end});
  }

  std::sort(result.entries.begin(), result.entries.end(),
            [](const TensorEntry &a, const TensorEntry &b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t covered = 0;
  for (size_t i = 0; i < result.entries.size(); ++i) {
    const TensorEntry &e = result.entries[i];
    if (e.begin < covered)
      fail("tensor '" + e.name + "': data_offsets [" + std::to_string(e.begin) + ", " +
           std::to_string(e.end) + "] overlap tensor '" + result.entries[i - 1].name + "'");
    if (e.begin > covered)
      fail("tensor '" + e.name + "': data starts at " + std::to_string(e.begin) +
           ", leaving bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) +
           ") unused (safetensors data may not have holes)");
    covered = e.end;
    result.byName[e.name] = i;
  }
  if (covered != dataSize)
    fail("data section is " + std::to_string(dataSize) + " bytes but tensors cover only " +
         std::to_string(covered) + " (trailing bytes or holes)");
  return result;
}

}  // namespace shardc::runtime::checkpoint
