#include "runtime/PlanJson.h"

#include "runtime/PlanCheck.h"
#include "runtime/RuntimeError.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>
#include <set>

namespace shardc::runtime {
using namespace shardc::plan;
using nlohmann::json;
using ordered = nlohmann::ordered_json;

// ---------------------------------------------------------------- writing --

namespace {

ordered attrToJson(const AttrValue &value) {
  if (auto *i = std::get_if<int64_t>(&value)) return *i;
  if (auto *d = std::get_if<double>(&value)) {
    if (std::isnan(*d)) return ordered{{"f64", "nan"}};
    if (std::isinf(*d)) return ordered{{"f64", *d > 0 ? "inf" : "-inf"}};
    return *d;
  }
  if (auto *s = std::get_if<std::string>(&value)) return *s;
  return std::get<std::vector<int64_t>>(value);
}

ordered paramToJson(const Param &p) {
  ordered j{{"name", p.name},       {"dtype", dtypeName(p.dtype)},
            {"shape", p.shape},     {"device", p.device},
            {"unit", p.unit},       {"is_buffer", p.isBuffer},
            {"chunk_rows", p.chunkRows}};
  // Only when not the default: older plans read unchanged.
  if (!p.persistent) j["persistent"] = false;
  if (!p.tiedNames.empty()) j["tied"] = p.tiedNames;
  return j;
}

ordered bufferToJson(const Buffer &b) {
  ordered j{{"id", b.id},         {"name", b.name},
            {"dtype", dtypeName(b.dtype)}, {"shape", b.shape},
            {"bytes", b.bytes},   {"category", categoryName(b.category)}};
  if (b.param) j["param"] = *b.param;
  if (b.replicated) j["replicated"] = true;
  if (b.aliasOf) {  // only aliases carry these keys: older plans read unchanged
    j["alias_of"] = *b.aliasOf;
    j["byte_offset"] = b.byteOffset;
  }
  return j;
}

ordered instructionToJson(const Instruction &inst) {
  ordered attrs = ordered::object();
  for (const auto &[key, value] : inst.attrs) attrs[key] = attrToJson(value);
  return ordered{{"op", opName(inst.op)},        {"inputs", inst.inputs},
                 {"outputs", inst.outputs}, {"attrs", attrs},
                 {"loc", inst.loc}};
}

}  // namespace

std::string planToJson(const Plan &plan) {
  ordered j{{"format", "shardc-plan"},
            {"version", plan.version},
            {"world_size", plan.worldSize}};
  ordered params = ordered::array();
  for (const Param &p : plan.params) params.push_back(paramToJson(p));
  j["params"] = params;
  ordered functions = ordered::array();
  for (const Function &f : plan.functions) {
    ordered buffers = ordered::array(), body = ordered::array();
    for (const Buffer &b : f.buffers) buffers.push_back(bufferToJson(b));
    for (const Instruction &i : f.body) body.push_back(instructionToJson(i));
    functions.push_back(ordered{{"name", f.name},     {"buffers", buffers},
                                {"inputs", f.inputs}, {"outputs", f.outputs},
                                {"body", body}});
  }
  j["functions"] = functions;
  return j.dump(1) + "\n";
}

// ---------------------------------------------------------------- reading --

namespace {

/// A JSON value together with its path, so every error can name its place.
class Node {
public:
  Node(const json &value, std::string path, const std::string &source)
      : value_(value), path_(std::move(path)), source_(source) {}

  [[noreturn]] void fail(const std::string &reason) const {
    throw RuntimeError(source_ + ": " + (path_.empty() ? "<root>" : path_) +
                       ": " + reason);
  }

  const json &value() const { return value_; }
  /// A node for a value below this one that has no simple key/index path.
  Node sub(const json &value, std::string path) const {
    return Node(value, std::move(path), source_);
  }
  const std::string &path() const { return path_; }

  /// Rejects keys this format does not define, so typos do not pass silently.
  void expectObject(std::initializer_list<const char *> allowed) const {
    if (!value_.is_object()) fail("expected an object, got " + typeName());
    for (const auto &item : value_.items()) {
      bool known = false;
      for (const char *a : allowed) known = known || item.key() == a;
      if (!known) child(item.key()).fail("unknown key");
    }
  }

