//===- GraphNodes.cpp - forward nodes: reading and type inference ---------===//
//
// Each op's rules mirror torch's: the same shapes are accepted, with the
// same results, so a graph exported from a working torch model reads, and
// a graph that reads cannot fail on shapes later.
//
//===----------------------------------------------------------------------===//
#include "compiler/GraphNodes.h"
#include "runtime/AttentionShapes.h"
#include "runtime/OpRules.h"

#include <cmath>
#include <functional>

namespace shardc::compiler {
namespace {

using Shape = std::vector<int64_t>;

/// Numpy broadcasting; false if the shapes do not broadcast.
bool broadcast(const Shape &a, const Shape &b, Shape &result) {
  size_t rank = std::max(a.size(), b.size());
  result.assign(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return false;
    result[rank - 1 - i] = da == 1 ? db : da;
  }
  return true;
}

bool isFloat(plan::DType dtype) { return dtype != plan::DType::I64; }

/// What one node reads, with helpers that fail with its path.
class NodeReader {
public:
  NodeReader(const GraphReader &reader, const json &value, std::string path,
             const ValueTypes &types, GraphNode &node)
      : reader_(reader), value_(value), path_(std::move(path)),
        types_(types), node_(node) {}

  [[noreturn]] void fail(const std::string &reason) const {
    reader_.fail(path_, node_.op + ": " + reason);
  }
  [[noreturn]] void failAt(const std::string &key, const std::string &reason) const {
    reader_.fail(path_ + "." + key, reason);
  }

  void arity(size_t min, size_t max) const {
    size_t n = node_.inputs.size();
    if (n < min || n > max)
      failAt("inputs", node_.op + " takes " +
                           (min == max ? std::to_string(min)
                                       : std::to_string(min) + " to " +
                                             std::to_string(max)) +
                           " inputs, got " + std::to_string(n));
  }
  const Shape &shape(size_t i) const { return types_.at(node_.inputs[i]).first; }
  plan::DType dtype(size_t i) const { return types_.at(node_.inputs[i]).second; }
  std::string describe(size_t i) const {
    return "'" + node_.inputs[i] + "' " + shapeString(shape(i)) + " " +
           plan::dtypeName(dtype(i));
  }

  /// Inputs [first, last) must share one dtype: the result's.
  void sameDtype(size_t first, size_t last) const {
    for (size_t i = first; i < last && i < node_.inputs.size(); ++i)
      if (dtype(i) != dtype(first))
        fail("inputs " + describe(first) + " and " + describe(i) +
             " differ in dtype");
    node_.dtype = dtype(first);
  }

  /// Float inputs [first, last) must share one dtype: the result's.
  void floatInputs(size_t first, size_t last) const {
    for (size_t i = first; i < last && i < node_.inputs.size(); ++i) {
      if (!isFloat(dtype(i)))
        fail("input " + describe(i) + " must be floating point");
      if (dtype(i) != dtype(first))
        fail("inputs " + describe(first) + " and " + describe(i) +
             " differ in dtype");
    }
    node_.dtype = dtype(first);
  }

  double number(const char *key, std::optional<double> fallback) const {
    auto it = value_.find(key);
    if (it == value_.end()) {
      if (!fallback)
        failAt(key, "missing required attribute");
      return *fallback;
    }
    if (!it->is_number())
      failAt(key, "must be a number, got " + it->dump());
    return it->get<double>();
  }

  int64_t integer(const char *key, std::optional<int64_t> fallback) const {
    double value = number(key, fallback ? std::optional<double>(double(*fallback))
                                        : std::nullopt);
    if (value != std::floor(value) || std::abs(value) > 1e15)
      failAt(key, "must be an integer");
    return static_cast<int64_t>(value);
  }

  /// A dim attribute normalized to [0, rank).
  int64_t dim(const char *key, int64_t rank, std::optional<int64_t> fallback) {
    int64_t d = integer(key, fallback);
    if (d < -rank || d >= rank)
      failAt(key, "dim " + std::to_string(d) + " out of range for " +
                      std::to_string(rank) + " dims");
    d = d < 0 ? d + rank : d;
    node_.numbers[key] = static_cast<double>(d);
    return d;
  }

