//===- GraphJson.cpp - parse and validate a graph file --------------------===//
//
// Every rejection names the file, the JSON path and the reason, e.g.
//   seed.json: parameters[0].shape[1]: must be a non-negative integer
//
//===----------------------------------------------------------------------===//
#include "compiler/Graph.h"
#include "compiler/GraphNodes.h"
#include "compiler/GraphReader.h"
#include "compiler/MasterWeights.h"
#include "dialects/tc/Device.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

using json = nlohmann::json;

namespace shardc::compiler {
namespace {


/// The init ops of the graph format, their kind, and their numeric
/// arguments with torch's defaults (NaN: required).
struct InitOpSpec {
  const char *name;
  InitStepKind kind;
  std::vector<std::pair<const char *, double>> numbers;
};

constexpr double kRequired = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<InitOpSpec> &initOpSpecs() {
  using K = InitStepKind;
  static const std::vector<InitOpSpec> specs = {
      {"fill", K::Generator, {{"value", kRequired}}},
      {"zeros", K::Generator, {}},
      {"ones", K::Generator, {}},
      {"uniform", K::Generator, {{"a", 0.0}, {"b", 1.0}}},
      {"normal", K::Generator, {{"mean", 0.0}, {"std", 1.0}}},
      {"trunc_normal", K::Generator,
       {{"mean", 0.0}, {"std", 1.0}, {"a", -2.0}, {"b", 2.0}}},
      {"kaiming_uniform", K::Generator, {{"a", 0.0}}},
      {"kaiming_normal", K::Generator, {{"a", 0.0}}},
      {"xavier_uniform", K::Generator, {{"gain", 1.0}}},
      {"xavier_normal", K::Generator, {{"gain", 1.0}}},
      {"eye", K::Generator, {}},
      {"arange", K::Generator, {{"start", 0.0}, {"step", 1.0}}},
      {"orthogonal", K::Generator, {{"gain", 1.0}}},
      {"load", K::Generator, {}},
      // Derived: the 2-norm of another parameter's initial values over some
      // of its dims (weight norm's g = ||v||); `of` and `dims` read below.
      {"norm_of", K::Generator, {}},
      {"mul", K::Pointwise, {{"value", kRequired}}},
      {"add", K::Pointwise, {{"value", kRequired}}},
      {"sub", K::Pointwise, {{"value", kRequired}}},
      {"div", K::Pointwise, {{"value", kRequired}}},
      {"clamp", K::Pointwise, {{"min", -kInf}, {"max", kInf}}},
      {"erfinv", K::Pointwise, {}},
      {"sqrt", K::Pointwise, {}},
      {"neg", K::Pointwise, {}},
      {"exp", K::Pointwise, {}},
      {"log", K::Pointwise, {}},
      {"expm1", K::Pointwise, {}},
      // x + log(-expm1(-x)): Mamba's dt bias (softplus of it is x)
      {"inverse_softplus", K::Pointwise, {}},
      // a row range of the final shape (nn.Embedding's padding_idx row)
      {"fill_rows", K::Pointwise, {{"value", kRequired}, {"start", kRequired},
                                   {"end", kRequired}}},
      {"reshape", K::View, {}},
      {"transpose", K::View, {{"dim0", kRequired}, {"dim1", kRequired}}},
      {"permute", K::View, {}},
      {"slice", K::View,
       {{"dim", kRequired}, {"start", 0.0}, {"end", kRequired}, {"step", 1.0}}},
  };
  return specs;
}

std::string knownInitOps() {
  std::string names;
  for (const InitOpSpec &spec : initOpSpecs())
    names += (names.empty() ? "" : ", ") + std::string(spec.name);
  return names;
}

/// A view argument: an integer that fits (negative dims count from the end).
int64_t integerArgument(const GraphReader &reader, const InitStep &step,
                        const char *key) {
  double value = step.number(key);
  if (value != std::floor(value) || std::abs(value) > 1e15)
    reader.fail(step.path + "." + key, "must be an integer");
  return static_cast<int64_t>(value);
}

int64_t normalizeDim(const GraphReader &reader, const InitStep &step,
                     const char *key, int64_t rank) {
  int64_t dim = integerArgument(reader, step, key);
  if (dim < -rank || dim >= rank)
    reader.fail(step.path + "." + key, "dim " + std::to_string(dim) +
                                           " out of range for a tensor of " +
                                           std::to_string(rank) + " dims");
  return dim < 0 ? dim + rank : dim;
}

/// Computes the shape a view step produces from `in`, normalizing the
/// step's arguments (dims made non-negative, slice end clamped as torch).
std::vector<int64_t> applyView(const GraphReader &reader, const json &value,
                               InitStep &step, const std::vector<int64_t> &in) {
  int64_t rank = static_cast<int64_t>(in.size());
  if (step.op == "reshape") {
    std::vector<int64_t> out = reader.shape(value, step.path);
    if (numElements(out) != numElements(in))
      reader.fail(step.path + ".shape",
                  "cannot reshape " + std::to_string(numElements(in)) +
                      " elements to " + std::to_string(numElements(out)));
    return out;
  }
  if (step.op == "transpose") {
    int64_t d0 = normalizeDim(reader, step, "dim0", rank);
    int64_t d1 = normalizeDim(reader, step, "dim1", rank);
    step.numbers["dim0"] = static_cast<double>(d0);
    step.numbers["dim1"] = static_cast<double>(d1);
    std::vector<int64_t> out = in;
    std::swap(out[d0], out[d1]);
    return out;
  }
  if (step.op == "permute") {
    std::string path = step.path + ".dims";
    const json &dims = reader.array(reader.member(value, step.path, "dims"), path);
    if (static_cast<int64_t>(dims.size()) != rank)
      reader.fail(path, "needs " + std::to_string(rank) + " dims, got " +
                            std::to_string(dims.size()));
    std::vector<bool> seen(rank, false);
    std::vector<int64_t> out;
    for (size_t k = 0; k < dims.size(); ++k) {
      if (!dims[k].is_number_integer())
        reader.fail(indexed(path, k), "must be an integer");
      int64_t d = dims[k].get<int64_t>();
      if (d < 0)
        d += rank;
      if (d < 0 || d >= rank || seen[d])
        reader.fail(indexed(path, k), "dims must be a permutation of 0.." +
                                          std::to_string(rank - 1));
      seen[d] = true;
      step.ints.push_back(d);
      out.push_back(in[d]);
    }
    return out;
  }
  // slice
  int64_t dim = normalizeDim(reader, step, "dim", rank);
  int64_t start = integerArgument(reader, step, "start");
  int64_t end = integerArgument(reader, step, "end");
  int64_t stride = integerArgument(reader, step, "step");
  int64_t size = in[dim];
  if (stride < 1)
    reader.fail(step.path + ".step", "must be at least 1");
  if (start < 0)
    start += size;
  if (end < 0)
    end += size;
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  step.numbers["dim"] = static_cast<double>(dim);
  step.numbers["start"] = static_cast<double>(start);
  step.numbers["end"] = static_cast<double>(end);
  std::vector<int64_t> out = in;
  out[dim] = (end - start + stride - 1) / stride;
  return out;
}

std::vector<InitStep> readInitChain(const GraphReader &reader,
                                    const json &param, const std::string &path,
                                    const std::vector<int64_t> &paramShape) {
  std::string chainPath = path + ".init";
  const json &chain = reader.array(reader.member(param, path, "init"), chainPath);
  if (chain.empty())
    reader.fail(chainPath, "an init chain needs at least one op (a generator)");
  std::vector<InitStep> steps;
  std::vector<int64_t> shape;
  for (size_t i = 0; i < chain.size(); ++i) {
    std::string stepPath = indexed(chainPath, i);
    const json &value = chain[i];
    reader.requireObject(value, stepPath);
    InitStep step;
    step.path = stepPath;
    step.op = reader.string(reader.member(value, stepPath, "op"), stepPath + ".op");
    const InitOpSpec *spec = nullptr;
    for (const InitOpSpec &candidate : initOpSpecs())
      if (step.op == candidate.name)
        spec = &candidate;
    if (!spec)
      reader.fail(stepPath + ".op", "unknown init op \"" + step.op +
                                        "\"; expected one of " + knownInitOps());
    step.kind = spec->kind;
    for (const auto &[key, fallback] : spec->numbers) {
      auto it = value.find(key);
      if (it == value.end()) {
        if (std::isnan(fallback))
          reader.fail(stepPath, std::string("missing required key \"") + key + "\"");
        step.numbers[key] = fallback;
      } else if (auto number = jsonFloat(*it)) {
        step.numbers[key] = *number;
      } else {
        reader.fail(stepPath + "." + key,
                    "must be a number (or \"inf\", \"-inf\", \"nan\"), got " + it->dump());
      }
    }
    if (step.op == "load") {
      // Relative paths are relative to the graph file's directory.
      if (auto file = value.find("file"); file != value.end()) {
        step.file = reader.string(*file, stepPath + ".file");
        if (step.file.empty())
          reader.fail(stepPath + ".file", "must be a non-empty path");
        std::string source = reader.sourceName();
        auto slash = source.rfind('/');
        if (step.file[0] != '/' && slash != std::string::npos)
          step.file = source.substr(0, slash + 1) + step.file;
      }
      if (auto tensor = value.find("tensor"); tensor != value.end()) {
        step.tensor = reader.string(*tensor, stepPath + ".tensor");
        if (step.tensor.empty())
          reader.fail(stepPath + ".tensor", "must be a non-empty tensor name");
      }
      if (value.contains("shape"))
        reader.fail(stepPath + ".shape", "a load has the parameter's shape; views after a "
                                         "load are not supported");
    }
    if (step.op == "norm_of") {
      step.tensor = reader.string(reader.member(value, stepPath, "of"), stepPath + ".of");
      const json &dims = reader.array(reader.member(value, stepPath, "dims"), stepPath + ".dims");
      for (size_t k = 0; k < dims.size(); ++k) {
        if (!dims[k].is_number_integer())
          reader.fail(indexed(stepPath + ".dims", k), "must be an integer");
        step.ints.push_back(dims[k].get<int64_t>());
      }
      if (value.contains("shape"))
        reader.fail(stepPath + ".shape", "a norm_of has the parameter's shape; views after "
                                         "it are not supported");
    }
    if (step.op.rfind("kaiming", 0) == 0) {
      if (auto mode = value.find("mode"); mode != value.end())
        step.mode = reader.string(*mode, stepPath + ".mode");
      if (auto nl = value.find("nonlinearity"); nl != value.end())
        step.nonlinearity = reader.string(*nl, stepPath + ".nonlinearity");
      if (step.mode != "fan_in" && step.mode != "fan_out")
        reader.fail(stepPath + ".mode", "must be \"fan_in\" or \"fan_out\"");
    }

    if (i == 0) {
      if (step.kind != InitStepKind::Generator)
        reader.fail(stepPath + ".op", "an init chain starts with a generator, "
                                      "not \"" + step.op + "\"");
      // A generator makes the parameter's shape unless views follow.
      step.shape = value.contains("shape") ? reader.shape(value, stepPath)
                                           : paramShape;
    } else if (step.kind == InitStepKind::Generator) {
      reader.fail(stepPath + ".op", "generator \"" + step.op +
                                        "\" can only start an init chain");
    } else if (step.kind == InitStepKind::View && steps.front().op == "norm_of") {
      reader.fail(stepPath + ".op", "view \"" + step.op + "\" after a norm_of is not "
                                    "supported (only pointwise ops may follow it)");
    } else if (step.kind == InitStepKind::View && steps.front().op == "load") {
      reader.fail(stepPath + ".op", "view \"" + step.op + "\" after a load is not supported "
                                    "(only pointwise ops may follow a load; reshape the "
                                    "checkpoint tensor instead)");
    } else if (step.kind == InitStepKind::Pointwise) {
      step.shape = shape;
    } else if (!steps.empty() && steps.back().op == "fill_rows") {
      reader.fail(stepPath + ".op", "view \"" + step.op + "\" after fill_rows; fill_rows "
                                    "sets rows of the parameter's own shape, after every view");
    } else {
      step.shape = applyView(reader, value, step, shape);
    }
    shape = step.shape;
    steps.push_back(std::move(step));
  }
  for (const InitStep &step : steps) {
    if (step.op != "fill_rows")
      continue;
    const double start = step.number("start"), end = step.number("end");
    const double rows = paramShape.empty() ? 1.0 : static_cast<double>(paramShape[0]);
    if (start != std::floor(start) || end != std::floor(end) || start < 0 || end < start ||
        end > rows)
      reader.fail(step.path, "rows [" + json(start).dump() + ", " + json(end).dump() +
                                 ") must be integers with 0 <= start "
                                 "<= end <= " + std::to_string(static_cast<int64_t>(rows)) +
                                 " (the parameter's dim 0)");
  }
  if (shape != paramShape)
    reader.fail(chainPath, "the init chain produces shape " + shapeString(shape) +
                               " but the parameter's shape is " +
                               shapeString(paramShape));
  return steps;
}

GraphParam readParam(const GraphReader &reader, const json &value,
                     const std::string &path, bool isBuffer) {
  reader.requireObject(value, path);
  GraphParam param;
  param.path = path;
  param.isBuffer = isBuffer;
  param.name = reader.name(value, path);
  param.shape = reader.shape(value, path);
  param.dtype = reader.dtype(value, path);
  param.device = reader.string(reader.member(value, path, "device"),
                               path + ".device");
  if (!mlir::tc::isValidDeviceString(param.device))
    reader.fail(path + ".device",
                "device \"" + param.device +
                    "\" does not parse; expected cpu, meta, cuda, cpu:N or "
                    "cuda:N");
  if (auto unit = value.find("unit"); unit != value.end())
    param.unit = reader.string(*unit, path + ".unit");
  if (auto persistent = value.find("persistent"); persistent != value.end()) {
    if (!isBuffer)
      reader.fail(path + ".persistent", "only buffers can be non-persistent; a parameter "
                                        "is always saved");
    if (!persistent->is_boolean())
      reader.fail(path + ".persistent",
                  "must be true or false, got " + std::string(persistent->type_name()));
    param.persistent = persistent->get<bool>();
  }
  if (value.contains("tied")) {
    if (isBuffer)
      reader.fail(path + ".tied", "only parameters can be tied");
    const json &tied = reader.optionalArray(value, path, "tied");
    for (size_t i = 0; i < tied.size(); ++i) {
      std::string tiedPath = path + ".tied[" + std::to_string(i) + "]";
      std::string name = reader.string(tied[i], tiedPath);
      if (name.empty() || name == param.name)
        reader.fail(tiedPath, "a tied name must be non-empty and not the parameter's own name");
      param.tiedNames.push_back(name);
    }
  }
  param.init = readInitChain(reader, value, path, param.shape);
  for (InitStep &step : param.init)
    if (step.op == "load" && step.tensor.empty())
      step.tensor = param.name;
  // int64 state is constant data only (an index table built in __init__,
  // docs/graph-format.md "Constant data"; an integer scalar of forward):
  // loaded as it is or one fill with an integer, never saved, never sharded;
  // no other init op computes integers.
  auto constantInit = [&] {
    if (param.init.size() != 1) return false;
    const InitStep &step = param.init.front();
    if (step.op == "load") return true;
    const double value = step.numbers.count("value") ? step.number("value") : 0.5;
    return step.op == "fill" && value == std::trunc(value) &&
           std::abs(value) < 9007199254740992.0;  // 2^53: the value exact
  };
  if (param.dtype == plan::DType::I64 && (!isBuffer || param.persistent || !constantInit()))
    reader.fail(path + ".dtype", "int64 is for inputs and for non-persistent buffers "
                                 "whose init is one load (constant index data) or one fill "
                                 "with an integer; parameters and other buffers must be "
                                 "floating point");
  return param;
}


/// An input's recorded example values ("value", with "value_read_at"): the
/// exporter specialised forward on them because its Python control flow read
/// them (docs/graph-format.md, "Specialised inputs"). int64 inputs only, as
/// many integers as the shape holds.
void readSpecializedValue(const GraphReader &reader, const json &object,
                          const std::string &path, GraphInput &input) {
  auto value = object.find("value");
  if (value == object.end()) {
    if (object.contains("value_read_at"))
      reader.fail(path + ".value_read_at", "given without \"value\"");
    return;
  }
  if (input.dtype != plan::DType::I64)
    reader.fail(path + ".value", "only an int64 input takes recorded values");
  const json &list = reader.array(*value, path + ".value");
  if (static_cast<int64_t>(list.size()) != plan::numElements(input.shape))
    reader.fail(path + ".value", "holds " + std::to_string(list.size()) +
                                     " values, the input's shape " +
                                     std::to_string(plan::numElements(input.shape)));
  for (size_t k = 0; k < list.size(); ++k) {
    if (!list[k].is_number_integer())
      reader.fail(path + ".value[" + std::to_string(k) + "]", "must be an integer");
    input.value.push_back(list[k].get<int64_t>());
  }
  if (auto at = object.find("value_read_at"); at != object.end())
    input.valueReadAt = reader.string(*at, path + ".value_read_at");
}

/// A `norm_of` init names another parameter (its source) whose initial
/// values the runtime regenerates block by block: the source must be a
/// parameter whose chain is a generator the runtime replays by index
/// (no views, no load, orthogonal or norm_of), its dims valid and distinct,
/// and the norm's shape (the source's with the reduced dims 1) the
/// parameter's (docs/graph-format.md, "Derived parameters").
void checkDerivedInits(const GraphReader &reader, const std::vector<GraphParam> &params) {
  for (const GraphParam &param : params) {
    if (param.init.empty() || param.init.front().op != "norm_of")
      continue;
    const InitStep &step = param.init.front();
    const GraphParam *source = nullptr;
    for (const GraphParam &candidate : params)
      if (candidate.name == step.tensor && !candidate.isBuffer)
        source = &candidate;
    if (!source)
      reader.fail(step.path + ".of", "\"" + step.tensor + "\" is not a parameter");
    if (source == &param)
      reader.fail(step.path + ".of", "a parameter cannot be the norm of itself");
    for (const InitStep &s : source->init)
      if (s.kind == InitStepKind::View || s.op == "load" || s.op == "orthogonal" ||
          s.op == "norm_of")
        reader.fail(step.path + ".of", "the source \"" + source->name + "\" has init op \"" +
                                           s.op + "\" (" + s.path + "); norm_of replays a "
                                           "generator and pointwise ops only");
    if (source->dtype != param.dtype)
      reader.fail(step.path + ".of", "the source \"" + source->name + "\" has another dtype");
    const int64_t rank = static_cast<int64_t>(source->shape.size());
    std::vector<int64_t> kept = source->shape;
    for (size_t k = 0; k < step.ints.size(); ++k) {
      int64_t d = step.ints[k];
      if (d < 0 || d >= rank || kept[d] == -1)
        reader.fail(indexed(step.path + ".dims", k),
                    "dim " + std::to_string(d) + " is out of range or repeated for the source " +
                        shapeString(source->shape));
      kept[d] = -1;
    }
    for (int64_t &n : kept)
      if (n == -1) n = 1;
    if (kept != param.shape)
      reader.fail(step.path, "the norm of " + shapeString(source->shape) + " over these dims "
                             "has shape " + shapeString(kept) + ", the parameter " +
                             shapeString(param.shape));
  }
}

/// "updates": [{"buffer": B, "value": V}]: after forward, buffer B holds
/// V (a training-mode batch norm's new running statistics). V must be a
/// node's result of B's shape and dtype; each buffer is updated once, and
/// is not itself an output (which would then read the new value).
void readUpdates(const GraphReader &reader, const json &root, Graph &graph,
                 const std::map<std::string, std::string> &definedAt,
                 const ValueTypes &typeOf) {
  const json &updates = reader.optionalArray(root, "", "updates");
  if (!updates.empty() && graph.nodes.empty())
    reader.fail("updates",
                "a graph without nodes has no forward to update buffers");
  std::set<std::string> nodeResults;
  for (const GraphNode &node : graph.nodes)
    nodeResults.insert(node.names.begin(), node.names.end());
  std::map<std::string, std::string> updatedAt;
  for (size_t i = 0; i < updates.size(); ++i) {
    std::string path = indexed("updates", i);
    reader.requireObject(updates[i], path);
    BufferUpdate update;
    update.buffer = reader.string(reader.member(updates[i], path, "buffer"),
                                  path + ".buffer");
    update.value = reader.string(reader.member(updates[i], path, "value"),
                                 path + ".value");
    update.path = path;
    const GraphParam *buffer = nullptr;
    for (const GraphParam &param : graph.params)
      if (param.name == update.buffer)
        buffer = &param;
    if (!buffer || !buffer->isBuffer)
      reader.fail(path + ".buffer",
                  "\"" + update.buffer + "\" is not a buffer" +
                      (buffer ? " (a parameter: the optimizer updates "
                                "parameters)"
                              : ""));
    if (!nodeResults.count(update.value))
      reader.fail(
          path + ".value",
          "\"" + update.value + "\" is not " +
              (definedAt.count(update.value) ? "a node's result" : "defined"));
    const auto &[shape, dtype] = typeOf.at(update.value);
    if (shape != buffer->shape || dtype != buffer->dtype)
      reader.fail(path + ".value",
                  "\"" + update.value + "\" is " + shapeString(shape) + " " +
                      plan::dtypeName(dtype) + ", the buffer " +
                      shapeString(buffer->shape) + " " +
                      plan::dtypeName(buffer->dtype));
    if (auto [it, inserted] = updatedAt.emplace(update.buffer, path); !inserted)
      reader.fail(path + ".buffer", "\"" + update.buffer +
                                        "\" is already updated at " +
                                        it->second);
    if (std::find(graph.outputs.begin(), graph.outputs.end(), update.buffer) !=
        graph.outputs.end())
      reader.fail(path + ".buffer", "\"" + update.buffer +
                                        "\" is also an output, which "
                                        "would be read after its update");
    graph.updates.push_back(std::move(update));
  }
}

} // namespace

Graph parseGraph(const std::string &text, const std::string &sourceName) {
  GraphReader reader(sourceName);
  json root;
  try {
    root = json::parse(text);
  } catch (const json::exception &error) {
    // parse_error for bad syntax, out_of_range for a number no double holds
    // (e.g. 1e400): both are the input's fault, not ours.
    reader.fail("", std::string("not valid JSON: ") + error.what());
  }
  reader.requireObject(root, "");
  expandMasterWeights(root, reader);
  std::string format = reader.string(reader.member(root, "", "format"), "format");
  if (format != "shardc-graph")
    reader.fail("format", "expected \"shardc-graph\", got \"" + format + "\"");
  const json &version = reader.member(root, "", "version");
  if (!version.is_number_integer() || version.get<int64_t>() != kGraphFormatVersion)
    reader.fail("version", "unsupported graph format version " + version.dump() +
                               "; this shardc reads version " +
                               std::to_string(kGraphFormatVersion));

  Graph graph;
  graph.sourceName = sourceName;
  if (auto name = root.find("name"); name != root.end())
    graph.name = reader.string(*name, "name");

  // Every name (parameter, buffer, input, node) lives in one namespace.
  std::map<std::string, std::string> definedAt;
  ValueTypes typeOf;
  auto define = [&](const std::string &name, const std::string &path,
                    const std::vector<int64_t> &shape, plan::DType dtype) {
    auto [it, inserted] = definedAt.emplace(name, path);
    if (!inserted)
      reader.fail(path + ".name", "duplicate name \"" + name +
                                      "\" (first defined at " + it->second +
                                      ")");
    typeOf[name] = {shape, dtype};
  };

  for (const char *key : {"parameters", "buffers"}) {
    const json &list = reader.optionalArray(root, "", key);
    bool isBuffer = std::string(key) == "buffers";
    for (size_t i = 0; i < list.size(); ++i) {
      GraphParam param = readParam(reader, list[i], indexed(key, i), isBuffer);
      define(param.name, param.path, param.shape, param.dtype);
      graph.params.push_back(std::move(param));
    }
  }
  checkDerivedInits(reader, graph.params);
  // Tied names are saved beside the tensors' own names: one file namespace.
  std::map<std::string, std::string> tiedAt;
  for (const GraphParam &param : graph.params)
    for (size_t i = 0; i < param.tiedNames.size(); ++i) {
      const std::string &name = param.tiedNames[i];
      std::string path = param.path + ".tied[" + std::to_string(i) + "]";
      auto defined = definedAt.find(name);
      if (defined != definedAt.end())
        reader.fail(path, "tied name \"" + name + "\" is already the name of " +
                              defined->second);
      if (auto [it, inserted] = tiedAt.emplace(name, path); !inserted)
        reader.fail(path, "tied name \"" + name + "\" is also listed at " + it->second);
    }

  const json &inputs = reader.optionalArray(root, "", "inputs");
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string path = indexed("inputs", i);
    reader.requireObject(inputs[i], path);
    GraphInput input;
    input.name = reader.name(inputs[i], path);
    input.shape = reader.shape(inputs[i], path);
    input.dtype = reader.dtype(inputs[i], path);
    input.path = path;
    if (auto high = inputs[i].find("high"); high != inputs[i].end()) {
      if (input.dtype != plan::DType::I64 || !high->is_number_integer() ||
          high->get<int64_t>() < 1)
        reader.fail(path + ".high", "only an int64 input takes \"high\", a "
                                    "positive integer bound");
      input.high = high->get<int64_t>();
    }
    readSpecializedValue(reader, inputs[i], path, input);
    define(input.name, path, input.shape, input.dtype);
    graph.inputs.push_back(std::move(input));
  }

