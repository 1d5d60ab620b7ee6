#include "runtime/PagePolicy.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace shardc::runtime {
namespace {

// Bit numbers of the virtio balloon's feature bits (virtio spec 5.5.3).
constexpr size_t kBalloonFreePageReporting = 5;

/// nullptr when unset or empty.
const char *envValue(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

PagePolicy decide() {
  PagePolicy policy;
  if (hypervisorReclaimsFreedPages()) {
    policy.adviseHugePages = false;
    policy.reason = "4 KiB pages: the hypervisor reclaims freed memory (free page reporting)";
  } else {
    policy.reason = "huge pages advised for large blocks";
  }
  if (const char *huge = envValue("SHARDC_HUGE_PAGES")) {
    policy.adviseHugePages = std::strcmp(huge, "0") != 0;
    policy.reason = policy.adviseHugePages ? "huge pages advised (SHARDC_HUGE_PAGES)"
                                           : "4 KiB pages (SHARDC_HUGE_PAGES=0)";
  }
  if (const char *prefault = envValue("SHARDC_PREFAULT"))
    policy.prefault = std::strcmp(prefault, "0") != 0;
  policy.reason += policy.prefault ? "; fresh blocks prefaulted" : "; no prefault";
  return policy;
}

}  // namespace

bool hypervisorReclaimsFreedPages() {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path driver = "/sys/bus/virtio/drivers/virtio_balloon";
  for (fs::directory_iterator it(driver, error), end; !error && it != end; it.increment(error)) {
    if (it->path().filename().string().rfind("virtio", 0) != 0) continue;
    // "features" is one '0' or '1' per feature bit, bit 0 first.
    std::ifstream in(it->path() / "features");
    std::string bits;
    if (in >> bits && bits.size() > kBalloonFreePageReporting &&
        bits[kBalloonFreePageReporting] == '1')
      return true;
  }
  return false;
}

const PagePolicy &systemPagePolicy() {
  static const PagePolicy policy = decide();
  return policy;
}

}  // namespace shardc::runtime
