// shardc embedded JIT API (docs/jit.md): everything in one include.
#pragma once

#include "shardc/jit.h"
#include "shardc/module.h"
#include "shardc/nn.h"
#include "shardc/tensor.h"
