//===- GradientAccumulation.cpp - K micro-steps per optimizer step --------===//
//
// accumulatedStepGraph (compiler/GradientAccumulation.h): the joint graph
// of one micro-step repeated over the rank's rows, its gradients and loss
// shares added up.
//
//===----------------------------------------------------------------------===//
#include "compiler/GradientAccumulation.h"

#include "compiler/Autodiff.h"
#include "compiler/DataParallel.h"

#include <algorithm>
#include <map>
#include <set>

namespace shardc::compiler {

namespace {

using Shape = std::vector<int64_t>;

/// A constant 0-d buffer of `value` (a non-persistent fill), added to
/// `graph` under a name no other value has.
std::string addConstant(Graph &graph, const std::string &stem, double value,
                        plan::DType dtype, const std::set<std::string> &taken) {
  std::string name = stem;
  for (int n = 1;
       taken.count(name) ||
       std::any_of(graph.params.begin(), graph.params.end(),
                   [&](const GraphParam &p) { return p.name == name; });
       ++n)
    name = stem + "." + std::to_string(n);
  graph.params.push_back(
      fillConstant(name, value, dtype,
                   graph.params.empty() ? "cpu" : graph.params.front().device,
                   "a constant of gradient accumulation"));
  return name;
}

/// Every name a value of `graph` has (parameters, inputs, node results).
std::set<std::string> namesOf(const Graph &graph) {
  std::set<std::string> names;
  for (const GraphParam &param : graph.params)
    names.insert(param.name);
  for (const GraphInput &input : graph.inputs)
    names.insert(input.name);
  for (const GraphNode &node : graph.nodes)
    names.insert(node.names.begin(), node.names.end());
  return names;
}

class Unroller {
public:
  Unroller(const Graph &joint, int64_t steps,
           const std::vector<std::string> &countTotals)
      : joint_(joint), steps_(steps), rows_(graphBatchRows(joint)),
        result_(joint) {
    result_.nodes.clear();
    result_.updates.clear();
    for (const GraphParam &param : joint.params) {
      params_.insert(param.name);
      taken_.insert(param.name);
    }
    for (const GraphInput &input : joint.inputs) {
      if (isReplicatedInput(input))
        params_.insert(input.name); // every micro-step reads it whole
      else
        inputs_[input.name] = &input;
      taken_.insert(input.name);
    }
    for (size_t i = 0; i < joint.nodes.size(); ++i)
      for (size_t r = 0; r < joint.nodes[i].names.size(); ++r) {
        definedBy_[joint.nodes[i].names[r]] = i;
        shapes_[joint.nodes[i].names[r]] = joint.nodes[i].shapes[r];
        taken_.insert(joint.nodes[i].names[r]);
      }
    for (const std::string &total : countTotals) {
      auto node = definedBy_.find(total);
      if (node == definedBy_.end() ||
          joint.nodes[node->second].op != "all_reduce_sum")
        throw GraphError(joint.sourceName +
                         ": internal error: gradient accumulation: '" + total +
                         "' is not a count summed over ranks");
      totals_.insert(node->second);
      addClosure(joint.nodes[node->second].inputs.at(0));
    }
    // Running statistics follow the micro-steps (each copy updates what the
    // previous one left); dropout's counter is the optimizer step's, the
    // same in every copy.
    for (const BufferUpdate &update : joint.updates)
      if (update.buffer != plan::kRngStepBuffer)
        chained_[update.buffer] = update.value;
    pickPrefix();
  }

