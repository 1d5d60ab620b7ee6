//===- AssignUnits.cpp - the tc-assign-units pass -------------------------===//
//
// FSDP gathers parameters unit by unit; the unit is the granularity of both
// the collective and the memory that is live at once. The default follows
// PyTorch FSDP practice: one unit per block of each layer list.
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Regex.h"

namespace mlir::tc {
#define GEN_PASS_DEF_TCASSIGNUNITS
#include "passes/Passes.h.inc"
} // namespace mlir::tc

using namespace mlir;
using namespace mlir::tc;

namespace {

constexpr llvm::StringLiteral kRootUnit = "root";

/// Whether a module name numbers a block of a list: all digits ("3", as
/// nn.Sequential and nn.ModuleList name their items), or a name ending in
/// digits ("encoder_layer_3", "denselayer12", "block2-0": torchvision's
/// ViT, DenseNet and RegNet name their blocks so).
bool isNumbered(StringRef segment) {
  return !segment.empty() && llvm::isDigit(segment.back());
}

/// The first "P.N." in `name` with N a numbered segment (isNumbered; P not
/// empty): returns {P, "P.N"}. The first is the outermost list on the path.
std::optional<std::pair<StringRef, StringRef>> numberedBlock(StringRef name) {
  size_t start = 0;
  while (true) {
    size_t dot = name.find('.', start);
    if (dot == StringRef::npos)
      return std::nullopt;
    size_t end = name.find('.', dot + 1);
    if (end == StringRef::npos)
      return std::nullopt;
    if (isNumbered(name.slice(dot + 1, end)))
      return std::make_pair(name.take_front(dot), name.take_front(end));
    start = dot + 1;
  }
}

/// The layer lists: every prefix with at least two numbered blocks, and the
/// one with the most (first seen wins) even if it has one. A model may have
/// several (an encoder's and a decoder's layers, ResNet's four stages,
/// VGG's features and classifier); each of their blocks is a unit.
llvm::StringSet<> layerLists(ArrayRef<ParamOp> params) {
  llvm::MapVector<StringRef, llvm::StringSet<>> blocks;
  for (ParamOp param : params)
    if (auto block = numberedBlock(param.getSymName()))
      blocks[block->first].insert(block->second);
  llvm::StringSet<> lists;
  std::optional<StringRef> most;
  size_t mostCount = 0;
  for (auto &[prefix, children] : blocks) {
    if (children.size() >= 2)
      lists.insert(prefix);
    if (children.size() > mostCount) {
      most = prefix;
      mostCount = children.size();
    }
  }
  if (most)
    lists.insert(*most);
  return lists;
}

struct TcAssignUnitsPass
    : public tc::impl::TcAssignUnitsBase<TcAssignUnitsPass> {
  using TcAssignUnitsBase::TcAssignUnitsBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(verifyProgram(module)))
      return signalPassFailure();
    SmallVector<ParamOp> params(module.getOps<ParamOp>());
    Builder builder(&getContext());
    if (!patterns.empty()) {
      SmallVector<std::pair<std::string, llvm::Regex>> regexes;
      for (const std::string &pattern : patterns) {
        llvm::Regex regex("^(" + pattern + ")");
        std::string error;
        if (!regex.isValid(error)) {
          emitError(module.getLoc())
              << "unit pattern '" << pattern << "' is not a valid regex: "
              << error;
          return signalPassFailure();
        }
        regexes.emplace_back(pattern, std::move(regex));
      }
      SmallVector<bool> used(regexes.size(), false);
      for (ParamOp param : params) {
        StringRef unit = kRootUnit;
        std::string matched;
        for (auto [i, entry] : llvm::enumerate(regexes)) {
          SmallVector<StringRef> groups;
          if (entry.second.match(param.getSymName(), &groups)) {
            matched = groups[0].str();
            unit = matched;
            used[i] = true;
            break;
          }
        }
        param.setUnitAttr(builder.getStringAttr(unit));
      }
      for (auto [i, entry] : llvm::enumerate(regexes))
        if (!used[i]) {
          emitError(module.getLoc())
              << "unit pattern '" << entry.first
              << "' matches no parameter name";
          return signalPassFailure();
        }
      return;
    }
    llvm::StringSet<> lists = layerLists(params);
    for (ParamOp param : params) {
      if (param.getUnit())
        continue;
      StringRef unit = kRootUnit;
      if (auto block = numberedBlock(param.getSymName());
          block && lists.contains(block->first))
        unit = block->second;
      param.setUnitAttr(builder.getStringAttr(unit));
    }
  }
};

} // namespace
