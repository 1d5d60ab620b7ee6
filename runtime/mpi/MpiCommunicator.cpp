#include "runtime/mpi/MpiCommunicator.h"

#include "runtime/RuntimeError.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>

namespace shardc::runtime::mpi {

std::atomic<const char *> currentCollective{nullptr};

namespace {

using Clock = std::chrono::steady_clock;

/// A committed derived datatype, freed on scope exit (MPI allows freeing a
/// type while an operation that uses it is pending; we free after waiting).
class Type {
public:
  Type() = default;
  explicit Type(MPI_Datatype type) : type_(type) {}
  Type(Type &&other) noexcept : type_(std::exchange(other.type_, MPI_DATATYPE_NULL)) {}
  Type &operator=(Type &&other) noexcept {
    std::swap(type_, other.type_);
    return *this;
  }
  ~Type() {
    if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
  }
  MPI_Datatype get() const { return type_; }

private:
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// MPI counts and block lengths are ints: ranges over INT_MAX bytes are cut
// into blocks of at most 1 GiB. Both limits can be lowered for tests
// (setBlockLimitsForTesting), so the split runs on small buffers.
std::atomic<size_t> maxBlock{size_t(1) << 30};
std::atomic<size_t> splitAbove{static_cast<size_t>(INT_MAX)};

/// Bytes at the given addresses (absolute when used with MPI_BOTTOM, or
/// relative to a buffer), as one hindexed type of MPI_BYTE blocks.
Type byteRanges(const std::vector<std::pair<MPI_Aint, size_t>> &ranges) {
  std::vector<int> lengths;
  std::vector<MPI_Aint> displacements;
  for (const auto &[address, bytes] : ranges)
    for (size_t done = 0, block = maxBlock; done < bytes; done += block) {
      lengths.push_back(static_cast<int>(std::min(block, bytes - done)));
      displacements.push_back(address + static_cast<MPI_Aint>(done));
    }
  MPI_Datatype type;
  MPI_Type_create_hindexed(static_cast<int>(lengths.size()), lengths.data(),
                           displacements.data(), MPI_BYTE, &type);
  MPI_Type_commit(&type);
  return Type(type);
}

/// `bytes` contiguous bytes whose extent is `bytes` (so block r of a
/// gather lands at r * bytes), for any size.
Type contiguousBytes(size_t bytes) {
  MPI_Datatype type;
  if (bytes <= splitAbove) {
    MPI_Type_contiguous(static_cast<int>(bytes), MPI_BYTE, &type);
    MPI_Type_commit(&type);
    return Type(type);
  }
  Type blocks = byteRanges({{0, bytes}});
  MPI_Type_create_resized(blocks.get(), 0, static_cast<MPI_Aint>(bytes), &type);
  MPI_Type_commit(&type);
  return Type(type);
}

}  // namespace

void setBlockLimitsForTesting(size_t splitAboveBytes, size_t blockBytes) {
  if (blockBytes == 0 || blockBytes > (size_t(1) << 30) || splitAboveBytes > size_t(INT_MAX))
    throw RuntimeError("setBlockLimitsForTesting: limits above the defaults, or a 0-byte block");
  splitAbove = splitAboveBytes;
  maxBlock = blockBytes;
}

namespace {

MPI_Aint addressOf(const void *pointer) {
  MPI_Aint address;
  MPI_Get_address(pointer, &address);
  return address;
}

uint64_t fnv1a(uint64_t hash, uint64_t value) {
  for (int i = 0; i < 8; ++i) {
    hash ^= (value >> (8 * i)) & 0xff;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

enum Kind : uint64_t {
  kAllGather = 1, kAllGatherMany, kScatter, kBarrier, kGather, kGatherStrings, kAllGatherU64,
  kScatterRows
};

const char *kindName(uint64_t kind) {
  switch (kind) {
  case kAllGather: return "all_gather";
  case kAllGatherMany: return "all_gather_many";
  case kScatter: return "scatter";
  case kBarrier: return "barrier";
  case kGather: return "gather";
  case kGatherStrings: return "gather (report)";
  case kAllGatherU64: return "all_gather (check)";
  case kScatterRows: return "scatter_rows";
  }
  return "unknown collective";
}

/// Marks which collective this process waits in (for the SIGTERM handler).
struct InCollective {
  explicit InCollective(const char *what) { currentCollective.store(what); }
  ~InCollective() { currentCollective.store(nullptr); }
};

}  // namespace

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::chrono::duration<double> timeout)
    : timeout_(timeout) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) throw RuntimeError("MpiCommunicator: MPI is not initialized");
  if (MPI_Comm_dup(comm, &comm_) != MPI_SUCCESS)
    throw RuntimeError("MpiCommunicator: MPI_Comm_dup failed");
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(comm_, &rank);
  MPI_Comm_size(comm_, &size);
  rank_ = rank;
  size_ = size;
  // Ranks sharing this machine: when each can have a core, a waiting rank
  // polls without sleeping (wait() says why).
  MPI_Comm node = MPI_COMM_NULL;
  int nodeRanks = size;
  if (MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS &&
      node != MPI_COMM_NULL) {
    MPI_Comm_size(node, &nodeRanks);
    MPI_Comm_free(&node);
  }
  const unsigned cores = std::thread::hardware_concurrency();
  rankPerCore_ = cores != 0 && static_cast<unsigned>(nodeRanks) <= cores;
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

void MpiCommunicator::fail(const char *what, const std::string &why) const {
  throw RuntimeError(std::string(what) + " on rank " + std::to_string(rank_) + ": " + why);
}

void MpiCommunicator::check(int rc, const char *what, const char *call) const {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  fail(what, std::string(call) + " failed: " + std::string(text, length) +
                 " (a peer process may have died)");
}

void MpiCommunicator::wait(MPI_Request &request, const char *what) {
  InCollective marker(what);
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(timeout_);
  auto pause = std::chrono::microseconds(0);
  for (int polls = 0;; ++polls) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what, "MPI_Test");
    if (done) return;
    if (Clock::now() >= deadline) {
      std::ostringstream message;
      message << "timed out after " << timeout_.count() << " s (collective #" << sequence_
              << " of this run): not every rank arrived; a peer process died, hangs, or "
                 "calls a different collective (set the limit with --timeout)";
      fail(what, message.str());
    }
    // MPI progresses only inside MPI_Test. Spin briefly; then, when every
    // rank of this machine has a core, keep polling and only yield: a
    // sleeping rank noticed its peer's arrival up to 200 us late at every
    // collective, and a forward has hundreds (llama at N = 2, one process
    // per core: 1.2-1.6 s polling against 1.6-2.2 s sleeping, bench/README).
    // With more ranks than cores, back off into sleeps so that the waiting
    // ranks leave the cores to the ones that compute.
    if (polls > 200) {
      if (rankPerCore_) {
        std::this_thread::yield();
      } else {
        pause = std::min(std::chrono::microseconds(200), pause + std::chrono::microseconds(10));
        std::this_thread::sleep_for(pause);
      }
    }
  }
}

