// Where each op's result holds the batch (compiler/BatchLayout.h), and the
// graph a rank runs for its rows (rebatchGraph, compiler/Rebatch.cpp).
#include "compiler/BatchLayout.h"
#include "compiler/DataParallel.h"
#include "compiler/SummedCrossEntropy.h"

#include <catch2/catch.hpp>

using namespace shardc::compiler;

namespace {

using Shape = std::vector<int64_t>;

GraphNode makeNode(const std::string &op, std::vector<std::string> inputs, Shape result) {
  GraphNode node;
  node.names = {"y"};
  node.op = op;
  node.inputs = std::move(inputs);
  node.shapes = {std::move(result)};
  return node;
}

BatchOperand batchAt(const Shape &shape, int64_t axis, int64_t factor = 1, int64_t outer = 1) {
  return BatchOperand{&shape, BatchLayout{axis, factor, outer}};
}

BatchOperand whole(const Shape &shape, bool uniform = false) {
  return BatchOperand{&shape, std::nullopt, uniform};
}

BatchLayout only(const BatchSplit &split) {
  REQUIRE(split.results.size() == 1);
  return split.results[0];
}

/// A graph of one float32 input x of `shape` and the given nodes (JSON).
Graph graphOf(const Shape &shape, const std::string &nodes, const std::string &output = "y",
              const std::string &buffers = "") {
  std::string dims;
  for (int64_t d : shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
  return parseGraph(R"({"format": "shardc-graph", "version": 1, "parameters": [], )"
                    R"("buffers": [)" + buffers + R"(], "inputs": [{"name": "x", "shape": [)" +
                        dims + R"(], "dtype": "float32"}], "nodes": [)" + nodes +
                        R"(], "outputs": [")" + output + R"("]})",
                    "t.json");
}

const GraphNode &nodeNamed(const Graph &graph, const std::string &name) {
  for (const GraphNode &node : graph.nodes)
    for (const std::string &n : node.names)
      if (n == name) return node;
  FAIL("no node " << name);
  return graph.nodes.front();
}

} // namespace

TEST_CASE("permute and transpose move the batch's dim", "[data-parallel][batch-layout]") {
  Shape x{4, 3, 8};
  GraphNode permute = makeNode("permute", {"x"}, {3, 8, 4});
  permute.ints = {1, 2, 0};
  CHECK(only(splitOverBatch(permute, {batchAt(x, 0)}, 4)) == BatchLayout{2, 1, 1});
  GraphNode transpose = makeNode("transpose", {"x"}, {3, 4, 8});
  transpose.numbers = {{"dim0", 0}, {"dim1", 1}};
  CHECK(only(splitOverBatch(transpose, {batchAt(x, 0)}, 4)) == BatchLayout{1, 1, 1});
}

TEST_CASE("reshape keeps the batch where its rows stay whole blocks",
          "[data-parallel][batch-layout]") {
  const int64_t batch = 4;
  Shape bsh{4, 3, 8}, tbe{3, 4, 8}, rows{4 * 6, 5, 7};
  // [B, S, H] -> [B * S, H]: rows of S.
  CHECK(only(splitOverBatch(makeNode("reshape", {"x"}, {12, 8}), {batchAt(bsh, 0)}, batch)) ==
        BatchLayout{0, 3, 1});
  // [T, B, E] -> [T * B, E]: the batch interleaved, T blocks (torch's attention).
  CHECK(only(splitOverBatch(makeNode("reshape", {"x"}, {12, 8}), {batchAt(tbe, 1)}, batch)) ==
        BatchLayout{0, 1, 3});
  // [B * H, T, d] -> [B, H, T, d]: back to one row each.
  CHECK(only(splitOverBatch(makeNode("reshape", {"x"}, {4, 6, 5, 7}), {batchAt(rows, 0, 6)},
                            batch)) == BatchLayout{0, 1, 1});
  // [B, S, H] -> [B, S * H] keeps dim 0; an unsqueeze in front moves it.
  CHECK(only(splitOverBatch(makeNode("reshape", {"x"}, {1, 4, 24}), {batchAt(bsh, 0)}, batch)) ==
        BatchLayout{1, 1, 1});
  // [T, B, E] -> [6, 2, 8]: a row's entries straddle two dims.
  CHECK_THROWS_WITH(
      splitOverBatch(makeNode("reshape", {"x"}, {6, 2, 8}), {batchAt(tbe, 1)}, batch),
      "'reshape' turns the batch (dim 1, 4 rows) into [6, 2, 8]; only ops that keep every batch "
      "row apart can be split");
}

TEST_CASE("contractions and reductions over the batch are refused",
          "[data-parallel][batch-layout]") {
  Shape a{3, 4}, w{4, 5}, xa{2, 3, 4};
  GraphNode matmul = makeNode("matmul", {"a", "w"}, {3, 5});
  CHECK_THROWS_WITH(splitOverBatch(matmul, {batchAt(a, 1), whole(w)}, 4),
                    "'matmul' contracts over dim 1 of 'a', the batch");
  CHECK(only(splitOverBatch(matmul, {batchAt(a, 0), whole(w)}, 3)) == BatchLayout{0, 1, 1});
  // The batch in the leading dim of both operands, or in a's rows (M),
  // keeps its place; in a's rows against b's leading dim it would pair
  // different samples.
  Shape xb{3, 2, 4}, b{3, 4, 6}, w6{4, 6};
  GraphNode bmm = makeNode("matmul", {"xb", "b"}, {3, 2, 6});
  CHECK(only(splitOverBatch(bmm, {batchAt(xb, 0), batchAt(b, 0)}, 3)) == BatchLayout{0, 1, 1});
  GraphNode rowsM = makeNode("matmul", {"xa", "w6"}, {2, 3, 6});
  CHECK(only(splitOverBatch(rowsM, {batchAt(xa, 1), whole(w6)}, 3)) == BatchLayout{1, 1, 1});
  GraphNode mixed = makeNode("matmul", {"xa", "b"}, {3, 3, 6});
  CHECK_THROWS_WITH(splitOverBatch(mixed, {batchAt(xa, 1), batchAt(b, 0)}, 3),
                    Catch::Contains("so that rows of different samples meet"));

  GraphNode sum = makeNode("sum", {"xa"}, {3});
  sum.familyOp = true;
  sum.attrs["dims"] = std::vector<int64_t>{0, -1};
  CHECK(only(splitOverBatch(sum, {batchAt(xa, 1)}, 3)) == BatchLayout{0, 1, 1});
  sum.attrs["dims"] = std::vector<int64_t>{1};
  CHECK_THROWS_WITH(splitOverBatch(sum, {batchAt(xa, 1)}, 3),
                    Catch::StartsWith("'sum' acts along dim 1, the batch"));
  GraphNode linear = makeNode("linear", {"a", "w"}, {3, 5});
  CHECK_THROWS_WITH(splitOverBatch(linear, {batchAt(a, 1), whole(w)}, 4),
                    "'linear' contracts over dim 1, the batch");
}

TEST_CASE("a broadcast operand not from the batch must have 1 entry there, or be uniform",
          "[data-parallel][batch-layout]") {
  Shape x{4, 3}, row{1, 3}, perSample{4, 3};
  GraphNode add = makeNode("add", {"x", "c"}, {4, 3});
  CHECK(only(splitOverBatch(add, {batchAt(x, 0), whole(row)}, 4)) == BatchLayout{0, 1, 1});
  CHECK_THROWS_WITH(splitOverBatch(add, {batchAt(x, 0), whole(perSample)}, 4),
                    "'add' pairs the batch rows (dim 0 of its result) with dim 0 of 'c' [4, 3], "
                    "which is not computed from the batch");
  BatchSplit ones = splitOverBatch(add, {batchAt(x, 0), whole(perSample, true)}, 4);
  CHECK(ones.cut == std::vector<std::pair<size_t, int64_t>>{{1, 0}});
}

TEST_CASE("cat and split along the batch's dim work in whole blocks of rows",
          "[data-parallel][batch-layout]") {
  Shape frame{2, 3, 8}, both{4, 3, 8};
  GraphNode cat = makeNode("cat", {"a", "b"}, {4, 3, 8});
  cat.numbers["dim"] = 0;
  CHECK(only(splitOverBatch(cat, {batchAt(frame, 0), batchAt(frame, 0)}, 2)) ==
        BatchLayout{0, 1, 2});
  GraphNode split = makeNode("split", {"x"}, {2, 3, 8});
  split.names = {"p", "q"};
  split.shapes = {{2, 3, 8}, {2, 3, 8}};
  split.numbers["dim"] = 0;
  split.ints = {2, 2};
  BatchSplit pieces = splitOverBatch(split, {batchAt(both, 0, 1, 2)}, 2);
  CHECK(pieces.results == std::vector<BatchLayout>{{0, 1, 1}, {0, 1, 1}});
  split.ints = {1, 3};
  CHECK_THROWS_WITH(splitOverBatch(split, {batchAt(both, 0, 1, 2)}, 2),
                    "'split' cuts dim 0, the batch's, into a piece of 1 entries, not whole "
                    "blocks of its 2 rows");
  // conv needs the batch in dim 0.
  GraphNode conv = makeNode("conv", {"x", "w"}, {3, 2, 8});
  conv.familyOp = true;
  Shape w{2, 3, 1};
  CHECK_THROWS_WITH(splitOverBatch(conv, {batchAt(frame, 1), whole(w)}, 3),
                    "'conv' needs the batch in dim 0, where 'x' holds it in dim 1");
}

TEST_CASE("copies of one value are split with the batch", "[data-parallel][batch-layout]") {
  Shape token{1, 1, 8};
  GraphNode cat = makeNode("cat", {"t", "t", "t", "t"}, {4, 1, 8});
  cat.numbers["dim"] = 0;
  CHECK(replicaLayout(cat, token, 2) == BatchLayout{0, 2, 1});
  CHECK(!replicaLayout(cat, token, 3));
  cat.inputs[3] = "u";
  CHECK(!replicaLayout(cat, token, 2));
  GraphNode expand = makeNode("as_strided", {"p"}, {4, 5});
  expand.familyOp = true;
  expand.attrs["size"] = std::vector<int64_t>{4, 5};
  expand.attrs["stride"] = std::vector<int64_t>{0, 1};
  CHECK(replicaLayout(expand, Shape{5}, 4) == BatchLayout{0, 1, 1});
}

TEST_CASE("rebatchGraph rewrites what counts the batch's entries",
          "[data-parallel][batch-layout]") {
  // [T, B, E] through a reshape to [T * B, E] and back: 3 blocks of 2 rows.
  Graph graph = graphOf({4, 3, 8}, R"(
      {"name": "t", "op": "transpose", "inputs": ["x"], "dim0": 0, "dim1": 1},
      {"name": "rows", "op": "reshape", "inputs": ["t"], "shape": [12, 8]},
      {"name": "back", "op": "reshape", "inputs": ["rows"], "shape": [3, 4, 8]},
      {"name": "y", "op": "permute", "inputs": ["back"], "dims": [1, 0, 2]})");
  Graph two = rebatchGraph(graph, 2);
  CHECK(nodeNamed(two, "rows").shapes[0] == Shape{6, 8});
  CHECK(nodeNamed(two, "rows").ints == Shape{6, 8});
  CHECK(nodeNamed(two, "back").ints == Shape{3, 2, 8});
  CHECK(nodeNamed(two, "y").shapes[0] == Shape{2, 3, 8});

  // A uniform constant with the batch's rows: this rank's rows, by a slice.
  Graph ones = graphOf({4, 3},
                       R"({"name": "y", "op": "mul", "inputs": ["x", "c"]})", "y",
                       R"({"name": "c", "shape": [4, 3], "dtype": "float32", "device": "cpu", )"
                       R"("persistent": false, "init": [{"op": "ones"}]})");
  Graph cut = rebatchGraph(ones, 1);
  REQUIRE(cut.nodes.size() == 2);
  CHECK(cut.nodes[0].op == "slice");
  CHECK(cut.nodes[0].shapes[0] == Shape{1, 3});
  CHECK(cut.nodes[1].inputs[1] == cut.nodes[0].names[0]);

  // An output holding the batch in dim 1 cannot be concatenated over ranks.
  Graph moved = graphOf(
      {4, 3}, R"({"name": "y", "op": "transpose", "inputs": ["x"], "dim0": 0, "dim1": 1})");
  CHECK_THROWS_WITH(rebatchGraph(moved, 2),
                    Catch::Contains("output 'y' does not hold the batch rows as the blocks of its "
                                    "dim 0 (they are in dim 1)"));
}

TEST_CASE("a sum or mean over the batch rows is a share of the global value",
          "[data-parallel][batch-layout]") {
  Shape logits{6, 4}, targets{6}, xa{2, 3, 4};
  GraphNode ce = makeNode("cross_entropy", {"l", "t"}, {});
  CHECK(reductionOverBatch(ce, {batchAt(logits, 0, 3), batchAt(targets, 0, 3)}) ==
        BatchReduction::Mean);
  // Targets not split with the logits' rows: not a share.
  CHECK_FALSE(reductionOverBatch(ce, {batchAt(logits, 0, 3), whole(targets)}));
  GraphNode sum = makeNode("sum", {"xa"}, {});
  sum.familyOp = true;
  CHECK(reductionOverBatch(sum, {batchAt(xa, 1)}) == BatchReduction::Sum);  // every dim
  sum.attrs["dims"] = std::vector<int64_t>{-2};
  CHECK(reductionOverBatch(sum, {batchAt(xa, 1)}) == BatchReduction::Sum);
  sum.attrs["dims"] = std::vector<int64_t>{2};
  CHECK_FALSE(reductionOverBatch(sum, {batchAt(xa, 1)}));  // keeps the rows apart
  GraphNode mean = makeNode("mean", {"xa"}, {});
  mean.familyOp = true;
  CHECK(reductionOverBatch(mean, {batchAt(xa, 0)}) == BatchReduction::Mean);
  GraphNode amax = makeNode("amax", {"xa"}, {});
  amax.familyOp = true;
  CHECK_FALSE(reductionOverBatch(amax, {batchAt(xa, 0)}));  // a max does not add up
  // conv_weight_grad sums over its samples: a share when the input's and
  // the gradient's rows are the same rows of dim 0.
  Shape x4{6, 3, 5, 5}, g4{6, 2, 5, 5};
  GraphNode dw = makeNode("conv_weight_grad", {"x", "g"}, {});
  dw.familyOp = true;
  CHECK(reductionOverBatch(dw, {batchAt(x4, 0, 3), batchAt(g4, 0, 3)}) == BatchReduction::Sum);
  CHECK_FALSE(reductionOverBatch(dw, {batchAt(x4, 0, 3), whole(g4)}));
  // ... and is never split as a per-row op.
  CHECK_THROWS_WITH(splitOverBatch(dw, {batchAt(x4, 0), whole(g4)}, 6),
                    Catch::Contains("'conv_weight_grad' sums over the batch rows"));
}

TEST_CASE("rebatchGraph turns a loss into this rank's share of it",
          "[data-parallel][batch-layout]") {
  // mean(x) over a batch of 4: one row's share is its mean times 1/4; a sum
  // of shares is a share; a sum needs no scale.
  Graph graph = graphOf({4, 3}, R"(
      {"name": "m", "op": "mean", "inputs": ["x"]},
      {"name": "s", "op": "sum", "inputs": ["x"]},
      {"name": "half", "op": "mul", "inputs": ["s", "c"]},
      {"name": "y", "op": "add", "inputs": ["m", "half"]})",
                        "y",
                        R"({"name": "c", "shape": [], "dtype": "float32", "device": "cpu", )"
                        R"("persistent": false, "init": [{"op": "fill", "value": 0.5}]})");
  Graph one = rebatchGraph(graph, 1);
  REQUIRE(one.nodes.size() == 5);
  CHECK(one.nodes[0].op == "mean");
  CHECK(one.nodes[0].names[0] == "m.rows1");
  CHECK(one.nodes[1].op == "mul");
  CHECK(one.nodes[1].names[0] == "m");
  REQUIRE(one.params.size() == 2);
  CHECK(one.nodes[1].inputs == std::vector<std::string>{"m.rows1", one.params[1].name});
  CHECK(one.params[1].init[0].number("value") == 0.25);
  CHECK(nodeNamed(one, "s").inputs == std::vector<std::string>{"x"});
  // The whole batch on one rank: the graph as it was.
  CHECK(rebatchGraph(graph, 4).nodes.size() == 4);

