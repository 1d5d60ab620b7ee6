// How HostMemory backs large blocks with pages: whether to ask for
// transparent huge pages, and whether to fault a fresh block in at once.
//
// Why: first-touching fresh memory dominated one rank's init at scale
// (docs/init-scale.md) and a quarter of the data-parallel forward. On a VM
// whose hypervisor takes freed guest memory back (virtio-balloon free page
// reporting: every free block of 2 MiB or more is handed to the host), a
// transparent huge page is always such a block, so each one costs the
// host's faults on top of the guest's: measured here (bench/first_touch.cpp)
// about 4.7 ms of sys time per 2 MiB page against 0.24-0.53 ms for a
// recycled one, and 4-5x the sys time of 4 KiB pages for the same fresh
// 4 GiB (5-6x when both are prefaulted). There huge pages are not advised. Faulting a fresh block in with one
// MADV_POPULATE_WRITE call instead of one trap per page saves 40% of the
// 4 KiB fault cost; the block is written in full right after anyway, so it
// changes no resident figure.
//
// Environment overrides (for measurement): SHARDC_HUGE_PAGES=0 or 1 forces
// the huge-page advice off or on; SHARDC_PREFAULT=0 turns prefaulting off.
#pragma once

#include <string>

namespace shardc::runtime {

struct PagePolicy {
  bool adviseHugePages = true;
  bool prefault = true;
  /// One line saying why (for reports and docs/init-scale.md).
  std::string reason;
};

/// The process's policy, decided once from the system and the environment.
const PagePolicy &systemPagePolicy();

/// True when a virtio balloon device with free page reporting
/// (VIRTIO_BALLOON_F_REPORTING, feature bit 5) is bound: the hypervisor
/// reclaims freed guest blocks of 2 MiB and more.
bool hypervisorReclaimsFreedPages();

}  // namespace shardc::runtime