void MpiCommunicator::agree(const char *what, uint64_t kind, int64_t root, uint64_t sizeA,
                            uint64_t sizeB) {
  ++sequence_;
  constexpr int kWords = 5;
  const uint64_t mine[kWords] = {sequence_, kind, static_cast<uint64_t>(root), sizeA, sizeB};
  std::vector<uint64_t> all(static_cast<size_t>(size_) * kWords);
  MPI_Request request;
  check(MPI_Iallgather(mine, kWords, MPI_UINT64_T, all.data(), kWords, MPI_UINT64_T, comm_,
                       &request),
        what, "MPI_Iallgather");
  wait(request, what);
  for (int64_t r = 0; r < size_; ++r) {
    const uint64_t *theirs = &all[static_cast<size_t>(r) * kWords];
    if (std::equal(theirs, theirs + kWords, mine)) continue;
    std::ostringstream message;
    if (theirs[0] != mine[0] || theirs[1] != mine[1])
      message << "collective mismatch: rank " << r << " is in " << kindName(theirs[1]) << " #"
              << theirs[0] << " while rank " << rank_ << " is in " << kindName(kind) << " #"
              << sequence_;
    else if (theirs[2] != mine[2])
      message << "root mismatch: rank " << r << " names root " << theirs[2] << ", rank "
              << rank_ << " names root " << root;
    else
      message << "size mismatch: rank " << r << " passes " << theirs[3] << " part(s) / "
              << theirs[4] << " (bytes or size hash), rank " << rank_ << " passes " << sizeA
              << " / " << sizeB;
    fail(what, message.str());
  }
}

