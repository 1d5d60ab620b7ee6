// reduce_scatter, sgd_step and adamw_step on the CPU (runtime/Optimizers.h).
#include "runtime/Optimizers.h"

#include "runtime/InitOps.h"
#include "runtime/Kernels.h"
#include "runtime/RuntimeError.h"
#include "runtime/cpu/KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace shardc::runtime {
namespace {

bool isFloating(plan::DType dtype) {
  return dtype == plan::DType::F32 || dtype == plan::DType::F64 || dtype == plan::DType::BF16 ||
         dtype == plan::DType::F16;
}

/// float64 sums need more than double's 53 bits to stay exact for equal
/// values: x87's 64-bit mantissa (long double) keeps N x exact to N = 2^11.
int64_t accumulatorBytes(plan::DType dtype) {
  return dtype == plan::DType::F64 ? static_cast<int64_t>(sizeof(long double)) : 8;
}

template <typename Acc>
void reduceScatterMean(Communicator &comm, const KTensor &full, const KTensor &shard,
                       std::byte *work) {
  const plan::DType dtype = shard.dtype;
  const int64_t elementBytes = plan::dtypeSize(dtype);
  const int64_t elements = shard.numel();
  const size_t shardBytes = static_cast<size_t>(elements * elementBytes);
  const size_t fullBytes = static_cast<size_t>(full.numel() * elementBytes);
  const size_t begin = static_cast<size_t>(comm.rank()) * shardBytes;
  const int64_t valid =
      begin >= fullBytes
          ? 0
          : static_cast<int64_t>(std::min(shardBytes, fullBytes - begin)) / elementBytes;
  Acc *sum = reinterpret_cast<Acc *>(work);
  std::byte *received = work + elements * static_cast<int64_t>(sizeof(Acc));
  std::fill(sum, sum + elements, Acc(0));
  // One root at a time, in rank order: every rank adds the same values in
  // the same order, whatever the world size splits.
  for (int64_t root = 0; root < comm.worldSize(); ++root) {
    comm.scatterRows(root, full.data, fullBytes, shardBytes, received);
    for (int64_t i = 0; i < valid; ++i) sum[i] += Acc(loadAsDouble(dtype, received, i));
  }
  const Acc ranks = Acc(comm.worldSize());
  for (int64_t i = 0; i < elements; ++i)
    storeFromDouble(dtype, shard.data, i, i < valid ? static_cast<double>(sum[i] / ranks) : 0.0);
}

/// Element access in the compute type T, rounding every stored result to
/// the tensor's dtype once (as each torch op does).
template <typename T>
T load(const KTensor &t, int64_t i) {
  return static_cast<T>(loadAsDouble(t.dtype, t.data, i));
}
template <typename T>
T rounded(plan::DType dtype, T value) {
  if (dtype == plan::DType::F64 || dtype == plan::DType::F32) return value;
  alignas(8) std::byte bits[8] = {};
  storeFromDouble(dtype, bits, 0, static_cast<double>(value));
  return static_cast<T>(loadAsDouble(dtype, bits, 0));
}

constexpr int64_t kBlock = 4096;

template <typename Body>
void forBlocks(int64_t elements, int threads, const Body &body) {
  const int64_t tasks = (elements + kBlock - 1) / kBlock;
  cpu::parallelTasks(tasks, threads, elements * 8, [&](int64_t t) {
    const int64_t end = std::min(elements, (t + 1) * kBlock);
    for (int64_t i = t * kBlock; i < end; ++i) body(i);
  });
}

template <typename T>
void sgdStep(const SgdParams &p, const KTensor &param, const KTensor &grad,
             const KTensor *momentumBuffer, int threads) {
  const plan::DType dtype = param.dtype;
  const T weightDecay = T(p.weightDecay), momentum = T(p.momentum), minusLr = T(-p.lr);
  forBlocks(param.numel(), threads, [&](int64_t i) {
    T g = load<T>(grad, i);
    const T w = load<T>(param, i);
    if (p.weightDecay != 0) g = rounded(dtype, g + weightDecay * w);  // grad.add(param, alpha=wd)
    if (momentumBuffer) {
      // buf.mul_(momentum).add_(grad): a zero buffer gives torch's first
      // step (buf = grad.clone()) exactly.
      T b = rounded(dtype, load<T>(*momentumBuffer, i) * momentum);
      b = rounded(dtype, b + g);
      storeFromDouble(dtype, momentumBuffer->data, i, static_cast<double>(b));
      g = b;
    }
    storeFromDouble(dtype, param.data, i, static_cast<double>(w + minusLr * g));
  });
}

template <typename T>
void adamwStep(const AdamwParams &p, const KTensor &param, const KTensor &grad,
               const KTensor &expAvg, const KTensor &expAvgSq, double step, int threads) {
  const plan::DType dtype = param.dtype;
  // The scalars as torch.optim.adamw computes them (Python floats).
  const double biasCorrection1 = 1 - std::pow(p.beta1, step);
  const double biasCorrection2 = 1 - std::pow(p.beta2, step);
  const T decay = T(1 - p.lr * p.weightDecay);
  const T averageWeight = T(1 - p.beta1), beta2 = T(p.beta2), squareWeight = T(1 - p.beta2);
  const T minusStepSize = T(-(p.lr / biasCorrection1));
  const T biasCorrection2Sqrt = T(std::sqrt(biasCorrection2)), eps = T(p.eps);
  forBlocks(param.numel(), threads, [&](int64_t i) {
    const T g = load<T>(grad, i);
    const T w = rounded(dtype, load<T>(param, i) * decay);  // param.mul_(1 - lr * wd)
    // exp_avg.lerp_(grad, 1 - beta1), torch's lerp formula for weight < 0.5.
    T m = load<T>(expAvg, i);
    m = rounded(dtype, averageWeight < T(0.5) ? m + averageWeight * (g - m)
                                              : g - (g - m) * (T(1) - averageWeight));
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    T v = rounded(dtype, load<T>(expAvgSq, i) * beta2);
    v = rounded(dtype, v + squareWeight * g * g);
    // denom = (exp_avg_sq.sqrt() / sqrt(bias_correction2)).add_(eps)
    T denom = rounded(dtype, std::sqrt(v));
    denom = rounded(dtype, denom / biasCorrection2Sqrt);
    denom = rounded(dtype, denom + eps);
    storeFromDouble(dtype, expAvg.data, i, static_cast<double>(m));
    storeFromDouble(dtype, expAvgSq.data, i, static_cast<double>(v));
    // param.addcdiv_(exp_avg, denom, value=-step_size)
    storeFromDouble(dtype, param.data, i, static_cast<double>(w + minusStepSize * m / denom));
  });
}

void checkFloating(const char *op, const KTensor &t, const char *what) {
  if (!isFloating(t.dtype))
    throw RuntimeError(std::string(op) + ": " + what + " is " + plan::dtypeName(t.dtype) +
                       "; optimizer state and gradients are floating point");
}

void checkSameLayout(const char *op, const KTensor &param, const KTensor &other,
                     const char *what) {
  if (other.dtype != param.dtype || other.numel() != param.numel())
    throw RuntimeError(std::string(op) + ": " + what + " (" + plan::dtypeName(other.dtype) + " " +
                       shapeToString(other.shape) + ") does not match the param's " +
                       plan::dtypeName(param.dtype) + " " + shapeToString(param.shape));
}

}  // namespace

