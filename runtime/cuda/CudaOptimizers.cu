// reduce_scatter, sgd_step and adamw_step on a CUDA device (grad_norm has
// no kernel here yet: UnsupportedOps.h)
// (runtime/Optimizers.h). reduce_scatter: one scatter_rows per root and window (the
// communicator moves device memory: NCCL, or peer copies between ranks on
// one GPU), each root's rows added into a double sum by one thread per
// element in rank order, then divided and rounded once: the CPU's bits for
// float32 and 16-bit gradients (float64 sums in double where the CPU uses
// long double: equal gradients may differ from their mean in the last bit).
// The optimizer steps: one
// thread per element, the CPU kernels' formulas (torch.optim's single-tensor
// updates) operation by operation in the same math type (float for float32
// and 16-bit storage, double for float64), each torch op's result rounded to
// the storage dtype, with round-to-nearest intrinsics so nvcc contracts
// nothing into a fused multiply-add the CPU does not do: bit-identical to
// the CPU for float32 and float64 where sqrtf / division round correctly
// (CUDA's defaults). Compiled here, not yet run on a GPU (docs/gpu.md).
#include "runtime/cuda/CudaFamilies.h"

#include "runtime/ForwardChecks.h"
#include "runtime/cuda/CudaCheck.h"
#include "runtime/cuda/DeviceStorage.cuh"

#include <algorithm>
#include <cmath>

