// Checkpoint I/O in the safetensors format (huggingface/safetensors):
//   8 bytes little-endian header length N, N bytes of JSON header
//   {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__"?},
//   then the data; offsets are relative to the start of the data.
// Supported dtypes: F32, F64, F16, BF16, I64.
#pragma once

#include "runtime/HostTensor.h"

#include <map>
#include <string>
#include <vector>

namespace shardc::runtime {

struct SafetensorsContents {
  std::vector<HostTensor> tensors;  // in data-offset order
  std::map<std::string, std::string> metadata;
};

/// Writes `tensors` in the given order. The header is padded with spaces so
/// the data starts 8-byte aligned. The file is written to
/// "<path>.tmp.<pid>" and renamed onto `path` only after everything
/// succeeded, so no partial file ever exists under `path`; on failure the
/// temporary is removed and RuntimeError names the file and the reason.
void writeSafetensors(const std::string &path, const std::vector<HostTensor> &tensors,
                      const std::map<std::string, std::string> &metadata = {});

/// Reads and validates a whole file. Errors name the file, the tensor (when
/// there is one) and the reason: too short, header length beyond the file,
/// header not JSON / not an object, duplicate keys, unknown dtype, bad
/// shape, data_offsets not matching the shape, out of the file (truncated),
/// overlapping, or leaving holes in the data.
SafetensorsContents readSafetensors(const std::string &path);

/// The same validation on bytes already in memory; `sourceName` is used in
/// messages in place of the file name.
SafetensorsContents parseSafetensors(const std::string &bytes, const std::string &sourceName);

}  // namespace shardc::runtime