int64_t reduceScatterWorkBytes(const std::vector<int64_t> &shardShape, plan::DType dtype) {
  int64_t elements = 1;
  for (int64_t d : shardShape)
    if (d < 0 || __builtin_mul_overflow(elements, d, &elements)) return -1;
  int64_t bytes = 0;
  if (__builtin_mul_overflow(elements, accumulatorBytes(dtype) + plan::dtypeSize(dtype), &bytes))
    return -1;
  return bytes;
}

void reduceScatterMeanKernel(Communicator &comm, const KTensor &full, const KTensor &shard,
                             std::byte *work) {
  checkFloating("reduce_scatter", full, "the gradient");
  if (full.dtype != shard.dtype)
    throw RuntimeError(std::string("reduce_scatter: the gradient is ") + plan::dtypeName(full.dtype) +
                       " but its shard " + plan::dtypeName(shard.dtype));
  if (shard.dtype == plan::DType::F64) reduceScatterMean<long double>(comm, full, shard, work);
  else reduceScatterMean<double>(comm, full, shard, work);
}

void sgdStepKernel(const SgdParams &p, const KTensor &param, const KTensor &grad,
                   const KTensor *momentumBuffer, int threads) {
  checkFloating("sgd_step", param, "the param");
  checkSameLayout("sgd_step", param, grad, "the gradient");
  if (momentumBuffer) checkSameLayout("sgd_step", param, *momentumBuffer, "the momentum buffer");
  if (param.dtype == plan::DType::F64) sgdStep<double>(p, param, grad, momentumBuffer, threads);
  else sgdStep<float>(p, param, grad, momentumBuffer, threads);
}

void adamwStepKernel(const AdamwParams &p, const KTensor &param, const KTensor &grad,
                     const KTensor &expAvg, const KTensor &expAvgSq, const KTensor &step,
                     int threads) {
  checkFloating("adamw_step", param, "the param");
  checkSameLayout("adamw_step", param, grad, "the gradient");
  checkSameLayout("adamw_step", param, expAvg, "exp_avg");
  checkSameLayout("adamw_step", param, expAvgSq, "exp_avg_sq");
  if (step.numel() != 1 || !isFloating(step.dtype))
    throw RuntimeError("adamw_step: the step count must be one floating value");
  const double count = loadAsDouble(step.dtype, step.data, 0);
  if (!(count >= 1))
    throw RuntimeError("adamw_step: the step count is " + std::to_string(count) +
                       "; it is advanced to 1 before the first update");
  if (param.dtype == plan::DType::F64)
    adamwStep<double>(p, param, grad, expAvg, expAvgSq, count, threads);
  else adamwStep<float>(p, param, grad, expAvg, expAvgSq, count, threads);
}

}  // namespace shardc::runtime
