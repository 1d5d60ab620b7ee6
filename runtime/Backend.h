// What a device backend supplies to the executor core: kernels, copies and
// the hooks around collectives. Nothing else.
//
// The executor core (runtime/Executor.cpp) decodes and validates every
// instruction against the op table, owns buffers, frees, aliases and the
// memory ledger (through Device), computes shard regions, and then calls one
// method here per instruction. A backend (CpuBackend, cuda::CudaBackend)
// implements those methods for its memory; pointers it gets are in its
// device's address space. Kernels throw RuntimeError with the reason only;
// the core prefixes the instruction's place.
//
// An op a backend has no kernel for is named in its unsupportedOps() list,
// the one place it is stated: the core refuses such an instruction with the
// op's name and the backend's before touching anything. The base class's
// default for those methods is never reached.
#pragma once

#include "runtime/Communicator.h"
#include "runtime/Device.h"
#include "runtime/IndexMapProgram.h"
#include "runtime/ForwardKernels.h"
#include "runtime/OpFamilies.h"
#include "runtime/OpTable.h"
#include "runtime/Optimizers.h"
#include "runtime/Plan.h"
#include "runtime/checkpoint/SafetensorsIndex.h"
#include "runtime/init/Generators.h"
#include "runtime/init/NormOf.h"
#include "runtime/init/Pointwise.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace shardc::runtime {

/// The part of a buffer this rank computes: for a sharded param, the valid
/// rows of its shard (full flat elements [begin, begin + count)); else the
/// whole tensor. `localElements` includes padding rows.
struct Region {
  std::byte *data = nullptr;
  plan::DType dtype = plan::DType::F32;
  std::vector<int64_t> fullShape;
  int64_t begin = 0, count = 0, localElements = 0;
};

/// The kernels every backend supplies, declared once: Backend declares them
/// pure virtual, a backend class writes SHARDC_BACKEND_KERNELS(, override)
/// and defines them. Semantics: copies between the host and device memory
/// (waited for);
/// init as runtime/Kernels.h and runtime/init/; forward as
/// runtime/ForwardKernels.h.
#define SHARDC_BACKEND_KERNELS(VIRTUAL, SUFFIX)                                              \
  VIRTUAL void copyFromHost(void *dst, const void *hostSrc, size_t bytes) SUFFIX;            \
  VIRTUAL void copyToHost(void *hostDst, const void *src, size_t bytes) SUFFIX;              \
  VIRTUAL void zero(void *dst, int64_t bytes) SUFFIX;                                        \
  VIRTUAL void fill(plan::DType dtype, void *data, int64_t elements, double value) SUFFIX;   \
  VIRTUAL void shardedFill(plan::DType dtype, void *data, int64_t localElements,             \
                           int64_t validRows, int64_t rowElements, double value) SUFFIX;     \
  VIRTUAL void generateRange(const init::GeneratorSpec &spec, plan::DType dtype,             \
                             int64_t begin, int64_t count, void *out) SUFFIX;                \
  /* out[k] = source element hostIndices[k] (host memory, checked in range) */               \
  VIRTUAL void generateAt(const init::GeneratorSpec &spec, plan::DType dtype,                \
                          const int64_t *hostIndices, int64_t count, void *out) SUFFIX;      \
  VIRTUAL void pointwise(init::PointwiseKind kind, double a, double b, plan::DType dtype,    \
                         void *data, int64_t count) SUFFIX;                                  \
  VIRTUAL void binary(BinaryOp op, const KTensor &a, const KTensor &b, const KTensor &out)   \
      SUFFIX;                                                                                \
  VIRTUAL void embedding(const KTensor &weight, const KTensor &ids, const KTensor &out)      \
      SUFFIX;                                                                                \
  VIRTUAL void linear(const KTensor &x, const KTensor &w, const KTensor *b,                  \
                      const KTensor &y) SUFFIX;                                              \
  VIRTUAL void matmul(const KTensor &a, const KTensor &b, const KTensor &c,                  \
                      MatmulLayout layout) SUFFIX;                                           \
  VIRTUAL void activation(Activation kind, const KTensor &x, const KTensor &y) SUFFIX;       \
  VIRTUAL void layerNorm(const KTensor &x, const KTensor *weight, const KTensor *bias,       \
                         double eps, const KTensor &y) SUFFIX;                               \
  VIRTUAL void rmsNorm(const KTensor &x, const KTensor *weight, double eps,                  \
                       const KTensor &y) SUFFIX;                                             \
  VIRTUAL void softmax(const KTensor &x, int64_t dim, const KTensor &y) SUFFIX;              \
  VIRTUAL void sdpa(const KTensor &q, const KTensor &k, const KTensor &v,                   \
                    const KTensor *mask, const KTensor &o, bool causal,                      \
                    double scale) SUFFIX;                                                    \
  VIRTUAL void rope(const KTensor &x, double theta, const KTensor &y) SUFFIX;                \
  VIRTUAL void stridedCopy(const KTensor &x, const std::vector<int64_t> &strides,            \
                           int64_t offset, const KTensor &y) SUFFIX;                         \
  VIRTUAL void cat(const std::vector<KTensor> &inputs, int64_t dim, const KTensor &y) SUFFIX;

