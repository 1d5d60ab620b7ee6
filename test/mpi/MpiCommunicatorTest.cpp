// Self-checking test of MpiCommunicator, run under mpirun (test/mpi/
// CMakeLists.txt): every collective with uneven, zero and large-ish sizes,
// and the signature check that turns a mismatched call into an error on
// every rank instead of a hang or corrupted memory. The collectives run twice:
// with the default block limits and with tiny ones, so the split of > 2 GiB
// ranges into MPI blocks (docs/mpi.md) is exercised on small buffers.
#include "runtime/RuntimeError.h"
#include "runtime/mpi/MpiCommunicator.h"

#include <climits>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

using namespace shardc::runtime;
using namespace shardc::runtime::mpi;

namespace {
int failures = 0;
int rankForLog = 0;
void expect(bool ok, const std::string &what) {
  if (!ok) {
    std::fprintf(stderr, "rank %d: FAILED: %s\n", rankForLog, what.c_str());
    ++failures;
  }
}
uint8_t byteOf(int64_t rank, size_t part, size_t i) {
  return static_cast<uint8_t>(rank * 37 + part * 11 + i * 7 + 1);
}
/// Every data-moving collective, checked byte for byte; `label` says which
/// block limits are in force.
void checkCollectives(MpiCommunicator &comm, const std::string &label) {
  const int64_t rank = comm.rank(), n = comm.worldSize();
  // allGather, including a size that is not a multiple of anything.
  for (size_t bytes : {size_t(0), size_t(1), size_t(13), size_t(1) << 20}) {
    std::vector<uint8_t> send(bytes), recv(bytes * n, 0xEE);
    for (size_t i = 0; i < bytes; ++i) send[i] = byteOf(rank, 0, i);
    comm.allGather(send.data(), bytes, recv.data());
    bool ok = true;
    for (int64_t r = 0; r < n; ++r)
      for (size_t i = 0; i < bytes; ++i) ok = ok && recv[r * bytes + i] == byteOf(r, 0, i);
    expect(ok, label + "allGather of " + std::to_string(bytes) + " bytes");
  }

  // allGatherMany: parts of different sizes (one empty) in one unit buffer,
  // each part's N blocks contiguous, parts in reverse address order.
  {
    const std::vector<size_t> sizes = {5, 0, 4096, 3, 65537};
    std::vector<std::vector<uint8_t>> sends(sizes.size());
    size_t total = 0;
    for (size_t s : sizes) total += s * n;
    std::vector<uint8_t> unit(total + 64, 0xEE);
    std::vector<AllGatherPart> parts;
    size_t offset = total;
    std::vector<size_t> offsets(sizes.size());
    for (size_t p = 0; p < sizes.size(); ++p) {
      sends[p].resize(sizes[p]);
      for (size_t i = 0; i < sizes[p]; ++i) sends[p][i] = byteOf(rank, p, i);
      offset -= sizes[p] * n;
      offsets[p] = offset;
      parts.push_back({sends[p].data(), sizes[p], unit.data() + offset});
    }
    comm.allGatherMany(parts);
    bool ok = true;
    for (size_t p = 0; p < sizes.size(); ++p)
      for (int64_t r = 0; r < n; ++r)
        for (size_t i = 0; i < sizes[p]; ++i)
          ok = ok && unit[offsets[p] + r * sizes[p] + i] == byteOf(r, p, i);
    for (size_t i = total; i < unit.size(); ++i) ok = ok && unit[i] == 0xEE;
    expect(ok, label + "allGatherMany of 5 parts");
    comm.allGatherMany({});  // no parts: a no-op that still synchronizes
  }

  // In place (docs/mpi.md): a send that is this rank's own block of recv,
  // as the executor gathers master weights it converted into that block;
  // in allGatherMany beside a part that is not in place.
  {
    const size_t bytes = 4099, other = 17;
    std::vector<uint8_t> recv(bytes * n, 0xEE), second(other * n, 0xEE), send(other);
    for (size_t i = 0; i < bytes; ++i) recv[rank * bytes + i] = byteOf(rank, 0, i);
    comm.allGather(recv.data() + rank * bytes, bytes, recv.data());
    bool ok = true;
    for (int64_t r = 0; r < n; ++r)
      for (size_t i = 0; i < bytes; ++i) ok = ok && recv[r * bytes + i] == byteOf(r, 0, i);
    expect(ok, label + "allGather in place");
    std::fill(recv.begin(), recv.end(), 0xEE);
    for (size_t i = 0; i < bytes; ++i) recv[rank * bytes + i] = byteOf(rank, 1, i);
    for (size_t i = 0; i < other; ++i) send[i] = byteOf(rank, 2, i);
    comm.allGatherMany(
        {{recv.data() + rank * bytes, bytes, recv.data()}, {send.data(), other, second.data()}});
    ok = true;
    for (int64_t r = 0; r < n; ++r) {
      for (size_t i = 0; i < bytes; ++i) ok = ok && recv[r * bytes + i] == byteOf(r, 1, i);
      for (size_t i = 0; i < other; ++i) ok = ok && second[r * other + i] == byteOf(r, 2, i);
    }
    expect(ok, label + "allGatherMany with a part in place");
  }

  // scatter from the last rank; gather to rank 0.
  {
    const int64_t root = n - 1;
    const size_t bytes = 1001;
    std::vector<uint8_t> send, recv(bytes);
    if (rank == root) {
      send.resize(bytes * n);
      for (int64_t r = 0; r < n; ++r)
        for (size_t i = 0; i < bytes; ++i) send[r * bytes + i] = byteOf(r, 3, i);
    }
    comm.scatter(root, rank == root ? send.data() : nullptr, bytes, recv.data());
    bool ok = true;
    for (size_t i = 0; i < bytes; ++i) ok = ok && recv[i] == byteOf(rank, 3, i);
    expect(ok, label + "scatter from the last rank");

    std::vector<uint8_t> gathered(rank == 0 ? bytes * n : 0);
    comm.gather(0, recv.data(), bytes, gathered.data());
    if (rank == 0) {
      ok = true;
      for (int64_t r = 0; r < n; ++r)
        for (size_t i = 0; i < bytes; ++i) ok = ok && gathered[r * bytes + i] == byteOf(r, 3, i);
      expect(ok, label + "gather to rank 0");
    }
  }

  // scatterRows: a window of each rank's part of an unpadded send (a
  // reduce_scatter's window of a gradient); the last part ends early.
  {
    const int64_t root = 0;
    const size_t part = 1000, offset = 300, window = 500, sendBytes = part * n - 400;
    std::vector<uint8_t> send, recv(window, 0xEE);
    if (rank == root) {
      send.resize(sendBytes);
      for (size_t i = 0; i < sendBytes; ++i) send[i] = byteOf(int64_t(i / part), 4, i % part);
    }
    comm.scatterRows(root, rank == root ? send.data() : nullptr, sendBytes, part, offset, window,
                     recv.data());
    const size_t begin = rank * part + offset;
    const size_t expected = begin >= sendBytes ? 0 : std::min(window, sendBytes - begin);
    bool ok = true;
    for (size_t i = 0; i < window; ++i)
      ok = ok && recv[i] == (i < expected ? byteOf(rank, 4, offset + i) : 0xEE);
    expect(ok, label + "scatterRows window");
  }
}

}  // namespace

