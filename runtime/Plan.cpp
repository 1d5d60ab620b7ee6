#include "runtime/Plan.h"

#include <algorithm>

namespace shardc::plan {

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32: return "float32";
  case DType::F64: return "float64";
  case DType::F16: return "float16";
  case DType::BF16: return "bfloat16";
  case DType::I64: return "int64";
  }
  return "unknown";
}

std::optional<DType> parseDType(const std::string &name) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64})
    if (name == dtypeName(d)) return d;
  return std::nullopt;
}

int64_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32: return 4;
  case DType::F64:
  case DType::I64: return 8;
  case DType::F16:
  case DType::BF16: return 2;
  }
  return 0;
}

const char *categoryName(Category category) {
  switch (category) {
  case Category::Parameter: return "parameters";
  case Category::Gathered: return "gathered";
  case Category::Activation: return "activations";
  case Category::IO: return "io";
  }
  return "unknown";
}

std::optional<Category> parseCategory(const std::string &name) {
  for (Category c : {Category::Parameter, Category::Gathered,
                     Category::Activation, Category::IO})
    if (name == categoryName(c)) return c;
  return std::nullopt;
}

int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<int64_t> Param::localShape() const {
  std::vector<int64_t> local = shape;
  if (sharded() && !local.empty()) local[0] = chunkRows;
  return local;
}

int64_t Param::localBytes() const {
  return numElements(localShape()) * dtypeSize(dtype);
}

int64_t Param::fullBytes() const {
  return numElements(shape) * dtypeSize(dtype);
}

int64_t Param::validRows(int64_t rank) const {
  if (!sharded()) return shape.empty() ? 1 : shape[0];
  int64_t rows = shape.empty() ? 1 : shape[0];
  return std::clamp<int64_t>(rows - rank * chunkRows, 0, chunkRows);
}

int64_t Param::rowElements() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

int64_t Param::gatheredBytes(int64_t worldSize) const { return gatheredBytes(worldSize, dtype); }

int64_t Param::gatheredBytes(int64_t worldSize, DType as) const {
  if (!sharded()) return numElements(shape) * dtypeSize(as);
  return worldSize * chunkRows * rowElements() * dtypeSize(as);
}

const Function *Plan::function(const std::string &name) const {
  for (const Function &f : functions)
    if (f.name == name) return &f;
  return nullptr;
}

}  // namespace shardc::plan
