#include "runtime/RuntimeError.h"
#include "runtime/Safetensors.h"

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace shardc::runtime;
using shardc::plan::DType;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

fs::path scratchDir() {
  fs::path dir = fs::temp_directory_path() /
                 ("shardc-safetensors-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

HostTensor tensor(const std::string &name, DType dtype, std::vector<int64_t> shape, int seed) {
  HostTensor t{name, dtype, std::move(shape), {}};
  t.data.resize(static_cast<size_t>(t.expectedBytes()));
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = std::byte((i * 31 + seed) & 0xff);
  return t;
}

/// A file from a header text and a data section.
std::string crafted(const std::string &header, size_t dataBytes, uint64_t claimedLength = ~0ull) {
  uint64_t n = claimedLength == ~0ull ? header.size() : claimedLength;
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return bytes + header + std::string(dataBytes, '\x01');
}

std::string errorOf(const std::string &bytes) {
  try {
    parseSafetensors(bytes, "ckpt.safetensors");
  } catch (const RuntimeError &e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("safetensors round trip of all four dtypes with metadata", "[safetensors]") {
  fs::path path = scratchDir() / "roundtrip.safetensors";
  std::vector<HostTensor> tensors = {tensor("w.f32", DType::F32, {3, 5}, 1),
                                     tensor("w.f64", DType::F64, {2}, 2),
                                     tensor("w.f16", DType::F16, {1, 3}, 3),
                                     tensor("scalar.bf16", DType::BF16, {}, 4),
                                     tensor("empty", DType::F32, {0, 4}, 5)};
  writeSafetensors(path, tensors, {{"format", "pt"}});
  // 8-byte aligned data start.
  std::ifstream in(path, std::ios::binary);
  unsigned char len[8];
  in.read(reinterpret_cast<char *>(len), 8);
  CHECK(len[0] % 8 == 0);

  SafetensorsContents back = readSafetensors(path);
  CHECK(back.metadata == std::map<std::string, std::string>{{"format", "pt"}});
  REQUIRE(back.tensors.size() == tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    INFO(tensors[i].name);
    // Both the zero-byte tensors sort by offset; compare by name.
    const HostTensor *match = nullptr;
    for (const HostTensor &t : back.tensors)
      if (t.name == tensors[i].name) match = &t;
    REQUIRE(match);
    CHECK(match->dtype == tensors[i].dtype);
    CHECK(match->shape == tensors[i].shape);
    CHECK(match->data == tensors[i].data);
  }
  fs::remove_all(path.parent_path());
}

TEST_CASE("safetensors reader rejects every malformed file with a reason", "[safetensors]") {
  const std::string ok = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  CHECK(errorOf(crafted(ok, 8)) == "");
  CHECK_THAT(errorOf("1234"),
             Contains("ckpt.safetensors: file is 4 bytes, shorter than the 8-byte header"));
  CHECK_THAT(errorOf(crafted(ok, 8, 5000)),
             Contains("header length 5000 extends beyond the file"));
  CHECK_THAT(errorOf(crafted("{\"a\": nope}", 0)), Contains("header is not valid JSON"));
  CHECK_THAT(errorOf(crafted("[1, 2]", 0)), Contains("header is not a JSON object"));
  CHECK_THAT(errorOf(crafted(R"({"a":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})", 8)),
             Contains("tensor 'a': unsupported dtype 'I32'"));
  CHECK_THAT(errorOf(crafted(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)),
             Contains("tensor 'a': data_offsets [0, 8] cover 8 bytes but shape [3] of F32 needs 12"));
  CHECK_THAT(errorOf(crafted(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", 8)),
             Contains("tensor 'a': shape [-1] has a dimension"));
  CHECK_THAT(errorOf(crafted(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", 16)),
             Contains("tensor 'a': data_offsets [8, 24] extend beyond the end of the file"));
  CHECK_THAT(errorOf(crafted(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12)),
             Contains("tensor 'b': data_offsets [4, 12] overlap tensor 'a'"));
  CHECK_THAT(errorOf(crafted(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 16)),
             Contains("duplicate key 'a'"));
  CHECK_THAT(errorOf(crafted(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12)),
             Contains("leaving bytes [0, 4) unused"));
  CHECK_THAT(errorOf(crafted(ok, 9)), Contains("data section is 9 bytes but tensors cover only 8"));
  CHECK_THAT(errorOf(crafted(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8)),
             Contains("has begin after end"));
  CHECK_THAT(errorOf(crafted(R"({"a":{"dtype":"F32","shape":[2]}})", 8)),
             Contains("'data_offsets' must be an array"));
  CHECK_THAT(errorOf(crafted(R"({"__metadata__":{"k":1}})", 0)),
             Contains("__metadata__ value for 'k' is not a string"));
}

TEST_CASE("a truncated file on disk is reported with its name", "[safetensors]") {
  fs::path path = scratchDir() / "truncated.safetensors";
  writeSafetensors(path, {tensor("w", DType::F32, {16}, 1)});
  fs::resize_file(path, fs::file_size(path) - 4);
  CHECK_THROWS_WITH(readSafetensors(path),
                    Contains(path.string() + ": tensor 'w': data_offsets [0, 64] extend beyond "
                                             "the end of the file"));
  CHECK_THROWS_WITH(readSafetensors((scratchDir() / "missing").string()),
                    Contains("cannot open"));
  fs::remove_all(path.parent_path());
}

TEST_CASE("a failed write leaves no file behind", "[safetensors]") {
  fs::path dir = scratchDir() / "failed";
  fs::create_directories(dir);
  auto entries = [&] {
    return std::distance(fs::directory_iterator(dir), fs::directory_iterator());
  };
  // Rename fails: the target is a directory. The temp must be cleaned up.
  fs::create_directories(dir / "target.safetensors");
  CHECK_THROWS_WITH(writeSafetensors(dir / "target.safetensors", {tensor("w", DType::F32, {4}, 0)}),
                    Contains("cannot rename"));
  CHECK(entries() == 1);  // only the directory itself
  // Invalid tensors are rejected before anything is written.
  HostTensor bad = tensor("w", DType::F32, {4}, 0);
  bad.data.pop_back();
  CHECK_THROWS_WITH(writeSafetensors(dir / "bad.safetensors", {bad}),
                    Contains("tensor 'w': has 15 bytes of data but its shape needs 16"));
  CHECK_THROWS_WITH(writeSafetensors(dir / "dup.safetensors", {tensor("w", DType::F32, {4}, 0),
                                                               tensor("w", DType::F32, {4}, 0)}),
                    Contains("duplicate tensor name 'w'"));
  // Unwritable directory: nothing to clean up, clear message.
  CHECK_THROWS_WITH(writeSafetensors(dir / "no/such/dir.safetensors", {}),
                    Contains("cannot create"));
  CHECK(entries() == 1);
  fs::remove_all(scratchDir());
}
