#include "runtime/Safetensors.h"

#include "runtime/PlanCheck.h"
#include "runtime/RuntimeError.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

namespace shardc::runtime {
using plan::DType;
using nlohmann::json;

namespace {

// A header longer than this is surely not a real checkpoint header (the
// reference implementation uses the same bound).
constexpr uint64_t kMaxHeaderBytes = 100ull * 1024 * 1024;

const char *safetensorsDType(DType dtype) {
  switch (dtype) {
  case DType::F32: return "F32";
  case DType::F64: return "F64";
  case DType::F16: return "F16";
  case DType::BF16: return "BF16";
  case DType::I64: return "I64";
  }
  return "?";
}

std::optional<DType> parseSafetensorsDType(const std::string &name) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64})
    if (name == safetensorsDType(d)) return d;
  return std::nullopt;
}

std::string errnoText() { return std::strerror(errno); }

/// Removes the temporary file unless dismissed (RAII so every throw cleans up).
struct TempFileGuard {
  std::string path;
  bool active = true;
  ~TempFileGuard() {
    if (active) std::remove(path.c_str());
  }
};

std::string buildHeader(const std::string &path, const std::vector<HostTensor> &tensors,
                        const std::map<std::string, std::string> &metadata) {
  auto fail = [&](const std::string &reason) {
    throw RuntimeError("writing safetensors '" + path + "': " + reason);
  };
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const HostTensor &t : tensors) {
    if (t.name.empty()) fail("a tensor has an empty name");
    if (t.name == "__metadata__") fail("'__metadata__' is reserved and cannot name a tensor");
    if (!names.insert(t.name).second) fail("duplicate tensor name '" + t.name + "'");
    int64_t expected = checkedLogicalBytes(t.shape, t.dtype);
    if (expected < 0) fail("tensor '" + t.name + "': invalid shape");
    if (static_cast<uint64_t>(expected) != t.data.size())
      fail("tensor '" + t.name + "': has " + std::to_string(t.data.size()) +
           " bytes of data but its shape needs " + std::to_string(expected));
    header[t.name] = {{"dtype", safetensorsDType(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.data.size()}}};
    offset += t.data.size();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

void writeSafetensors(const std::string &path, const std::vector<HostTensor> &tensors,
                      const std::map<std::string, std::string> &metadata) {
  const std::string header = buildHeader(path, tensors, metadata);
  TempFileGuard temp{path + ".tmp." + std::to_string(::getpid())};
  auto fail = [&](const std::string &reason) {
    throw RuntimeError("writing safetensors '" + path + "': " + reason);
  };
  {
    std::ofstream out(temp.path, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot create '" + temp.path + "': " + errnoText());
    unsigned char length[8];
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(n >> (8 * i));
    out.write(reinterpret_cast<const char *>(length), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const HostTensor &t : tensors)
      out.write(reinterpret_cast<const char *>(t.data.data()),
                static_cast<std::streamsize>(t.data.size()));
    out.flush();
    if (!out) fail("write to '" + temp.path + "' failed: " + errnoText());
    out.close();
    if (!out) fail("closing '" + temp.path + "' failed: " + errnoText());
  }
  if (std::rename(temp.path.c_str(), path.c_str()) != 0)
    fail("cannot rename '" + temp.path + "' onto it: " + errnoText());
  temp.active = false;
}

SafetensorsContents readSafetensors(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError("safetensors '" + path + "': cannot open: " + errnoText());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw RuntimeError("safetensors '" + path + "': read failed: " + errnoText());
  return parseSafetensors(buffer.str(), path);
}

SafetensorsContents parseSafetensors(const std::string &bytes, const std::string &source) {
  auto fail = [&](const std::string &reason) -> void {
    throw RuntimeError("safetensors '" + source + "': " + reason);
  };
  if (bytes.size() < 8)
    fail("file is " + std::to_string(bytes.size()) +
         " bytes, shorter than the 8-byte header length");
  uint64_t headerLength = 0;
  for (int i = 0; i < 8; ++i)
    headerLength |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (headerLength > bytes.size() - 8)
    fail("header length " + std::to_string(headerLength) + " extends beyond the file (" +
         std::to_string(bytes.size()) + " bytes)");
  if (headerLength > kMaxHeaderBytes)
    fail("header length " + std::to_string(headerLength) + " exceeds the 100 MiB limit");

  // nlohmann keeps the last of duplicate keys silently; a checkpoint with two
  // entries for one tensor is ambiguous, so detect them while parsing.
  std::vector<std::set<std::string>> openObjects;
  std::string duplicate;
  auto callback = [&](int, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::object_start) openObjects.emplace_back();
    else if (event == json::parse_event_t::object_end && !openObjects.empty())
      openObjects.pop_back();
    else if (event == json::parse_event_t::key && !openObjects.empty() &&
             !openObjects.back().insert(parsed.get<std::string>()).second &&
             duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<int64_t>(headerLength),
                         callback);
  } catch (const json::exception &e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
  if (!duplicate.empty()) fail("header has duplicate key '" + duplicate + "'");
  if (!header.is_object()) fail(std::string("header is not a JSON object but ") + header.type_name());

  SafetensorsContents contents;
  struct Entry { std::string name; DType dtype; std::vector<int64_t> shape; uint64_t begin, end; };
  std::vector<Entry> entries;
  const uint64_t dataStart = 8 + headerLength;
  const uint64_t dataSize = bytes.size() - dataStart;

  for (const auto &item : header.items()) {
    const std::string &name = item.key();
    const json &value = item.value();
    auto tensorFail = [&](const std::string &reason) {
      fail("tensor '" + name + "': " + reason);
    };
    if (name == "__metadata__") {
      if (!value.is_object()) fail("__metadata__ is not an object");
      for (const auto &m : value.items()) {
        if (!m.value().is_string())
          fail("__metadata__ value for '" + m.key() + "' is not a string");
        contents.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (!value.is_object()) tensorFail("entry is not an object");
    for (const auto &field : value.items())
      if (field.key() != "dtype" && field.key() != "shape" && field.key() != "data_offsets")
        tensorFail("unknown key '" + field.key() + "'");
    if (!value.contains("dtype") || !value["dtype"].is_string())
      tensorFail("missing or non-string 'dtype'");
    auto dtype = parseSafetensorsDType(value["dtype"].get<std::string>());
    if (!dtype)
      tensorFail("unsupported dtype '" + value["dtype"].get<std::string>() +
                 "' (supported: F32, F64, F16, BF16, I64)");
    if (!value.contains("shape") || !value["shape"].is_array())
      tensorFail("missing or non-array 'shape'");
    std::vector<int64_t> shape;
    for (const json &d : value["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
        tensorFail("shape " + value["shape"].dump() + " has a dimension that is not a "
                   "non-negative integer");
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
                 value["shape"].dump() + " of " + value["dtype"].get<std::string>() +
                 " needs " + std::to_string(expected));
    if (end > dataSize)
      tensorFail("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                 "] extend beyond the end of the file (data section is " +
                 std::to_string(dataSize) + " bytes): truncated file?");
    entries.push_back({name, *dtype, std::move(shape), begin, end});
  }

  std::sort(entries.begin(), entries.end(), [](const Entry &a, const Entry &b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry &e = entries[i];
    if (e.begin < covered)
      fail("tensor '" + e.name + "': data_offsets [" + std::to_string(e.begin) + ", " +
           std::to_string(e.end) + "] overlap tensor '" + entries[i - 1].name + "'");
    if (e.begin > covered)
      fail("tensor '" + e.name + "': data starts at " + std::to_string(e.begin) +
           ", leaving bytes [" + std::to_string(covered) + ", " + std::to_string(e.begin) +
           ") unused (safetensors data may not have holes)");
    covered = e.end;
  }
  if (covered != dataSize)
    fail("data section is " + std::to_string(dataSize) + " bytes but tensors cover only " +
         std::to_string(covered) + " (trailing bytes or holes)");

  for (Entry &e : entries) {
    HostTensor t{e.name, e.dtype, std::move(e.shape), {}};
    const auto *first = reinterpret_cast<const std::byte *>(bytes.data() + dataStart + e.begin);
    t.data.assign(first, first + (e.end - e.begin));
    contents.tensors.push_back(std::move(t));
  }
  return contents;
}

}  // namespace shardc::runtime
