#include "compiler/MasterWeights.h"

#include "runtime/Plan.h"

#include <set>
#include <vector>

namespace shardc::compiler {

using json = nlohmann::json;

namespace {

/// The float dtype named by `value` at `path`, or a failure saying why not.
plan::DType floatDtype(const GraphReader &reader, const json &value, const std::string &path,
                       const std::string &what) {
  std::string text = reader.string(value, path);
  std::optional<plan::DType> dtype = plan::parseDType(text);
  if (!dtype || *dtype == plan::DType::I64)
    reader.fail(path, "\"" + text + "\": " + what +
                          " must be float32, float64, float16 or bfloat16");
  return *dtype;
}

} // namespace

void expandMasterWeights(json &document, const GraphReader &reader) {
  if (!document.is_object()) return;
  if (auto buffers = document.find("buffers"); buffers != document.end() && buffers->is_array())
    for (size_t i = 0; i < buffers->size(); ++i)
      if ((*buffers)[i].is_object() && (*buffers)[i].contains("master_dtype"))
        reader.fail("buffers[" + std::to_string(i) + "].master_dtype",
                    "only parameters have master weights; a buffer is stored in the dtype "
                    "forward reads");
  auto params = document.find("parameters");
  if (params == document.end() || !params->is_array()) return;

  // Every name the file defines, so that a cast's name is fresh.
  std::set<std::string> names;
  for (const char *key : {"parameters", "buffers", "inputs", "nodes"})
    if (auto list = document.find(key); list != document.end() && list->is_array())
      for (const json &entry : *list) {
        if (!entry.is_object()) continue;
        if (auto name = entry.find("name"); name != entry.end() && name->is_string())
          names.insert(name->get<std::string>());
        if (auto split = entry.find("names"); split != entry.end() && split->is_array())
          for (const json &name : *split)
            if (name.is_string()) names.insert(name.get<std::string>());
      }

  std::map<std::string, std::string> castOf;  // parameter -> its cast's name
  json casts = json::array();
  for (size_t i = 0; i < params->size(); ++i) {
    json &param = (*params)[i];
    auto master = param.is_object() ? param.find("master_dtype") : param.end();
    if (!param.is_object() || master == param.end()) continue;
    const std::string path = "parameters[" + std::to_string(i) + "]";
    const plan::DType storage =
        floatDtype(reader, *master, path + ".master_dtype", "a master dtype");
    const plan::DType compute =
        floatDtype(reader, reader.member(param, path, "dtype"), path + ".dtype",
                   "the dtype of a parameter with master weights");
    const std::string name = reader.name(param, path);
    param.erase("master_dtype");
    if (storage == compute) continue;
    std::string cast = name + ".compute";
    for (int k = 2; names.count(cast); ++k) cast = name + ".compute" + std::to_string(k);
    names.insert(cast);
    castOf[name] = cast;
    casts.push_back({{"name", cast},
                     {"op", "cast"},
                     {"inputs", {name}},
                     {"dtype", plan::dtypeName(compute)}});
    param["dtype"] = plan::dtypeName(storage);
  }
  // Nodes read the cast; an output naming a parameter stays its stored
  // value. A parameter no node reads gets no cast.
  auto nodes = document.find("nodes");
  if (castOf.empty() || nodes == document.end() || !nodes->is_array())
    return; // nothing reads them (parseGraph says what else is wrong)
  std::set<std::string> read;
  for (json &node : *nodes) {
    if (!node.is_object()) continue;
    auto inputs = node.find("inputs");
    if (inputs == node.end() || !inputs->is_array()) continue;
    for (json &input : *inputs)
      if (input.is_string())
        if (auto it = castOf.find(input.get<std::string>());
            it != castOf.end()) {
          read.insert(it->second);
          input = it->second;
        }
  }
  json used = json::array();
  for (json &cast : casts)
    if (read.count(cast["name"].get<std::string>()))
      used.push_back(std::move(cast));
  nodes->insert(nodes->begin(), used.begin(), used.end());
}

std::string withMasterDtype(const std::string &text,
                            const std::string &masterDtype,
                            const std::string &sourceName) {
  if (masterDtype.empty())
    return text;
  if (!isMasterDtypeName(masterDtype))
    throw GraphError(sourceName + ": master dtype \"" + masterDtype +
                     "\": master weights are float32 or float64");
  json document = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto params =
      document.is_object() ? document.find("parameters") : document.end();
  if (document.is_discarded() || params == document.end() ||
      !params->is_array())
    return text;
  for (json &param : *params) {
    if (!param.is_object() || param.contains("master_dtype"))
      continue;
    auto dtype = param.find("dtype");
    if (dtype != param.end() && (*dtype == "bfloat16" || *dtype == "float16"))
      param["master_dtype"] = masterDtype;
  }
  return document.dump(1);
}

std::string expandMasterWeights(const std::string &text, const std::string &sourceName) {
  if (text.find("\"master_dtype\"") == std::string::npos) return text;
  json document = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded()) return text;
  expandMasterWeights(document, GraphReader(sourceName));
  return document.dump(1);
}

} // namespace shardc::compiler
