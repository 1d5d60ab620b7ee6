// runtime/checkpoint: range reads with dtype conversion through a small
// buffer, and the cooperative writer's all-or-nothing file.
#include "runtime/HalfFloat.h"
#include "runtime/LocalCommunicator.h"
#include "runtime/RankError.h"
#include "runtime/Safetensors.h"
#include "runtime/checkpoint/CooperativeWriter.h"
#include "runtime/checkpoint/ShardReader.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <thread>
#include <unistd.h>

using namespace shardc;
using namespace shardc::runtime;
using namespace std::chrono_literals;

namespace {
/// This process's scratch directory, removed with everything in it when
/// the process ends (each test case runs in its own process under ctest).
std::string tempDir() {
  struct Owned {
    std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                ("shardc-ckpt-" + std::to_string(::getpid()));
    Owned() { std::filesystem::create_directories(dir); }
    ~Owned() {
      std::error_code ignored;
      std::filesystem::remove_all(dir, ignored);
    }
  };
  static const Owned owned;
  return owned.dir.string();
}
}  // namespace

TEST_CASE("readElements converts any range through a tiny buffer", "[checkpoint]") {
  const std::string path = tempDir() + "/f32.safetensors";
  HostTensor t{"w", plan::DType::F32, {10, 7}, {}};
  t.data.resize(70 * 4);
  for (int i = 0; i < 70; ++i) {
    float v = 0.37f * float(i) - 9.1f;
    std::memcpy(t.data.data() + i * 4, &v, 4);
  }
  writeSafetensors(path, {t});
  auto file = checkpoint::SafetensorsFile::open(path);
  const checkpoint::TensorEntry &e = *file->header().find("w");
  for (plan::DType to : {plan::DType::F32, plan::DType::F64, plan::DType::F16, plan::DType::BF16}) {
    const int64_t size = plan::dtypeSize(to);
    std::vector<std::byte> all(70 * size), part(21 * size), expect(21 * size);
    checkpoint::convertElements(plan::DType::F32, t.data.data(), to, all.data(), 70);
    std::vector<std::byte> buffer(12);  // three f32 elements per pread
    checkpoint::readElements(*file, e, 28, 21, to, part.data(), buffer.data(), 12);
    CHECK(std::memcmp(part.data(), all.data() + 28 * size, 21 * size) == 0);
    // Zero elements past the end is fine (a rank holding only padding).
    checkpoint::readElements(*file, e, 70, 0, to, part.data(), buffer.data(), 12);
    CHECK_THROWS_WITH(checkpoint::readElements(*file, e, 60, 11, to, part.data(),
                                               buffer.data(), 12),
                      Catch::Contains("are outside its 70 elements"));
  }
  // bf16 -> f32 is exact; f32 -> bf16 rounds to nearest even.
  uint16_t bf = floatToBFloat16Bits(1.00390625f);  // halfway: rounds to even (1.0)
  float back;
  checkpoint::convertElements(plan::DType::BF16, reinterpret_cast<std::byte *>(&bf),
                              plan::DType::F32, reinterpret_cast<std::byte *>(&back), 1);
  CHECK(back == 1.0f);
}

