#include "runtime/DeterministicInput.h"

#include "runtime/HalfFloat.h"
#include "runtime/Philox.h"
#include "runtime/PlanCheck.h"
#include "runtime/RuntimeError.h"

namespace shardc::runtime {
using plan::DType;

HostTensor makeDeterministicInput(const std::string &name, DType dtype,
                                  const std::vector<int64_t> &shape, uint64_t seed) {
  if (checkedLogicalBytes(shape, dtype) < 0)
    throw RuntimeError("makeDeterministicInput('" + name + "'): invalid shape");
  HostTensor t{name, dtype, shape, {}};
  t.data.resize(static_cast<size_t>(t.expectedBytes()));
  const uint32_t nameHash = philox::fnv1a32(name.data(), name.size());
  const philox::Key key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  const int64_t n = t.numElements();
  for (int64_t i = 0; i < n; ++i) {
    uint64_t index = static_cast<uint64_t>(i);
    philox::Counter counter{
        {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), nameHash, 0}};
    float value = philox::uniformMinusOneToOne(philox::philox4x32_10(counter, key).v[0]);
    switch (dtype) {
    case DType::F32: t.as<float>()[i] = value; break;
    case DType::F64: t.as<double>()[i] = value; break;
    case DType::F16: t.as<uint16_t>()[i] = floatToHalfBits(value); break;
    case DType::BF16: t.as<uint16_t>()[i] = floatToBFloat16Bits(value); break;
    }
  }
  return t;
}

}  // namespace shardc::runtime
