#include "runtime/cuda/CudaExecutor.h"

#include "runtime/InitOps.h"
#include "runtime/RuntimeError.h"
#include "runtime/checkpoint/SafetensorsIndex.h"
#include "runtime/checkpoint/ShardReader.h"
#include "runtime/cpu/FamilyKernels.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/CudaFamilies.h"
#include "runtime/cuda/CudaForward.h"
#include "runtime/cuda/CudaInit.h"
#include "runtime/cuda/NcclCommunicator.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace shardc::runtime::cuda {
using namespace shardc::plan;

void SingleGpuCommunicator::allGather(const void *send, size_t bytesPerRank, void *recv) {
  if (bytesPerRank == 0 || send == recv) return;  // in place: nothing to move
  device_.makeCurrent();
  checkCuda(cudaMemcpyAsync(recv, send, bytesPerRank, cudaMemcpyDeviceToDevice, device_.stream()),
            "all_gather (one GPU): cudaMemcpyAsync");
}

void SingleGpuCommunicator::scatter(int64_t root, const void *send, size_t bytesPerRank,
                                    void *recv) {
  if (root != 0)
    throw RuntimeError("scatter (one GPU): root " + std::to_string(root) +
                       " out of range for world size 1");
  allGather(send, bytesPerRank, recv);
}

void SingleGpuCommunicator::barrier() { device_.synchronize("barrier (one GPU)"); }

// ---- copies and ordering ---------------------------------------------------

void CudaBackend::copyFromHost(void *dst, const void *hostSrc, size_t bytes) {
  copyToDevice(device_, dst, hostSrc, bytes);
}
void CudaBackend::copyToHost(void *hostDst, const void *src, size_t bytes) {
  cuda::copyToHost(device_, hostDst, src, bytes);
}
void CudaBackend::zero(void *dst, int64_t bytes) { zeroBytes(device_, dst, bytes); }

/// NCCL waits for the compute stream by itself (setComputeStream); the
/// one-GPU communicator copies on that stream; any other communicator gets a
/// synchronized device.
void CudaBackend::beforeCollective(Communicator &comm) {
  if (auto *nccl = dynamic_cast<NcclCommunicator *>(&comm))
    nccl->setComputeStream(device_.stream());
  else if (!dynamic_cast<SingleGpuCommunicator *>(&comm))
    device_.synchronize("before a collective");
}

void CudaBackend::finish(const std::string &what) { device_.synchronize(what); }

// ---- init ------------------------------------------------------------------

void CudaBackend::fill(DType dtype, void *data, int64_t elements, double value) {
  cuda::fill(device_, dtype, data, elements, value);
}
void CudaBackend::shardedFill(DType dtype, void *data, int64_t localElements, int64_t validRows,
                              int64_t rowElements, double value) {
  cuda::shardedFill(device_, dtype, data, localElements, validRows, rowElements, value);
}
void CudaBackend::generateRange(const init::GeneratorSpec &spec, DType dtype, int64_t begin,
                                int64_t count, void *out) {
  cuda::generateRange(device_, spec, dtype, begin, count, out);
}
void CudaBackend::generateAt(const init::GeneratorSpec &spec, DType dtype,
                             const int64_t *hostIndices, int64_t count, void *out) {
  // Only for maps over IndexMapProgram's room (generateMapped does the
  // rest). The core hands blocks of at most 4096 indices: each is staged
  // through pinned memory and copied asynchronously (no synchronization per
  // block); the copy of the next block overlaps this block's kernel.
  const int64_t elementSize = plan::dtypeSize(dtype);
  for (int64_t done = 0; done < count; done += CudaDevice::kIndexBlockElements) {
    const int64_t n = std::min(CudaDevice::kIndexBlockElements, count - done);
    const int64_t *deviceIndices = device_.stageIndices(hostIndices + done, n);
    generateAtDevice(device_, spec, dtype, deviceIndices, n,
                     static_cast<std::byte *>(out) + done * elementSize);
  }
}
bool CudaBackend::generateMapped(const init::GeneratorSpec &spec, DType dtype,
                                 const IndexMapProgram &map, int64_t begin, int64_t count,
                                 void *out, int64_t &firstUnmapped) {
  firstUnmapped = cuda::generateMapped(device_, spec, dtype, map, begin, count, out);
  return true;
}
void CudaBackend::pointwise(init::PointwiseKind kind, double a, double b, DType dtype,
                            void *data, int64_t count) {
  applyPointwise(device_, kind, a, b, dtype, data, count);
}

// ---- init ops that run on the host -------------------------------------------

