#include "runtime/checkpoint/CooperativeWriter.h"
#include "runtime/checkpoint/FileIo.h"

#include "runtime/RankError.h"
#include "runtime/RuntimeError.h"
#include "runtime/checkpoint/SafetensorsHeader.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <optional>
#include <unistd.h>

namespace shardc::runtime::checkpoint {
using plan::Param;

SaveLayout computeSaveLayout(const plan::Plan &plan) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::vector<std::vector<uint64_t>> relative(plan.params.size());
  uint64_t offset = 0;
  for (size_t i = 0; i < plan.params.size(); ++i) {
    const Param &p = plan.params[i];
    if (!p.persistent) continue;  // not in the model's state_dict
    const uint64_t bytes = static_cast<uint64_t>(p.fullBytes());
    // The own name, then each tied name with its own copy: safetensors
    // readers refuse overlapping offsets, and torch's strict load wants
    // every state_dict name.
    std::vector<std::string> names{p.name};
    names.insert(names.end(), p.tiedNames.begin(), p.tiedNames.end());
    for (const std::string &name : names) {
      header[name] = {{"dtype", safetensorsDTypeName(p.dtype)},
                      {"shape", p.shape},
                      {"data_offsets", {offset, offset + bytes}}};
      relative[i].push_back(offset);
      offset += bytes;
    }
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  SaveLayout layout;
  layout.prefix.resize(8);
  for (int i = 0; i < 8; ++i)
    layout.prefix[i] = static_cast<char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  layout.prefix += text;
  for (const std::vector<uint64_t> &copies : relative) {
    std::vector<uint64_t> &absolute = layout.offsets.emplace_back();
    for (uint64_t r : copies) absolute.push_back(layout.prefix.size() + r);
  }
  layout.fileBytes = layout.prefix.size() + offset;
  return layout;
}

namespace {

/// Every rank's error after a step ("" = ok); all ranks learn all. The
/// lengths travel first, so the texts cost a second collective only when a
/// rank failed.
std::vector<std::string> exchangeErrors(Communicator &comm, const std::string &mine) {
  const size_t n = static_cast<size_t>(comm.worldSize());
  int64_t length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(n);
  comm.allGather(&length, sizeof length, lengths.data());
  std::vector<std::string> errors(n);
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  if (longest == 0) return errors;
  std::string slot = mine;
  slot.resize(static_cast<size_t>(longest), '\0');
  std::string all(n * static_cast<size_t>(longest), '\0');
  comm.allGather(slot.data(), static_cast<size_t>(longest), all.data());
  for (size_t r = 0; r < n; ++r)
    errors[r] = all.substr(r * static_cast<size_t>(longest), static_cast<size_t>(lengths[r]));
  return errors;
}

/// When any rank failed, every rank throws the lowest failing rank's own
/// reason (with its OS error), naming that rank: whichever rank the runner
/// reports, the user reads the failure where it happened.
void throwFirstError(const std::vector<std::string> &errors, const std::string &path) {
  for (size_t r = 0; r < errors.size(); ++r)
    if (!errors[r].empty())
      throw RankError(static_cast<int64_t>(r), "writing '" + path + "': " + errors[r]);
}

}  // namespace

void saveCooperatively(const plan::Plan &plan,
                       const std::function<const std::byte *(int32_t)> &localData,
                       Communicator &comm, const std::string &path) {
  const int64_t rank = comm.rank();
  const SaveLayout layout = computeSaveLayout(plan);
  // Rank 0's pid names the temporary (ranks may be separate processes).
  int64_t pid = ::getpid();
  std::vector<int64_t> pids(static_cast<size_t>(comm.worldSize()));
  comm.allGather(&pid, sizeof pid, pids.data());
  const std::string temp = path + ".tmp." + std::to_string(pids[0]);
  // Rank 0 removes the temporary on every exit but a successful rename
  // (also when a collective throws because another rank failed).
  struct Guard {
    std::string path;
    bool active = false;
    ~Guard() {
      if (active) ::unlink(path.c_str());
    }
  } guard{temp};

  // 1. Rank 0 creates the file, writes the header, sizes it.
  std::string error;
  if (rank == 0) {
    guard.active = true;
    int fd = ::open(temp.c_str(), O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
      error = "cannot create '" + temp + "': " + std::strerror(errno);
    } else {
      if (!pwriteFully(fd, reinterpret_cast<const std::byte *>(layout.prefix.data()),
                       layout.prefix.size(), 0) ||
          ::ftruncate(fd, static_cast<off_t>(layout.fileBytes)) != 0)
        error = "writing the header of '" + temp + "' failed: " + std::strerror(errno);
      if (::close(fd) != 0 && error.empty())
        error = "closing '" + temp + "' failed: " + std::strerror(errno);
    }
  }
  throwFirstError(exchangeErrors(comm, error), path);

  // 2. Every rank writes its own valid rows; rank 0 the replicated tensors.
  int fd = ::open(temp.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) error = "cannot open '" + temp + "': " + std::strerror(errno);
  for (size_t i = 0; fd >= 0 && error.empty() && i < plan.params.size(); ++i) {
    const Param &p = plan.params[i];
    uint64_t begin = 0, bytes = 0;
    if (p.sharded()) {
      const uint64_t rowBytes = static_cast<uint64_t>(p.rowElements() * plan::dtypeSize(p.dtype));
      begin = static_cast<uint64_t>(rank * p.chunkRows) * rowBytes;
      bytes = static_cast<uint64_t>(p.validRows(rank)) * rowBytes;
    } else if (rank == 0) {
      bytes = static_cast<uint64_t>(p.fullBytes());
    }
    if (bytes == 0 || layout.offsets[i].empty()) continue;
    const std::byte *data = localData(static_cast<int32_t>(i));
    if (!data) {
      error = "param '" + p.name + "' has no storage on rank " + std::to_string(rank);
      break;
    }
    for (uint64_t at : layout.offsets[i])
      if (error.empty() && !pwriteFully(fd, data, bytes, at + begin))
        error = "writing param '" + p.name + "' into '" + temp + "' failed: " +
                std::strerror(errno);
  }
  if (fd >= 0 && ::close(fd) != 0 && error.empty())
    error = "closing '" + temp + "' failed: " + std::strerror(errno);
  throwFirstError(exchangeErrors(comm, error), path);

  // 3. Every rank is done: rank 0 renames; everybody learns the outcome.
  if (rank == 0) {
    if (std::rename(temp.c_str(), path.c_str()) != 0)
      error = "cannot rename '" + temp + "' onto it: " + std::strerror(errno);
    else
      guard.active = false;
  }
  throwFirstError(exchangeErrors(comm, error), path);
}

}  // namespace shardc::runtime::checkpoint
