// im2col (runtime/cpu/Im2col.h): per row, the output columns whose window
// lies inside the input are copied (a strided read for stride > 1), the rest
// set to zero, so no element is tested one by one.
#include "runtime/cpu/Im2col.h"

#include "runtime/cpu/KernelSupport.h"

#include <algorithm>

namespace shardc::runtime::cpu {
using plan::DType;

namespace {

/// [lo, hi): the output columns ow whose input column ow*s - pad + off lies in [0, W).
void validRange(int64_t OW, int64_t W, int64_t s, int64_t pad, int64_t off, int64_t &lo,
                int64_t &hi) {
  const int64_t shift = off - pad;  // iw = ow * s + shift
  lo = shift >= 0 ? 0 : (-shift + s - 1) / s;
  hi = W - shift <= 0 ? 0 : (W - shift + s - 1) / s;
  lo = std::min(lo, OW);
  hi = std::clamp(hi, lo, OW);
}

float loadOne(DType dtype, const void *base, int64_t i) {
  float v = 0;
  loadFloats(dtype, base, i, 1, &v);
  return v;
}

}  // namespace

void im2col(const ConvGeometry &g, DType dtype, const void *x, int64_t plane0, int64_t p0,
            int64_t P, int64_t r0, int64_t r1, float *col, int64_t ld) {
  const int64_t taps = g.taps(), HW = g.H * g.W;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t ci = r / taps, kz = (r / (g.kh * g.kw)) % g.kd;
    const int64_t ki = (r / g.kw) % g.kh, kj = r % g.kw;
    int64_t lo, hi;
    validRange(g.OW, g.W, g.sw, g.pw, kj * g.dw, lo, hi);
    const int64_t shift = kj * g.dw - g.pw;
    float *dst = col + (r - r0) * ld;
    for (int64_t p = p0; p < p0 + P;) {
      const int64_t row = p / g.OW, ow0 = p % g.OW, ow1 = std::min(g.OW, ow0 + (p0 + P - p));
      const int64_t oh = row % g.OH, od = row / g.OH;
      float *out = dst + (p - p0);
      const int64_t id = od * g.sd - g.pd + kz * g.dd;
      const int64_t ih = oh * g.sh - g.ph + ki * g.dh;
      if (id < 0 || id >= g.D || ih < 0 || ih >= g.H) {
        std::fill(out, out + (ow1 - ow0), 0.0f);
      } else {
        const int64_t line = plane0 + ci * g.inPlane() + id * HW + ih * g.W;
        const int64_t a = std::clamp(lo, ow0, ow1), b = std::clamp(hi, a, ow1);
        std::fill(out, out + (a - ow0), 0.0f);
        if (g.sw == 1) {
          loadFloats(dtype, x, line + a + shift, b - a, out + (a - ow0));
        } else if (dtype == DType::F32) {
          const float *src = static_cast<const float *>(x) + line + shift;
          for (int64_t ow = a; ow < b; ++ow) out[ow - ow0] = src[ow * g.sw];
        } else {
          for (int64_t ow = a; ow < b; ++ow)
            out[ow - ow0] = loadOne(dtype, x, line + ow * g.sw + shift);
        }
        std::fill(out + (b - ow0), out + (ow1 - ow0), 0.0f);
      }
      p += ow1 - ow0;
    }
  }
}

}  // namespace shardc::runtime::cpu
