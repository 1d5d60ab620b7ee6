// Opening checkpoints: one safetensors file, or a sharded set described by a
// Hugging Face `model.safetensors.index.json` ({"metadata": {...},
// "weight_map": {tensor: "model-00001-of-00002.safetensors", ...}}).
// Only headers are read here; tensor bytes are read by ShardReader.
#pragma once

#include "runtime/checkpoint/SafetensorsHeader.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace shardc::runtime::checkpoint {

/// An open safetensors file with its validated header. Closes on destruction.
class SafetensorsFile {
public:
  /// Opens and validates `path`'s header (CheckpointError "PATH: reason").
  static std::shared_ptr<SafetensorsFile> open(const std::string &path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  const std::string &path() const { return path_; }
  int fd() const { return fd_; }
  const SafetensorsHeader &header() const { return header_; }

private:
  SafetensorsFile() = default;
  std::string path_;
  int fd_ = -1;
  SafetensorsHeader header_;
};

/// Where a tensor lives.
struct TensorLocation {
  std::shared_ptr<SafetensorsFile> file;
  const TensorEntry *entry = nullptr;
};

/// A checkpoint: a .safetensors file, an index .json, or a directory holding
/// model.safetensors.index.json or model.safetensors (tried in that order).
class Checkpoint {
public:
  /// Opens every file and validates every header; for an index, also that
  /// every shard it names exists and holds the tensors it maps to it.
  static std::shared_ptr<Checkpoint> open(const std::string &path);

  const std::string &path() const { return path_; }
  /// nullptr when absent.
  const TensorLocation *find(const std::string &tensor) const;
  /// Like find, but a missing tensor is a CheckpointError
  /// "PATH: tensor 'x': not in the checkpoint".
  const TensorLocation &at(const std::string &tensor) const;
  /// Every tensor name, sorted.
  std::vector<std::string> tensorNames() const;

private:
  std::string path_;
  std::map<std::string, TensorLocation> tensors_;
};

}  // namespace shardc::runtime::checkpoint
