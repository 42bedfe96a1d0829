#include "core/models/lora/lora_binding.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/shape_text.h"
#include "core/models/lora/distill_name.h"

namespace ferry::models::lora {
namespace {

struct Place {
  std::size_t group = 0, index = 0;
};

// Every model tensor of the layout by its official name.
std::unordered_map<std::string, Place> places_by_official_name(const offload::ModelLayout& layout,
                                                               const OfficialName& official_name) {
  std::unordered_map<std::string, Place> places;
  for (std::size_t g = 0; g < layout.groups.size(); ++g) {
    const auto& weights = layout.groups[g].weights;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      places.emplace(official_name(weights[i].tensor->name), Place{g, i});
    }
  }
  return places;
}

// A Linear's weight as a matrix [out, in] (a Conv's kernel flattened into in).
std::pair<std::int64_t, std::int64_t> matrix_of(const io::TensorInfo& weight) {
  if (weight.shape.empty()) return {1, 1};
  const auto out = static_cast<std::int64_t>(weight.shape[0]);
  const auto all = static_cast<std::int64_t>(weight.element_count());
  return {out, out == 0 ? 0 : all / out};
}

std::int64_t count(const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

// Error(kBadModelFile) unless `term`'s tensors fit `target` (whose up has `up_rows` rows when
// not 0).
void check_fits(const LoraFile& lora, const Term& term, const io::TensorInfo& target,
                std::int64_t up_rows) {
  const std::string where = io::detail::display(lora.path.filename()) + ": " + term.module;
  const auto up = up_shape(lora, term);
  const std::string target_text =
      io::quote_tensor_name(target.name) + " " + io::shape_text(target.shape);
  if (term.kind != TermKind::kLowRank) {
    if (count(up) != static_cast<std::int64_t>(target.element_count())) {
      throw Error(ErrorCode::kBadModelFile,
                  "the LoRA does not fit this model (a LoRA for another model?): " + where +
                      " adds " + io::shape_text(up) + " to " + target_text);
    }
    return;
  }
  const auto down = down_shape(lora, term);
  const auto [target_out, in] = matrix_of(target);
  const std::int64_t out = up_rows != 0 ? up_rows : target_out;
  if (target.shape.size() < 2 || down.size() != 2 || up.size() != 2 || down[1] != in ||
      up[0] != out || up[1] != down[0]) {
    throw Error(ErrorCode::kBadModelFile,
                "the LoRA does not fit this model (a LoRA for another model?): " + where +
                    " is up " + io::shape_text(up) + " · down " + io::shape_text(down) +
                    ", the layer " + target_text);
  }
  if (down[0] > std::max(in, out)) {
    throw Error(ErrorCode::kBadModelFile, where + ": rank " + std::to_string(down[0]) +
                                              " exceeds the layer's width " + target_text);
  }
}

}  // namespace

LoraBinding LoraBinding::bind(std::span<const LoraChoice> loras, offload::ModelLayout& layout,
                              const ResolveTerm& resolve, const OfficialName& official_name) {
  return bind(
      loras, layout,
      [&](const LoraFile&, const Term& term) -> std::optional<TermTarget> {
        std::optional<std::string> name = resolve(term);
        if (!name) return std::nullopt;
        return TermTarget{std::move(*name), 0, 0, 1.0f};
      },
      official_name);
}

LoraBinding LoraBinding::bind(std::span<const LoraChoice> loras, offload::ModelLayout& layout,
                              const ResolveTarget& resolve, const OfficialName& official_name) {
  // A refusal leaves the layout as it was: no WeightRef may outlive the file it points into.
  std::vector<std::size_t> sizes;
  for (const offload::LayerGroup& g : layout.groups) sizes.push_back(g.weights.size());
  try {
    return bind_all(loras, layout, resolve, official_name);
  } catch (...) {
    for (std::size_t g = 0; g < sizes.size(); ++g) layout.groups[g].weights.resize(sizes[g]);
    throw;
  }
}

LoraBinding LoraBinding::bind_all(std::span<const LoraChoice> loras, offload::ModelLayout& layout,
                                  const ResolveTarget& resolve, const OfficialName& official_name) {
  LoraBinding b;
  const auto places = places_by_official_name(layout, official_name);
  for (std::size_t l = 0; l < loras.size(); ++l) {
    auto lora = std::make_unique<LoraFile>(open_lora(loras[l].path));
    const float strength = loras[l].strength;
    LoraReport report;
    report.path = loras[l].path;
    report.bytes = lora->file->file_size();
    report.modules = lora->terms.size();
    report.distilled_steps = distilled_steps(loras[l].path);
    for (const Term& term : lora->terms) {
      const std::optional<TermTarget> target = resolve(*lora, term);
      const auto place = target ? places.find(target->name) : places.end();
      if (place == places.end()) {
        if (report.unmatched.size() < 3) report.unmatched.push_back(term.module);
        continue;
      }
      offload::LayerGroup& group = layout.groups[place->second.group];
      check_fits(*lora, term, *group.weights[place->second.index].tensor, target->up_rows);
      BoundTerm bound;
      bound.kind = term.kind;
      bound.rows = target->rows;
      bound.group = place->second.group;
      bound.target = place->second.index;
      bound.lora = l;
      const auto append = [&](const std::string& tensor) {
        const io::TensorInfo& info = lora->file->at(tensor);
        group.weights.push_back(offload::WeightRef{lora->file.get(), &info});
        report.adapter_bytes += info.bytes;
        return group.weights.size() - 1;
      };
      if (term.kind == TermKind::kLowRank) {
        bound.down = append(term.down);
        bound.rank = term.rank;
        bound.scale = strength * term.alpha_scale * target->scale;
      } else {
        bound.scale = strength * target->scale;
      }
      bound.up = append(term.up);
      b.terms_.push_back(bound);
      ++report.matched;
    }
    if (report.matched == 0) {
      throw Error(ErrorCode::kBadModelFile,
                  io::detail::display(report.path.filename()) +
                      ": no layer of this model matches the LoRA's " +
                      std::to_string(report.modules) + " modules (e.g. " +
                      (report.unmatched.empty() ? std::string("none") : report.unmatched[0]) +
                      "): a LoRA for another model?");
    }
    b.reports_.push_back(std::move(report));
    b.files_.push_back(std::move(lora));
  }
  return b;
}

std::string describe(const LoraReport& r) {
  std::string s = io::detail::display(r.path.filename()) + ": " + std::to_string(r.matched) +
                  " of " + std::to_string(r.modules) + " layers";
  const std::size_t unmatched = r.modules - r.matched;
  if (unmatched > 0) {
    s += "; " + std::to_string(unmatched) + " adapt nothing in this model";
    if (!r.unmatched.empty()) s += ", e.g. " + r.unmatched[0];
  }
  return s;
}

}  // namespace ferry::models::lora
