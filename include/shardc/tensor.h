// shardc embedded JIT API: the Tensor proxy (docs/jit.md).
//
// A Tensor is a symbolic value of a trace: a name, a shape and a dtype. It
// owns no storage. Every operation checks its operands as the graph format
// does (docs/graph-format.md), infers the result's shape and records one
// forward node. A mismatch throws TraceError naming the C++ call site (file
// and line, via std::source_location) and the module being traced.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardc {

using SourceLocation = std::source_location;

enum class DType { Float32, Float64, Float16, BFloat16, Int64 };

/// "float32", "float64", "float16", "bfloat16", "int64".
const char *dtype_name(DType dtype);
/// Bytes per element.
int64_t dtype_size(DType dtype);
/// "[2, 8, 32]".
std::string shape_string(const std::vector<int64_t> &shape);

/// Every error of the API (compilation, running, files).
class Error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// An error found while a model is constructed or traced. what() reads
/// "FILE:LINE: in module 'PATH': reason" (module '' is the root model).
class TraceError : public Error {
public:
  TraceError(const std::string &reason, const SourceLocation &where,
             std::string modulePath);
  const std::string &file() const { return file_; }
  int64_t line() const { return line_; }
  const std::string &module_path() const { return module_; }
  const std::string &reason() const { return reason_; }

private:
  std::string file_;
  int64_t line_ = 0;
  std::string module_;
  std::string reason_;
};

namespace detail {
class Trace;
}

class Tensor {
public:
  Tensor() = default;

  bool defined() const { return trace_ != nullptr; }
  /// The value's name in the traced graph (a parameter's full name, an
  /// input's name, or a generated node name).
  const std::string &name() const { return name_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  /// Size of dim `d` (negative counts from the end).
  int64_t size(int64_t d) const;

  Tensor reshape(std::vector<int64_t> shape,
                 SourceLocation loc = SourceLocation::current()) const;
  Tensor transpose(int64_t dim0, int64_t dim1,
                   SourceLocation loc = SourceLocation::current()) const;
  Tensor permute(std::vector<int64_t> dims,
                 SourceLocation loc = SourceLocation::current()) const;
  /// Elements start, start+step, ... < end of `dim` (clamped as torch).
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1,
               SourceLocation loc = SourceLocation::current()) const;
  std::vector<Tensor> split(std::vector<int64_t> sizes, int64_t dim,
                            SourceLocation loc = SourceLocation::current()) const;
  Tensor softmax(int64_t dim = -1,
                 SourceLocation loc = SourceLocation::current()) const;

private:
  friend class detail::Trace;
  std::shared_ptr<detail::Trace> trace_;
  std::string name_;
  std::vector<int64_t> shape_;
  DType dtype_ = DType::Float32;
};

/// A tensor operand together with the call site of the expression it is
/// used in (binary operators cannot take a defaulted location argument; the
/// implicit conversion can).
struct At {
  const Tensor &tensor;
  SourceLocation loc;
  At(const Tensor &t, SourceLocation where = SourceLocation::current())
      : tensor(t), loc(where) {}
};

/// Elementwise with numpy broadcasting.
Tensor operator+(At a, const Tensor &b);
Tensor operator-(At a, const Tensor &b);
Tensor operator*(At a, const Tensor &b);
Tensor operator/(At a, const Tensor &b);

Tensor add(const Tensor &a, const Tensor &b, SourceLocation loc = SourceLocation::current());
Tensor sub(const Tensor &a, const Tensor &b, SourceLocation loc = SourceLocation::current());
Tensor mul(const Tensor &a, const Tensor &b, SourceLocation loc = SourceLocation::current());
Tensor div(const Tensor &a, const Tensor &b, SourceLocation loc = SourceLocation::current());

/// x [..., K], weight [N, K], bias [N] -> [..., N] (torch.nn.functional.linear).
Tensor linear(const Tensor &x, const Tensor &weight,
              SourceLocation loc = SourceLocation::current());
Tensor linear(const Tensor &x, const Tensor &weight, const Tensor &bias,
              SourceLocation loc = SourceLocation::current());
Tensor matmul(const Tensor &a, const Tensor &b,
              SourceLocation loc = SourceLocation::current());
/// weight [V, D], ids int64 -> ids.shape + [D].
Tensor embedding(const Tensor &weight, const Tensor &ids,
                 SourceLocation loc = SourceLocation::current());
/// approximate: "none" or "tanh".
Tensor gelu(const Tensor &x, const std::string &approximate = "none",
            SourceLocation loc = SourceLocation::current());
Tensor silu(const Tensor &x, SourceLocation loc = SourceLocation::current());
Tensor relu(const Tensor &x, SourceLocation loc = SourceLocation::current());
/// torch's training-mode F.dropout: x's elements kept with probability
/// 1 - p and scaled by 1 / (1 - p), the rest 0. The mask follows the run's
/// seed, this dropout's place in the trace, a step counter every forward()
/// advances and the element's index in the whole batch: the same at every
/// world size and data-parallel split (docs/rng.md). p = 0 returns x.
Tensor dropout(const Tensor &x, double p, SourceLocation loc = SourceLocation::current());
Tensor softmax(const Tensor &x, int64_t dim = -1,
               SourceLocation loc = SourceLocation::current());
Tensor layer_norm(const Tensor &x, const Tensor &weight, const Tensor &bias,
                  double eps = 1e-5, SourceLocation loc = SourceLocation::current());
Tensor rms_norm(const Tensor &x, const Tensor &weight, double eps = 1e-6,
                SourceLocation loc = SourceLocation::current());
/// q [B, H, T, E], k [B, H, S, E], v [B, H, S, Ev]; scale default 1/sqrt(E).
Tensor scaled_dot_product_attention(const Tensor &q, const Tensor &k,
                                    const Tensor &v, bool causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    SourceLocation loc = SourceLocation::current());
/// The same with torch's float attn_mask: added to the scaled scores, of
/// q's dtype, 4-d with each dim 1 or the scores' [B, H, T, S]; -inf
/// excludes a key, and a query row with no key left gives zeros.
Tensor scaled_dot_product_attention(const Tensor &q, const Tensor &k,
                                    const Tensor &v, const Tensor &mask,
                                    bool causal = false,
                                    std::optional<double> scale = std::nullopt,
                                    SourceLocation loc = SourceLocation::current());
/// Rotate-half RoPE on x [B, H, T, D] at positions 0..T-1.
Tensor rotary_embedding(const Tensor &x, double theta = 10000.0,
                        SourceLocation loc = SourceLocation::current());
Tensor cat(const std::vector<Tensor> &tensors, int64_t dim,
           SourceLocation loc = SourceLocation::current());
/// logits [N, C], targets int64 [N] -> 0-d mean loss over the targets
/// other than ignore_index (torch's; -100 by default).
Tensor cross_entropy(const Tensor &logits, const Tensor &targets, int64_t ignore_index = -100,
                     SourceLocation loc = SourceLocation::current());

} // namespace shardc