void CudaBackend::orthogonal(const init::GeneratorSpec &normal, double gain, DType dtype,
                             int64_t rows, int64_t cols, void *out, void *) {
  std::vector<std::byte> host(static_cast<size_t>(rows * cols * dtypeSize(dtype)));
  std::vector<std::byte> work(
      static_cast<size_t>(std::max<int64_t>(0, orthogonalWorkBytes({rows, cols}, dtype))));
  orthogonalOnHost(normal, gain, dtype, rows, cols, host.data(), work.data(), hostThreads_);
  copyToDevice(device_, out, host.data(), host.size());
}

void CudaBackend::normOf(const init::NormOfSource &source, const std::vector<int64_t> &dims,
                         int64_t begin, int64_t count, DType dtype, void *out, void *) {
  std::vector<std::byte> host(static_cast<size_t>(count * dtypeSize(dtype)));
  std::vector<std::byte> work(static_cast<size_t>(init::normOfWorkBytes(count)));
  init::normOf(source, dims, begin, count, dtype, host.data(), work.data());
  copyToDevice(device_, out, host.data(), host.size());
}

// ---- checkpoint load ---------------------------------------------------------

/// The file's bytes land in host memory first (pread), then go to the GPU:
/// chunks of at most the plan's io-buffer size are read (and converted) on
/// the host and copied into the rank's rows. The device io buffer the plan
/// allocated (and the ledger accounts) is not needed; the host staging is
/// bounded by the same size (twice it while converting), like the CPU
/// backend's reads through its io buffer.
void CudaBackend::load(const checkpoint::TensorLocation &where, const Region &target,
                       std::byte *, int64_t ioBytes) {
  const int64_t targetSize = dtypeSize(target.dtype), fileSize = dtypeSize(where.entry->dtype);
  const int64_t perChunk = std::max<int64_t>(1, ioBytes / std::max(targetSize, fileSize));
  const int64_t chunk = std::min(perChunk, std::max<int64_t>(target.count, 1));
  std::vector<std::byte> staged(static_cast<size_t>(chunk * targetSize)),
      convert(static_cast<size_t>(chunk * fileSize));
  for (int64_t done = 0; done < target.count; done += chunk) {
    const int64_t n = std::min(chunk, target.count - done);
    checkpoint::readElements(*where.file, *where.entry, target.begin + done, n, target.dtype,
                             staged.data(), convert.data(), static_cast<int64_t>(convert.size()));
    copyToDevice(device_, target.data + done * targetSize, staged.data(),
                 static_cast<size_t>(n * targetSize));
  }
}

// ---- forward ---------------------------------------------------------------

void CudaBackend::binary(BinaryOp op, const KTensor &a, const KTensor &b, const KTensor &out) {
  cuda::binary(device_, op, a, b, out);
}
void CudaBackend::embedding(const KTensor &weight, const KTensor &ids, const KTensor &out) {
  cuda::embedding(device_, weight, ids, out);
}
void CudaBackend::linear(const KTensor &x, const KTensor &w, const KTensor *b, const KTensor &y) {
  cuda::linear(device_, x, w, b, y);
}
void CudaBackend::matmul(const KTensor &a, const KTensor &b, const KTensor &c,
                         MatmulLayout layout) {
  cuda::matmul(device_, a, b, c, layout);
}
void CudaBackend::activation(Activation kind, const KTensor &x, const KTensor &y) {
  cuda::activation(device_, kind, x, y);
}
void CudaBackend::layerNorm(const KTensor &x, const KTensor *weight, const KTensor *bias,
                            double eps, const KTensor &y) {
  cuda::layerNorm(device_, x, weight, bias, eps, y);
}
void CudaBackend::rmsNorm(const KTensor &x, const KTensor *weight, double eps, const KTensor &y) {
  cuda::rmsNorm(device_, x, weight, eps, y);
}
void CudaBackend::softmax(const KTensor &x, int64_t dim, const KTensor &y) {
  cuda::softmax(device_, x, dim, y);
}
void CudaBackend::sdpa(const KTensor &q, const KTensor &k, const KTensor &v,
                       const KTensor *mask, const KTensor &o, bool causal, double scale) {
  cuda::sdpa(device_, q, k, v, mask, o, causal, scale);
}
void CudaBackend::rope(const KTensor &x, double theta, const KTensor &y) {
  cuda::rope(device_, x, theta, y);
}
void CudaBackend::stridedCopy(const KTensor &x, const std::vector<int64_t> &strides,
                              int64_t offset, const KTensor &y) {
  cuda::stridedCopy(device_, x, strides, offset, y);
}
void CudaBackend::cat(const std::vector<KTensor> &inputs, int64_t dim, const KTensor &y) {
  cuda::cat(device_, inputs, dim, y);
}

void CudaBackend::crossEntropy(const KTensor &logits, const KTensor &targets, int64_t ignoreIndex,
                               const KTensor &loss) {
  cuda::crossEntropy(device_, logits, targets, ignoreIndex, loss);
}

// ---- the op families ---------------------------------------------------------

