#include "runtime/CpuBackend.h"

#include "runtime/Executor.h"
#include "runtime/InitOps.h"
#include "runtime/Kernels.h"
#include "runtime/cpu/FamilyKernels.h"
#include "runtime/RuntimeError.h"
#include "runtime/checkpoint/ShardReader.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <type_traits>

namespace shardc::runtime {
using namespace shardc::plan;

void CpuBackend::copyFromHost(void *dst, const void *hostSrc, size_t bytes) {
  if (bytes) std::memcpy(dst, hostSrc, bytes);
}
void CpuBackend::copyToHost(void *hostDst, const void *src, size_t bytes) {
  if (bytes) std::memcpy(hostDst, src, bytes);
}
void CpuBackend::zero(void *dst, int64_t bytes) {
  if (bytes > 0) std::memset(dst, 0, static_cast<size_t>(bytes));
}

// ---- init ----------------------------------------------------------------

void CpuBackend::fill(DType dtype, void *data, int64_t elements, double value) {
  runtime::fill(dtype, data, elements, value);
}
void CpuBackend::shardedFill(DType dtype, void *data, int64_t localElements, int64_t validRows,
                             int64_t rowElements, double value) {
  runtime::shardedFill(dtype, data, localElements, validRows, rowElements, value);
}
void CpuBackend::generateRange(const init::GeneratorSpec &spec, DType dtype, int64_t begin,
                               int64_t count, void *out) {
  init::generateRange(spec, dtype, begin, count, out, threads_);
}
void CpuBackend::generateAt(const init::GeneratorSpec &spec, DType dtype,
                            const int64_t *hostIndices, int64_t count, void *out) {
  init::generateAt(spec, dtype, hostIndices, count, out);
}
void CpuBackend::pointwise(init::PointwiseKind kind, double a, double b, DType dtype, void *data,
                           int64_t count) {
  init::applyPointwise(kind, a, b, dtype, data, count, threads_);
}

void CpuBackend::normOf(const init::NormOfSource &source, const std::vector<int64_t> &dims,
                        int64_t begin, int64_t count, DType dtype, void *out, void *work) {
  init::normOf(source, dims, begin, count, dtype, out, work);
}

void CpuBackend::orthogonal(const init::GeneratorSpec &normal, double gain, DType dtype,
                            int64_t rows, int64_t cols, void *out, void *work) {
  orthogonalOnHost(normal, gain, dtype, rows, cols, out, work, threads_);
}

void CpuBackend::load(const checkpoint::TensorLocation &where, const Region &r, std::byte *io,
                      int64_t ioBytes) {
  checkpoint::readElements(*where.file, *where.entry, r.begin, r.count, r.dtype, r.data, io,
                           ioBytes, threads_);
}

// ---- forward -------------------------------------------------------------

void CpuBackend::binary(BinaryOp op, const KTensor &a, const KTensor &b, const KTensor &out) {
  binaryKernel(op, a, b, out, threads_);
}
void CpuBackend::embedding(const KTensor &weight, const KTensor &ids, const KTensor &out) {
  embeddingKernel(weight, ids, out);
}
void CpuBackend::linear(const KTensor &x, const KTensor &w, const KTensor *b, const KTensor &y) {
  linearKernel(x, w, b, y, threads_);
}
void CpuBackend::matmul(const KTensor &a, const KTensor &b, const KTensor &c, MatmulLayout layout) {
  matmulKernel(a, b, c, layout, threads_);
}
void CpuBackend::activation(Activation kind, const KTensor &x, const KTensor &y) {
  activationKernel(kind, x, y, threads_);
}
void CpuBackend::layerNorm(const KTensor &x, const KTensor *weight, const KTensor *bias,
                           double eps, const KTensor &y) {
  layerNormKernel(x, weight, bias, eps, y, threads_);
}
void CpuBackend::rmsNorm(const KTensor &x, const KTensor *weight, double eps, const KTensor &y) {
  rmsNormKernel(x, weight, eps, y, threads_);
}
void CpuBackend::softmax(const KTensor &x, int64_t dim, const KTensor &y) {
  softmaxKernel(x, dim, y, threads_);
}
void CpuBackend::sdpa(const KTensor &q, const KTensor &k, const KTensor &v, const KTensor *mask,
                      const KTensor &o, bool causal, double scale) {
  sdpaKernel(q, k, v, mask, o, causal, scale, threads_);
}
void CpuBackend::rope(const KTensor &x, double theta, const KTensor &y) {
  ropeKernel(x, theta, y, threads_);
}
void CpuBackend::stridedCopy(const KTensor &x, const std::vector<int64_t> &strides,
                             int64_t offset, const KTensor &y) {
  stridedCopyKernel(x, strides, offset, y);
}
void CpuBackend::cat(const std::vector<KTensor> &inputs, int64_t dim, const KTensor &y) {
  catKernel(inputs, dim, y);
}
void CpuBackend::crossEntropy(const KTensor &logits, const KTensor &targets, int64_t ignoreIndex,
                              const KTensor &loss) {
  crossEntropyKernel(logits, targets, ignoreIndex, loss, threads_);
}

// ---- op families (runtime/cpu/FamilyKernels.h) -----------------------------

void CpuBackend::conv(const ConvParams &p, const KTensor &x, const KTensor &w, const KTensor *b,
                      const KTensor &y) {
  convKernel(p, x, w, b, y, threads_);
}
void CpuBackend::convWeightGrad(const ConvParams &p, const KTensor &x, const KTensor &grad,
                                const std::vector<int64_t> &kernel, const KTensor &dw) {
  convWeightGradKernel(p, x, grad, kernel, dw, threads_);
}
void CpuBackend::pool(const PoolParams &p, const KTensor &x, const KTensor &y) {
  poolKernel(p, x, y, threads_);
}
void CpuBackend::maxPoolBackward(const PoolParams &p, const KTensor &x, const KTensor &grad,
                                 const KTensor &dx) {
  maxPoolBackwardKernel(p, x, grad, dx, threads_);
}
void CpuBackend::adaptivePool(PoolKind kind, const std::vector<int64_t> &outputSize,
                              const KTensor &x, const KTensor &y) {
  adaptivePoolKernel(kind, outputSize, x, y, threads_);
}
void CpuBackend::batchNorm(const KTensor &x, const KTensor &mean, const KTensor &var,
                           const KTensor *w, const KTensor *b, double eps, const KTensor &y) {
  batchNormKernel(x, mean, var, w, b, eps, y, threads_);
}
void CpuBackend::groupNorm(const KTensor &x, int64_t groups, const KTensor *w, const KTensor *b,
                           double eps, const KTensor &y) {
  groupNormKernel(x, groups, w, b, eps, y, threads_);
}
void CpuBackend::reduce(ReduceKind kind, const KTensor &x, const std::vector<int64_t> &dims,
                        int64_t correction, const KTensor &y) {
  reduceKernel(kind, x, dims, correction, y, threads_);
}
void CpuBackend::unary(UnaryOp op, double a, double b, const KTensor &x, const KTensor &y) {
  unaryKernel(op, a, b, x, y, threads_);
}
void CpuBackend::sdpaBackward(const AttentionGradParams &p, const KTensor &q, const KTensor &k,
                              const KTensor &v, const KTensor &g, const KTensor *mask,
                              const KTensor &y, std::byte *workspace) {
  sdpaBackwardKernel(p, q, k, v, g, mask, y, workspace, threads_);
}
void CpuBackend::linearCrossEntropy(const LossHeadParams &p, const KTensor &x,
                                    const KTensor &target, const KTensor &weight,
                                    const KTensor *scale, const KTensor &y, std::byte *workspace) {
  linearCrossEntropyKernel(p, x, target, weight, scale, y, workspace, threads_);
}
void CpuBackend::moeExperts(const MoeParams &p, const KTensor &x, const KTensor &index,
                            const KTensor &weights, const KTensor &gateUp, const KTensor &down,
                            const KTensor &y, std::byte *workspace) {
  moeExpertsKernel(p, x, index, weights, gateUp, down, y, workspace, threads_);
}
void CpuBackend::moeExpertsBackward(const MoeParams &p, const KTensor &x, const KTensor &index,
                                    const KTensor &weights, const KTensor &gateUp,
                                    const KTensor &down, const KTensor &grad, const KTensor *hidden,
                                    const KTensor *gatedGrad, const KTensor &y,
                                    std::byte *workspace) {
  moeExpertsBackwardKernel(p, x, index, weights, gateUp, down, grad, hidden, gatedGrad, y,
                           workspace, threads_);
}
void CpuBackend::moeExpertsHidden(const KTensor &x, const KTensor &index, const KTensor &gateUp,
                                  const KTensor &y, std::byte *workspace) {
  moeExpertsHiddenKernel(x, index, gateUp, y, workspace, threads_);
}
void CpuBackend::moeExpertsGatedGrad(const KTensor &grad, const KTensor &index, const KTensor &down,
                                     const KTensor &y, std::byte *workspace) {
  moeExpertsGatedGradKernel(grad, index, down, y, workspace, threads_);
}
void CpuBackend::index(IndexKind kind, const IndexParams &p, const KTensor &x, const KTensor *index,
                       const KTensor *acc, const KTensor &y) {
  if (kind == IndexKind::TopK) topkKernel(p, x, y, threads_);
  else if (kind == IndexKind::Gather) gatherKernel(p, x, *index, y, threads_);
  else if (kind == IndexKind::CrossEntropyBackward)
    crossEntropyBackwardKernel(p, x, *index, y, threads_);
  else
    embeddingBackwardKernel(p, x, *index, y, threads_, acc);
}
void CpuBackend::compare(CompareOp op, const KTensor &a, const KTensor *b, double value,
                         const KTensor &y) {
  compareKernel(op, a, b, value, y, threads_);
}
void CpuBackend::where(const KTensor &cond, const KTensor &a, const KTensor &b,
                       const KTensor &y) {
  whereKernel(cond, a, b, y, threads_);
}
void CpuBackend::cast(const KTensor &x, const KTensor &y) { castKernel(x, y, threads_); }
void CpuBackend::cumsum(const ScanParams &p, const KTensor &x, const KTensor &y) {
  cumsumKernel(p, x, y, threads_);
}

void CpuBackend::dropout(const DropoutParams &p, uint64_t seed, uint64_t offset, const KTensor &x,
                         const KTensor &step, const KTensor &y) {
  dropoutKernel(p, seed, offset, x, step, y, threads_);
}
void CpuBackend::gridSample(const SampleParams &p, const KTensor &x, const KTensor &grid,
                            const KTensor &y) {
  gridSampleKernel(p, x, grid, y, threads_);
}
void CpuBackend::gridSampleBackward(const SampleParams &p, SampleGrad wrt, const KTensor &x,
                                    const KTensor &grid, const KTensor &grad, const KTensor &y) {
  gridSampleBackwardKernel(p, wrt, x, grid, grad, y, threads_);
}

void CpuBackend::allReduceSum(Communicator &comm, const KTensor &x, const KTensor &y,
                              std::byte *work) {
  allReduceSumKernel(comm, x, y, work);
}
void CpuBackend::reduceScatter(Communicator &comm, const KTensor &full, const KTensor &shard,
                               std::byte *work, bool mean) {
  reduceScatterKernel(comm, full, shard, work, mean);
}
void CpuBackend::gradNorm(Communicator &comm, const std::vector<KTensor> &grads,
                          const std::vector<bool> &whole, const KTensor &norm) {
  gradNormKernel(comm, grads, whole, norm, threads_);
}
void CpuBackend::sgdStep(const SgdParams &p, const KTensor &param, const KTensor &grad,
                         const KTensor *momentumBuffer, const KTensor *step,
                         const KTensor *gradNorm) {
  sgdStepKernel(p, param, grad, momentumBuffer, step, gradNorm, threads_);
}
void CpuBackend::adamwStep(const AdamwParams &p, const KTensor &param, const KTensor &grad,
                           const KTensor &expAvg, const KTensor &expAvgSq, const KTensor &step,
                           const KTensor *gradNorm) {
  adamwStepKernel(p, param, grad, expAvg, expAvgSq, step, gradNorm, threads_);
}

// ---- the CPU entry point --------------------------------------------------

int defaultKernelThreads(int64_t worldSize) {
  const int64_t cores = std::thread::hardware_concurrency();
  return static_cast<int>(std::max<int64_t>(1, cores / std::max<int64_t>(1, worldSize)));
}

std::vector<TensorView> executeFunction(const Plan &plan, const std::string &name,
                                        CpuDevice &device, Communicator &comm, RankState &state,
                                        const std::vector<HostTensor> &inputs,
                                        const ExecutionContext &context) {
  if (context.threads < 1)
    throw RuntimeError("executeFunction('" + name + "'): kernel threads must be >= 1, got " +
                       std::to_string(context.threads));
  CpuBackend backend(device, context.threads);
  return runFunction(plan, name, backend, comm, state, inputs, context.seed, "executeFunction");
}

}  // namespace shardc::runtime