  // A share used any other way is summed over ranks first (all_reduce_sum):
  // x - mean over the rows (a batch norm's centering) then reads the global
  // batch's mean; a value every rank then holds whole is no output.
  const std::string constant = R"({"name": "c", "shape": [], "dtype": "float32", "device": "cpu", )"
                               R"("persistent": false, "init": [{"op": "fill", "value": 0.5}]})";
  Graph centered = rebatchGraph(graphOf({4, 3}, R"(
      {"name": "m", "op": "mean", "inputs": ["x"], "dims": [0]},
      {"name": "y", "op": "sub", "inputs": ["x", "m"]})"),
                                2);
  REQUIRE(centered.nodes.size() == 4);  // mean, its share scale, the sum over ranks, sub
  CHECK(centered.nodes[2].op == "all_reduce_sum");
  CHECK(centered.nodes[2].inputs == std::vector<std::string>{"m"});
  CHECK(centered.nodes[2].shapes[0] == Shape{3});
  CHECK(nodeNamed(centered, "y").inputs ==
        std::vector<std::string>{"x", centered.nodes[2].names[0]});
  CHECK(nodeNamed(centered, "y").shapes[0] == Shape{2, 3});
  // The whole batch on one rank: the mean is the global one already.
  CHECK(rebatchGraph(graphOf({4, 3}, R"(
      {"name": "m", "op": "mean", "inputs": ["x"], "dims": [0]},
      {"name": "y", "op": "sub", "inputs": ["x", "m"]})"),
                     4)
            .nodes.size() == 2);
  // A 0-d output every rank then holds whole (a mean loss plus a term
  // every rank holds, a product) returns each rank's fraction of it: the
  // ranks' values add up to it, as shares do.
  Graph penalty = rebatchGraph(graphOf({4, 3}, R"(
      {"name": "m", "op": "mean", "inputs": ["x"]},
      {"name": "y", "op": "add", "inputs": ["m", "c"]})",
                                       "y", constant),
                               2);
  const GraphNode &part = penalty.nodes.back();
  CHECK(part.names[0] == "y");
  CHECK(part.op == "mul");
  CHECK(nodeNamed(penalty, part.inputs[0]).op == "add");
  CHECK(penalty.params.back().name.rfind(kShareScale, 0) == 0);
  CHECK(penalty.params.back().init[0].number("value") == 0.5);
  // A tensor every rank holds whole is no output.
  CHECK_THROWS_WITH(rebatchGraph(graphOf({4, 3}, R"(
      {"name": "m", "op": "mean", "inputs": ["x"], "dims": [0]},
      {"name": "y", "op": "mul", "inputs": ["m", "m"]})"),
                                 2),
                    Catch::Contains("outputs: data-parallel: output 'y' is computed from the "
                                    "global batch's sums (summed over ranks), so every rank "
                                    "holds it whole"));
  // A share is an output only 0-d (summed over ranks).
  CHECK_THROWS_WITH(
      rebatchGraph(graphOf({4, 3}, R"({"name": "y", "op": "sum", "inputs": ["x"], "dims": [0]})"),
                   2),
      Catch::Contains("output 'y' [3] is a sum or mean over the batch rows; data-parallel "
                      "returns such values 0-d only (summed over ranks)"));
}