  std::vector<int64_t> intList(const char *key) const {
    std::string path = path_ + "." + key;
    const json &list = reader_.array(reader_.member(value_, path_, key), path);
    std::vector<int64_t> result;
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_number_integer())
        reader_.fail(indexed(path, i), "must be an integer");
      result.push_back(list[i].get<int64_t>());
    }
    return result;
  }

  const json &value() const { return value_; }
  GraphNode &node() { return node_; }

private:
  const GraphReader &reader_;
  const json &value_;
  std::string path_;
  const ValueTypes &types_;
  GraphNode &node_;
};

using Rule = std::function<void(NodeReader &)>;

void elementwise(NodeReader &r) {
  r.arity(2, 2);
  // add, sub and mul also take int64 (position ids); div of integers is
  // torch's true division, which gives floats: the exporter casts first.
  const bool ints = r.dtype(0) == plan::DType::I64 && r.dtype(1) == plan::DType::I64;
  if (ints && r.value().value("op", std::string()) == "div")
    r.fail("int64 operands: torch divides integers into floats, so cast them to a float "
           "dtype first");
  if (ints)
    r.node().dtype = plan::DType::I64;
  else
    r.floatInputs(0, 2);
  Shape out;
  if (!broadcast(r.shape(0), r.shape(1), out))
    r.fail("shapes " + shapeString(r.shape(0)) + " and " +
           shapeString(r.shape(1)) + " do not broadcast");
  r.node().shapes = {out};
}

void unary(NodeReader &r) {
  r.arity(1, 1);
  r.floatInputs(0, 1);
  r.node().shapes = {r.shape(0)};
}

