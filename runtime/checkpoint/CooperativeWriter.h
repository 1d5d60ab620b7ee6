// Saving sharded parameters into ONE standard safetensors file without
// gathering them: every rank computes the same header, rank 0 creates the
// file (under a temporary name) and writes the header, every rank pwrites
// the valid rows it owns, and the file is renamed onto its final name only
// after every rank reported success. On any failure the temporary is
// removed and nothing appears under the final name.
#pragma once

#include "runtime/Communicator.h"
#include "runtime/Plan.h"

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace shardc::runtime::checkpoint {

/// The file every rank agrees on: params and persistent buffers in plan
/// order, a tied parameter once under each of its names (own name first).
struct SaveLayout {
  std::string prefix;  // 8-byte length + JSON header (padded to 8)
  /// Per param: the file offset of each saved copy's first byte (one per
  /// name; none for a non-persistent buffer).
  std::vector<std::vector<uint64_t>> offsets;
  uint64_t fileBytes = 0;
};
SaveLayout computeSaveLayout(const plan::Plan &plan);

/// Collective: all ranks call it with the same plan and path. `localData(i)`
/// is this rank's storage of param i (Param::localShape, padded rows
/// included). The temporary is `path + ".tmp." + <rank 0's pid>`. When any
/// rank failed, every rank throws the same RankError: the lowest failing
/// rank, and "writing 'PATH': " + that rank's own reason (with the OS error).
void saveCooperatively(const plan::Plan &plan,
                       const std::function<const std::byte *(int32_t)> &localData,
                       Communicator &comm, const std::string &path);

}  // namespace shardc::runtime::checkpoint