TEST_CASE("rebatchGraph computes batch statistics over every rank's rows",
          "[data-parallel][batch-layout]") {
  // export --train's batch norm: [N, C, L] permuted to [C, N, L], viewed as
  // [1, C, N * L], group_norm with one group per channel; the running
  // statistics' var over the batch and the spatial dims.
  const std::string affine =
      R"({"name": "w", "shape": [3], "dtype": "float32", "device": "cpu", "init": [{"op": "ones"}]},)"
      R"({"name": "b", "shape": [3], "dtype": "float32", "device": "cpu", "init": [{"op": "zeros"}]})";
  const std::string nodes = R"(
      {"name": "p", "op": "permute", "inputs": ["x"], "dims": [1, 0, 2]},
      {"name": "r", "op": "reshape", "inputs": ["p"], "shape": [1, 3, 20]},
      {"name": "g", "op": "group_norm", "inputs": ["r", "w", "b"], "groups": 3, "eps": 1e-5},
      {"name": "v", "op": "var", "inputs": ["x"], "dims": [0, 2], "correction": 1},
      {"name": "gr", "op": "reshape", "inputs": ["g"], "shape": [3, 4, 5]},
      {"name": "y", "op": "permute", "inputs": ["gr"], "dims": [1, 0, 2]})";
  Graph graph = graphOf({4, 3, 5}, nodes, "y", affine);
  Graph two = rebatchGraph(graph, 2);
  size_t sums = 0, detached = 0;
  for (const GraphNode &node : two.nodes) {
    CHECK(node.op != "group_norm");
    CHECK(node.op != "var");
    sums += node.op == "all_reduce_sum";
    detached += node.op == "detach";
  }
  // group_norm: the mean, then the squares about it; var: its mean (v
  // itself stays this rank's share until a reader needs the sum: none here)
  CHECK(sums == 3);
  CHECK(detached == 2);  // the squares are taken about a detached mean
  CHECK(nodeNamed(two, "g").shapes[0] == Shape{1, 3, 10});
  CHECK(nodeNamed(two, "v").shapes[0] == Shape{3});
  // The constants count the global batch: 4 rows of 5 per channel.
  std::vector<double> constants;
  for (const GraphParam &param : two.params)
    if (param.name.rfind("data_parallel.const", 0) == 0)
      constants.push_back(param.init[0].number("value"));
  CHECK(constants == std::vector<double>{1.0 / 20, 1.0 / 20, 1e-5, 1.0 / 20, 1.0 / 19});
  // The whole batch: the nodes as they are.
  Graph all = rebatchGraph(graph, 4);
  CHECK(all.nodes.size() == graph.nodes.size());
  CHECK(nodeNamed(all, "g").op == "group_norm");

  // Groups of several channels across the rows are still refused.
  const std::string grouped = R"(
      {"name": "p", "op": "permute", "inputs": ["x"], "dims": [1, 0, 2]},
      {"name": "r", "op": "reshape", "inputs": ["p"], "shape": [1, 3, 20]},
      {"name": "y", "op": "group_norm", "inputs": ["r"], "groups": 1, "eps": 1e-5})";
  CHECK_THROWS_WITH(rebatchGraph(graphOf({4, 3, 5}, grouped), 2), Catch::Contains("'group_norm'"));
}

