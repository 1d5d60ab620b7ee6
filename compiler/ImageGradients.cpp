//===- ImageGradients.cpp - convolution, pooling and image norm rules -----===//
#include "compiler/GradientRuleSets.h"

namespace shardc::compiler::gradients {

RuleTable imageRules() { return {}; }

} // namespace shardc::compiler::gradients