const std::map<std::string, Rule> &rules() {
  static const std::map<std::string, Rule> table = {
      {"add", elementwise},
      {"sub", elementwise},
      {"mul", elementwise},
      {"div", elementwise},
      {"silu", unary},
      {"relu", unary},
      // torch's x.detach(): x's values, and no gradient flows back through it
      {"detach",
       [](NodeReader &r) {
         r.arity(1, 1);
         r.node().dtype = r.dtype(0);
         r.node().shapes = {r.shape(0)};
       }},
      {"gelu",
       [](NodeReader &r) {
         unary(r);
         std::string approximate = "none";
         if (auto it = r.value().find("approximate"); it != r.value().end()) {
           if (!it->is_string() || (*it != "none" && *it != "tanh"))
             r.failAt("approximate", "must be \"none\" or \"tanh\"");
           approximate = it->get<std::string>();
         }
         r.node().strings["approximate"] = approximate;
       }},
      {"embedding",
       [](NodeReader &r) {
         r.arity(2, 2);
         if (r.shape(0).size() != 2 || !isFloat(r.dtype(0)))
           r.fail("weight " + r.describe(0) + " must be a float [V, D] table");
         if (r.dtype(1) != plan::DType::I64)
           r.fail("ids " + r.describe(1) + " must be int64");
         Shape out = r.shape(1);
         out.push_back(r.shape(0)[1]);
         r.node().dtype = r.dtype(0);
         r.node().shapes = {out};
         // nn.Embedding's padding_idx: the row whose gradient stays zero
         // (forward reads it like any other row).
         int64_t padding = r.integer("padding_idx", -1);
         if (padding < -1 || padding >= r.shape(0)[0])
           r.failAt("padding_idx", "must be a row of the table (0.." +
                                       std::to_string(r.shape(0)[0] - 1) + ") or -1, got " +
                                       std::to_string(padding));
         r.node().numbers["padding_idx"] = static_cast<double>(padding);
       }},
      {"linear",
       [](NodeReader &r) {
         r.arity(2, 3);
         r.floatInputs(0, r.node().inputs.size());
         const Shape &x = r.shape(0), &w = r.shape(1);
         if (x.empty() || w.size() != 2 || w[1] != x.back())
           r.fail("x " + r.describe(0) + " does not fit weight " + r.describe(1) +
                  " (x [..., K], weight [N, K])");
         if (r.node().inputs.size() == 3 && r.shape(2) != Shape{w[0]})
           r.fail("bias " + r.describe(2) + " must be [" + std::to_string(w[0]) + "]");
         Shape out = x;
         out.back() = w[0];
         r.node().shapes = {out};
       }},
      {"matmul",
       [](NodeReader &r) {
         r.arity(2, 2);
         r.floatInputs(0, 2);
         const Shape &a = r.shape(0), &b = r.shape(1);
         if (a.size() < 2 || b.size() < 2 || a.back() != b[b.size() - 2])
           r.fail(r.describe(0) + " and " + r.describe(1) +
                  " do not multiply ([..., M, K] x [..., K, N])");
         Shape batch;
         if (!broadcast(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), batch))
           r.fail("batch dims of " + r.describe(0) + " and " + r.describe(1) +
                  " do not broadcast");
         batch.push_back(a[a.size() - 2]);
         batch.push_back(b.back());
         r.node().shapes = {batch};
       }},
      {"layer_norm",
       [](NodeReader &r) {
         r.arity(3, 3);
         r.floatInputs(0, 3);
         const Shape &x = r.shape(0);
         if (x.empty() || r.shape(1) != Shape{x.back()} || r.shape(2) != Shape{x.back()})
           r.fail("weight " + r.describe(1) + " and bias " + r.describe(2) +
                  " must be [" + (x.empty() ? "?" : std::to_string(x.back())) + "]");
         r.node().numbers["eps"] = r.number("eps", 1e-5);
         r.node().shapes = {x};
       }},
      {"rms_norm",
       [](NodeReader &r) {
         r.arity(2, 2);
         r.floatInputs(0, 2);
         const Shape &x = r.shape(0);
         if (x.empty() || r.shape(1) != Shape{x.back()})
           r.fail("weight " + r.describe(1) + " must be [" +
                  (x.empty() ? "?" : std::to_string(x.back())) + "]");
         r.node().numbers["eps"] = r.number("eps", 1e-6);
         r.node().shapes = {x};
       }},
      {"softmax",
       [](NodeReader &r) {
         unary(r);
         r.dim("dim", static_cast<int64_t>(r.shape(0).size()), -1);
       }},
      {"scaled_dot_product_attention",
       [](NodeReader &r) {
         r.arity(3, 4);
         r.floatInputs(0, 4);
         const Shape &q = r.shape(0), &k = r.shape(1), &v = r.shape(2);
         if (!runtime::attentionShapesFit(q, k, v))
           r.fail("q " + r.describe(0) + ", k " + r.describe(1) + ", v " +
                  r.describe(2) + " do not fit [B, H, T, E], [B, Hkv, S, E], [B, Hkv, S, Ev]"
                  " with H a multiple of Hkv");
         if (r.node().inputs.size() == 4) {
           // The additive mask: each dim 1 or the scores' [B, H, T, S].
           const Shape scores{q[0], q[1], q[2], k[2]};
           if (!runtime::attentionMaskFits(r.shape(3), scores))
             r.fail("mask " + r.describe(3) + " does not broadcast to the scores " +
                    shapeString(scores) + " (4 dims, each 1 or the scores')");
         }
         if (auto it = r.value().find("causal"); it != r.value().end()) {
           if (!it->is_boolean())
             r.failAt("causal", "must be true or false");
           r.node().causal = it->get<bool>();
         }
         if (r.node().causal && q[2] != k[2])
           r.fail("causal attention needs as many queries as keys");
         r.node().numbers["scale"] =
             r.number("scale", 1.0 / std::sqrt(static_cast<double>(q[3])));
         r.node().shapes = {{q[0], q[1], q[2], v[3]}};
       }},
      {"rotary_embedding",
       [](NodeReader &r) {
         unary(r);
         const Shape &x = r.shape(0);
         if (x.size() != 4 || x[3] % 2 != 0)
           r.fail("x " + r.describe(0) + " must be [B, H, T, D] with D even");
         r.node().numbers["theta"] = r.number("theta", 10000.0);
       }},
      {"reshape",
       [](NodeReader &r) {
         r.arity(1, 1);
         r.node().dtype = r.dtype(0);
         Shape shape = r.intList("shape");
         int64_t known = 1, inferred = -1;
         for (size_t i = 0; i < shape.size(); ++i) {
           if (shape[i] == -1) {
             if (inferred >= 0)
               r.failAt("shape", "only one dimension may be -1");
             inferred = static_cast<int64_t>(i);
           } else if (shape[i] < 0) {
             r.failAt("shape", "dimensions must be non-negative or -1");
           } else {
             known *= shape[i];
           }
         }
         int64_t total = numElements(r.shape(0));
         if (inferred >= 0 && known > 0 && total % known == 0)
           shape[inferred] = total / known;
         if (numElements(shape) != total || (inferred >= 0 && known == 0))
           r.fail("cannot reshape " + r.describe(0) + " to " + shapeString(shape));
         r.node().ints = shape;
         r.node().shapes = {shape};
       }},
      {"transpose",
       [](NodeReader &r) {
         r.arity(1, 1);
         r.node().dtype = r.dtype(0);
         int64_t rank = static_cast<int64_t>(r.shape(0).size());
         int64_t d0 = r.dim("dim0", rank, std::nullopt);
         int64_t d1 = r.dim("dim1", rank, std::nullopt);
         Shape out = r.shape(0);
         std::swap(out[d0], out[d1]);
         r.node().shapes = {out};
       }},
      {"permute",
       [](NodeReader &r) {
         r.arity(1, 1);
         r.node().dtype = r.dtype(0);
         int64_t rank = static_cast<int64_t>(r.shape(0).size());
         Shape dims = r.intList("dims");
         std::vector<bool> seen(rank, false);
         if (static_cast<int64_t>(dims.size()) != rank)
           r.failAt("dims", "needs " + std::to_string(rank) + " dims");
         Shape out;
         for (int64_t &d : dims) {
           d = d < 0 ? d + rank : d;
           if (d < 0 || d >= rank || seen[d])
             r.failAt("dims", "must be a permutation of 0.." + std::to_string(rank - 1));
           seen[d] = true;
           out.push_back(r.shape(0)[d]);
         }
         r.node().ints = dims;
         r.node().shapes = {out};
       }},
      {"slice",
       [](NodeReader &r) {
         r.arity(1, 1);
         r.node().dtype = r.dtype(0);
         int64_t rank = static_cast<int64_t>(r.shape(0).size());
         int64_t d = r.dim("dim", rank, std::nullopt);
         int64_t size = r.shape(0)[d];
         int64_t start = r.integer("start", 0), end = r.integer("end", size);
         int64_t step = r.integer("step", 1);
         if (step < 1)
           r.failAt("step", "must be at least 1");
         start = start < 0 ? start + size : start;
         end = end < 0 ? end + size : end;
         start = std::clamp<int64_t>(start, 0, size);
         end = std::clamp<int64_t>(end, start, size);
         r.node().numbers["start"] = double(start);
         r.node().numbers["end"] = double(end);
         r.node().numbers["step"] = double(step);
         Shape out = r.shape(0);
         out[d] = (end - start + step - 1) / step;
         r.node().shapes = {out};
       }},
      {"split",
       [](NodeReader &r) {
         r.arity(1, 1);
         r.node().dtype = r.dtype(0);
         int64_t rank = static_cast<int64_t>(r.shape(0).size());
         int64_t d = r.dim("dim", rank, std::nullopt);
         Shape sizes = r.intList("sizes");
         int64_t total = 0;
         for (int64_t size : sizes) {
           if (size < 0)
             r.failAt("sizes", "sizes must be non-negative");
           total += size;
         }
         if (total != r.shape(0)[d])
           r.failAt("sizes", "sizes add up to " + std::to_string(total) +
                                 " but dim " + std::to_string(d) + " of " +
                                 r.describe(0) + " is " + std::to_string(r.shape(0)[d]));
         if (sizes.size() != r.node().names.size())
           r.failAt("names", "split into " + std::to_string(sizes.size()) +
                                 " pieces needs as many names, got " +
                                 std::to_string(r.node().names.size()));
         r.node().ints = sizes;
         for (int64_t size : sizes) {
           Shape out = r.shape(0);
           out[d] = size;
           r.node().shapes.push_back(out);
         }
       }},
      {"cat",
       [](NodeReader &r) {
         r.arity(1, 1 << 20);
         // int64 too: a copy of bytes (Hugging Face's causal-LM loss pads
         // its labels with -100 before shifting them)
         if (r.dtype(0) == plan::DType::I64)
           r.sameDtype(0, r.node().inputs.size());
         else
           r.floatInputs(0, r.node().inputs.size());
         int64_t rank = static_cast<int64_t>(r.shape(0).size());
         int64_t d = r.dim("dim", rank, std::nullopt);
         Shape out = r.shape(0);
         out[d] = 0;
         for (size_t i = 0; i < r.node().inputs.size(); ++i) {
           const Shape &s = r.shape(i);
           if (static_cast<int64_t>(s.size()) != rank)
             r.fail("inputs differ in rank: " + r.describe(0) + " and " + r.describe(i));
           for (int64_t k = 0; k < rank; ++k)
             if (k != d && s[k] != r.shape(0)[k])
               r.fail("inputs " + r.describe(0) + " and " + r.describe(i) +
                      " differ outside dim " + std::to_string(d));
           out[d] += s[d];
         }
         r.node().shapes = {out};
       }},
      {"cross_entropy",
       [](NodeReader &r) {
         r.arity(2, 2);
         const Shape &logits = r.shape(0), &targets = r.shape(1);
         if (!isFloat(r.dtype(0)) || logits.size() != 2)
           r.fail("logits " + r.describe(0) + " must be float [N, C]");
         if (r.dtype(1) != plan::DType::I64 || targets != Shape{logits[0]})
           r.fail("targets " + r.describe(1) + " must be int64 [" +
                  std::to_string(logits[0]) + "]");
         r.node().dtype = r.dtype(0);
         r.node().shapes = {Shape{}};
         // torch's ignore_index: the targets left out of the mean (nanoGPT
         // pads with -1, a tokenizer's pad id may be a class, as in torch).
         r.node().numbers["ignore_index"] =
             static_cast<double>(r.integer("ignore_index", -100));
       }},
  };
  return table;
}