TEST_CASE("rebatchGraph gives updated buffers the global batch's value",
          "[data-parallel][batch-layout]") {
  const std::string buffer =
      R"({"name": "run", "shape": [3], "dtype": "float32", "device": "cpu", "persistent": true, )"
      R"("init": [{"op": "zeros"}]})";
  auto withUpdate = [&](const std::string &value) {
    Graph graph = graphOf({4, 3}, R"(
        {"name": "m", "op": "mean", "inputs": ["x"], "dims": [0]},
        {"name": "y", "op": "mul", "inputs": ["x", "x"]})",
                          "y", buffer);
    graph.updates.push_back(BufferUpdate{"run", value, "updates[0]"});
    return graph;
  };
  // A share (a mean over the rows) is summed over ranks first.
  Graph two = rebatchGraph(withUpdate("m"), 2);
  REQUIRE(two.updates.size() == 1);
  CHECK(nodeNamed(two, two.updates[0].value).op == "all_reduce_sum");
  // A value of single rows is refused, naming the update.
  Graph rows = withUpdate("y");
  rows.nodes[1].shapes[0] = {4, 3};
  rows.params[0].shape = {4, 3};
  CHECK_THROWS_WITH(rebatchGraph(rows, 2),
                    Catch::Contains("updates[0]: data-parallel: buffer 'run' is updated from the "
                                    "batch rows (by 'y')"));
}