  Graph run() {
    for (GraphInput &input : result_.inputs)
      if (!isReplicatedInput(input))
        input.shape[0] = rows_ * steps_;
    // Every copy's count before the first forward: the global batch's
    // count is known when the first loss share needs it.
    for (int64_t k = 0; k < steps_; ++k)
      for (size_t i : prologue_)
        emitNode(k, i);
    for (size_t i : totals_) {
      const GraphNode &total = joint_.nodes[i];
      std::string sum = local(0, total.inputs[0]);
      for (int64_t k = 1; k < steps_; ++k)
        sum = emitAdd(fresh(prefix(k) + total.inputs[0] + ".so_far"), sum,
                      local(k, total.inputs[0]), total.inputs[0]);
      GraphNode node = total;
      node.names = {fresh(total.names[0] + ".all_micro_steps")};
      node.inputs = {sum};
      // Each copy's share is scaled by 1 / K (scaleSharesPerMicroStep):
      // its count's total is the global batch's over K.
      GraphNode perStep = total;
      perStep.op = "div";
      perStep.familyOp = false;
      perStep.attrs.clear();
      perStep.inputs = {node.names[0],
                        addConstant(result_, "gradient_accumulation.steps",
                                    double(steps_), total.dtype, taken_)};
      result_.nodes.push_back(std::move(node));
      result_.nodes.push_back(std::move(perStep));
    }
    classifyOutputs();
    for (int64_t k = 0; k < steps_; ++k) {
      for (size_t i = 0; i < joint_.nodes.size(); ++i) {
        if (prologue_.count(i) || totals_.count(i) || renames_.count(i))
          continue;
        emitNode(k, i);
        // A gradient is added to the sum as soon as this copy completes it
        // (not where the joint graph names it, at its end), so that the
        // lowering adds in place and tc-fsdp reduces it right away.
        if (auto done = completedBy_.find(i);
            done != completedBy_.end() && k > 0)
          for (const std::string &output : done->second)
            addToSum(k, output);
      }
    }
    for (const std::string &output : concatenated_) {
      GraphNode cat = joint_.nodes[definedBy_.at(output)];
      cat.names = {output};
      cat.op = "cat";
      cat.familyOp = false;
      cat.attrs.clear();
      cat.strings.clear();
      cat.ints.clear();
      cat.causal = false;
      cat.numbers = {{"dim", 0.0}};
      cat.inputs.clear();
      for (int64_t k = 0; k < steps_; ++k)
        cat.inputs.push_back(local(k, output));
      cat.shapes = {shapes_.at(output)};
      cat.shapes[0][0] = rows_ * steps_;
      result_.nodes.push_back(std::move(cat));
    }
    for (const BufferUpdate &update : joint_.updates)
      result_.updates.push_back(
          {update.buffer, local(steps_ - 1, update.value), update.path});
    return std::move(result_);
  }

private:
  /// The nodes `name` is computed from (a count of targets: their reshapes
  /// and comparisons), which run before the first micro-step.
  void addClosure(const std::string &name) {
    auto node = definedBy_.find(name);
    if (node == definedBy_.end() || !prologue_.insert(node->second).second)
      return;
    for (const std::string &in : joint_.nodes[node->second].inputs)
      addClosure(in);
  }

  /// A prefix for each copy's names that no name of the graph starts with.
  void pickPrefix() {
    for (;;) {
      const bool clash =
          std::any_of(taken_.begin(), taken_.end(), [&](const std::string &n) {
            return n.rfind(stem_, 0) == 0;
          });
      if (!clash)
        return;
      stem_ += "_";
    }
  }

  std::string prefix(int64_t k) const {
    return stem_ + std::to_string(k + 1) + ".";
  }

  std::string fresh(const std::string &stem) {
    return freshValueName(taken_, stem);
  }

  /// What copy `k` reads for the joint graph's `name`.
  std::string local(int64_t k, const std::string &name) {
    if (params_.count(name)) {
      auto chained = chained_.find(name);
      if (chained != chained_.end() && k > 0)
        return local(k - 1, chained->second);
      return name;
    }
    if (auto input = inputs_.find(name); input != inputs_.end())
      return slicedInput(k, *input->second);
    auto node = definedBy_.find(name);
    if (node != definedBy_.end() && totals_.count(node->second))
      return name; // the one count over every micro-step
    return prefix(k) + name;
  }