void MpiCommunicator::allGather(const void *send, size_t bytesPerRank, void *recv) {
  const char *what = "all_gather";
  agree(what, kAllGather, 0, 1, bytesPerRank);
  if (!bytesPerRank) return;
  Type block = contiguousBytes(bytesPerRank);
  // In place (send is this rank's own block of recv): MPI forbids aliased
  // buffers and spells it MPI_IN_PLACE.
  const bool inPlace = send == static_cast<const std::byte *>(recv) + rank_ * bytesPerRank;
  MPI_Request request;
  check(MPI_Iallgather(inPlace ? MPI_IN_PLACE : send, 1, block.get(), recv, 1, block.get(), comm_,
                       &request),
        what, "MPI_Iallgather");
  wait(request, what);
}

void MpiCommunicator::allGatherMany(const std::vector<AllGatherPart> &parts) {
  const char *what = "all_gather_many";
  uint64_t sizes = 0xcbf29ce484222325ULL;
  for (const AllGatherPart &part : parts) sizes = fnv1a(sizes, part.bytesPerRank);
  agree(what, kAllGatherMany, 0, parts.size(), sizes);
  std::vector<std::pair<MPI_Aint, size_t>> sendRanges;
  for (const AllGatherPart &part : parts)
    if (part.bytesPerRank) sendRanges.push_back({addressOf(part.send), part.bytesPerRank});
  if (sendRanges.empty()) return;
  // This rank's own blocks are copied here, not exchanged with itself: a
  // part may be in place (send is its own block of recv), and MPI forbids
  // a send buffer that aliases a receive buffer.
  for (const AllGatherPart &part : parts) {
    std::byte *own = static_cast<std::byte *>(part.recv) + rank_ * part.bytesPerRank;
    if (part.bytesPerRank && part.send != own) std::memcpy(own, part.send, part.bytesPerRank);
  }
  // Absolute addresses with MPI_BOTTOM: no packing, no staging buffer.
  Type sendType = byteRanges(sendRanges);
  std::vector<Type> recvTypes;
  std::vector<MPI_Datatype> sendTypes(size_, sendType.get()), recvTypeHandles;
  for (int64_t r = 0; r < size_; ++r) {
    std::vector<std::pair<MPI_Aint, size_t>> recvRanges;
    for (const AllGatherPart &part : parts)
      if (part.bytesPerRank)
        recvRanges.push_back(
            {addressOf(static_cast<std::byte *>(part.recv) + r * part.bytesPerRank),
             part.bytesPerRank});
    recvTypes.push_back(byteRanges(recvRanges));
    recvTypeHandles.push_back(recvTypes.back().get());
  }
  std::vector<int> ones(size_, 1), zeros(size_, 0);
  ones[rank_] = 0;  // copied above
  MPI_Request request;
  check(MPI_Ialltoallw(MPI_BOTTOM, ones.data(), zeros.data(), sendTypes.data(), MPI_BOTTOM,
                       ones.data(), zeros.data(), recvTypeHandles.data(), comm_, &request),
        what, "MPI_Ialltoallw");
  wait(request, what);
}

void MpiCommunicator::scatter(int64_t root, const void *send, size_t bytesPerRank, void *recv) {
  const char *what = "scatter";
  if (root < 0 || root >= size_)
    fail(what, "root " + std::to_string(root) + " out of range for world size " +
                   std::to_string(size_));
  agree(what, kScatter, root, 1, bytesPerRank);
  if (!bytesPerRank) return;
  if (rank_ == root && !send) fail(what, "the root passed no send buffer");
  Type block = contiguousBytes(bytesPerRank);
  MPI_Request request;
  check(MPI_Iscatter(send, 1, block.get(), recv, 1, block.get(), static_cast<int>(root), comm_,
                     &request),
        what, "MPI_Iscatter");
  wait(request, what);
}

