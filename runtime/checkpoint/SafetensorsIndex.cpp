#include "runtime/checkpoint/SafetensorsIndex.h"
#include "runtime/checkpoint/FileIo.h"

#include "runtime/checkpoint/StrictJson.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace shardc::runtime::checkpoint {
namespace {

std::string errnoText() { return std::strerror(errno); }

bool isDirectory(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}
std::string directoryOf(const std::string &path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}
bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string readWholeFile(const std::string &path, const std::string &prefix) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError(prefix + "cannot open: " + errnoText());
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw CheckpointError(prefix + "not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxHeaderBytes) {
    ::close(fd);
    throw CheckpointError(prefix + "index file is larger than 100 MiB");
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  bool ok = preadFully(fd, text.data(), text.size(), 0);
  ::close(fd);
  if (!ok) throw CheckpointError(prefix + "read failed");
  return text;
}

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string &path) {
  const std::string prefix = path + ": ";
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (file->fd_ < 0) throw CheckpointError(prefix + "cannot open: " + errnoText());
  struct stat st;
  if (::fstat(file->fd_, &st) != 0) throw CheckpointError(prefix + "cannot stat: " + errnoText());
  if (!S_ISREG(st.st_mode)) throw CheckpointError(prefix + "not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  unsigned char prefix8[8] = {};
  if (size >= 8 && !preadFully(file->fd_, prefix8, 8, 0))
    throw CheckpointError(prefix + "cannot read the header length");
  const uint64_t length = checkHeaderLength(prefix8, size, prefix);
  std::string json(length, '\0');
  if (!preadFully(file->fd_, json.data(), length, 8))
    throw CheckpointError(prefix + "cannot read the " + std::to_string(length) +
                          "-byte header (file changed while reading?)");
  file->header_ = parseSafetensorsHeader(json, size, prefix);
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::shared_ptr<Checkpoint> Checkpoint::open(const std::string &given) {
  std::string path = given;
  if (isDirectory(path)) {
    std::string index = path + "/model.safetensors.index.json";
    std::string single = path + "/model.safetensors";
    if (exists(index)) path = index;
    else if (exists(single)) path = single;
    else
      throw CheckpointError(given + ": directory holds neither model.safetensors.index.json "
                                    "nor model.safetensors");
  }
  auto checkpoint = std::make_shared<Checkpoint>();
  checkpoint->path_ = path;
  if (!endsWith(path, ".json")) {
    auto file = SafetensorsFile::open(path);
    for (const TensorEntry &entry : file->header().entries)
      checkpoint->tensors_[entry.name] = {file, &entry};
    return checkpoint;
  }

  // A Hugging Face index: weight_map names, per tensor, the shard holding it.
  const std::string prefix = path + ": ";
  nlohmann::json index = parseStrictJson(readWholeFile(path, prefix), prefix, "index");
  if (!index.is_object()) throw CheckpointError(prefix + "index is not a JSON object");
  auto map = index.find("weight_map");
  if (map == index.end() || !map->is_object())
    throw CheckpointError(prefix + "index has no \"weight_map\" object");
  const std::string dir = directoryOf(path);
  std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
  for (const auto &item : map->items()) {
    const std::string &tensor = item.key();
    if (!item.value().is_string())
      throw CheckpointError(prefix + "tensor '" + tensor + "': weight_map value is not a string");
    std::string shard = item.value().get<std::string>();
    if (shard.empty() || shard[0] == '/' || shard.find("..") != std::string::npos)
      throw CheckpointError(prefix + "tensor '" + tensor + "': shard file '" + shard +
                            "' must be a relative path inside the index's directory");
    std::string shardPath = dir + "/" + shard;
    auto &file = shards[shard];
    if (!file) {
      if (!exists(shardPath))
        throw CheckpointError(prefix + "tensor '" + tensor + "': the index names shard '" +
                              shard + "', which does not exist (" + shardPath + ")");
      file = SafetensorsFile::open(shardPath);
    }
    const TensorEntry *entry = file->header().find(tensor);
    if (!entry)
      throw CheckpointError(prefix + "tensor '" + tensor + "': the index maps it to '" + shard +
                            "', which has no such tensor");
    checkpoint->tensors_[tensor] = {file, entry};
  }
  return checkpoint;
}

const TensorLocation *Checkpoint::find(const std::string &tensor) const {
  auto it = tensors_.find(tensor);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorLocation &Checkpoint::at(const std::string &tensor) const {
  const TensorLocation *found = find(tensor);
  if (!found) throw CheckpointError(path_ + ": tensor '" + tensor + "': not in the checkpoint");
  return *found;
}

std::vector<std::string> Checkpoint::tensorNames() const {
  std::vector<std::string> names;
  for (const auto &[name, location] : tensors_) names.push_back(name);
  return names;
}

}  // namespace shardc::runtime::checkpoint