namespace shardc::runtime::cuda {

namespace {

using namespace dev;

__device__ inline float addRn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double addRn(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float mulRn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mulRn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float divRn(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double divRn(double a, double b) { return __ddiv_rn(a, b); }
__device__ inline float sqrtRn(float a) { return __fsqrt_rn(a); }
__device__ inline double sqrtRn(double a) { return __dsqrt_rn(a); }

/// v rounded to the storage type S and back (the CPU's Block::round).
template <typename St>
__device__ typename St::C rounded(typename St::C v) {
  return St::load(St::store(v));
}

/// The clip coefficient of a step (runtime/Optimizers.h clipCoefficient);
/// `clips` false: the gradient is read as it is.
template <typename C>
struct Clip {
  bool clips;
  C coefficient;
};

/// The gradient scaled as torch's grads.mul_(clip_coef_clamped).
template <typename St>
__device__ typename St::C clipped(typename St::C g, Clip<typename St::C> clip) {
  return clip.clips ? rounded<St>(mulRn(g, clip.coefficient)) : g;
}

template <typename St>
__global__ void sgdKernel(typename St::S *param, const typename St::S *grad,
                          typename St::S *buffer, typename St::C weightDecay,
                          typename St::C momentum, typename St::C minusLr, bool decays,
                          bool nesterov, Clip<typename St::C> clip, int64_t count) {
  using C = typename St::C;
  SHARDC_GRID_LOOP(i, count) {
    C g = clipped<St>(St::load(grad[i]), clip);
    const C w = St::load(param[i]);
    if (decays) g = rounded<St>(addRn(g, mulRn(weightDecay, w)));
    if (buffer) {
      C b = rounded<St>(mulRn(St::load(buffer[i]), momentum));
      b = rounded<St>(addRn(b, g));
      buffer[i] = St::store(b);
      g = nesterov ? rounded<St>(addRn(g, mulRn(momentum, b))) : b;
    }
    param[i] = St::store(addRn(w, mulRn(minusLr, g)));
  }
}

/// adamwStepScalars in the kernel's math type.
template <typename C>
struct AdamwScalars {
  C decay, averageWeight, beta2, squareWeight, minusStepSize, biasCorrection2Sqrt, eps;
  bool lerpFromStart;
};

template <typename St>
__global__ void adamwKernel(typename St::S *param, const typename St::S *grad,
                            typename St::S *expAvg, typename St::S *expAvgSq,
                            AdamwScalars<typename St::C> k, Clip<typename St::C> clip,
                            int64_t count) {
  using C = typename St::C;
  SHARDC_GRID_LOOP(i, count) {
    const C g = clipped<St>(St::load(grad[i]), clip);
    const C w = rounded<St>(mulRn(St::load(param[i]), k.decay));
    C m = St::load(expAvg[i]);
    m = rounded<St>(k.lerpFromStart
                        ? addRn(m, mulRn(k.averageWeight, addRn(g, -m)))
                        : addRn(g, -mulRn(addRn(g, -m), addRn(C(1), -k.averageWeight))));
    C v = rounded<St>(mulRn(St::load(expAvgSq[i]), k.beta2));
    v = rounded<St>(addRn(v, mulRn(mulRn(k.squareWeight, g), g)));
    expAvg[i] = St::store(m);
    expAvgSq[i] = St::store(v);
    C denom = rounded<St>(sqrtRn(v));
    denom = rounded<St>(divRn(denom, k.biasCorrection2Sqrt));
    denom = rounded<St>(addRn(denom, k.eps));
    param[i] = St::store(addRn(w, divRn(mulRn(k.minusStepSize, m), denom)));
  }
}

template <typename St>
__global__ void accumulateKernel(double *sum, const typename St::S *received, int64_t count) {
  SHARDC_GRID_LOOP(i, count) sum[i] = __dadd_rn(sum[i], double(St::load(received[i])));
}

template <typename St>
__global__ void meanKernel(typename St::S *shard, const double *sum, double ranks, int64_t valid,
                           int64_t count) {
  using C = typename St::C;
  SHARDC_GRID_LOOP(i, count) shard[i] = St::store(i < valid ? C(__ddiv_rn(sum[i], ranks)) : C(0));
}

/// y[i] = the ranks' x[i] summed in rank order in double, rounded once.
template <typename St>
__global__ void sumRanksKernel(typename St::S *y, const typename St::S *gathered, int64_t ranks,
                               int64_t count) {
  using C = typename St::C;
  SHARDC_GRID_LOOP(i, count) {
    double sum = 0;
    for (int64_t r = 0; r < ranks; ++r) sum = __dadd_rn(sum, double(St::load(gathered[r * count + i])));
    y[i] = St::store(C(sum));
  }
}

/// The step's clip: the norm read on the host, the coefficient computed
/// there in the kernel's math type C, as the CPU kernel does.
template <typename C>
Clip<C> clipOf(CudaDevice &device, double maxGradNorm, const KTensor *gradNorm) {
  if (!gradNorm) return {false, C(1)};
  double norm = 0;
  copyToHost(device, &norm, gradNorm->data, sizeof norm);
  return {true, clipCoefficient<C>(maxGradNorm, norm)};
}

/// An optimizer's 0-d step count, copied to the host (one wait).
double hostStepCount(CudaDevice &device, const char *op, const KTensor &step) {
  if (step.numel() != 1 || (step.dtype != plan::DType::F32 && step.dtype != plan::DType::F64))
    checks::fail(op, "the step count must be one float32 or float64 value");
  if (step.dtype == plan::DType::F64) {
    double count = 0;
    copyToHost(device, &count, step.data, sizeof count);
    return count;
  }
  float value = 0;
  copyToHost(device, &value, step.data, sizeof value);
  return value;
}

}  // namespace

void reduceScatter(CudaDevice &device, Communicator &comm, const KTensor &full,
                   const KTensor &shard, std::byte *work, bool mean) {
  if (!widensExactly(full.dtype, shard.dtype))
    checks::fail("reduce_scatter", std::string("the gradient is ") + plan::dtypeName(full.dtype) +
                                       " but its shard " + plan::dtypeName(shard.dtype) +
                                       " (a shard holds its gradient's dtype or a float dtype "
                                       "that holds every value of it)");
  // The CPU's workspace layout (one window of sums, then one root's window
  // as received, in the gradient's dtype); a float64 sum has 16 bytes
  // there, 8 used here.
  const ReduceScatterLayout layout = reduceScatterLayout(comm.rank(), full, shard);
  const int64_t elementBytes = plan::dtypeSize(full.dtype);
  double *sum = reinterpret_cast<double *>(work);
  std::byte *received = work + layout.receivedOffset;
  device.makeCurrent();
  // Every rank runs every window (padding too): the scatters are collectives.
  for (int64_t start = 0; start < layout.elements; start += layout.window) {
    const int64_t count = std::min(layout.window, layout.elements - start);
    const int64_t valid = std::clamp<int64_t>(layout.valid - start, 0, count);
    checkCuda(cudaMemsetAsync(sum, 0, static_cast<size_t>(count) * 8, device.stream()),
              "reduce_scatter: zeroing the sums");
    for (int64_t root = 0; root < comm.worldSize(); ++root) {
      // The previous root's rows are added before the next overwrite them.
      device.synchronize("reduce_scatter");
      comm.scatterRows(root, full.data, layout.fullBytes, layout.partBytes,
                       static_cast<size_t>(start * elementBytes),
                       static_cast<size_t>(count * elementBytes), received);
      if (valid == 0) continue;
      dispatchFloat("reduce_scatter", full.dtype, true, [&](auto st) {  // the gradient's dtype
        using St = decltype(st);
        accumulateKernel<St><<<gridFor(valid), kThreads, 0, device.stream()>>>(
            sum, reinterpret_cast<const typename St::S *>(received), valid);
        checkLaunch("reduce_scatter accumulate kernel launch");
      });
    }
    dispatchFloat("reduce_scatter", shard.dtype, true, [&](auto st) {  // the shard's dtype
      using St = decltype(st);
      meanKernel<St><<<gridFor(count), kThreads, 0, device.stream()>>>(
          static_cast<typename St::S *>(shard.data) + start, sum,
          mean ? double(comm.worldSize()) : 1.0, valid, count);
      checkLaunch("reduce_scatter mean kernel launch");
    });
  }
}

void allReduceSum(CudaDevice &device, Communicator &comm, const KTensor &x, const KTensor &y,
                  std::byte *work) {
  if (x.dtype != y.dtype || x.numel() != y.numel())
    checks::fail("all_reduce_sum", std::string("x is ") + plan::dtypeName(x.dtype) + " of " +
                                       std::to_string(x.numel()) + " elements, y " +
                                       plan::dtypeName(y.dtype) + " of " +
                                       std::to_string(y.numel()));
  const int64_t count = x.numel();
  device.makeCurrent();  // beforeCollective synchronized x's writes
  comm.allGather(x.data, static_cast<size_t>(count) * plan::dtypeSize(x.dtype), work);
  if (count == 0) return;
  dispatchFloat("all_reduce_sum", x.dtype, true, [&](auto st) {
    using St = decltype(st);
    using S = typename St::S;
    sumRanksKernel<St><<<gridFor(count), kThreads, 0, device.stream()>>>(
        static_cast<S *>(y.data), reinterpret_cast<const S *>(work), comm.worldSize(), count);
    checkLaunch("all_reduce_sum kernel launch");
  });
}

void sgdStep(CudaDevice &device, const SgdParams &p, const KTensor &param, const KTensor &grad,
             const KTensor *momentumBuffer, const KTensor *step, const KTensor *gradNorm) {
  std::vector<std::pair<const char *, const KTensor *>> state;
  if (momentumBuffer) state.push_back({"the momentum buffer", momentumBuffer});
  // A schedule's learning rate comes from the step count, read on the host.
  double stepCount = 0;
  if (step) stepCount = hostStepCount(device, "sgd_step", *step);
  checks::optimizerStep("sgd_step", param, grad, state, step ? &stepCount : nullptr);
  checks::clipNorm("sgd_step", p.maxGradNorm, gradNorm);
  const double lr = step ? scheduledLr(p, stepCount) : p.lr;
  const int64_t count = param.numel();
  if (count == 0) return;
  device.makeCurrent();
  dispatchFloat("sgd_step", param.dtype, true, [&](auto st) {
    using St = decltype(st);
    using S = typename St::S;
    using C = typename St::C;
    sgdKernel<St><<<gridFor(count), kThreads, 0, device.stream()>>>(
        static_cast<S *>(param.data), static_cast<const S *>(grad.data),
        momentumBuffer ? static_cast<S *>(momentumBuffer->data) : nullptr, C(p.weightDecay),
        C(p.momentum), C(-lr), p.weightDecay != 0, p.nesterov,
        clipOf<C>(device, p.maxGradNorm, gradNorm),
        count);
  });
  checkLaunch("sgd_step kernel launch");
}

void adamwStep(CudaDevice &device, const AdamwParams &p, const KTensor &param,
               const KTensor &grad, const KTensor &expAvg, const KTensor &expAvgSq,
               const KTensor &step, const KTensor *gradNorm) {
  checks::clipNorm("adamw_step", p.maxGradNorm, gradNorm);
  // The bias corrections are the host's (torch computes them in Python).
  const double count = hostStepCount(device, "adamw_step", step);
  checks::optimizerStep("adamw_step", param, grad,
                        {{"exp_avg", &expAvg}, {"exp_avg_sq", &expAvgSq}}, &count);
  const int64_t elements = param.numel();
  if (elements == 0) return;
  device.makeCurrent();
  dispatchFloat("adamw_step", param.dtype, true, [&](auto st) {
    using St = decltype(st);
    using S = typename St::S;
    using C = typename St::C;
    const AdamwStepScalars host = adamwStepScalars(p, count);
    AdamwScalars<C> k;
    k.decay = C(host.decay);
    k.averageWeight = C(host.averageWeight);
    k.beta2 = C(host.beta2);
    k.squareWeight = C(host.squareWeight);
    k.minusStepSize = C(host.minusStepSize);
    k.biasCorrection2Sqrt = C(host.biasCorrection2Sqrt);
    k.eps = C(host.eps);
    k.lerpFromStart = k.averageWeight < C(0.5);
    adamwKernel<St><<<gridFor(elements), kThreads, 0, device.stream()>>>(
        static_cast<S *>(param.data), static_cast<const S *>(grad.data),
        static_cast<S *>(expAvg.data), static_cast<S *>(expAvgSq.data), k,
        clipOf<C>(device, p.maxGradNorm, gradNorm), elements);
  });
  checkLaunch("adamw_step kernel launch");
}

}  // namespace shardc::runtime::cuda