std::string knownOps() {
  std::string names;
  for (const auto &[name, rule] : rules())
    names += (names.empty() ? "" : ", ") + name;
  for (const plan::OpInfo &info : plan::allOps())
    if (info.generic())
      names += std::string(", ") + info.name;
  return names;
}

/// A family op's attribute from JSON by the table's kind (integers also
/// from true/false, for flags such as keepdim), or nullopt.
std::optional<plan::AttrValue> jsonAttr(const json &value, plan::AttrKind kind) {
  switch (kind) {
  case plan::AttrKind::Int:
    if (value.is_boolean())
      return int64_t{value.get<bool>() ? 1 : 0};
    if (value.is_number_integer())
      return value.get<int64_t>();
    return std::nullopt;
  case plan::AttrKind::Float:
    if (auto number = jsonFloat(value))
      return *number;
    return std::nullopt;
  case plan::AttrKind::String:
    if (value.is_string())
      return value.get<std::string>();
    return std::nullopt;
  case plan::AttrKind::IntList: {
    if (!value.is_array())
      return std::nullopt;
    std::vector<int64_t> list;
    for (const json &element : value) {
      if (!element.is_number_integer())
        return std::nullopt;
      list.push_back(element.get<int64_t>());
    }
    return list;
  }
  }
  return std::nullopt;
}