  const json &nodes = reader.optionalArray(root, "", "nodes");
  for (size_t i = 0; i < nodes.size(); ++i) {
    GraphNode node = readNode(reader, nodes[i], indexed("nodes", i), typeOf);
    for (size_t r = 0; r < node.names.size(); ++r)
      define(node.names[r], node.path, node.shapes[r], node.dtype);
    graph.nodes.push_back(std::move(node));
  }

  const json &outputs = reader.optionalArray(root, "", "outputs");
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string path = indexed("outputs", i);
    std::string output = reader.string(outputs[i], path);
    if (!definedAt.count(output))
      reader.fail(path, "\"" + output + "\" is not defined");
    graph.outputs.push_back(output);
  }
  if (graph.outputs.empty() && !graph.nodes.empty())
    reader.fail("outputs", "a graph with nodes must name at least one output");
  readUpdates(reader, root, graph, definedAt, typeOf);
  return graph;
}

Graph loadGraph(const std::string &path, int64_t maxBytes,
                const std::string &masterDtype) {
  return parseGraph(readGraphText(path, maxBytes, masterDtype), path);
}

std::string readGraphText(const std::string &path, int64_t maxBytes,
                          const std::string &masterDtype) {
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file)
    throw GraphError(path + ": cannot open the graph file");
  // A graph holds the program, never weights: even GPT-3 175B is 440 KB.
  // Refuse absurd files before reading them into memory.
  std::streamoff size = file.tellg();
  if (size > maxBytes)
    throw GraphError(path + ": the graph file is " + std::to_string(size) +
                     " bytes, over the limit of " + std::to_string(maxBytes) +
                     " bytes (raise it with --max-graph-mib)");
  file.seekg(0);
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad())
    throw GraphError(path + ": read error");
  return expandMasterWeights(withMasterDtype(text.str(), masterDtype, path),
                             path);
}

} // namespace shardc::compiler