TEST_CASE("a 0-d input is every rank's whole; a sum's shares are told from a mean's",
          "[data-parallel][batch-layout]") {
  // x [4, 3] and a 0-d count n: the sum over x's rows divided by n.
  const std::string summed = R"({"format": "shardc-graph", "version": 1, "parameters": [], )"
                             R"("inputs": [{"name": "n", "shape": [], "dtype": "float32"}, )"
                             R"({"name": "x", "shape": [4, 3], "dtype": "float32"}], "nodes": [
      {"name": "s", "op": "sum", "inputs": ["x"]},
      {"name": "y", "op": "div", "inputs": ["s", "n"]}], "outputs": ["y"]})";
  const Graph graph = parseGraph(summed, "t.json");
  CHECK(graphBatchRows(graph) == 4);  // the first input, n, has no rows
  CHECK(firstBatchInput(graph).name == "x");
  MicroStepShares microStep;
  const Graph two = rebatchGraph(graph, 2, 0, &microStep);
  CHECK(two.inputs[0].shape.empty());  // read whole
  CHECK(two.inputs[1].shape == Shape{2, 3});
  REQUIRE(two.nodes.size() == 2);  // no sum over ranks, no share scale
  CHECK(nodeNamed(two, "y").inputs == std::vector<std::string>{"s", "n"});
  CHECK(microStep.sumOutputs == std::set<std::string>{"y"});

  // A mean's share is no sum's: gradient accumulation scales it by 1 / K.
  MicroStepShares meanStep;
  rebatchGraph(graphOf({4, 3}, R"({"name": "y", "op": "mean", "inputs": ["x"]})"), 2, 0, &meanStep);
  CHECK(meanStep.sumOutputs.empty());
  // Both in one output: accumulation cannot scale its parts apart.
  MicroStepShares mixedStep;
  CHECK_THROWS_WITH(rebatchGraph(graphOf({4, 3}, R"(
      {"name": "m", "op": "mean", "inputs": ["x"]},
      {"name": "s", "op": "sum", "inputs": ["x"]},
      {"name": "y", "op": "add", "inputs": ["m", "s"]})"),
                                 2, 0, &mixedStep),
                    Catch::Contains("output 'y' adds a mean over the batch's rows to a sum"));
  // ... which a step without accumulation takes.
  CHECK_NOTHROW(rebatchGraph(graphOf({4, 3}, R"(
      {"name": "m", "op": "mean", "inputs": ["x"]},
      {"name": "s", "op": "sum", "inputs": ["x"]},
      {"name": "y", "op": "add", "inputs": ["m", "s"]})"),
                             2));

  // Nothing but 0-d inputs: no batch.
  CHECK_THROWS_WITH(graphBatchRows(parseGraph(
                        R"({"format": "shardc-graph", "version": 1, "parameters": [], )"
                        R"("inputs": [{"name": "n", "shape": [], "dtype": "float32"}], "nodes": [
          {"name": "y", "op": "mul", "inputs": ["n", "n"]}], "outputs": ["y"]})",
                        "t.json")),
                    Catch::Contains("every input of the graph is 0-d"));
}