/// The kernels a backend may lack, declared once like SHARDC_BACKEND_KERNELS
/// (Backend's defaults fail naming the op; a backend that has them writes
/// SHARDC_BACKEND_OPTIONAL_KERNELS(, override)):
///   orthogonal: torch's orthogonal_ of a rows x cols matrix into `out` (its
///     dtype), normal values from `normal`, scaled by `gain`; `work` holds
///     orthogonalWorkBytes (the op table's workspace);
///   normOf: a derived parameter's elements [begin, begin + count) of the
///     norm of `source` over `dims` (runtime/init/NormOf.h); `work` holds
///     normOfWorkBytes;
///   load: a rank's rows of a checkpoint tensor into `target` (its dtype)
///     through the io buffer `io` (ioBytes);
///   the op families (SHARDC_FAMILY_OP in OpTable.def; semantics in
///     runtime/OpFamilies.h): one method per family, its parameters decoded
///     by the core (runtime/OpRules.h), y never aliasing an input but
///     the one plan::overwritableOperand names (embedding_backward's acc,
///     cross_entropy_backward's logits: the lowering writes over them);
///     batchNorm is eval mode (running statistics; weight and bias both or
///     neither); moeExperts' `workspace` holds moeExpertsWorkBytes,
///     moeExpertsBackward's moeExpertsBackwardWorkBytes (p.wrt), hidden
///     and gatedGrad optional (gatedGrad only with hidden),
///     moeExpertsHidden's moeExpertsHiddenWorkBytes, moeExpertsGatedGrad's
///     moeExpertsGatedGradWorkBytes; linearCrossEntropy is the forward
///     (scale == nullptr, y the 0-d loss) or, with scale, the backward
///     (p.wrt), `workspace` holding linearCrossEntropyWorkBytes;
///     sdpaBackward's `workspace` holds sdpaBackwardWorkBytes, mask
///     optional (sdpa's); index is
///     topk (index == nullptr; y int64) or gather (index int64), acc only
///     embedding_backward's optional third operand; compare is
///     the scalar form (a OP value) when b == nullptr; convWeightGrad is
///     the conv family's weight gradient (dw from x and conv's output
///     gradient, summed over the batch);
///   allReduceSum: y = x summed over the ranks in rank order, in double
///     (long double for float64), rounded once; `work` holds worldSize
///     times x's bytes (the op table's allReduceWorkspace);
///   training (runtime/Optimizers.h): reduceScatter's `work` holds
///     reduceScatterWorkBytes, `mean` divides the ranks' sum by their count;
///     gradNorm writes the global L2 norm of every rank's `grads` (a
///     `whole` one counted once: every rank holds it) into the 0-d float64
///     `norm`, exactly summed (runtime/ExactSquareSum.h); sgdStep and
///     adamwStep update param (and their state) in place, first scaling
///     the gradient by clipCoefficient when `gradNorm` is given.
#define SHARDC_BACKEND_OPTIONAL_KERNELS(VIRTUAL, SUFFIX)                                     \
  VIRTUAL void orthogonal(const init::GeneratorSpec &normal, double gain, plan::DType dtype,  \
                          int64_t rows, int64_t cols, void *out, void *work) SUFFIX;          \
  VIRTUAL void normOf(const init::NormOfSource &source, const std::vector<int64_t> &dims,     \
                      int64_t begin, int64_t count, plan::DType dtype, void *out, void *work) \
      SUFFIX;                                                                                \
  VIRTUAL void load(const checkpoint::TensorLocation &where, const Region &target,           \
                    std::byte *io, int64_t ioBytes) SUFFIX;                                  \
  VIRTUAL void crossEntropy(const KTensor &logits, const KTensor &targets,                   \
                            int64_t ignoreIndex, const KTensor &loss) SUFFIX;                \
  VIRTUAL void conv(const ConvParams &p, const KTensor &x, const KTensor &w, const KTensor *b, \
                    const KTensor &y) SUFFIX;                                                \
  VIRTUAL void convWeightGrad(const ConvParams &p, const KTensor &x, const KTensor &grad,     \
                              const std::vector<int64_t> &kernel, const KTensor &dw) SUFFIX; \
  VIRTUAL void pool(const PoolParams &p, const KTensor &x, const KTensor &y) SUFFIX;         \
  VIRTUAL void maxPoolBackward(const PoolParams &p, const KTensor &x, const KTensor &grad,    \
                               const KTensor &dx) SUFFIX;                                    \
  VIRTUAL void adaptivePool(PoolKind kind, const std::vector<int64_t> &outputSize,            \
                            const KTensor &x, const KTensor &y) SUFFIX;                      \
  VIRTUAL void batchNorm(const KTensor &x, const KTensor &mean, const KTensor &var,          \
                         const KTensor *w, const KTensor *b, double eps, const KTensor &y)   \
      SUFFIX;                                                                                \
  VIRTUAL void groupNorm(const KTensor &x, int64_t groups, const KTensor *w,                 \
                         const KTensor *b, double eps, const KTensor &y) SUFFIX;             \
  VIRTUAL void reduce(ReduceKind kind, const KTensor &x, const std::vector<int64_t> &dims,   \
                      int64_t correction, const KTensor &y) SUFFIX;                          \
  VIRTUAL void unary(UnaryOp op, double a, double b, const KTensor &x, const KTensor &y)     \
      SUFFIX;                                                                                \
  VIRTUAL void moeExperts(const MoeParams &p, const KTensor &x, const KTensor &index,        \
                          const KTensor &weights, const KTensor &gateUp,                     \
                          const KTensor &down, const KTensor &y, std::byte *workspace)       \
      SUFFIX;                                                                                \
  VIRTUAL void moeExpertsBackward(const MoeParams &p, const KTensor &x, const KTensor &index,\
                                  const KTensor &weights, const KTensor &gateUp,             \
                                  const KTensor &down, const KTensor &grad,                  \
                                  const KTensor *hidden, const KTensor *gatedGrad,           \
                                  const KTensor &y, std::byte *workspace) SUFFIX;            \
  VIRTUAL void moeExpertsHidden(const KTensor &x, const KTensor &index, const KTensor &gateUp,\
                                const KTensor &y, std::byte *workspace) SUFFIX;              \
  VIRTUAL void moeExpertsGatedGrad(const KTensor &grad, const KTensor &index,                \
                                   const KTensor &down, const KTensor &y,                    \
                                   std::byte *workspace) SUFFIX;                             \
  VIRTUAL void linearCrossEntropy(const LossHeadParams &p, const KTensor &x,                 \
                                  const KTensor &target, const KTensor &weight,              \
                                  const KTensor *scale, const KTensor &y,                    \
                                  std::byte *workspace) SUFFIX;                              \
  VIRTUAL void sdpaBackward(const AttentionGradParams &p, const KTensor &q, const KTensor &k,  \
                            const KTensor &v, const KTensor &g, const KTensor *mask,         \
                            const KTensor &y, std::byte *workspace) SUFFIX;                  \
  VIRTUAL void index(IndexKind kind, const IndexParams &p, const KTensor &x,                 \
                     const KTensor *index, const KTensor *acc, const KTensor &y) SUFFIX;     \
  VIRTUAL void compare(CompareOp op, const KTensor &a, const KTensor *b, double value,       \
                       const KTensor &y) SUFFIX;                                             \
  VIRTUAL void where(const KTensor &cond, const KTensor &a, const KTensor &b,               \
                     const KTensor &y) SUFFIX;                                               \
  VIRTUAL void cast(const KTensor &x, const KTensor &y) SUFFIX;                              \
  VIRTUAL void cumsum(const ScanParams &p, const KTensor &x, const KTensor &y) SUFFIX;      \
  VIRTUAL void dropout(const DropoutParams &p, uint64_t seed, uint64_t offset,              \
                       const KTensor &x, const KTensor &step, const KTensor &y) SUFFIX;      \
  VIRTUAL void gridSample(const SampleParams &p, const KTensor &x, const KTensor &grid,      \
                          const KTensor &y) SUFFIX;                                          \
  VIRTUAL void gridSampleBackward(const SampleParams &p, SampleGrad wrt, const KTensor &x,   \
                                  const KTensor &grid, const KTensor &grad,                  \
                                  const KTensor &y) SUFFIX;                                  \
  VIRTUAL void allReduceSum(Communicator &comm, const KTensor &x, const KTensor &y,          \
                            std::byte *work) SUFFIX;                                         \
  VIRTUAL void reduceScatter(Communicator &comm, const KTensor &full, const KTensor &shard,  \
                             std::byte *work, bool mean) SUFFIX;                            \
  VIRTUAL void gradNorm(Communicator &comm, const std::vector<KTensor> &grads,             \
                        const std::vector<bool> &whole, const KTensor &norm) SUFFIX;         \
  VIRTUAL void sgdStep(const SgdParams &p, const KTensor &param, const KTensor &grad,        \
                       const KTensor *momentumBuffer, const KTensor *step,                   \
                       const KTensor *gradNorm) SUFFIX;                                      \
  VIRTUAL void adamwStep(const AdamwParams &p, const KTensor &param, const KTensor &grad,    \
                         const KTensor &expAvg, const KTensor &expAvgSq,                     \
                         const KTensor &step, const KTensor *gradNorm) SUFFIX;

