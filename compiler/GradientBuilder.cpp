//===- GradientBuilder.cpp - emitting backward nodes into a graph ---------===//
#include "compiler/GradientBuilder.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>

namespace shardc::compiler {

int64_t elementCount(const Shape &shape) {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count;
}

GradientBuilder::GradientBuilder(json &document, const GraphReader &reader,
                                 ValueTypes &types, std::string device)
    : document_(document), reader_(reader), types_(types),
      device_(std::move(device)) {
  if (!document_.contains("nodes"))
    document_["nodes"] = json::array();
  if (!document_.contains("buffers"))
    document_["buffers"] = json::array();
}

std::string GradientBuilder::fresh(const std::string &stem) {
  // Names share one namespace with the model's own; "grad:" cannot clash
  // with an exporter's names (they are Python identifiers and dotted paths).
  std::string name;
  do {
    name = "grad:" + stem + "." + std::to_string(counter_++);
  } while (types_.count(name));
  return name;
}

std::string GradientBuilder::named(const std::string &name,
                                   const std::string &op,
                                   const std::vector<std::string> &inputs,
                                   json attributes) {
  json node = std::move(attributes);
  node["name"] = name;
  node["op"] = op;
  node["inputs"] = inputs;
  json &nodes = document_["nodes"];
  std::string path = "gradient of " + origin_ + " (nodes[" +
                     std::to_string(nodes.size()) + "])";
  GraphNode read = readNode(reader_, node, path, types_);
  types_[name] = {read.shapes.at(0), read.dtype};
  nodes.push_back(std::move(node));
  return name;
}

namespace {
/// Whether `node` defines `value` (its "name", or one of its "names").
bool defines(const json &node, const std::string &value) {
  if (node.value("name", "") == value)
    return true;
  const auto names = node.find("names");
  return names != node.end() &&
         std::find(names->begin(), names->end(), value) != names->end();
}
} // namespace

std::string GradientBuilder::accumulate(const std::string &existing,
                                        const std::string &contribution) {
  json &nodes = document_["nodes"];
  // Back from the last node to the contribution's: nothing on the way may
  // read it (it would see the sum) or define `existing` (acc must come
  // first).
  std::optional<size_t> fused;
  for (size_t k = nodes.size(); k-- > 0;) {
    const json &node = nodes[k];
    const json &inputs = node["inputs"];
    if (defines(node, existing) ||
        std::find(inputs.begin(), inputs.end(), contribution) != inputs.end())
      break;
    if (defines(node, contribution)) {
      if (node["op"] == "embedding_backward" && inputs.size() == 2)
        fused = k;
      break;
    }
  }
  if (!fused)
    return add(existing, contribution);
  json node = nodes[*fused];
  node["inputs"].push_back(existing);
  readNode(reader_, node,
           "gradient of " + origin_ + " (nodes[" + std::to_string(*fused) +
               "])",
           types_); // acc's shape and dtype checked as any operand's
  nodes[*fused] = std::move(node);
  return contribution;
}

std::string GradientBuilder::op(const std::string &op,
                                const std::vector<std::string> &inputs,
                                json attributes) {
  return named(fresh(op), op, inputs, std::move(attributes));
}

const Shape &GradientBuilder::shape(const std::string &value) const {
  return types_.at(value).first;
}

plan::DType GradientBuilder::dtype(const std::string &value) const {
  return types_.at(value).second;
}

std::string GradientBuilder::constant(const std::string &key,
                                      const Shape &shape, plan::DType dtype,
                                      json init) {
  std::ostringstream fullKey;
  fullKey << key << "/" << plan::dtypeName(dtype) << "/";
  for (int64_t size : shape)
    fullKey << size << ",";
  if (auto it = constants_.find(fullKey.str()); it != constants_.end())
    return it->second;
  std::string name = fresh("const");
  document_["buffers"].push_back({{"name", name},
                                  {"shape", shape},
                                  {"dtype", plan::dtypeName(dtype)},
                                  {"device", device_},
                                  {"persistent", false},
                                  {"init", json::array({std::move(init)})}});
  types_[name] = {shape, dtype};
  constants_[fullKey.str()] = name;
  return name;
}

std::string GradientBuilder::scalar(double value, plan::DType dtype) {
  return filled({}, dtype, value);
}

std::string GradientBuilder::zeros(const Shape &shape, plan::DType dtype) {
  return constant("zeros", shape, dtype, {{"op", "zeros"}});
}

std::string GradientBuilder::filled(const Shape &shape, plan::DType dtype,
                                    double value) {
  std::ostringstream key;
  key.precision(17);
  key << "fill=" << value;
  // The graph format writes non-finite values as strings (JSON has none).
  json number = std::isfinite(value) ? json(value)
                : std::isnan(value)  ? json("nan")
                                     : json(value < 0 ? "-inf" : "inf");
  return constant(key.str(), shape, dtype, {{"op", "fill"}, {"value", number}});
}

std::string GradientBuilder::arange(int64_t n, plan::DType dtype) {
  return constant("arange", {n}, dtype, {{"op", "arange"}});
}

std::string GradientBuilder::identity(int64_t n, plan::DType dtype) {
  return constant("eye", {n, n}, dtype, {{"op", "eye"}});
}

std::string GradientBuilder::reshape(const std::string &x, const Shape &shape) {
  if (this->shape(x) == shape)
    return x;
  return op("reshape", {x}, {{"shape", shape}});
}

std::string GradientBuilder::reduceTo(const std::string &g,
                                      const Shape &target) {
  const Shape &from = shape(g);
  if (from == target)
    return g;
  const size_t lead = from.size() - target.size();
  std::vector<int64_t> dims;
  for (size_t k = 0; k < from.size(); ++k)
    if (k < lead || (target[k - lead] == 1 && from[k] != 1))
      dims.push_back(static_cast<int64_t>(k));
  std::string summed = dims.empty() ? g : sumKeep(g, dims);
  return reshape(summed, target);
}

std::string GradientBuilder::expandTo(const std::string &x,
                                      const Shape &target) {
  const Shape &from = shape(x);
  if (from == target)
    return x;
  std::vector<int64_t> strides(from.size(), 0);
  int64_t stride = 1;
  for (size_t k = from.size(); k-- > 0;) {
    strides[k] = from[k] == 1 ? 0 : stride;
    stride *= from[k];
  }
  return op("as_strided", {x}, {{"size", target}, {"stride", strides}});
}

std::string GradientBuilder::scale(const std::string &x, double value) {
  if (value == 1.0)
    return x;
  return mul(x, scalar(value, dtype(x)));
}

std::string GradientBuilder::shift(const std::string &x, double value) {
  return add(x, scalar(value, dtype(x)));
}

std::string GradientBuilder::sumKeep(const std::string &x,
                                     const std::vector<int64_t> &dims) {
  return op("sum", {x}, {{"dims", dims}, {"keepdim", 1}});
}

std::string GradientBuilder::meanKeep(const std::string &x,
                                      const std::vector<int64_t> &dims) {
  return op("mean", {x}, {{"dims", dims}, {"keepdim", 1}});
}

std::string GradientBuilder::asFloat(const std::string &mask,
                                     plan::DType dtype) {
  return op("cast", {mask}, {{"dtype", plan::dtypeName(dtype)}});
}

} // namespace shardc::compiler
