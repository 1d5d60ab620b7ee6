// Force-included (-include) into every file of the ASan build
// (scripts/sanitize.sh).
//
// Why: LLVM's BumpPtrAllocator (llvm/Support/Allocator.h) poisons each new
// slab and unpoisons each allocation when the code that inlines it is built
// with ASan. Debian's libMLIR.so is not. MLIR's attribute and type uniquer
// shares one allocator between both: when an inline allocation in our
// instrumented code starts a slab, the whole slab is poisoned, and the
// attributes libMLIR.so then places in it (ArrayAttr, IntegerAttr) are never
// unpoisoned, so reading them reports a use-after-poison that is not a bug
// of ours (whether it happens depends on which side starts a slab: CI saw it,
// 2-core runs here mostly did not). Making the annotations no-ops in our code
// matches what the library does; real heap errors are still caught by ASan's
// malloc/new interception, which does not depend on these annotations.
#pragma once
#include <sanitizer/asan_interface.h>
#undef ASAN_POISON_MEMORY_REGION
#undef ASAN_UNPOISON_MEMORY_REGION
#define __asan_poison_memory_region(addr, size) ((void)(addr), (void)(size))
#define __asan_unpoison_memory_region(addr, size) ((void)(addr), (void)(size))
