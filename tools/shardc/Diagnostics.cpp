//===- Diagnostics.cpp - print MLIR diagnostics for people ----------------===//
#include "tools/shardc/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace shardc::cli {
namespace {

/// "FILE: JSON.PATH" for locations the graph importer made.
std::string describe(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc)) {
    std::string path = name.getName().str();
    if (auto file = dyn_cast<FileLineColLoc>(name.getChildLoc()))
      return file.getFilename().str() + ": " + path;
    return path;
  }
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    if (file.getLine() == 0)
      return file.getFilename().str();
    return file.getFilename().str() + ":" + std::to_string(file.getLine()) +
           ":" + std::to_string(file.getColumn());
  }
  std::string text;
  llvm::raw_string_ostream out(text);
  loc.print(out);
  return text;
}

const char *severity(DiagnosticSeverity level) {
  switch (level) {
  case DiagnosticSeverity::Error:
    return "error";
  case DiagnosticSeverity::Warning:
    return "warning";
  case DiagnosticSeverity::Note:
    return "note";
  case DiagnosticSeverity::Remark:
    return "remark";
  }
  return "error";
}

} // namespace

CliDiagnosticHandler::CliDiagnosticHandler(MLIRContext *context)
    : ScopedDiagnosticHandler(context) {
  // Printing the offending op in generic form helps compiler developers,
  // not the people running shardc on their model.
  context->printOpOnDiagnostic(false);
  setHandler([](Diagnostic &diag) {
    llvm::errs() << "shardc: " << severity(diag.getSeverity()) << ": "
                 << describe(diag.getLocation()) << ": " << diag.str() << "\n";
    for (Diagnostic &note : diag.getNotes())
      llvm::errs() << "  note: " << describe(note.getLocation()) << ": "
                   << note.str() << "\n";
    return success();
  });
}

} // namespace shardc::cli