int main() {
  MPI_Init(nullptr, nullptr);
  {
    MpiCommunicator comm(MPI_COMM_WORLD, std::chrono::seconds(20));
    const int64_t rank = comm.rank(), n = comm.worldSize();
    rankForLog = static_cast<int>(rank);

    checkCollectives(comm, "");
    // The > 2 GiB path, on small buffers: every range over 1000 bytes is
    // cut into blocks of 333 bytes (1 MiB: 3149 blocks; 65537: 197), as
    // ranges over INT_MAX are cut into 1 GiB blocks by default.
    setBlockLimitsForTesting(1000, 333);
    checkCollectives(comm, "333-byte blocks: ");
    setBlockLimitsForTesting(INT_MAX, size_t(1) << 30);

    comm.barrier();
    std::vector<std::string> texts = comm.gatherStrings(0, std::string(rank * 3, 'x'));
    if (rank == 0)
      for (int64_t r = 0; r < n; ++r)
        expect(texts[r] == std::string(r * 3, 'x'), "gatherStrings from rank " + std::to_string(r));
    std::vector<uint64_t> values = comm.allGatherU64(static_cast<uint64_t>(rank) * 1000);
    for (int64_t r = 0; r < n; ++r) expect(values[r] == uint64_t(r) * 1000, "allGatherU64");

    // A mismatch is detected by every rank, before any data moves, so the
    // communicator stays usable.
    if (n > 1) {
      std::string error;
      try {
        uint8_t byte = 1;
        std::vector<uint8_t> recv(n * 2);
        if (rank == 1) comm.barrier();
        else comm.allGather(&byte, 1, recv.data());
      } catch (const RuntimeError &e) {
        error = e.what();
      }
      expect(error.find("collective mismatch") != std::string::npos,
             "mismatch detected (got '" + error + "')");
      error.clear();
      try {
        std::vector<uint8_t> send(8), recv(8 * n);
        comm.allGather(send.data(), rank == 0 ? 4 : 8, recv.data());
      } catch (const RuntimeError &e) {
        error = e.what();
      }
      expect(error.find("size mismatch") != std::string::npos,
             "size mismatch detected (got '" + error + "')");
      comm.barrier();
    }
    if (rank == 0 && !failures) std::printf("MpiCommunicator: all checks passed on %lld ranks\n",
                                            static_cast<long long>(n));
  }
  int local = failures, total = 0;
  MPI_Allreduce(&local, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  MPI_Finalize();
  return total ? 1 : 0;
}
