// LoRAs bound to a model's layout for runtime (bypass) application (formats_lora_moe.md §4.6):
// every term of every file matched, through the family's name resolution, to the tensor it
// adapts; its shapes checked against that tensor; and its tensors appended to that tensor's layer
// group, so that they stream with their layer (from disk, through the pinned cache, into VRAM)
// and the planner counts their bytes like any weight. The model's own tensors are never touched:
// a family's forward reads the terms and adds them (Backend::linear_add, add_scaled).
//
//   LoraBinding loras = LoraBinding::bind(request.loras, layout, resolve, official_name);
//   ... the streamer on `layout`; the model told loras.terms() ...
//
// The binding owns the opened LoRA files: it must outlive the layout's streamer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/models/family.h"
#include "core/models/lora/lora_file.h"
#include "core/models/request.h"
#include "core/offload/layer_group.h"

namespace ferry::models::lora {

// One term applied to one tensor of the model.
struct BoundTerm {
  TermKind kind = TermKind::kLowRank;
  std::size_t group = 0;   // in ModelLayout::groups
  std::size_t target = 0;  // the adapted tensor: its index in that group's weights
  // The term's tensors, appended to the same group: kLowRank down [r, in] (a Conv's flattened)
  // and up [out, r]; a diff's delta is `up` (down unused).
  std::size_t down = 0, up = 0;
  std::int64_t rank = 0;  // kLowRank; 0 for the diffs
  float scale = 1.0f;     // strength · alpha/rank (kLowRank); strength (the diffs)
  std::size_t lora = 0;   // which of the request's LoRAs
  // Family-defined: how up's rows map onto the target's outputs (0: one to one). H3's fused QKV
  // and SwiGLU Linears are adapted by terms whose rows are laid out otherwise (h3/lora_names.h).
  int rows = 0;
};

// The family's part: the official name of the model tensor a term adapts (nullopt: none), and
// the official name of a model tensor as its file spells it.
using ResolveTerm = std::function<std::optional<std::string>(const Term&)>;
using OfficialName = std::function<std::string(std::string_view)>;

// The richer form of ResolveTerm for families whose LoRAs may lay a Linear's output rows out
// otherwise than the model does (a fused QKV LoRA on separate q, k, v Linears): the tensor, the
// rows the term's up must have (0: the tensor's own), the family's tag for the mapping
// (BoundTerm::rows), and a factor on the term's scale (MiniMax-H3 reads a file's `__metadata__`
// alpha as every module's: alpha / rank). It is told the term's file.
struct TermTarget {
  std::string name;
  std::int64_t up_rows = 0;
  int rows = 0;
  float scale = 1.0f;
};
using ResolveTarget = std::function<std::optional<TermTarget>(const LoraFile&, const Term&)>;

class LoraBinding {
 public:
  LoraBinding() = default;

  // Binds `loras` in order. Error(kBadModelFile) naming the file: as open_lora says; a term whose
  // shapes do not fit its tensor ("a LoRA for another model"), naming the term and both shapes; a
  // rank above the adapted layer's width; a diff on a tensor that is not a float tensor; or a
  // file none of whose terms adapts a tensor of the model; the layout is then as it was. Terms
  // that adapt nothing are skipped and reported (LoraReport::unmatched), never applied.
  static LoraBinding bind(std::span<const LoraChoice> loras, offload::ModelLayout& layout,
                          const ResolveTerm& resolve, const OfficialName& official_name);
  // The same with targets whose up rows the family decides (TermTarget).
  static LoraBinding bind(std::span<const LoraChoice> loras, offload::ModelLayout& layout,
                          const ResolveTarget& resolve, const OfficialName& official_name);

  std::span<const BoundTerm> terms() const { return terms_; }
  // One per LoRA, in the request's order.
  const std::vector<LoraReport>& reports() const { return reports_; }
  bool empty() const { return terms_.empty(); }

 private:
  static LoraBinding bind_all(std::span<const LoraChoice> loras, offload::ModelLayout& layout,
                              const ResolveTarget& resolve, const OfficialName& official_name);

  std::vector<std::unique_ptr<LoraFile>> files_;  // the layout's WeightRefs point into these
  std::vector<BoundTerm> terms_;
  std::vector<LoraReport> reports_;
};

// One line for users: "style.safetensors: 312 of 312 layers" (+ "; 12 adapt nothing in this
// model, e.g. blocks.0.cross_attn.k_img" when some do not match).
std::string describe(const LoraReport& report);

}  // namespace ferry::models::lora