  /// Copy k's rows of `input`, sliced where a copy first reads them.
  std::string slicedInput(int64_t k, const GraphInput &input) {
    const std::string name = prefix(k) + input.name;
    if (!sliced_.insert(name).second)
      return name;
    GraphNode slice;
    slice.names = {name};
    slice.op = "slice";
    slice.inputs = {input.name};
    slice.numbers = {{"dim", 0.0},
                     {"start", double(k * rows_)},
                     {"end", double((k + 1) * rows_)},
                     {"step", 1.0}};
    slice.shapes = {input.shape};
    slice.dtype = input.dtype;
    slice.path = input.path;
    result_.nodes.push_back(std::move(slice));
    return name;
  }

  void emitNode(int64_t k, size_t index) {
    GraphNode node = joint_.nodes[index];
    for (std::string &in : node.inputs)
      in = local(k, in);
    for (std::string &name : node.names)
      name = prefix(k) + name;
    // The mask of the rows this copy holds: the rank's rows of the whole
    // global batch (K micro-steps of the one rebatchGraph saw), its first
    // row k b rows past the rank's.
    if (auto global = node.attrs.find("global_rows");
        node.op == "dropout" && global != node.attrs.end()) {
      global->second = std::get<int64_t>(global->second) * steps_;
      node.attrs["row_offset"] = k * rows_;
    }
    result_.nodes.push_back(std::move(node));
  }

  /// `name` = a + b, two copies' values of the joint graph's `like`.
  std::string emitAdd(const std::string &name, const std::string &a,
                      const std::string &b, const std::string &like) {
    const GraphNode &node = joint_.nodes[definedBy_.at(like)];
    GraphNode add;
    add.names = {name};
    add.op = "add";
    add.inputs = {a, b};
    add.shapes = {shapes_.at(like)};
    add.dtype = node.dtype;
    add.path = node.path;
    result_.nodes.push_back(std::move(add));
    return name;
  }

  /// Copy k's value of `output` (complete where its source is) added to
  /// the copies' sum so far; the last copy's sum is `output`.
  void addToSum(int64_t k, const std::string &output) {
    const std::string &source = sourceOf_.at(output);
    const std::string name =
        k + 1 == steps_ ? output : fresh(prefix(k) + output + ".so_far");
    sumSoFar_[output] =
        emitAdd(name, k == 1 ? local(0, source) : sumSoFar_.at(output),
                local(k, source), source);
  }

  /// The value `output` renames (reshapes to its own shape: the joint
  /// graph names each gradient so at its end), computed earlier. The
  /// renames nothing else reads are not copied (a copy's rename would keep
  /// its full gradient alive until the copy's end).
  std::string sourceOf(const std::string &output) {
    std::string name = output;
    for (;;) {
      const size_t at = definedBy_.at(name);
      const GraphNode &node = joint_.nodes[at];
      if (node.op != "reshape" || node.inputs.size() != 1 ||
          !definedBy_.count(node.inputs[0]) ||
          shapes_.at(node.inputs[0]) != shapes_.at(name) ||
          readCount(name) != (name == output ? 0 : 1))
        return name;
      const size_t from = definedBy_.at(node.inputs[0]);
      if (prologue_.count(from) || totals_.count(from))
        return name;
      renames_.insert(at);
      name = node.inputs[0];
    }
  }

  /// How many node operands read `name`.
  size_t readCount(const std::string &name) const {
    size_t count = 0;
    for (const GraphNode &node : joint_.nodes)
      count += std::count(node.inputs.begin(), node.inputs.end(), name);
    return count;
  }