const char *jsonKindText(plan::AttrKind kind) {
  switch (kind) {
  case plan::AttrKind::Int: return "an integer (or true/false)";
  case plan::AttrKind::Float: return "a number";
  case plan::AttrKind::String: return "a string";
  case plan::AttrKind::IntList: return "a list of integers";
  }
  return "?";
}

/// A family op of the op table, read from the table alone: its attributes
/// by their kinds, its result type from the family's rule (runtime/OpRules.h,
/// the same code the tc verifier and the executor run).
void readFamilyNode(const GraphReader &reader, const json &value, const plan::OpInfo &info,
                    const ValueTypes &types, GraphNode &node) {
  const std::string &path = node.path;
  node.familyOp = true;
  for (const auto &[key, attr] : value.items()) {
    if (key == "op" || key == "name" || key == "inputs")
      continue;
    const plan::AttrSpec *spec = info.attr(key);
    if (!spec) {
      std::string known;
      for (const plan::AttrSpec &s : info.attrs)
        known += (known.empty() ? "" : ", ") + std::string(s.name);
      reader.fail(path + "." + key, std::string(info.name) + " has no attribute \"" + key +
                                        "\" (it takes " + (known.empty() ? "none" : known) +
                                        ")");
    }
    std::optional<plan::AttrValue> parsed = jsonAttr(attr, spec->kind);
    if (!parsed)
      reader.fail(path + "." + key, std::string("must be ") + jsonKindText(spec->kind) +
                                        ", got " + attr.dump());
    node.attrs[key] = std::move(*parsed);
  }
  for (const plan::AttrSpec &spec : info.attrs)
    if (spec.required && !node.attrs.count(spec.name))
      reader.fail(path + "." + spec.name, std::string(info.name) +
                                              ": missing required attribute (" +
                                              jsonKindText(spec.kind) + ")");
  std::vector<runtime::TensorType> operands;
  for (const std::string &input : node.inputs)
    operands.push_back({types.at(input).first, types.at(input).second});
  runtime::TensorType result;
  if (std::optional<std::string> reason =
          runtime::tryResultType(info, operands, node.attrs, result)) {
    std::string described;
    for (size_t i = 0; i < operands.size(); ++i)
      described += std::string(i ? ", " : "") + "'" + node.inputs[i] + "' " +
                   shapeString(operands[i].shape) + " " + plan::dtypeName(operands[i].dtype);
    reader.fail(path, *reason + " (operands " + described + ")");
  }
  node.shapes = {result.shape};
  node.dtype = result.dtype;
}

} // namespace