  Node field(const char *key) const {
    auto it = value_.find(key);
    if (it == value_.end()) child(key).fail("missing required key");
    return child(key);
  }
  bool has(const char *key) const { return value_.contains(key); }

  std::vector<Node> elements() const {
    if (!value_.is_array()) fail("expected an array, got " + typeName());
    std::vector<Node> out;
    for (size_t i = 0; i < value_.size(); ++i)
      out.emplace_back(value_[i], path_ + "[" + std::to_string(i) + "]", source_);
    return out;
  }

  std::string str() const {
    if (!value_.is_string()) fail("expected a string, got " + typeName());
    return value_.get<std::string>();
  }
  bool boolean() const {
    if (!value_.is_boolean()) fail("expected a boolean, got " + typeName());
    return value_.get<bool>();
  }
  int64_t integer(int64_t min = std::numeric_limits<int64_t>::min(),
                  int64_t max = std::numeric_limits<int64_t>::max()) const {
    // get<int64_t>() would silently truncate a float: check the JSON type.
    if (value_.is_number_unsigned() &&
        value_.get<uint64_t>() > static_cast<uint64_t>(max))
      fail("integer " + value_.dump() + " is out of range");
    if (!value_.is_number_integer()) fail("expected an integer, got " + typeName());
    int64_t v = value_.get<int64_t>();
    if (v < min || v > max)
      fail("integer " + std::to_string(v) + " is out of range [" +
           std::to_string(min) + ", " + std::to_string(max) + "]");
    return v;
  }
  std::vector<int64_t> integers(int64_t min = std::numeric_limits<int64_t>::min()) const {
    std::vector<int64_t> out;
    for (const Node &e : elements()) out.push_back(e.integer(min));
    return out;
  }
  std::vector<int32_t> ids() const {
    std::vector<int32_t> out;
    for (const Node &e : elements())
      out.push_back(static_cast<int32_t>(e.integer(0, std::numeric_limits<int32_t>::max())));
    return out;
  }

  std::string typeName() const {
    if (value_.is_number_float()) return "a float";
    if (value_.is_number()) return "an integer";
    return std::string("a") + (value_.is_object() || value_.is_array() ? "n " : " ") +
           value_.type_name();
  }

private:
  Node child(const std::string &key) const {
    static const json null;
    auto it = value_.is_object() ? value_.find(key) : value_.end();
    return Node(it == value_.end() ? null : *it,
                path_.empty() ? key : path_ + "." + key, source_);
  }