void CudaBackend::conv(const ConvParams &p, const KTensor &x, const KTensor &w, const KTensor *b,
                       const KTensor &y) {
  cuda::conv(device_, p, x, w, b, y);
}
void CudaBackend::convWeightGrad(const ConvParams &p, const KTensor &x, const KTensor &grad,
                                 const std::vector<int64_t> &kernel, const KTensor &dw) {
  cuda::convWeightGrad(device_, p, x, grad, kernel, dw);
}
void CudaBackend::pool(const PoolParams &p, const KTensor &x, const KTensor &y) {
  cuda::pool(device_, p, x, y);
}
void CudaBackend::adaptivePool(PoolKind kind, const std::vector<int64_t> &outputSize,
                               const KTensor &x, const KTensor &y) {
  cuda::adaptivePool(device_, kind, outputSize, x, y);
}
void CudaBackend::batchNorm(const KTensor &x, const KTensor &mean, const KTensor &var,
                            const KTensor *w, const KTensor *b, double eps, const KTensor &y) {
  cuda::batchNorm(device_, x, mean, var, w, b, eps, y);
}
void CudaBackend::groupNorm(const KTensor &x, int64_t groups, const KTensor *w, const KTensor *b,
                            double eps, const KTensor &y) {
  cuda::groupNorm(device_, x, groups, w, b, eps, y);
}
void CudaBackend::reduce(ReduceKind kind, const KTensor &x, const std::vector<int64_t> &dims,
                         int64_t correction, const KTensor &y) {
  cuda::reduce(device_, kind, x, dims, correction, y);
}
void CudaBackend::unary(UnaryOp op, double a, double b, const KTensor &x, const KTensor &y) {
  cuda::unary(device_, op, a, b, x, y);
}

void CudaBackend::moeExperts(const MoeParams &p, const KTensor &x, const KTensor &index,
                             const KTensor &weights, const KTensor &gateUp, const KTensor &down,
                             const KTensor &y, std::byte *workspace) {
  cuda::moeExperts(device_, p, x, index, weights, gateUp, down, y, workspace);
}
void CudaBackend::moeExpertsBackward(const MoeParams &p, const KTensor &x, const KTensor &index,
                                     const KTensor &weights, const KTensor &gateUp,
                                     const KTensor &down, const KTensor &grad,
                                     const KTensor *hidden, const KTensor *gatedGrad,
                                     const KTensor &y, std::byte *workspace) {
  // no kernel: kCudaUnsupportedOps
  Backend::moeExpertsBackward(p, x, index, weights, gateUp, down, grad, hidden, gatedGrad, y,
                              workspace);
}
void CudaBackend::sdpaBackward(const AttentionGradParams &p, const KTensor &q, const KTensor &k,
                               const KTensor &v, const KTensor &g, const KTensor *mask,
                               const KTensor &y, std::byte *) {
  // On the host, as orthogonal: the operands copied over, the CPU kernel
  // (its bits), the result copied back. Slow, but a long sequence's
  // training pass runs; a FlashAttention-style CUDA kernel is not written
  // before a GPU can run it.
  std::vector<std::vector<std::byte>> held;
  auto onHost = [&](const KTensor &t) {
    held.emplace_back(static_cast<size_t>(t.numel() * dtypeSize(t.dtype)));
    cuda::copyToHost(device_, held.back().data(), t.data, held.back().size());
    return KTensor{t.dtype, t.shape, held.back().data()};
  };
  held.reserve(5);
  const KTensor hq = onHost(q), hk = onHost(k), hv = onHost(v), hg = onHost(g);
  const std::optional<KTensor> hmask = mask ? std::optional(onHost(*mask)) : std::nullopt;
  std::vector<std::byte> out(static_cast<size_t>(y.numel() * dtypeSize(y.dtype)));
  std::vector<std::byte> work(static_cast<size_t>(
      sdpaBackwardWorkBytes(p.wrt, q.shape[1], k.shape[1], q.shape[2], k.shape[2],
                            std::max(k.shape[3], v.shape[3]), q.dtype)));
  sdpaBackwardKernel(p, hq, hk, hv, hg, hmask ? &*hmask : nullptr,
                     KTensor{y.dtype, y.shape, out.data()}, work.data(), hostThreads_);
  copyToDevice(device_, y.data, out.data(), out.size());
}
void CudaBackend::linearCrossEntropy(const LossHeadParams &p, const KTensor &x,
                                     const KTensor &target, const KTensor &weight,
                                     const KTensor *scale, const KTensor &y, std::byte *workspace) {
  // no kernel: kCudaUnsupportedOps
  Backend::linearCrossEntropy(p, x, target, weight, scale, y, workspace);
}
void CudaBackend::maxPoolBackward(const PoolParams &p, const KTensor &x, const KTensor &grad,
                                  const KTensor &dx) {
  Backend::maxPoolBackward(p, x, grad, dx);  // no kernel: kCudaUnsupportedOps
}
void CudaBackend::gridSampleBackward(const SampleParams &p, SampleGrad wrt, const KTensor &x,
                                     const KTensor &grid, const KTensor &grad, const KTensor &y) {
  Backend::gridSampleBackward(p, wrt, x, grid, grad, y);  // no kernel: kCudaUnsupportedOps
}
void CudaBackend::moeExpertsHidden(const KTensor &x, const KTensor &index, const KTensor &gateUp,
                                   const KTensor &y, std::byte *workspace) {
  Backend::moeExpertsHidden(x, index, gateUp, y, workspace);  // no kernel: kCudaUnsupportedOps
}
void CudaBackend::moeExpertsGatedGrad(const KTensor &grad, const KTensor &index,
                                      const KTensor &down, const KTensor &y, std::byte *workspace) {
  Backend::moeExpertsGatedGrad(grad, index, down, y, workspace);  // no kernel: kCudaUnsupportedOps
}
void CudaBackend::index(IndexKind kind, const IndexParams &p, const KTensor &x,
                        const KTensor *index, const KTensor *acc, const KTensor &y) {
  if (kind == IndexKind::TopK) cuda::topk(device_, p, x, y);
  else if (kind == IndexKind::Gather) cuda::gather(device_, p, x, *index, y);
  else if (kind == IndexKind::CrossEntropyBackward)
    cuda::crossEntropyBackward(device_, p, x, *index, y);
  else
    cuda::embeddingBackward(device_, p, x, *index, acc, y);
}
void CudaBackend::compare(CompareOp op, const KTensor &a, const KTensor *b, double value,
                          const KTensor &y) {
  cuda::compare(device_, op, a, b, value, y);
}
void CudaBackend::where(const KTensor &cond, const KTensor &a, const KTensor &b,
                        const KTensor &y) {
  cuda::where(device_, cond, a, b, y);
}
void CudaBackend::cast(const KTensor &x, const KTensor &y) { cuda::cast(device_, x, y); }
void CudaBackend::gridSample(const SampleParams &p, const KTensor &x, const KTensor &grid,
                             const KTensor &y) {
  cuda::gridSample(device_, p, x, grid, y);
}
void CudaBackend::cumsum(const ScanParams &p, const KTensor &x, const KTensor &y) {
  cuda::cumsum(device_, p, x, y);
}