void MpiCommunicator::scatterRows(int64_t root, const void *send, size_t sendBytes,
                                  size_t bytesPerRank, size_t offset, size_t windowBytes,
                                  void *recv) {
  const char *what = "scatter_rows";
  if (root < 0 || root >= size_)
    fail(what, "root " + std::to_string(root) + " out of range for world size " +
                   std::to_string(size_));
  if (offset + windowBytes > bytesPerRank)
    fail(what, "window " + std::to_string(offset) + " + " + std::to_string(windowBytes) +
                   " lies outside a part of " + std::to_string(bytesPerRank) + " bytes");
  uint64_t layout = 0xcbf29ce484222325ULL;  // the part and its window, hashed
  for (size_t word : {bytesPerRank, offset, windowBytes}) layout = fnv1a(layout, word);
  agree(what, kScatterRows, root, sendBytes, layout);
  if (!sendBytes || !windowBytes) return;
  if (rank_ == root && !send) fail(what, "the root passed no send buffer");
  // MPI_Scatterv counts and displacements are int: one gradient up to 2 GiB.
  if (sendBytes > static_cast<size_t>(INT_MAX))
    fail(what, "a gradient of " + std::to_string(sendBytes) +
                   " bytes is over MPI_Scatterv's 2 GiB; reduce-scatter it in smaller units");
  std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
  for (int64_t r = 0; r < size_; ++r) {
    const size_t begin = std::min(sendBytes, static_cast<size_t>(r) * bytesPerRank + offset);
    counts[r] = static_cast<int>(std::min(windowBytes, sendBytes - begin));
    displs[r] = static_cast<int>(begin);
  }
  MPI_Request request;
  check(MPI_Iscatterv(send, counts.data(), displs.data(), MPI_BYTE, recv, counts[rank_], MPI_BYTE,
                      static_cast<int>(root), comm_, &request),
        what, "MPI_Iscatterv");
  wait(request, what);
}

void MpiCommunicator::barrier() {
  const char *what = "barrier";
  agree(what, kBarrier, 0, 0, 0);
  MPI_Request request;
  check(MPI_Ibarrier(comm_, &request), what, "MPI_Ibarrier");
  wait(request, what);
}

void MpiCommunicator::gather(int64_t root, const void *send, size_t bytesPerRank, void *recv) {
  const char *what = "gather";
  if (root < 0 || root >= size_)
    fail(what, "root " + std::to_string(root) + " out of range for world size " +
                   std::to_string(size_));
  agree(what, kGather, root, 1, bytesPerRank);
  if (!bytesPerRank) return;
  Type block = contiguousBytes(bytesPerRank);
  MPI_Request request;
  check(MPI_Igather(send, 1, block.get(), recv, 1, block.get(), static_cast<int>(root), comm_,
                    &request),
        what, "MPI_Igather");
  wait(request, what);
}

std::vector<std::string> MpiCommunicator::gatherStrings(int64_t root, const std::string &text) {
  const char *what = "gather (report)";
  agree(what, kGatherStrings, root, 0, 0);
  const int64_t length = static_cast<int64_t>(text.size());
  std::vector<int64_t> lengths(size_);
  MPI_Request request;
  check(MPI_Igather(&length, 1, MPI_INT64_T, lengths.data(), 1, MPI_INT64_T,
                    static_cast<int>(root), comm_, &request),
        what, "MPI_Igather");
  wait(request, what);
  std::vector<int> counts(size_), displacements(size_);
  int64_t total = 0;
  if (rank_ == root)
    for (int64_t r = 0; r < size_; ++r) {
      if (total + lengths[r] > INT_MAX) fail(what, "reports exceed 2 GiB");
      counts[r] = static_cast<int>(lengths[r]);
      displacements[r] = static_cast<int>(total);
      total += lengths[r];
    }
  std::string all(static_cast<size_t>(total), '\0');
  check(MPI_Igatherv(text.data(), static_cast<int>(length), MPI_BYTE, all.data(), counts.data(),
                     displacements.data(), MPI_BYTE, static_cast<int>(root), comm_, &request),
        what, "MPI_Igatherv");
  wait(request, what);
  std::vector<std::string> out;
  if (rank_ == root)
    for (int64_t r = 0; r < size_; ++r) out.push_back(all.substr(displacements[r], counts[r]));
  return out;
}

std::vector<uint64_t> MpiCommunicator::allGatherU64(uint64_t value) {
  const char *what = "all_gather (check)";
  agree(what, kAllGatherU64, 0, 0, 0);
  std::vector<uint64_t> all(size_);
  MPI_Request request;
  check(MPI_Iallgather(&value, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_, &request),
        what, "MPI_Iallgather");
  wait(request, what);
  return all;
}

}  // namespace shardc::runtime::mpi
