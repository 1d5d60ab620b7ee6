// The CPU backend: host memory (CpuDevice) and the CPU kernels
// (runtime/Kernels.h, ForwardKernels.h, init/). Supports every op in the
// table. Kernels may use `threads` worker threads (the rank's share of the
// cores); results do not depend on the count.
#pragma once

#include "runtime/Backend.h"

namespace shardc::runtime {

class CpuBackend : public Backend {
public:
  CpuBackend(CpuDevice &device, int threads) : Backend(device), threads_(threads) {}

  const char *name() const override { return "cpu"; }
  int hostThreads() const override { return threads_; }

  SHARDC_BACKEND_KERNELS(, override)
  void orthogonal(const init::GeneratorSpec &normal, double gain, plan::DType dtype, int64_t rows,
                  int64_t cols, void *out, void *work) override;
  void normOf(const init::NormOfSource &source, const std::vector<int64_t> &dims, int64_t begin,
              int64_t count, plan::DType dtype, void *out, void *work) override;
  void load(const checkpoint::TensorLocation &where, const Region &target, std::byte *io,
            int64_t ioBytes) override;

  void crossEntropy(const KTensor &logits, const KTensor &targets, int64_t ignoreIndex,
                    const KTensor &loss) override;

  // The op families: runtime/cpu/FamilyKernels.h.
  void conv(const ConvParams &p, const KTensor &x, const KTensor &w, const KTensor *b,
            const KTensor &y) override;
  void pool(const PoolParams &p, const KTensor &x, const KTensor &y) override;
  void adaptivePool(PoolKind kind, const KTensor &x, const KTensor &y) override;
  void batchNorm(const KTensor &x, const KTensor &mean, const KTensor &var, const KTensor *w,
                 const KTensor *b, double eps, const KTensor &y) override;
  void groupNorm(const KTensor &x, int64_t groups, const KTensor *w, const KTensor *b, double eps,
                 const KTensor &y) override;
  void reduce(ReduceKind kind, const KTensor &x, const std::vector<int64_t> &dims,
              int64_t correction, const KTensor &y) override;
  void unary(UnaryOp op, double a, double b, const KTensor &x, const KTensor &y) override;
  void index(IndexKind kind, const IndexParams &p, const KTensor &x, const KTensor *index,
             const KTensor &y) override;
  void moeExperts(const MoeParams &p, const KTensor &x, const KTensor &index,
                  const KTensor &weights, const KTensor &gateUp, const KTensor &down,
                  const KTensor &y, std::byte *workspace) override;

private:
  int threads_;
};

}  // namespace shardc::runtime
