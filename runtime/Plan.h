// The Plan: the small, versioned, serializable program the runtime executes.
//
// The compiler (which links MLIR) lowers a sharded tc module into a Plan; the
// runtime (which does not link MLIR) executes it on every rank. A Plan is the
// same for every rank (SPMD): rank-dependent facts (which rows a rank owns)
// are computed at run time from the rank and the Param's sharding.
//
// Memory is explicit: every allocation and release is an instruction, so the
// peak can be predicted from the instruction stream alone (MemoryModel.h) and
// compared with what the Device measures while executing it.
#pragma once

#include "runtime/OpTable.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace shardc::plan {

/// Bumped whenever the serialized form changes incompatibly.
inline constexpr int kPlanVersion = 1;

/// I64 holds integer data (token ids, targets); kernels that compute in
/// floating point reject it.
enum class DType { F32, F64, F16, BF16, I64 };

/// "float32", "float64", "float16", "bfloat16", "int64".
const char *dtypeName(DType dtype);
std::optional<DType> parseDType(const std::string &name);
int64_t dtypeSize(DType dtype);

/// What an allocation is for; the memory report is broken down by these.
enum class Category { Parameter, Gathered, Activation, IO };
const char *categoryName(Category category);
std::optional<Category> parseCategory(const std::string &name);

/// Number of elements of a shape; 1 for a 0-d shape.
int64_t numElements(const std::vector<int64_t> &shape);

/// Optimizer state (docs/training.md: moments, momentum buffers, the step
/// count) is named with this prefix: parameters outside the model's
/// state_dict, the only non-persistent ones that are not buffers.
inline constexpr const char *kOptimizerStatePrefix = "optim.";
inline bool isOptimizerState(const std::string &name) {
  return name.rfind(kOptimizerStatePrefix, 0) == 0;
}
/// Dropout's step counter (docs/rng.md, "Dropout masks"): a non-persistent
/// 0-d buffer the graph advances each forward. Resuming needs it as it
/// needs the optimizer state: it is saved and loaded with it.
inline constexpr const char *kRngStepBuffer = "rng.step";
/// What --save-optimizer writes and --load-optimizer reads back.
inline bool isResumeState(const std::string &name) {
  return isOptimizerState(name) || name == kRngStepBuffer;
}

/// A model parameter (or a replicated buffer) and how it is sharded.
struct Param {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // the full, unsharded shape
  std::string device;          // original device the user asked for
  std::string unit;            // FSDP unit name ("" = root)
  bool isBuffer = false;       // non-parameter state: never sharded
  /// Dim-0 sharding (docs/design.md): each rank stores `chunkRows` rows, rank r owns
  /// rows [r*chunkRows, min((r+1)*chunkRows, shape[0])). 0 = replicated.
  int64_t chunkRows = 0;
  // After chunkRows: positional {name, ..., isBuffer, chunkRows} stays valid.
  /// False for buffers outside the model's state (torch's persistent=False,
  /// exporter constants): checkpoints never save them.
  bool persistent = true;
  /// Other state_dict names of this tensor (tied weights): a checkpoint
  /// saves it under each of them too, so torch loads it strictly.
  std::vector<std::string> tiedNames;

  bool sharded() const { return chunkRows > 0; }
  /// The shape each rank stores: chunkRows rows when sharded, else full.
  std::vector<int64_t> localShape() const;
  int64_t localBytes() const;
  int64_t fullBytes() const;
  /// Rows of the full tensor that `rank` owns (0 when it owns only padding).
  int64_t validRows(int64_t rank) const;
  /// Elements in one dim-0 row (product of shape[1:]); 1 for a 0-d param.
  int64_t rowElements() const;
  /// Bytes of the buffer an all-gather of this param fills on `worldSize`
  /// ranks: worldSize * chunkRows padded rows (fullBytes when replicated).
  int64_t gatheredBytes(int64_t worldSize) const;
  /// The same rows gathered as `as` (master weights gathered in their
  /// compute dtype: docs/graph-format.md).
  int64_t gatheredBytes(int64_t worldSize, DType as) const;
};

