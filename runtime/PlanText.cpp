#include "runtime/PlanText.h"

#include "runtime/Kernels.h"

#include <cstdio>
#include <sstream>

namespace shardc::runtime {
using namespace shardc::plan;

namespace {

std::string ids(const std::vector<int32_t> &list) {
  std::string out;
  for (int32_t id : list) out += (out.empty() ? "%" : ", %") + std::to_string(id);
  return out;
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", value);
  return text;
}

std::string attrText(const AttrValue &value) {
  if (const int64_t *i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const double *d = std::get_if<double>(&value)) return number(*d);
  if (const std::string *s = std::get_if<std::string>(&value)) return "\"" + *s + "\"";
  return shapeToString(std::get<std::vector<int64_t>>(value));
}

void printBuffer(std::ostringstream &out, const Plan &plan, const Buffer &b) {
  out << "  %" << b.id << " = ";
  if (b.param) {
    out << "param @" << plan.params[*b.param].name;
  } else if (b.aliasOf) {
    out << "alias \"" << b.name << "\"";
  } else {
    out << "buffer \"" << b.name << "\"";
  }
  out << " " << dtypeName(b.dtype) << " " << shapeToString(b.shape);
  if (b.aliasOf)
    out << " of %" << *b.aliasOf << " + " << b.byteOffset;
  else
    out << " " << b.bytes << " bytes " << categoryName(b.category);
  out << "\n";
}

void printInstruction(std::ostringstream &out, const Instruction &inst) {
  out << "  " << opName(inst.op);
  if (!inst.inputs.empty()) out << " " << ids(inst.inputs);
  if (!inst.outputs.empty()) out << (inst.inputs.empty() ? " " : " -> ") << ids(inst.outputs);
  std::string attrs;
  for (const auto &[key, value] : inst.attrs)
    attrs += (attrs.empty() ? "" : ", ") + key + " = " + attrText(value);
  if (!attrs.empty()) out << " {" << attrs << "}";
  out << "\n";
}

}  // namespace

std::string planToText(const Plan &plan) {
  std::ostringstream out;
  out << "plan world_size=" << plan.worldSize << "\n";
  for (const Param &p : plan.params) {
    out << "param @" << p.name << " " << dtypeName(p.dtype) << " " << shapeToString(p.shape);
    if (p.sharded()) out << " chunk_rows=" << p.chunkRows;
    if (p.isBuffer) out << " buffer";
    out << " unit=\"" << p.unit << "\"\n";
  }
  for (const Function &f : plan.functions) {
    out << "function @" << f.name << "(" << ids(f.inputs) << ") -> (" << ids(f.outputs) << ")\n";
    for (const Buffer &b : f.buffers) printBuffer(out, plan, b);
    for (const Instruction &inst : f.body) printInstruction(out, inst);
  }
  return out.str();
}

}  // namespace shardc::runtime