void CudaBackend::dropout(const DropoutParams &p, uint64_t seed, uint64_t offset, const KTensor &x,
                          const KTensor &step, const KTensor &y) {
  cuda::dropout(device_, p, seed, offset, x, step, y);
}
void CudaBackend::allReduceSum(Communicator &comm, const KTensor &x, const KTensor &y,
                               std::byte *work) {
  cuda::allReduceSum(device_, comm, x, y, work);
}
void CudaBackend::reduceScatter(Communicator &comm, const KTensor &full, const KTensor &shard,
                                std::byte *work, bool mean) {
  cuda::reduceScatter(device_, comm, full, shard, work, mean);
}
void CudaBackend::gradNorm(Communicator &comm, const std::vector<KTensor> &grads,
                           const std::vector<bool> &whole, const KTensor &norm) {
  Backend::gradNorm(comm, grads, whole, norm);  // no kernel: kCudaUnsupportedOps
}
void CudaBackend::sgdStep(const SgdParams &p, const KTensor &param, const KTensor &grad,
                          const KTensor *momentumBuffer, const KTensor *step,
                          const KTensor *gradNorm) {
  cuda::sgdStep(device_, p, param, grad, momentumBuffer, step, gradNorm);
}
void CudaBackend::adamwStep(const AdamwParams &p, const KTensor &param, const KTensor &grad,
                            const KTensor &expAvg, const KTensor &expAvgSq, const KTensor &step,
                            const KTensor *gradNorm) {
  cuda::adamwStep(device_, p, param, grad, expAvg, expAvgSq, step, gradNorm);
}

// ---- the CUDA entry point --------------------------------------------------

std::vector<HostTensor> executeFunctionCuda(const Plan &plan, const std::string &name,
                                            CudaDevice &device, Communicator &comm,
                                            RankState &state,
                                            const std::vector<HostTensor> &inputs,
                                            const ExecutionContext &context) {
  CudaBackend backend(device);
  std::vector<TensorView> views =
      runFunction(plan, name, backend, comm, state, inputs, context.seed, "executeFunctionCuda");
  std::vector<HostTensor> out;
  for (const TensorView &view : views) {
    HostTensor t{view.name, view.dtype, view.shape, {}};
    t.data.resize(static_cast<size_t>(t.expectedBytes()));
    backend.copyToHost(t.data.data(), view.data, t.data.size());
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace shardc::runtime::cuda
