#include "runtime/Safetensors.h"

#include "runtime/PlanCheck.h"
#include "runtime/RuntimeError.h"
#include "runtime/checkpoint/SafetensorsHeader.h"

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

const char *safetensorsDType(DType dtype) { return checkpoint::safetensorsDTypeName(dtype); }

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
    throw RuntimeError("writing '" + path + "': " + reason);
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
    throw RuntimeError("writing '" + path + "': " + reason);
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
  if (!in) throw RuntimeError(path + ": cannot open: " + errnoText());
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw RuntimeError(path + ": read failed: " + errnoText());
  return parseSafetensors(buffer.str(), path);
}

SafetensorsContents parseSafetensors(const std::string &bytes, const std::string &source) {
  // One header parser for every reader (runtime/checkpoint/SafetensorsHeader.h).
  const std::string prefix = source + ": ";
  const uint64_t headerLength = checkpoint::checkHeaderLength(
      reinterpret_cast<const unsigned char *>(bytes.data()), bytes.size(), prefix);
  checkpoint::SafetensorsHeader header = checkpoint::parseSafetensorsHeader(
      std::string_view(bytes).substr(8, headerLength), bytes.size(), prefix);
  SafetensorsContents contents;
  contents.metadata = header.metadata;
  const uint64_t dataStart = header.dataStart();
  auto &entries = header.entries;
  for (checkpoint::TensorEntry &e : entries) {
    HostTensor t{e.name, e.dtype, std::move(e.shape), {}};
    const auto *first = reinterpret_cast<const std::byte *>(bytes.data() + dataStart + e.begin);
    t.data.assign(first, first + (e.end - e.begin));
    contents.tensors.push_back(std::move(t));
  }
  return contents;
}

}  // namespace shardc::runtime