class Backend {
public:
  explicit Backend(Device &device) : device_(device) {}
  virtual ~Backend() = default;
  Backend(const Backend &) = delete;
  Backend &operator=(const Backend &) = delete;

  Device &device() { return device_; }
  /// "cpu", "cuda": named in errors.
  virtual const char *name() const = 0;
  /// The ops this backend has no kernel for (docs/gpu.md mirrors the CUDA list).
  virtual std::span<const plan::OpCode> unsupportedOps() const { return {}; }
  bool supports(plan::OpCode op) const;
  /// Host threads the core may split host-side work (index mapping) into:
  /// it then calls generateAt from that many threads at once, so a backend
  /// returns more than 1 only when that is safe.
  virtual int hostThreads() const { return 1; }

  /// `generate` through an index_map in one go, where a backend maps
  /// indices on its device (runtime/IndexMapProgram.h): out[k] = source
  /// element indexmap::mapIndex(map, begin + k) for k < count. Returns
  /// false where it has no such kernel (the default: the core then maps on
  /// the host in blocks and calls generateAt). On true, `firstUnmapped` is
  /// -1, or the first k whose element does not map (out is then garbage;
  /// the core throws the host's reason for that element).
  virtual bool generateMapped(const init::GeneratorSpec &, plan::DType, const IndexMapProgram &,
                              int64_t /*begin*/, int64_t /*count*/, void * /*out*/,
                              int64_t & /*firstUnmapped*/) {
    return false;
  }

  /// Called before every collective (a CUDA backend orders its stream).
  virtual void beforeCollective(Communicator &) {}
  /// Called when a function's instructions are done.
  virtual void finish(const std::string &) {}

  // Every backend's kernels (SHARDC_BACKEND_KERNELS above).
  SHARDC_BACKEND_KERNELS(virtual, = 0)

  // Kernels a backend may lack (its unsupportedOps() then names the op;
  // the defaults here fail naming it): SHARDC_BACKEND_OPTIONAL_KERNELS above.
  SHARDC_BACKEND_OPTIONAL_KERNELS(virtual, )

protected:
  /// The base of a method for an op in unsupportedOps(): never reached
  /// through the core; a direct call gets this error.
  [[noreturn]] void noKernel(plan::OpCode op) const;
  [[noreturn]] void noKernel(plan::OpFamily family) const;

private:
  Device &device_;
};

}  // namespace shardc::runtime
