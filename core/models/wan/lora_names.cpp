// Resolves a LoRA term's module to the Wan DiT parameter it adds to (formats_lora_moe.md §4.3
// step 3, §4.4). Dotted modules are tried as official names, then through the diffusers map of
// dit_keys.cpp; underscored ones through a table built once from the model's parameters.
#include "core/models/wan/lora_names.h"

#include <algorithm>
#include <string_view>

#include "core/models/wan/dit_keys.h"

namespace ferry::models::wan {
namespace {

using lora::KeyStyle;
using lora::TermKind;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "blocks.0.self_attn.q.weight" → "blocks.0.self_attn.q"; a parameter that is a module of its
// own ("blocks.0.modulation") stays whole.
std::string_view module_of(std::string_view param) {
  for (std::string_view suffix : {std::string_view(".weight"), std::string_view(".bias")}) {
    if (ends_with(param, suffix)) return param.substr(0, param.size() - suffix.size());
  }
  return param;
}

std::string underscored(std::string_view module) {
  std::string key(module);
  std::replace(key.begin(), key.end(), '.', '_');
  return key;
}

}  // namespace

WanLoraNames::WanLoraNames(std::span<const std::string> official_params) {
  params_.reserve(official_params.size());
  underscored_.reserve(official_params.size() * 2);
  for (const std::string& param : official_params) {
    params_.insert(param);
    const std::string_view module = module_of(param);
    underscored_.try_emplace(underscored(module), module);
  }
  // kohya spellings of diffusers names (`lora_transformer_blocks_0_attn1_to_q`); an official
  // spelling of the same text wins, as it was inserted first.
  for (const std::string& param : official_params) {
    const std::string diffusers = diffusers_dit_name(param);
    if (diffusers != param) {
      underscored_.try_emplace(underscored(module_of(diffusers)), module_of(param));
    }
  }
}

std::optional<std::string> WanLoraNames::target(const lora::Term& term) const {
  std::string module = term.module;
  if (term.style == KeyStyle::kUnderscored) {
    // LightX2V's diff_m names the block; its parameter is the block's modulation.
    const auto it =
        underscored_.find(term.kind == TermKind::kModulationDiff ? module + "_modulation" : module);
    if (it == underscored_.end()) return std::nullopt;
    module = it->second;
    if (term.kind == TermKind::kModulationDiff) {
      return params_.contains(module) ? std::optional<std::string>(module) : std::nullopt;
    }
  }
  // The parameter as an official name, else as a diffusers one.
  const auto resolve = [&](const std::string& name) -> std::optional<std::string> {
    if (params_.contains(name)) return name;
    std::string official = official_dit_name(name);
    if (official != name && params_.contains(official)) return official;
    return std::nullopt;
  };
  switch (term.kind) {
    case TermKind::kLowRank:
      return resolve(module + ".weight");
    case TermKind::kWeightDiff:
      // A module that is a parameter itself (`blocks.N.modulation`, as ComfyUI keys it).
      if (std::optional<std::string> weight = resolve(module + ".weight")) return weight;
      return resolve(module);
    case TermKind::kBiasDiff:
      return resolve(module + ".bias");
    case TermKind::kModulationDiff:
      return resolve(module + ".modulation");
  }
  return std::nullopt;
}

}  // namespace ferry::models::wan