TEST_CASE("readElements with threads reads the same bytes as one thread", "[checkpoint]") {
  // 5 million f32 elements (20 MB): enough for several 4 MiB parts.
  const std::string path = tempDir() + "/threads.safetensors";
  const int64_t n = 5'000'003;
  HostTensor t{"w", plan::DType::F32, {n}, {}};
  t.data.resize(static_cast<size_t>(n) * 4);
  for (int64_t i = 0; i < n; ++i) {
    float v = 0.001f * float(i % 100'003) - 7.5f;
    std::memcpy(t.data.data() + i * 4, &v, 4);
  }
  writeSafetensors(path, {t});
  auto file = checkpoint::SafetensorsFile::open(path);
  const checkpoint::TensorEntry &e = *file->header().find("w");
  const int64_t first = 17, count = n - 40;
  for (plan::DType to : {plan::DType::F32, plan::DType::BF16}) {
    const int64_t size = plan::dtypeSize(to);
    std::vector<std::byte> one(count * size), many(count * size);
    std::vector<std::byte> buffer(1 << 20);  // converting threads share it in slices
    checkpoint::readElements(*file, e, first, count, to, one.data(), buffer.data(),
                             static_cast<int64_t>(buffer.size()), 1);
    for (int threads : {2, 3, 7}) {
      std::fill(many.begin(), many.end(), std::byte{0x5a});
      checkpoint::readElements(*file, e, first, count, to, many.data(), buffer.data(),
                               static_cast<int64_t>(buffer.size()), threads);
      INFO("to " << plan::dtypeName(to) << ", " << threads << " threads");
      CHECK(one == many);
    }
  }
  // A truncation seen by one thread is reported, not lost.
  REQUIRE(::truncate(path.c_str(), static_cast<off_t>(std::filesystem::file_size(path) / 2)) == 0);
  std::vector<std::byte> out(count * 4), buffer(1 << 20);
  CHECK_THROWS_WITH(checkpoint::readElements(*file, e, first, count, plan::DType::F32,
                                             out.data(), buffer.data(), 1 << 20, 4),
                    Catch::Contains("short read") && Catch::Contains("'w'"));
}

TEST_CASE("a truncated file is reported with file and tensor", "[checkpoint]") {
  const std::string path = tempDir() + "/trunc.safetensors";
  HostTensor t{"w", plan::DType::F32, {4}, std::vector<std::byte>(16)};
  writeSafetensors(path, {t});
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 4);
  CHECK_THROWS_WITH(checkpoint::SafetensorsFile::open(path),
                    Catch::Contains(path + ": tensor 'w': data_offsets [0, 16] extend beyond"));
}

TEST_CASE("the cooperative writer leaves nothing behind on failure", "[checkpoint]") {
  plan::Plan plan;
  plan.worldSize = 2;
  plan.params.push_back({"w", plan::DType::F32, {3, 2}, "cpu", "", false, 2, true, {}});
  std::vector<float> local[2] = {{1, 2, 3, 4}, {5, 6, 0, 0}};
  auto run = [&](const std::string &path) {
    LocalGroup group(2, 10s);
    std::string errors[2];
    std::thread threads[2];
    for (int r = 0; r < 2; ++r)
      threads[r] = std::thread([&, r] {
        LocalCommunicator comm(group, r);
        try {
          checkpoint::saveCooperatively(
              plan, [&](int32_t) { return reinterpret_cast<const std::byte *>(local[r].data()); },
              comm, path);
        } catch (const std::exception &e) {
          errors[r] = e.what();
          group.abort(e.what());
        }
      });
    for (auto &t : threads) t.join();
    return errors[0] + errors[1];
  };
  const std::string dir = tempDir();
  REQUIRE(run(dir + "/ok.safetensors").empty());
  SafetensorsContents read = readSafetensors(dir + "/ok.safetensors");
  REQUIRE(read.tensors.size() == 1);
  std::vector<float> values(6);
  std::memcpy(values.data(), read.tensors[0].data.data(), 24);
  CHECK(values == std::vector<float>{1, 2, 3, 4, 5, 6});

  CHECK_THAT(run(dir + "/missing-dir/out.safetensors"), Catch::Contains("cannot create"));
  CHECK(!std::filesystem::exists(dir + "/missing-dir"));
  for (const auto &entry : std::filesystem::directory_iterator(dir))
    CHECK(entry.path().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("a failed save names the failing rank and its OS reason on every rank", "[checkpoint]") {
  plan::Plan plan;
  plan.worldSize = 3;
  plan.params.push_back({"w", plan::DType::F32, {3, 2}, "cpu", "", false, 1, true, {}});
  std::vector<float> local(2, 1.0f);
  const std::string path = tempDir() + "/missing-dir/out.safetensors";
  LocalGroup group(3, 10s);
  std::string errors[3];
  int64_t failedRank[3] = {-1, -1, -1};
  std::thread threads[3];
  for (int r = 0; r < 3; ++r)
    threads[r] = std::thread([&, r] {
      LocalCommunicator comm(group, r);
      try {
        checkpoint::saveCooperatively(
            plan, [&](int32_t) { return reinterpret_cast<const std::byte *>(local.data()); },
            comm, path);
      } catch (const RankError &e) {
        errors[r] = e.what();
        failedRank[r] = e.rank();
      } catch (const std::exception &e) {
        errors[r] = e.what();
      }
    });
  for (auto &t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r << " reported: " << errors[r]);
    CHECK(failedRank[r] == 0);  // rank 0 creates the file
    CHECK_THAT(errors[r], Catch::StartsWith("writing '" + path + "': cannot create '" + path +
                                            ".tmp.") &&
                              Catch::EndsWith("': No such file or directory"));
  }
}
