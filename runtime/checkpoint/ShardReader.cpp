#include "runtime/checkpoint/ShardReader.h"
#include "runtime/checkpoint/FileIo.h"

#include "runtime/HalfFloat.h"
#include "runtime/JoiningThreads.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <vector>
#include <unistd.h>

namespace shardc::runtime::checkpoint {
using plan::DType;

namespace {

bool isFloating(DType d) { return d != DType::I64; }

template <typename Load, typename Store>
void convertLoop(const std::byte *in, std::byte *out, int64_t count, size_t inSize,
                 size_t outSize, Load load, Store store) {
  for (int64_t i = 0; i < count; ++i) store(out + i * outSize, load(in + i * inSize));
}

template <typename T> T loadAs(const std::byte *p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T> void storeAs(std::byte *p, T v) { std::memcpy(p, &v, sizeof v); }

float load16(DType d, const std::byte *p) {
  uint16_t bits = loadAs<uint16_t>(p);
  return d == DType::F16 ? halfBitsToFloat(bits) : bfloat16BitsToFloat(bits);
}

}  // namespace

void convertElements(DType from, const std::byte *in, DType to, std::byte *out, int64_t count) {
  const size_t inSize = plan::dtypeSize(from), outSize = plan::dtypeSize(to);
  if (from == to) {
    std::memcpy(out, in, static_cast<size_t>(count) * inSize);
    return;
  }
  // Fast paths for the common conversions (tight typed loops).
  if (to == DType::F32 && (from == DType::BF16 || from == DType::F16)) {
    const auto *src = reinterpret_cast<const uint16_t *>(in);
    auto *dst = reinterpret_cast<float *>(out);
    if (from == DType::BF16)
      for (int64_t i = 0; i < count; ++i) dst[i] = bfloat16BitsToFloat(src[i]);
    else
      for (int64_t i = 0; i < count; ++i) dst[i] = halfBitsToFloat(src[i]);
    return;
  }
  if (from == DType::F32 && (to == DType::BF16 || to == DType::F16)) {
    const auto *src = reinterpret_cast<const float *>(in);
    auto *dst = reinterpret_cast<uint16_t *>(out);
    if (to == DType::BF16)
      for (int64_t i = 0; i < count; ++i) dst[i] = floatToBFloat16Bits(src[i]);
    else
      for (int64_t i = 0; i < count; ++i) dst[i] = floatToHalfBits(src[i]);
    return;
  }
  if (from == DType::F64 && to == DType::F32) {
    const auto *src = reinterpret_cast<const double *>(in);
    auto *dst = reinterpret_cast<float *>(out);
    for (int64_t i = 0; i < count; ++i) dst[i] = static_cast<float>(src[i]);
    return;
  }
  // Widen to double (exact for every source), then narrow once; 16-bit
  // targets from F64 go through float, as torch does.
  auto wide = [&](const std::byte *p) -> double {
    switch (from) {
    case DType::F32: return loadAs<float>(p);
    case DType::F64: return loadAs<double>(p);
    default: return load16(from, p);
    }
  };
  switch (to) {
  case DType::F32:
    if (from == DType::F64)
      convertLoop(in, out, count, inSize, outSize, loadAs<double>,
                  [](std::byte *p, double v) { storeAs<float>(p, static_cast<float>(v)); });
    else
      convertLoop(in, out, count, inSize, outSize,
                  [&](const std::byte *p) { return load16(from, p); },
                  [](std::byte *p, float v) { storeAs<float>(p, v); });
    return;
  case DType::F64:
    convertLoop(in, out, count, inSize, outSize, wide,
                [](std::byte *p, double v) { storeAs<double>(p, v); });
    return;
  case DType::F16:
    convertLoop(in, out, count, inSize, outSize, wide, [](std::byte *p, double v) {
      storeAs<uint16_t>(p, floatToHalfBits(static_cast<float>(v)));
    });
    return;
  case DType::BF16:
    convertLoop(in, out, count, inSize, outSize, wide, [](std::byte *p, double v) {
      storeAs<uint16_t>(p, floatToBFloat16Bits(static_cast<float>(v)));
    });
    return;
  case DType::I64:
    break;
  }
  throw CheckpointError(std::string("cannot convert ") + plan::dtypeName(from) + " to " +
                        plan::dtypeName(to));
}

namespace {

constexpr int64_t kCachePiece = int64_t(512) << 10;

/// One thread's part of readElements: elements [first, first + count) of
/// the tensor into `out`, through `buffer` when converting.
void readPart(const SafetensorsFile &file, const TensorEntry &entry, int64_t first,
              int64_t count, DType to, std::byte *out, std::byte *buffer,
              int64_t bufferBytes, const std::string &place) {
  const DType from = entry.dtype;
  const int64_t inSize = plan::dtypeSize(from), outSize = plan::dtypeSize(to);
  uint64_t offset = file.header().dataStart() + entry.begin + static_cast<uint64_t>(first * inSize);
  auto truncated = [&](uint64_t at) {
    return CheckpointError(place + "short read at byte " + std::to_string(at) +
                           ": the file is truncated (was it changed after it was opened?)");
  };
  if (from == to) {
    if (!preadFully(file.fd(), out, static_cast<size_t>(count * inSize), offset))
      throw truncated(offset);
    return;
  }
  // Pieces small enough to stay in cache between the pread that writes
  // them and the conversion that reads them: streaming 64 MiB through
  // memory twice was 3-4x slower than the conversion itself.
  const int64_t perChunk = std::min(bufferBytes, kCachePiece) / inSize;
  for (int64_t done = 0; done < count;) {
    const int64_t n = std::min(perChunk, count - done);
    if (!preadFully(file.fd(), buffer, static_cast<size_t>(n * inSize), offset))
      throw truncated(offset);
    convertElements(from, buffer, to, out + done * outSize, n);
    offset += static_cast<uint64_t>(n * inSize);
    done += n;
  }
}

/// Below this many bytes per thread a part is not worth a thread.
constexpr int64_t kMinBytesPerThread = int64_t(4) << 20;

}  // namespace

void readElements(const SafetensorsFile &file, const TensorEntry &entry, int64_t first,
                  int64_t count, DType to, std::byte *out, std::byte *buffer,
                  int64_t bufferBytes, int threads) {
  if (count == 0) return;  // a rank that owns only padding rows
  const std::string place = file.path() + ": tensor '" + entry.name + "': ";
  const DType from = entry.dtype;
  const int64_t inSize = plan::dtypeSize(from), outSize = plan::dtypeSize(to);
  const int64_t total = static_cast<int64_t>(entry.end - entry.begin) / inSize;
  if (first < 0 || count < 0 || first > total || count > total - first)
    throw CheckpointError(place + "elements [" + std::to_string(first) + ", " +
                          std::to_string(first + count) + ") are outside its " +
                          std::to_string(total) + " elements");
  if (from != to && (!isFloating(from) || !isFloating(to)))
    throw CheckpointError(place + "is " + plan::dtypeName(from) + " and cannot be converted to " +
                          plan::dtypeName(to));
  // Threads split the range; converting ones split the io buffer too, so
  // the memory used stays the one bounded buffer.
  int64_t parts = std::clamp<int64_t>(threads, 1, std::max<int64_t>(1, count * inSize /
                                                                          kMinBytesPerThread));
  if (from != to) parts = std::min(parts, std::max<int64_t>(1, bufferBytes / inSize));
  const int64_t partBuffer = bufferBytes / parts / inSize * inSize;
  if (from != to && partBuffer < inSize)
    throw CheckpointError(place + "the io buffer (" + std::to_string(bufferBytes) +
                          " bytes) holds no element of " + plan::dtypeName(from));
  std::vector<std::exception_ptr> failures(static_cast<size_t>(parts));
  auto runPart = [&](int64_t part) {
    const int64_t begin = count / parts * part + std::min(part, count % parts);
    const int64_t end = count / parts * (part + 1) + std::min(part + 1, count % parts);
    try {
      readPart(file, entry, first + begin, end - begin, to, out + begin * outSize,
               buffer + part * partBuffer, partBuffer, place);
    } catch (...) {
      failures[static_cast<size_t>(part)] = std::current_exception();
    }
  };
  JoiningThreads workers;
  int64_t part = 1;
  for (; part < parts; ++part)
    if (!workers.start([&runPart, part] { runPart(part); })) break;
  // Parts whose thread the OS refused are read here: slower, same bytes.
  for (int64_t rest = part; rest < parts; ++rest) runPart(rest);
  runPart(0);
  workers.joinAll();
  for (const std::exception_ptr &failure : failures)
    if (failure) std::rethrow_exception(failure);
}

int64_t ioBufferBytesFor(int64_t maxLocalElements, int64_t cap) {
  int64_t need = maxLocalElements > (INT64_MAX / 8) ? INT64_MAX : maxLocalElements * 8;
  return std::max<int64_t>(8, std::min(need, cap) / 8 * 8);
}

}  // namespace shardc::runtime::checkpoint
