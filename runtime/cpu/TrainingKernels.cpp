// reduce_scatter, all_reduce_sum, grad_norm, sgd_step and adamw_step on the CPU
// (runtime/Optimizers.h).
#include "runtime/Optimizers.h"

#include "runtime/ForwardChecks.h"
#include "runtime/InitOps.h"
#include "runtime/Kernels.h"
#include "runtime/RuntimeError.h"
#include "runtime/cpu/KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>

namespace shardc::runtime {
namespace {

bool isFloating(plan::DType dtype) {
  return dtype == plan::DType::F32 || dtype == plan::DType::F64 || dtype == plan::DType::BF16 ||
         dtype == plan::DType::F16;
}

/// Elements per block: the unit of the kernels' loops and of their tasks
/// (whose bounds do not depend on the thread count).
constexpr int64_t kBlock = 1024;

/// Blocks of elements in the compute type T (float for float32 / bfloat16 /
/// float16, double for float64): loaded, rounded to the storage dtype after
/// each torch op (identity for float32 and float64), stored.
template <typename T>
struct Block;

template <>
struct Block<float> {
  static void load(plan::DType dtype, const void *base, int64_t offset, int64_t n, float *dst) {
    cpu::loadFloats(dtype, base, offset, n, dst);
  }
  static void store(plan::DType dtype, const float *src, int64_t n, void *base, int64_t offset) {
    cpu::storeFloats(dtype, src, n, base, offset);
  }
  static void round(plan::DType dtype, float *v, int64_t n) {
    if (dtype == plan::DType::BF16 || dtype == plan::DType::F16)
      for (int64_t i = 0; i < n; ++i) v[i] = cpu::roundedTo(dtype, v[i]);
  }
};

template <>
struct Block<double> {
  static void load(plan::DType, const void *base, int64_t offset, int64_t n, double *dst) {
    std::memcpy(dst, static_cast<const double *>(base) + offset, static_cast<size_t>(n) * 8);
  }
  static void store(plan::DType, const double *src, int64_t n, void *base, int64_t offset) {
    std::memcpy(static_cast<double *>(base) + offset, src, static_cast<size_t>(n) * 8);
  }
  static void round(plan::DType, double *, int64_t) {}
};

template <typename Acc>
void reduceScatter(Communicator &comm, const KTensor &full, const KTensor &shard, std::byte *work,
                   bool mean) {
  const plan::DType dtype = shard.dtype, gradDtype = full.dtype;
  const ReduceScatterLayout layout = reduceScatterLayout(comm.rank(), full, shard);
  const int64_t elementBytes = plan::dtypeSize(gradDtype);
  Acc *sum = reinterpret_cast<Acc *>(work);
  std::byte *received = work + layout.receivedOffset;
  const Acc ranks = mean ? Acc(comm.worldSize()) : Acc(1);  // x / 1 is exact
  float widened[kBlock];
  // Window by window; within one, one root at a time in rank order: every
  // rank adds the same values in the same order, whatever the world size
  // splits. Every rank runs every window (padding too): the scatters are
  // collectives.
  for (int64_t start = 0; start < layout.elements; start += layout.window) {
    const int64_t count = std::min(layout.window, layout.elements - start);
    const int64_t valid = std::clamp<int64_t>(layout.valid - start, 0, count);
    std::fill(sum, sum + count, Acc(0));
    for (int64_t root = 0; root < comm.worldSize(); ++root) {
      comm.scatterRows(root, full.data, layout.fullBytes, layout.partBytes,
                       static_cast<size_t>(start * elementBytes),
                       static_cast<size_t>(count * elementBytes), received);
      if (gradDtype == plan::DType::F64) {
        const double *values = reinterpret_cast<const double *>(received);
        for (int64_t i = 0; i < valid; ++i) sum[i] += Acc(values[i]);
        continue;
      }
      for (int64_t at = 0; at < valid; at += kBlock) {  // exact in float, then added in Acc
        const int64_t n = std::min(kBlock, valid - at);
        cpu::loadFloats(gradDtype, received, at, n, widened);
        for (int64_t i = 0; i < n; ++i) sum[at + i] += Acc(widened[i]);
      }
    }
    if (dtype == plan::DType::F64) {
      double *out = static_cast<double *>(shard.data) + start;
      for (int64_t i = 0; i < count; ++i) out[i] = i < valid ? double(sum[i] / ranks) : 0.0;
      continue;
    }
    for (int64_t at = 0; at < count; at += kBlock) {
      const int64_t n = std::min(kBlock, count - at);
      for (int64_t i = 0; i < n; ++i)
        widened[i] = at + i < valid ? static_cast<float>(double(sum[at + i] / ranks)) : 0.0f;
      cpu::storeFloats(dtype, widened, n, shard.data, start + at);  // 16-bit: through float
    }
  }
}

/// Runs body(begin, n) over blocks of kBlock elements on up to `threads`.
template <typename Body>
void forBlocks(int64_t elements, int threads, const Body &body) {
  const int64_t tasks = (elements + kBlock - 1) / kBlock;
  cpu::parallelTasks(tasks, threads, elements * 8, [&](int64_t t) {
    const int64_t begin = t * kBlock;
    body(begin, std::min(kBlock, elements - begin));
  });
}

/// The gradient's block scaled by the clip coefficient (torch's
/// grads.mul_(clip_coef_clamped), rounded to the gradient's dtype).
template <typename T>
void clip(plan::DType dtype, const std::optional<T> &coefficient, T *g, int64_t n) {
  if (!coefficient) return;
  for (int64_t i = 0; i < n; ++i) g[i] = g[i] * *coefficient;
  Block<T>::round(dtype, g, n);
}

/// The clip coefficient of a step that reads the global norm.
template <typename T> std::optional<T> clipOf(double maxGradNorm, const KTensor *gradNorm) {
  if (!gradNorm) return std::nullopt;
  return clipCoefficient<T>(maxGradNorm, loadAsDouble(gradNorm->dtype, gradNorm->data, 0));
}

template <typename T>
void sgdStep(const SgdParams &p, const KTensor &param, const KTensor &grad,
             const KTensor *momentumBuffer, double lr, const KTensor *gradNorm, int threads) {
  using B = Block<T>;
  const plan::DType dtype = param.dtype;
  const T weightDecay = T(p.weightDecay), momentum = T(p.momentum), minusLr = T(-lr);
  const std::optional<T> coefficient = clipOf<T>(p.maxGradNorm, gradNorm);
  forBlocks(param.numel(), threads, [&](int64_t at, int64_t n) {
    T g[kBlock], w[kBlock], b[kBlock];
    B::load(dtype, grad.data, at, n, g);
    clip(dtype, coefficient, g, n);
    B::load(dtype, param.data, at, n, w);
    if (p.weightDecay != 0) {  // grad.add(param, alpha=weight_decay)
      for (int64_t i = 0; i < n; ++i) g[i] = g[i] + weightDecay * w[i];
      B::round(dtype, g, n);
    }
    if (momentumBuffer) {
      // buf.mul_(momentum).add_(grad): a zero buffer gives torch's first
      // step (buf = grad.clone()) exactly.
      B::load(dtype, momentumBuffer->data, at, n, b);
      for (int64_t i = 0; i < n; ++i) b[i] = b[i] * momentum;
      B::round(dtype, b, n);
      for (int64_t i = 0; i < n; ++i) b[i] = b[i] + g[i];
      B::round(dtype, b, n);
      B::store(dtype, b, n, momentumBuffer->data, at);
      if (p.nesterov) {  // grad.add(buf, alpha=momentum)
        for (int64_t i = 0; i < n; ++i) g[i] = g[i] + momentum * b[i];
        B::round(dtype, g, n);
      } else {
        std::copy(b, b + n, g);
      }
    }
    for (int64_t i = 0; i < n; ++i) w[i] = w[i] + minusLr * g[i];  // param.add_(g, alpha=-lr)
    B::store(dtype, w, n, param.data, at);
  });
}

template <typename T>
void adamwStep(const AdamwParams &p, const KTensor &param, const KTensor &grad,
               const KTensor &expAvg, const KTensor &expAvgSq, double step, const KTensor *gradNorm,
               int threads) {
  using B = Block<T>;
  const plan::DType dtype = param.dtype;
  const AdamwStepScalars k = adamwStepScalars(p, step);
  const T decay = T(k.decay), averageWeight = T(k.averageWeight), beta2 = T(k.beta2);
  const T squareWeight = T(k.squareWeight), minusStepSize = T(k.minusStepSize);
  const T biasCorrection2Sqrt = T(k.biasCorrection2Sqrt), eps = T(k.eps);
  // torch's lerp: the formula from the start below a weight of 0.5, else
  // from the end.
  const bool lerpFromStart = averageWeight < T(0.5);
  const std::optional<T> coefficient = clipOf<T>(p.maxGradNorm, gradNorm);
  forBlocks(param.numel(), threads, [&](int64_t at, int64_t n) {
    T g[kBlock], w[kBlock], m[kBlock], v[kBlock];
    B::load(dtype, grad.data, at, n, g);
    clip(dtype, coefficient, g, n);
    B::load(dtype, param.data, at, n, w);
    B::load(dtype, expAvg.data, at, n, m);
    B::load(dtype, expAvgSq.data, at, n, v);
    for (int64_t i = 0; i < n; ++i) w[i] = w[i] * decay;  // param.mul_(1 - lr * wd)
    B::round(dtype, w, n);
    // exp_avg.lerp_(grad, 1 - beta1)
    if (lerpFromStart)
      for (int64_t i = 0; i < n; ++i) m[i] = m[i] + averageWeight * (g[i] - m[i]);
    else
      for (int64_t i = 0; i < n; ++i) m[i] = g[i] - (g[i] - m[i]) * (T(1) - averageWeight);
    B::round(dtype, m, n);
    // exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    for (int64_t i = 0; i < n; ++i) v[i] = v[i] * beta2;
    B::round(dtype, v, n);
    for (int64_t i = 0; i < n; ++i) v[i] = v[i] + squareWeight * g[i] * g[i];
    B::round(dtype, v, n);
    B::store(dtype, m, n, expAvg.data, at);
    B::store(dtype, v, n, expAvgSq.data, at);
    // denom = (exp_avg_sq.sqrt() / sqrt(bias_correction2)).add_(eps)
    T denom[kBlock];
    for (int64_t i = 0; i < n; ++i) denom[i] = std::sqrt(v[i]);
    B::round(dtype, denom, n);
    for (int64_t i = 0; i < n; ++i) denom[i] = denom[i] / biasCorrection2Sqrt;
    B::round(dtype, denom, n);
    for (int64_t i = 0; i < n; ++i) denom[i] = denom[i] + eps;
    B::round(dtype, denom, n);
    // param.addcdiv_(exp_avg, denom, value=-step_size)
    for (int64_t i = 0; i < n; ++i) w[i] = w[i] + minusStepSize * m[i] / denom[i];
    B::store(dtype, w, n, param.data, at);
  });
}

}  // namespace

int64_t reduceScatterWorkBytes(const std::vector<int64_t> &shardShape, plan::DType shardDtype,
                               plan::DType gradDtype) {
  int64_t elements = 1;
  for (int64_t d : shardShape)
    if (d < 0 || __builtin_mul_overflow(elements, d, &elements)) return -1;
  // One window: at most kReduceScatterWindow elements of 16 + 8 bytes.
  return std::min(elements, kReduceScatterWindow) *
         (reduceScatterSumBytes(shardDtype) + plan::dtypeSize(gradDtype));
}

void reduceScatterKernel(Communicator &comm, const KTensor &full, const KTensor &shard,
                         std::byte *work, bool mean) {
  if (!isFloating(full.dtype))
    throw RuntimeError(std::string("reduce_scatter: the gradient is ") +
                       plan::dtypeName(full.dtype) + "; gradients are floating point");
  if (!widensExactly(full.dtype, shard.dtype))
    throw RuntimeError(std::string("reduce_scatter: the gradient is ") +
                       plan::dtypeName(full.dtype) + " but its shard " +
                       plan::dtypeName(shard.dtype) +
                       " (a shard holds its gradient's dtype or a float dtype that holds "
                       "every value of it)");
  if (shard.dtype == plan::DType::F64)
    reduceScatter<long double>(comm, full, shard, work, mean);
  else
    reduceScatter<double>(comm, full, shard, work, mean);
}

void allReduceSumKernel(Communicator &comm, const KTensor &x, const KTensor &y, std::byte *work) {
  if (!isFloating(x.dtype) || x.dtype != y.dtype || x.numel() != y.numel())
    throw RuntimeError(std::string("all_reduce_sum: x is ") + plan::dtypeName(x.dtype) + " of " +
                       std::to_string(x.numel()) + " elements, y " + plan::dtypeName(y.dtype) +
                       " of " + std::to_string(y.numel()) +
                       "; expects one floating dtype and "
                       "size");
  const int64_t n = x.numel(), ranks = comm.worldSize();
  const size_t bytes = static_cast<size_t>(n) * plan::dtypeSize(x.dtype);
  comm.allGather(x.data, bytes, work);
  // Rank order, one rounding: the same bytes on every rank.
  if (x.dtype == plan::DType::F64) {
    const double *all = reinterpret_cast<const double *>(work);
    double *out = static_cast<double *>(y.data);
    for (int64_t i = 0; i < n; ++i) {
      long double sum = 0;
      for (int64_t r = 0; r < ranks; ++r) sum += all[r * n + i];
      out[i] = static_cast<double>(sum);
    }
    return;
  }
  float widened[kBlock];
  double sum[kBlock];
  for (int64_t at = 0; at < n; at += kBlock) {
    const int64_t count = std::min(kBlock, n - at);
    std::fill(sum, sum + count, 0.0);
    for (int64_t r = 0; r < ranks; ++r) {
      cpu::loadFloats(x.dtype, work, r * n + at, count, widened);  // 16-bit: exact in float
      for (int64_t i = 0; i < count; ++i) sum[i] += widened[i];
    }
    for (int64_t i = 0; i < count; ++i) widened[i] = static_cast<float>(sum[i]);
    cpu::storeFloats(y.dtype, widened, count, y.data, at);
  }
}

void addSquares(ExactSquareSum &sum, plan::DType dtype, const void *values, int64_t begin,
                int64_t n) {
  if (dtype == plan::DType::F64) {
    sum.addDoubles(static_cast<const double *>(values) + begin, n);
    return;
  }
  if (dtype == plan::DType::F32) {
    sum.addFloats(static_cast<const float *>(values) + begin, n);
    return;
  }
  float widened[kBlock];  // 16-bit values are float32 values exactly
  for (int64_t at = 0; at < n; at += kBlock) {
    const int64_t count = std::min(kBlock, n - at);
    cpu::loadFloats(dtype, values, begin + at, count, widened);
    sum.addFloats(widened, count);
  }
}

void gradNormKernel(Communicator &comm, const std::vector<KTensor> &grads,
                    const std::vector<bool> &whole, const KTensor &norm, int threads) {
  checks::gradNorm(grads, whole, norm);
  // One sum per task over contiguous elements, merged: the sum is exact, so
  // neither the split nor the merge order changes a bit.
  const int tasks = std::max(1, threads);
  std::vector<ExactSquareSum> partial(static_cast<size_t>(tasks));
  for (size_t g = 0; g < grads.size(); ++g) {
    if (whole[g] && comm.rank() != 0) continue;  // rank 0 counts what all hold
    const KTensor &grad = grads[g];
    const int64_t elements = grad.numel();
    const int64_t per = (elements + tasks - 1) / tasks;
    cpu::parallelTasks(tasks, threads, elements * 4, [&](int64_t t) {
      const int64_t begin = std::min(elements, t * per);
      addSquares(partial[static_cast<size_t>(t)], grad.dtype, grad.data, begin,
                 std::min(per, elements - begin));
    });
  }
  for (int t = 1; t < tasks; ++t) partial[0].merge(partial[static_cast<size_t>(t)]);
  *static_cast<double *>(norm.data) = globalNorm(comm, partial[0]);
}

void sgdStepKernel(const SgdParams &p, const KTensor &param, const KTensor &grad,
                   const KTensor *momentumBuffer, const KTensor *step, const KTensor *gradNorm,
                   int threads) {
  std::vector<std::pair<const char *, const KTensor *>> state;
  if (momentumBuffer) state.push_back({"the momentum buffer", momentumBuffer});
  // With a schedule the learning rate follows the step count, as AdamW's.
  double count = 0;
  if (step) {
    if (step->numel() != 1 || !isFloating(step->dtype))
      throw RuntimeError("sgd_step: the step count must be one floating value");
    count = loadAsDouble(step->dtype, step->data, 0);
  }
  checks::optimizerStep("sgd_step", param, grad, state, step ? &count : nullptr);
  checks::clipNorm("sgd_step", p.maxGradNorm, gradNorm);
  const double lr = step ? scheduledLr(p, count) : p.lr;
  if (param.dtype == plan::DType::F64)
    sgdStep<double>(p, param, grad, momentumBuffer, lr, gradNorm, threads);
  else
    sgdStep<float>(p, param, grad, momentumBuffer, lr, gradNorm, threads);
}

void adamwStepKernel(const AdamwParams &p, const KTensor &param, const KTensor &grad,
                     const KTensor &expAvg, const KTensor &expAvgSq, const KTensor &step,
                     const KTensor *gradNorm, int threads) {
  if (step.numel() != 1 || !isFloating(step.dtype))
    throw RuntimeError("adamw_step: the step count must be one floating value");
  const double count = loadAsDouble(step.dtype, step.data, 0);
  checks::optimizerStep("adamw_step", param, grad,
                        {{"exp_avg", &expAvg}, {"exp_avg_sq", &expAvgSq}}, &count);
  checks::clipNorm("adamw_step", p.maxGradNorm, gradNorm);
  if (param.dtype == plan::DType::F64)
    adamwStep<double>(p, param, grad, expAvg, expAvgSq, count, gradNorm, threads);
  else
    adamwStep<float>(p, param, grad, expAvg, expAvgSq, count, gradNorm, threads);
}

}  // namespace shardc::runtime