GraphNode readNode(const GraphReader &reader, const json &value,
                   const std::string &path, const ValueTypes &types) {
  reader.requireObject(value, path);
  GraphNode node;
  node.path = path;
  node.op = reader.string(reader.member(value, path, "op"), path + ".op");
  auto rule = rules().find(node.op);
  // A family op of the op table; other plan opcodes (fill, strided_copy)
  // are not graph ops.
  const plan::OpInfo *family = nullptr;
  if (std::optional<plan::OpCode> code = plan::parseOpCode(node.op))
    if (plan::opInfo(*code).generic())
      family = &plan::opInfo(*code);
  if (rule == rules().end() && !family)
    reader.fail(path + ".op", "unknown op \"" + node.op + "\"; expected one of " +
                                  knownOps());
  if (node.op == "split") {
    const json &names = reader.array(reader.member(value, path, "names"), path + ".names");
    for (size_t i = 0; i < names.size(); ++i)
      node.names.push_back(reader.string(names[i], indexed(path + ".names", i)));
  } else {
    node.names.push_back(reader.name(value, path));
  }
  const json &operands =
      reader.array(reader.member(value, path, "inputs"), path + ".inputs");
  for (size_t j = 0; j < operands.size(); ++j) {
    std::string operandPath = indexed(path + ".inputs", j);
    std::string operand = reader.string(operands[j], operandPath);
    if (std::find(node.names.begin(), node.names.end(), operand) != node.names.end())
      reader.fail(operandPath, "node \"" + operand + "\" uses its own result (a cycle)");
    if (!types.count(operand))
      reader.fail(operandPath,
                  "\"" + operand +
                      "\" is not a parameter, buffer, input or earlier node "
                      "(nodes must be listed in topological order)");
    node.inputs.push_back(operand);
  }
  if (family) {
    readFamilyNode(reader, value, *family, types, node);
    return node;
  }
  NodeReader nodeReader(reader, value, path, types, node);
  rule->second(nodeReader);
  return node;
}

} // namespace shardc::compiler