TEST_CASE("a cross_entropy summed over its counted targets is a sum's share",
          "[data-parallel][batch-layout]") {
  // The exporter's reduction='sum' (SummedCrossEntropy.h): the mean times
  // the count of targets other than -100, 0 when none counts, divided by
  // transformers' num_items_in_batch.
  auto trainerLoss = [](const std::string &extraOutput) {
    return parseGraph(
        R"({"format": "shardc-graph", "version": 1, "parameters": [], )"
        R"("buffers": [{"name": "zero", "shape": [], "dtype": "float32", "device": "cpu", )"
        R"("persistent": false, "init": [{"op": "fill", "value": 0.0}]}], )"
        R"("inputs": [{"name": "x", "shape": [4, 5], "dtype": "float32"}, )"
        R"({"name": "t", "shape": [4], "dtype": "int64", "high": 5}, )"
        R"({"name": "n", "shape": [], "dtype": "float32"}], "nodes": [
        {"name": "ce", "op": "cross_entropy", "inputs": ["x", "t"]},
        {"name": "kept", "op": "ne", "inputs": ["t"], "value": -100.0},
        {"name": "kept.float", "op": "cast", "inputs": ["kept"], "dtype": "float32"},
        {"name": "count", "op": "sum", "inputs": ["kept.float"]},
        {"name": "product", "op": "mul", "inputs": ["ce", "count"]},
        {"name": "any", "op": "ne", "inputs": ["count"], "value": 0.0},
        {"name": "summed", "op": "where", "inputs": ["any", "product", "zero"]},
        {"name": "y", "op": "div", "inputs": ["summed", "n"]}], "outputs": ["y")" +
            extraOutput + R"(]})",
        "t.json");
  };
  const Graph graph = trainerLoss("");
  const std::vector<SummedCrossEntropy> found = findSummedCrossEntropies(graph);
  REQUIRE(found.size() == 1);
  CHECK(found[0].loss == "ce");
  CHECK(found[0].count == "count");
  CHECK(found[0].summed == "summed");

  // Each micro-step of each rank: its own mean (0 when it counts no
  // target) times its own count, a sum's share: no count summed over
  // ranks, the graph's guard on the product gone.
  MicroStepShares microStep;
  const Graph two = rebatchGraph(graph, 2, 0, &microStep);
  CHECK(microStep.sumOutputs == std::set<std::string>{"y"});
  CHECK(microStep.countTotals.empty());
  for (const GraphNode &node : two.nodes) {
    CHECK(node.op != "all_reduce_sum");
    CHECK(node.names[0] != "any");
  }
  CHECK(nodeNamed(two, "ce").inputs == std::vector<std::string>{"x", "t"});
  const GraphNode &product = nodeNamed(two, "product");
  const GraphNode &guarded = nodeNamed(two, product.inputs[0]);
  CHECK(guarded.op == "where");
  CHECK(guarded.inputs[1] == "ce");
  CHECK(nodeNamed(two, guarded.inputs[0]).op == "gt");
  CHECK(nodeNamed(two, guarded.inputs[0]).inputs == std::vector<std::string>{"count"});
  CHECK(product.inputs[1] == "count");
  CHECK(nodeNamed(two, "summed").op == "reshape");
  CHECK(nodeNamed(two, "summed").inputs == std::vector<std::string>{"product"});

  // The mean read elsewhere too (returned): not the summed form, so the
  // product of a mean's share and a sum's is refused under accumulation.
  const Graph alsoMean = trainerLoss(R"(, "ce")");
  CHECK(findSummedCrossEntropies(alsoMean).empty());
  MicroStepShares refused;
  CHECK_THROWS_WITH(rebatchGraph(alsoMean, 2, 0, &refused),
                    Catch::Contains("unless it is the exporter's summed cross_entropy"));
}
