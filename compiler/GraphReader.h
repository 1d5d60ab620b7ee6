//===- GraphReader.h - reading graph JSON with paths in errors --*- C++ -*-===//
#pragma once

#include "compiler/Graph.h"

#include <nlohmann/json.hpp>

#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace shardc::compiler {

using json = nlohmann::json;

/// Walks a JSON document, keeping the path of the value being read.
class GraphReader {
public:
  explicit GraphReader(std::string sourceName)
      : sourceName_(std::move(sourceName)) {}

  [[noreturn]] void fail(const std::string &path,
                         const std::string &reason) const {
    throw GraphError(sourceName_ + ": " + (path.empty() ? "(root)" : path) +
                     ": " + reason);
  }

  const json &member(const json &object, const std::string &path,
                     const char *key) const {
    auto it = object.find(key);
    if (it == object.end())
      fail(path, std::string("missing required key \"") + key + "\"");
    return *it;
  }

  std::string string(const json &value, const std::string &path) const {
    if (!value.is_string())
      fail(path, "must be a string, got " + std::string(value.type_name()));
    return value.get<std::string>();
  }

  std::string name(const json &object, const std::string &path) const {
    std::string result = string(member(object, path, "name"), path + ".name");
    if (result.empty())
      fail(path + ".name", "must not be empty");
    return result;
  }

  const json &array(const json &value, const std::string &path) const {
    if (!value.is_array())
      fail(path, "must be an array, got " + std::string(value.type_name()));
    return value;
  }

  /// An optional array member; absent means empty.
  const json &optionalArray(const json &object, const std::string &path,
                            const char *key) const {
    static const json empty = json::array();
    auto it = object.find(key);
    if (it == object.end())
      return empty;
    return array(*it, path + "." + key);
  }

  void requireObject(const json &value, const std::string &path) const {
    if (!value.is_object())
      fail(path, "must be an object, got " + std::string(value.type_name()));
  }

  std::vector<int64_t> shape(const json &object,
                             const std::string &path) const {
    std::string shapePath = path + ".shape";
    const json &dims = array(member(object, path, "shape"), shapePath);
    std::vector<int64_t> result;
    int64_t elements = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      std::string dimPath = shapePath + "[" + std::to_string(i) + "]";
      const json &dim = dims[i];
      if (!dim.is_number_integer() ||
          (dim.is_number_integer() && !dim.is_number_unsigned() &&
           dim.get<int64_t>() < 0))
        fail(dimPath, "must be a non-negative integer, got " + dim.dump());
      if (dim.is_number_unsigned() &&
          dim.get<uint64_t>() >
              static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(dimPath, "dimension " + dim.dump() + " exceeds 2^63-1");
      int64_t size = dim.get<int64_t>();
      if (size != 0 && elements > std::numeric_limits<int64_t>::max() / 8 / size)
        fail(shapePath, "element count overflows: the tensor would have more "
                        "than 2^60 elements");
      elements *= size;
      result.push_back(size);
    }
    return result;
  }

  plan::DType dtype(const json &object, const std::string &path) const {
    std::string text = string(member(object, path, "dtype"), path + ".dtype");
    if (auto parsed = plan::parseDType(text))
      return *parsed;
    fail(path + ".dtype", "unknown dtype \"" + text +
                              "\"; expected float32, float64, float16, "
                              "bfloat16 or int64");
  }

  const std::string &sourceName() const { return sourceName_; }

private:
  std::string sourceName_;
};

/// A float value of the graph format: a JSON number, or one of the strings
/// "inf", "-inf", "nan" (JSON has no literal for them: a fill of -inf, a
/// masked_fill's value); nullopt for anything else.
inline std::optional<double> jsonFloat(const nlohmann::json &value) {
  if (value.is_number())
    return value.get<double>();
  if (value.is_string()) {
    const std::string &text = value.get_ref<const std::string &>();
    if (text == "inf")
      return std::numeric_limits<double>::infinity();
    if (text == "-inf")
      return -std::numeric_limits<double>::infinity();
    if (text == "nan")
      return std::numeric_limits<double>::quiet_NaN();
  }
  return std::nullopt;
}

inline std::string indexed(const std::string &path, size_t index) {
  return path + "[" + std::to_string(index) + "]";
}

inline std::string shapeString(const std::vector<int64_t> &shape) {
  std::ostringstream out;
  out << "[";
  for (size_t i = 0; i < shape.size(); ++i)
    out << (i ? ", " : "") << shape[i];
  out << "]";
  return out.str();
}

inline int64_t numElements(const std::vector<int64_t> &shape) {
  return plan::numElements(shape);
}

} // namespace shardc::compiler