/// A buffer of one function. `bytes` is the allocation size, which can exceed
/// the logical shape's size (an all-gather target holds N*chunk padded rows).
struct Buffer {
  Buffer() = default;
  /// Positional construction as the aggregate form `{id, name, dtype, shape,
  /// bytes, category, param}` always allowed (the alias fields trail).
  Buffer(int32_t id, std::string name, DType dtype, std::vector<int64_t> shape, int64_t bytes,
         Category category, std::optional<int32_t> param = std::nullopt,
         std::optional<int32_t> aliasOf = std::nullopt, int64_t byteOffset = 0)
      : id(id), name(std::move(name)), dtype(dtype), shape(std::move(shape)), bytes(bytes),
        category(category), param(param), aliasOf(aliasOf), byteOffset(byteOffset) {}

  int32_t id = 0;
  std::string name;  // for reports ("p1.gathered", "x", "%3")
  DType dtype = DType::F32;
  std::vector<int64_t> shape;  // logical shape seen by kernels
  int64_t bytes = 0;
  Category category = Category::Activation;
  /// When set, this buffer *is* the persistent local storage of that param:
  /// `alloc` of it creates the param storage (in init), and it is never
  /// released by the function; other functions reference it without `alloc`.
  std::optional<int32_t> param;
  /// When set, this buffer is an *alias*: a view of buffer `*aliasOf` (of the
  /// same function) starting `byteOffset` bytes into it, with its own logical
  /// shape and dtype. It is never allocated (alloc/free of it is an error),
  /// costs 0 bytes, and is valid exactly while its base is. `bytes` equals its
  /// logical size and [byteOffset, byteOffset + bytes) lies inside the base.
  /// Used for reshape without copy and for the per-param full tensors inside
  /// one gathered FSDP-unit buffer. The base may itself be an alias.
  std::optional<int32_t> aliasOf;
  int64_t byteOffset = 0;
  /// An output every rank computes the same value of (a training step's
  /// global gradient norm): a data-parallel run takes rank 0's, where other
  /// 0-d outputs are shares summed over the ranks.
  bool replicated = false;

  bool isAlias() const { return aliasOf.has_value(); }
};

using AttrValue =
    std::variant<int64_t, double, std::string, std::vector<int64_t>>;

/// One instruction. Opcodes, operands and attributes are the op table's
/// (runtime/OpTable.def, docs/ops.md); the plan reader rejects unknown names.
///   alloc      outputs=[buf]                      allocate buf
///   free       inputs=[buf]                       release buf
///   fill       outputs=[buf] value:double         fill (shard-aware, see docs)
///   add        inputs=[a,b] outputs=[out]         broadcasting add
///   sub/mul/div inputs=[a,b] outputs=[out]       broadcasting elementwise
///   all_gather inputs=[shard] outputs=[full]      gather a sharded param
///              inputs=[p1..pk] outputs=[unit] offsets  one gather per FSDP unit
///   embedding/linear/matmul/gelu/silu/relu/layer_norm/rms_norm/softmax/sdpa/
///   rope/strided_copy/cat/cross_entropy           forward ops (docs/plan.md)
///   generate   outputs=[buf] kind,stream,position,...  generator values
///   mul_scalar/add_scalar/sub_scalar/div_scalar/clamp/erfinv/sqrt/neg/
///   init_exp/init_log/init_expm1/inverse_softplus
///              inputs=[buf] outputs=[buf]         in place, valid rows only
///   scatter    inputs=[full] outputs=[param] root  root's rows to each rank
///   orthogonal outputs=[buf] gain,stream,position torch's orthogonal_
/// Any instruction may carry int64 `rank`: it then runs on that rank only.
struct Instruction {
  OpCode op = OpCode::Alloc;
  std::vector<int32_t> inputs;
  std::vector<int32_t> outputs;
  std::map<std::string, AttrValue> attrs;
  std::string loc;  // source location for error messages
};

struct Function {
  std::string name;
  std::vector<Buffer> buffers;   // indexed by Buffer::id (id == index)
  std::vector<int32_t> inputs;   // buffers bound to the function's arguments
  std::vector<int32_t> outputs;  // buffers returned (stay allocated)
  std::vector<Instruction> body;
};

struct Plan {
  int version = kPlanVersion;
  int64_t worldSize = 1;
  std::vector<Param> params;
  std::vector<Function> functions;  // "init" then "forward"

  const Function *function(const std::string &name) const;
};

}  // namespace shardc::plan
