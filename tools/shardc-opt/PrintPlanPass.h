//===- PrintPlanPass.h - -tc-print-plan -------------------------*- C++ -*-===//
#pragma once

namespace shardc {
/// Registers -tc-print-plan with shardc-opt's pass registry.
void registerPrintPlanPass();
} // namespace shardc
