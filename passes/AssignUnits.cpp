//===- AssignUnits.cpp - the tc-assign-units pass -------------------------===//
//
// FSDP gathers parameters unit by unit; the unit is the granularity of both
// the collective and the memory that is live at once. The default follows
// PyTorch FSDP practice: one unit per block of each layer list.
//
// A block that holds more than a quarter of the model is split into the
// blocks of its own nested list (Swin's and ConvNeXt's stages).
//
//===----------------------------------------------------------------------===//
#include "passes/Passes.h"
#include "passes/TensorBytes.h"

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
/// empty) and N starting after `from`: returns {P, "P.N"}. From 0 it is the
/// outermost list on the path; from the end of a block, the first list
/// nested in that block.
std::optional<std::pair<StringRef, StringRef>>
numberedBlock(StringRef name, size_t from = 0) {
  size_t start = from;
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

/// A unit holding more than 1/kSplitShare of the model's parameter bytes is
/// split. Each rank's forward peak is about its shard (total / N) plus the
/// largest gathered unit; a unit over a quarter of the model outweighs the
/// whole shard from N = 4 on, and FSDP's saving is gone. torchvision's
/// swin_t has half its parameters in its last stage, convnext_tiny too.
constexpr uint64_t kSplitShare = 4;

uint64_t paramBytes(ParamOp param) {
  return static_cast<uint64_t>(tensorBytes(param.getTensorType()));
}

/// Splits every default unit that holds more than 1/kSplitShare of the
/// parameters into the blocks of the lists nested in it, again and again,
/// until none is left to split. A nested list is a prefix with at least two
/// blocks of which one holds a module of its own (`features.7.0.attn.qkv`):
/// a list of single layers (a block's `mlp.0`, `mlp.3`) is the inside of
/// one block and stays whole, as FSDP wraps blocks, not their linears.
/// Parameters of the unit outside those lists stay in it. Buffers are never
/// gathered, so they do not count. `splittable[i]` is false for a parameter
/// whose unit was given, which is never changed.
void splitLargeUnits(ArrayRef<ParamOp> params, ArrayRef<bool> splittable,
                     MutableArrayRef<StringRef> units) {
  uint64_t total = 0;
  for (ParamOp param : params)
    if (!param.getIsBuffer())
      total += paramBytes(param);
  bool changed = true;
  while (changed) {
    changed = false;
    llvm::MapVector<StringRef, uint64_t> unitBytes;
    // Index loops: ParamOp's accessors are not const.
    for (size_t i = 0; i < params.size(); ++i) {
      ParamOp param = params[i];
      if (splittable[i] && units[i] != kRootUnit && !param.getIsBuffer())
        unitBytes[units[i]] += paramBytes(param);
    }
    for (auto &[unit, bytes] : unitBytes) {
      if (bytes * kSplitShare <= total)
        continue;
      // The lists nested in `unit`: prefix -> its blocks, and whether one
      // of them holds a module of its own.
      struct NestedList {
        llvm::StringSet<> blocks;
        bool holdsModules = false;
      };
      llvm::MapVector<StringRef, NestedList> nested;
      SmallVector<std::pair<size_t, std::pair<StringRef, StringRef>>> moves;
      for (size_t i = 0; i < params.size(); ++i) {
        if (!splittable[i] || units[i] != unit)
          continue;
        StringRef name = ParamOp(params[i]).getSymName();
        auto block = numberedBlock(name, unit.size());
        if (!block)
          continue;
        NestedList &list = nested[block->first];
        list.blocks.insert(block->second);
        list.holdsModules |=
            name.drop_front(block->second.size() + 1).contains('.');
        moves.push_back({i, *block});
      }
      for (auto &[i, block] : moves) {
        const NestedList &list = nested.find(block.first)->second;
        if (list.blocks.size() >= 2 && list.holdsModules) {
          units[i] = block.second;
          changed = true;
        }
      }
    }
  }
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
    SmallVector<StringRef> units(params.size(), kRootUnit);
    SmallVector<bool> splittable(params.size(), true);
    for (auto [i, param] : llvm::enumerate(params)) {
      if (param.getUnit()) {
        splittable[i] = false;
        continue;
      }
      if (auto block = numberedBlock(param.getSymName());
          block && lists.contains(block->first))
        units[i] = block->second;
    }
    splitLargeUnits(params, splittable, units);
    for (auto [i, param] : llvm::enumerate(params))
      if (splittable[i])
        param.setUnitAttr(builder.getStringAttr(units[i]));
  }
};

} // namespace
