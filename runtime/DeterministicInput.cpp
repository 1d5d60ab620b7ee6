#include "runtime/DeterministicInput.h"

#include "runtime/HalfFloat.h"
#include "runtime/Philox.h"
#include "runtime/PlanCheck.h"
#include "runtime/RuntimeError.h"

namespace shardc::runtime {
using plan::DType;

HostTensor makeDeterministicInput(const std::string &name, DType dtype,
                                  const std::vector<int64_t> &shape, uint64_t seed,
                                  std::optional<int64_t> intUpperBound) {
  if (checkedLogicalBytes(shape, dtype) < 0)
    throw RuntimeError("makeDeterministicInput('" + name + "'): invalid shape");
  if (intUpperBound && dtype != DType::I64)
    throw RuntimeError("makeDeterministicInput('" + name + "'): an integer bound is given but "
                       "the input is " + plan::dtypeName(dtype));
  const int64_t bound = intUpperBound.value_or(kDefaultIntInputBound);
  if (bound < 1)
    throw RuntimeError("makeDeterministicInput('" + name + "'): integer bound " +
                       std::to_string(bound) + " must be >= 1");
  HostTensor t{name, dtype, shape, {}};
  t.data.resize(static_cast<size_t>(t.expectedBytes()));
  const uint32_t nameHash = philox::fnv1a32(name.data(), name.size());
  const philox::Key key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}};
  const int64_t n = t.numElements();
  for (int64_t i = 0; i < n; ++i) {
    uint64_t index = static_cast<uint64_t>(i);
    philox::Counter counter{
        {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), nameHash, 0}};
    const philox::Counter words = philox::philox4x32_10(counter, key);
    if (dtype == DType::I64) {
      const uint64_t r = words.v[0] | (static_cast<uint64_t>(words.v[1]) << 32);
      const unsigned __int128 product =
          static_cast<unsigned __int128>(r) * static_cast<uint64_t>(bound);
      t.as<int64_t>()[i] = static_cast<int64_t>(product >> 64);
      continue;
    }
    float value = philox::uniformMinusOneToOne(words.v[0]);
    switch (dtype) {
    case DType::F32: t.as<float>()[i] = value; break;
    case DType::F64: t.as<double>()[i] = value; break;
    case DType::F16: t.as<uint16_t>()[i] = floatToHalfBits(value); break;
    case DType::BF16: t.as<uint16_t>()[i] = floatToBFloat16Bits(value); break;
    case DType::I64: break;
    }
  }
  return t;
}

}  // namespace shardc::runtime
