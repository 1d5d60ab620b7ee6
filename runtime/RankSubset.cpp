#include "runtime/RankSubset.h"

#include "runtime/RuntimeError.h"

#include <algorithm>
#include <cstring>
#include <set>

namespace shardc::runtime {
using namespace shardc::plan;

namespace {

/// A non-negative decimal integer below 2^62, or -1.
int64_t parseRank(const std::string &text) {
  if (text.empty() || text.size() > 18) return -1;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

std::vector<int64_t> parseRankList(const std::string &text, int64_t worldSize) {
  const std::string place = "--ranks '" + text + "': ";
  if (text.empty()) throw RuntimeError(place + "empty; give ranks like 0, 0-3 or 0,17,63");
  std::set<int64_t> ranks;
  size_t begin = 0;
  while (true) {
    const size_t comma = text.find(',', begin);
    const std::string item = text.substr(begin, comma == std::string::npos ? comma : comma - begin);
    if (item.empty())
      throw RuntimeError(place + "an empty item (give RANK or FIRST-LAST between commas)");
    const size_t dash = item.find('-');
    const int64_t first = parseRank(item.substr(0, dash));
    const int64_t last = dash == std::string::npos ? first : parseRank(item.substr(dash + 1));
    if (first < 0 || last < 0)
      throw RuntimeError(place + "'" + item +
                         "' is not a rank or a range (RANK or FIRST-LAST, decimal)");
    if (first > last)
      throw RuntimeError(place + "'" + item + "': the range's first rank is above its last");
    if (last >= worldSize)
      throw RuntimeError(place + "rank " + std::to_string(last) +
                         " is out of range for world size " + std::to_string(worldSize) +
                         " (ranks are 0.." + std::to_string(worldSize - 1) + ")");
    for (int64_t r = first; r <= last; ++r)
      if (!ranks.insert(r).second)
        throw RuntimeError(place + "rank " + std::to_string(r) + " is listed twice");
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return {ranks.begin(), ranks.end()};
}

std::string formatRankList(const std::vector<int64_t> &ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(ranks[i]);
    if (j > i) out += "-" + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

Plan planForRanks(const Plan &plan, const std::vector<int64_t> &present) {
  Plan result = plan;
  for (Function &function : result.functions)
    for (Instruction &inst : function.body) {
      auto it = inst.attrs.find("rank");
      if (it == inst.attrs.end()) continue;
      const int64_t *owner = std::get_if<int64_t>(&it->second);
      if (owner && !std::binary_search(present.begin(), present.end(), *owner))
        inst.attrs.erase(it);
    }
  return result;
}

SubsetCommunicator::SubsetCommunicator(Communicator &peers, std::vector<int64_t> ranks,
                                       int64_t worldSize, PeerCopier &copier)
    : peers_(peers), copier_(copier), ranks_(std::move(ranks)), worldSize_(worldSize) {
  for (size_t i = 1; i < ranks_.size(); ++i)
    if (ranks_[i] <= ranks_[i - 1])
      throw RuntimeError("SubsetCommunicator: ranks must be sorted and distinct");
  if (static_cast<int64_t>(ranks_.size()) != peers.worldSize())
    throw RuntimeError("SubsetCommunicator: " + std::to_string(ranks_.size()) +
                       " ranks for a group of " + std::to_string(peers.worldSize()));
}

void SubsetCommunicator::allGather(const void *, size_t, void *) {
  throw RuntimeError("all_gather needs every rank's shards, but only ranks " +
                     formatRankList(ranks_) + " of " + std::to_string(worldSize_) +
                     " are run (--ranks runs init only)");
}

void SubsetCommunicator::allGatherMany(const std::vector<AllGatherPart> &) {
  allGather(nullptr, 0, nullptr);
}

void SubsetCommunicator::scatter(int64_t root, const void *send, size_t bytesPerRank,
                                 void *recv) {
  const std::byte *source = nullptr;
  auto present = std::lower_bound(ranks_.begin(), ranks_.end(), root);
  const bool rootPresent = present != ranks_.end() && *present == root;
  if (rootPresent) {
    // Every peer learns root's send pointer; each reads its rows in place.
    std::vector<const void *> sends(ranks_.size());
    peers_.allGather(&send, sizeof send, sends.data());
    source = static_cast<const std::byte *>(sends[present - ranks_.begin()]);
  } else {
    source = static_cast<const std::byte *>(send);
  }
  if (!source && bytesPerRank)
    throw RuntimeError("scatter from rank " + std::to_string(root) + ": " +
                       (rootPresent ? "the root passed no send buffer"
                                    : "the root is not run and rank " +
                                          std::to_string(rank()) +
                                          " did not compute the tensor itself"));
  if (bytesPerRank) {
    copier_.copy(recv, source + rank() * bytesPerRank, bytesPerRank);
    copier_.flush();
  }
  // Root must not free its buffer before every peer has copied.
  if (rootPresent) peers_.barrier();
}

}  // namespace shardc::runtime