  const json &value_;
  std::string path_;
  const std::string &source_;
};

DType readDType(const Node &n) {
  std::string name = n.str();
  if (auto d = parseDType(name)) return *d;
  n.fail("unknown dtype '" + name + "' (expected float32, float64, float16, bfloat16 or int64)");
}

AttrValue readAttr(const Node &n) {
  const json &v = n.value();
  if (v.is_number_float()) return v.get<double>();
  if (v.is_number_integer()) return n.integer();
  if (v.is_string()) return v.get<std::string>();
  if (v.is_array()) return n.integers();
  if (v.is_object()) {
    n.expectObject({"f64"});
    std::string s = n.field("f64").str();
    if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
    if (s == "inf") return std::numeric_limits<double>::infinity();
    if (s == "-inf") return -std::numeric_limits<double>::infinity();
    n.field("f64").fail("expected \"nan\", \"inf\" or \"-inf\", got \"" + s + "\"");
  }
  n.fail("unsupported attribute value: " + n.typeName());
}

Param readParam(const Node &n) {
  n.expectObject({"name", "dtype", "shape", "device", "unit", "is_buffer", "chunk_rows",
                  "persistent", "tied"});
  Param p;
  p.name = n.field("name").str();
  p.dtype = readDType(n.field("dtype"));
  p.shape = n.field("shape").integers(0);
  p.device = n.field("device").str();
  p.unit = n.field("unit").str();
  p.isBuffer = n.field("is_buffer").boolean();
  p.chunkRows = n.field("chunk_rows").integer(0);
  if (n.has("persistent")) p.persistent = n.field("persistent").boolean();
  if (n.has("tied"))
    for (const Node &name : n.field("tied").elements()) p.tiedNames.push_back(name.str());
  return p;
}

Buffer readBuffer(const Node &n) {
  n.expectObject({"id", "name", "dtype", "shape", "bytes", "category", "param", "alias_of",
                  "byte_offset", "replicated"});
  Buffer b;
  b.id = static_cast<int32_t>(n.field("id").integer(0, std::numeric_limits<int32_t>::max()));
  b.name = n.field("name").str();
  b.dtype = readDType(n.field("dtype"));
  b.shape = n.field("shape").integers(0);
  b.bytes = n.field("bytes").integer(0);
  Node category = n.field("category");
  auto c = parseCategory(category.str());
  if (!c)
    category.fail("unknown category '" + category.str() +
                  "' (expected parameters, gathered, activations or io)");
  b.category = *c;
  if (n.has("param"))
    b.param = static_cast<int32_t>(
        n.field("param").integer(0, std::numeric_limits<int32_t>::max()));
  if (n.has("alias_of"))
    b.aliasOf = static_cast<int32_t>(
        n.field("alias_of").integer(0, std::numeric_limits<int32_t>::max()));
  if (n.has("byte_offset")) {
    if (!b.aliasOf) n.field("byte_offset").fail("only an alias (alias_of) has a byte_offset");
    b.byteOffset = n.field("byte_offset").integer(0);
  }
  if (n.has("replicated")) b.replicated = n.field("replicated").boolean();
  return b;
}

Instruction readInstruction(const Node &n) {
  n.expectObject({"op", "inputs", "outputs", "attrs", "loc"});
  Instruction inst;
  Node op = n.field("op");
  const std::string name = op.str();
  std::optional<OpCode> code = parseOpCode(name);
  if (!code) op.fail("unknown op '" + name + "' (known: " + opNameList() + ")");
  inst.op = *code;
  inst.inputs = n.field("inputs").ids();
  inst.outputs = n.field("outputs").ids();
  Node attrs = n.field("attrs");
  if (!attrs.value().is_object()) attrs.fail("expected an object, got " + attrs.typeName());
  for (const auto &item : attrs.value().items())
    inst.attrs[item.key()] =
        readAttr(attrs.sub(item.value(), attrs.path() + "." + item.key()));
  inst.loc = n.field("loc").str();
  return inst;
}

Function readFunction(const Node &n) {
  n.expectObject({"name", "buffers", "inputs", "outputs", "body"});
  Function f;
  f.name = n.field("name").str();
  for (const Node &b : n.field("buffers").elements()) f.buffers.push_back(readBuffer(b));
  f.inputs = n.field("inputs").ids();
  f.outputs = n.field("outputs").ids();
  for (const Node &i : n.field("body").elements()) f.body.push_back(readInstruction(i));
  return f;
}

}  // namespace

Plan planFromJson(const std::string &text, const std::string &sourceName) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception &e) {
    throw RuntimeError(sourceName + ": not valid JSON: " + e.what());
  }
  try {
    Node n(root, "", sourceName);
    n.expectObject({"format", "version", "world_size", "params", "functions"});
    if (n.field("format").str() != "shardc-plan")
      n.field("format").fail("expected \"shardc-plan\", got \"" +
                             n.field("format").str() + "\"");
    Plan plan;
    // Check the version before anything else: a newer format may differ anywhere.
    plan.version = static_cast<int>(n.field("version").integer(0, 1 << 30));
    if (plan.version != kPlanVersion)
      n.field("version").fail("plan version " + std::to_string(plan.version) +
                              " is not supported (this runtime reads version " +
                              std::to_string(kPlanVersion) + ")");
    plan.worldSize = n.field("world_size").integer(1);
    for (const Node &p : n.field("params").elements()) plan.params.push_back(readParam(p));
    for (const Node &f : n.field("functions").elements())
      plan.functions.push_back(readFunction(f));
    checkPlan(plan);
    return plan;
  } catch (const RuntimeError &e) {
    std::string msg = e.what();
    // checkPlan does not know the source name; Node errors already carry it.
    if (msg.rfind(sourceName + ": ", 0) == 0) throw;
    throw RuntimeError(sourceName + ": " + msg);
  } catch (const json::exception &e) {
    throw RuntimeError(sourceName + ": malformed plan: " + e.what());
  }
}

}  // namespace shardc::runtime