  /// Outputs the copies add up (gradients, 0-d loss shares) and those whose
  /// rows they concatenate (the batch's).
  void classifyOutputs() {
    for (const std::string &output : joint_.outputs) {
      auto node = definedBy_.find(output);
      if (node == definedBy_.end() || totals_.count(node->second) ||
          prologue_.count(node->second))
        throw GraphError(joint_.sourceName +
                         ": gradient accumulation: output '" + output +
                         "' is not computed by forward from the batch; "
                         "accumulated steps return the loss, gradients and "
                         "values of the batch rows");
      const Shape &shape = shapes_.at(output);
      if (output.rfind(kGradientPrefix, 0) == 0 || shape.empty()) {
        sourceOf_[output] = sourceOf(output);
        completedBy_[definedBy_.at(sourceOf_[output])].push_back(output);
      } else if (shape[0] == rows_)
        concatenated_.push_back(output);
      else
        throw GraphError(joint_.sourceName +
                         ": gradient accumulation: output '" + output +
                         "' of shape [" + std::to_string(shape[0]) +
                         ", ...] holds neither a 0-d share nor the " +
                         std::to_string(rows_) + " rows of one micro-step");
    }
  }

  const Graph &joint_;
  const int64_t steps_, rows_;
  Graph result_;
  std::string stem_ = "micro";
  std::set<std::string> params_, taken_, sliced_;
  std::map<std::string, const GraphInput *> inputs_;
  std::map<std::string, size_t> definedBy_;
  std::map<std::string, Shape> shapes_;
  std::set<size_t> prologue_, totals_, renames_;
  std::map<std::string, std::string> chained_; // buffer -> its update
  std::vector<std::string> concatenated_;
  // Summed outputs: the value each renames, and by node of that value.
  std::map<std::string, std::string> sourceOf_;
  std::map<size_t, std::vector<std::string>> completedBy_;
  std::map<std::string, std::string> sumSoFar_;
};

} // namespace

void scaleSharesPerMicroStep(Graph &rebatched, int64_t steps,
                             const std::set<std::string> &sumOutputs) {
  std::map<std::string, GraphNode *> producers;
  for (GraphNode &node : rebatched.nodes)
    for (const std::string &name : node.names)
      producers[name] = &node;
  std::vector<GraphNode> scales;
  for (const std::string &output : rebatched.outputs) {
    auto producer = producers.find(output);
    if (producer == producers.end() || producer->second->names.size() != 1 ||
        !producer->second->shapes[0].empty() || sumOutputs.count(output))
      continue;
    const std::set<std::string> taken = namesOf(rebatched);
    GraphNode &node = *producer->second;
    std::string unscaled = output + ".micro_step";
    for (int n = 1; taken.count(unscaled); ++n)
      unscaled = output + ".micro_step." + std::to_string(n);
    node.names[0] = unscaled;
    for (GraphNode &reader : rebatched.nodes)
      std::replace(reader.inputs.begin(), reader.inputs.end(), output,
                   unscaled);
    for (BufferUpdate &update : rebatched.updates)
      if (update.value == output)
        update.value = unscaled;
    GraphNode scale;
    scale.names = {output};
    scale.op = "mul";
    scale.inputs = {
        unscaled, addConstant(rebatched, "gradient_accumulation.inverse_steps",
                              1.0 / double(steps), node.dtype, taken)};
    scale.shapes = {{}};
    scale.dtype = node.dtype;
    scale.path = node.path;
    scales.push_back(std::move(scale));
  }
  for (GraphNode &scale : scales)
    rebatched.nodes.push_back(std::move(scale));
}

Graph accumulatedStepGraph(const Graph &joint, int64_t steps,
                           const std::vector<std::string> &countTotals) {
  if (steps < 1)
    throw GraphError(
        joint.sourceName +
        ": gradient accumulation needs at least 1 micro-step, got " +
        std::to_string(steps));
  for (const GraphInput &input : joint.inputs)
    if (!input.value.empty())
      throw GraphError(joint.sourceName + ": " + input.path +
                       ": gradient accumulation: input '" + input.name +
                       "' is specialised to its values (read at " +
                       input.valueReadAt +
                       "), so its rows cannot be split into micro-steps");
  if (steps == 1)
    return joint;
  return Unroller(joint, steps, countTotals).run();
}

} // namespace shardc::compiler
