// The `mpi` backend's Communicator: one rank per OS process, collectives
// over MPI (OpenMPI), every one bounded by a timeout.
//
// Each collective is nonblocking (MPI_Iallgather, MPI_Ialltoallw,
// MPI_Iscatter, MPI_Ibarrier, MPI_Igather) and polled with MPI_Test until
// it completes or the deadline passes; then it throws RuntimeError naming
// the collective, the rank and the timeout. A pending MPI collective cannot
// be cancelled, so after such an error the caller must end the job
// (runtime/mpi/MpiRun.h: abortWorld), never issue another collective.
//
// Before its data moves, every collective exchanges a 32-byte signature
// (sequence number, kind, root, sizes) with one small MPI_Iallgather, so a
// rank that calls a different collective, or with different sizes, fails
// with a message saying so instead of corrupting memory or hanging.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include "runtime/Communicator.h"

#include <atomic>
#include <string>
#include <vector>

namespace shardc::runtime::mpi {

/// The collective a rank of this process is waiting in, or nullptr (read by
/// the SIGTERM handler MpiRun installs, to say where a killed rank was).
extern std::atomic<const char *> currentCollective;

/// Test hook: a contiguous range of more than `splitAboveBytes` bytes is
/// described by MPI blocks of at most `blockBytes` (defaults: INT_MAX and
/// 1 GiB, which no call may exceed). Lets tests exercise the split that
/// > 2 GiB collectives take, on small buffers. Process-wide; call it
/// between collectives, on every rank alike.
void setBlockLimitsForTesting(size_t splitAboveBytes, size_t blockBytes);

class MpiCommunicator final : public Communicator {
public:
  /// Duplicates `comm` (so its traffic never mixes with the caller's) and
  /// sets MPI_ERRORS_RETURN on the duplicate: MPI errors become
  /// RuntimeErrors. MPI must be initialized.
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD,
                           std::chrono::duration<double> timeout = std::chrono::seconds(60));
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator &) = delete;
  MpiCommunicator &operator=(const MpiCommunicator &) = delete;

  int64_t rank() const override { return rank_; }
  int64_t worldSize() const override { return size_; }

  /// MPI_Iallgather with one derived datatype of bytesPerRank bytes (any
  /// size: blocks over 2^31 bytes are described by several MPI blocks).
  void allGather(const void *send, size_t bytesPerRank, void *recv) override;
  /// One MPI_Ialltoallw, pack-free: every rank sends the same hindexed
  /// datatype (its parts' send ranges) to every rank and receives from rank
  /// r with a hindexed datatype over the N ranges recv_i + r * bytes_i.
  void allGatherMany(const std::vector<AllGatherPart> &parts) override;
  void scatter(int64_t root, const void *send, size_t bytesPerRank, void *recv) override;
  void scatterRows(int64_t root, const void *send, size_t sendBytes, size_t bytesPerRank,
                   size_t offset, size_t windowBytes, void *recv) override;
  void barrier() override;

  /// Not in Communicator: rank `root` receives worldSize * bytesPerRank
  /// bytes into `recv` (rank 0's first); `recv` is ignored elsewhere.
  void gather(int64_t root, const void *send, size_t bytesPerRank, void *recv);
  /// Every rank's `text` (any length), on `root` only (empty elsewhere).
  std::vector<std::string> gatherStrings(int64_t root, const std::string &text);
  /// Every rank's value, on every rank.
  std::vector<uint64_t> allGatherU64(uint64_t value);

  std::chrono::duration<double> timeout() const override { return timeout_; }
  void setTimeout(std::chrono::duration<double> timeout) override { timeout_ = timeout; }

  MPI_Comm comm() const { return comm_; }

private:
  /// Exchanges and compares the signature of the collective about to run.
  void agree(const char *what, uint64_t kind, int64_t root, uint64_t sizeA, uint64_t sizeB);
  /// Polls `request` until done or the deadline; throws on error/timeout.
  void wait(MPI_Request &request, const char *what);
  [[noreturn]] void fail(const char *what, const std::string &why) const;
  void check(int rc, const char *what, const char *call) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  int64_t rank_ = 0, size_ = 1;
  uint64_t sequence_ = 0;
  std::chrono::duration<double> timeout_;
  /// This machine has a core for each of the communicator's ranks on it.
  bool rankPerCore_ = false;
};

}  // namespace shardc::runtime::mpi
