#include "runtime/init/PreparedGenerator.h"

#include "runtime/RuntimeError.h"
#include "runtime/init/InitMath.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace shardc::runtime::init {
namespace {

[[noreturn]] void reject(const GeneratorSpec &spec, const std::string &why) {
  throw RuntimeError(std::string("init generator '") + generatorKindName(spec.kind) +
                     "' (stream 0x" + [&] {
                       char hex[9];
                       std::snprintf(hex, sizeof hex, "%08x", spec.streamHash);
                       return std::string(hex);
                     }() + ", position " + std::to_string(spec.position) + "): " + why);
}

void requireFinite(const GeneratorSpec &spec, const char *name, double value) {
  if (!std::isfinite(value)) reject(spec, std::string(name) + " must be finite, got " + std::to_string(value));
}

/// The largest value of T strictly below `high` (high > some finite low).
template <typename T> T largestBelow(T high) { return std::nextafter(high, -std::numeric_limits<T>::infinity()); }

template <typename T> UniformConstants<T> uniformConstants(double low, double high) {
  T lowT = static_cast<T>(low), highT = static_cast<T>(high);
  T span = highT - lowT;
  // span == 0: the degenerate uniform(a, a) is a (torch allows it).
  return {lowT, span, span > 0 ? largestBelow(highT) : lowT};
}

template <typename T>
TruncNormalConstants<T> truncConstants(double mean, double std, double a, double b) {
  // erf(alpha / sqrt 2) = 2 Phi(alpha) - 1, with our own erf so the constants
  // do not depend on the host's libm.
  double lowT = math::erfD((a - mean) / std / std::sqrt(2.0));
  double highT = math::erfD((b - mean) / std / std::sqrt(2.0));
  return {static_cast<T>(lowT), static_cast<T>(highT - lowT), static_cast<T>(std::sqrt(2.0) * std),
          static_cast<T>(mean), static_cast<T>(a), static_cast<T>(b)};
}

}  // namespace

const char *generatorKindName(GeneratorKind kind) {
  switch (kind) {
  case GeneratorKind::Fill: return "fill";
  case GeneratorKind::Uniform: return "uniform";
  case GeneratorKind::Normal: return "normal";
  case GeneratorKind::TruncNormal: return "trunc_normal";
  case GeneratorKind::Eye: return "eye";
  case GeneratorKind::Arange: return "arange";
  }
  return "unknown";
}

void validateGeneratorSpec(const GeneratorSpec &spec) { (void)prepareGenerator(spec); }

PreparedGenerator prepareGenerator(const GeneratorSpec &spec) {
  PreparedGenerator g;
  g.kind = spec.kind;
  g.stream = {static_cast<uint32_t>(spec.seed), static_cast<uint32_t>(spec.seed >> 32),
              spec.streamHash, spec.position};
  g.elements = 1;
  for (int64_t d : spec.shape) {
    if (d < 0) reject(spec, "negative dimension " + std::to_string(d) + " in shape");
    if (d != 0 && g.elements > std::numeric_limits<int64_t>::max() / d)
      reject(spec, "shape has more than 2^63 elements");
    g.elements *= d;
  }
  switch (spec.kind) {
  case GeneratorKind::Fill:
    if (std::isnan(spec.value)) reject(spec, "fill value is NaN");  // inf is a legal fill
    g.fillValue = spec.value;
    break;
  case GeneratorKind::Uniform:
    requireFinite(spec, "low", spec.low);
    requireFinite(spec, "high", spec.high);
    if (!(spec.low <= spec.high))
      reject(spec, "needs low <= high, got [" + std::to_string(spec.low) + ", " + std::to_string(spec.high) + ")");
    g.uniformF = uniformConstants<float>(spec.low, spec.high);
    g.uniformD = uniformConstants<double>(spec.low, spec.high);
    break;
  case GeneratorKind::Normal:
    requireFinite(spec, "mean", spec.mean);
    requireFinite(spec, "std", spec.std);
    if (spec.std < 0) reject(spec, "std must be >= 0, got " + std::to_string(spec.std));
    g.normalF = {static_cast<float>(spec.mean), static_cast<float>(spec.std)};
    g.normalD = {spec.mean, spec.std};
    break;
  case GeneratorKind::TruncNormal:
    requireFinite(spec, "mean", spec.mean);
    requireFinite(spec, "std", spec.std);
    requireFinite(spec, "a (low)", spec.low);
    requireFinite(spec, "b (high)", spec.high);
    if (!(spec.std > 0)) reject(spec, "std must be > 0, got " + std::to_string(spec.std));
    if (!(spec.low < spec.high))
      reject(spec, "needs a < b, got a = " + std::to_string(spec.low) + ", b = " + std::to_string(spec.high));
    g.truncF = truncConstants<float>(spec.mean, spec.std, spec.low, spec.high);
    g.truncD = truncConstants<double>(spec.mean, spec.std, spec.low, spec.high);
    break;
  case GeneratorKind::Eye:
    if (spec.shape.size() != 2)
      reject(spec, "needs a 2-D shape, got " + std::to_string(spec.shape.size()) + " dimensions");
    g.eyeColumns = spec.shape[1];
    break;
  case GeneratorKind::Arange:
    requireFinite(spec, "start", spec.start);
    requireFinite(spec, "step", spec.step);
    g.start = spec.start;
    g.step = spec.step;
    break;
  default:
    reject(spec, "unknown generator kind " + std::to_string(static_cast<int>(spec.kind)));
  }
  return g;
}

}  // namespace shardc::runtime::init
