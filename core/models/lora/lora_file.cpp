// Reads a LoRA file's header into Terms (formats_lora_moe.md §4.1–4.3): each key loses one
// prefix (longest first), is split into module + suffix by the table below, and the keys of one
// module are grouped into a Term per kind. One pass over the keys with a hash map: a header of a
// million keys costs a million lookups. The only tensor bytes read are the alphas and scales.
#include "core/models/lora/lora_file.h"

#include <array>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "core/error.h"
#include "core/io/detail/os_file.h"
#include "core/io/shape_text.h"
#include "core/tensor/convert.h"

namespace ferry::models::lora {
namespace {

using io::TensorInfo;

// §4.3 step 1, longest first where one is a prefix of another. The underscored ones mean the
// module's dots became underscores.
struct Prefix {
  std::string_view text;
  KeyStyle style;
};
constexpr std::array<Prefix, 9> kPrefixes = {{
    {"model.diffusion_model.", KeyStyle::kDotted},
    {"diffusion_model.", KeyStyle::kDotted},
    {"base_model.model.", KeyStyle::kDotted},
    {"transformer.", KeyStyle::kDotted},
    {"unet.", KeyStyle::kDotted},
    {"lora_unet__", KeyStyle::kUnderscored},
    {"lora_unet_", KeyStyle::kUnderscored},
    {"lycoris_", KeyStyle::kUnderscored},
    {"lora_transformer_", KeyStyle::kUnderscored},
}};

// What a suffix makes of its key.
enum class Role { kDown, kUp, kAlpha, kScale, kDiff, kDiffBias, kDiffModulation };

struct Suffix {
  std::string_view text;
  Role role;
};
// §4.3 step 2 and the spellings of the §4.2 table. No entry is a suffix of another, so the
// order does not matter.
constexpr std::array<Suffix, 20> kSuffixes = {{
    {".lora_down.weight", Role::kDown},
    {".lora_up.weight", Role::kUp},
    {".lora_A.weight", Role::kDown},
    {".lora_B.weight", Role::kUp},
    {".lora_A.default.weight", Role::kDown},
    {".lora_B.default.weight", Role::kUp},
    {".lora_A.default", Role::kDown},
    {".lora_B.default", Role::kUp},
    {".lora_A", Role::kDown},
    {".lora_B", Role::kUp},
    {"_lora.down.weight", Role::kDown},
    {"_lora.up.weight", Role::kUp},
    {".lora.down.weight", Role::kDown},
    {".lora.up.weight", Role::kUp},
    {".lora_linear_layer.down.weight", Role::kDown},
    {".lora_linear_layer.up.weight", Role::kUp},
    {".alpha", Role::kAlpha},
    {".scale", Role::kScale},
    {".diff", Role::kDiff},
    {".diff_b", Role::kDiffBias},
}};
constexpr std::string_view kBiasUp = ".lora_B.bias";  // a bias delta, as .diff_b
constexpr std::string_view kModulationDiff = ".diff_m";

// Adapter kinds Ferry does not apply, recognised by a part of the key.
struct Refused {
  std::string_view part;
  std::string_view what;
};
constexpr std::array<Refused, 4> kRefused = {{
    {".hada_", "a LoHa (LyCORIS hada_*) adapter"},
    {".lokr_", "a LoKr (LyCORIS lokr_*) adapter"},
    {".dora_scale", "a DoRA adapter (dora_scale), which needs the merged weight's norms"},
    {".lora_mid", "a LoRA with a middle (Tucker) factor, lora_mid"},
}};

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

struct ParsedKey {
  std::string_view module;
  KeyStyle style = KeyStyle::kDotted;
  Role role = Role::kDown;
};

std::optional<ParsedKey> parse_key(std::string_view key) {
  ParsedKey parsed;
  std::string_view rest = key;
  for (const Prefix& p : kPrefixes) {
    if (rest.substr(0, p.text.size()) == p.text) {
      rest.remove_prefix(p.text.size());
      parsed.style = p.style;
      break;
    }
  }
  std::optional<std::pair<std::string_view, Role>> match;
  if (ends_with(rest, kBiasUp)) {
    match.emplace(kBiasUp, Role::kDiffBias);
  } else if (ends_with(rest, kModulationDiff)) {
    match.emplace(kModulationDiff, Role::kDiffModulation);
  } else {
    for (const Suffix& s : kSuffixes) {
      if (ends_with(rest, s.text)) {
        match.emplace(s.text, s.role);
        break;
      }
    }
  }
  if (!match || rest.size() == match->first.size()) return std::nullopt;
  parsed.module = rest.substr(0, rest.size() - match->first.size());
  parsed.role = match->second;
  return parsed;
}

// The keys of one Term while the header is read.
struct Group {
  std::string module;
  KeyStyle style = KeyStyle::kDotted;
  TermKind kind = TermKind::kLowRank;
  const TensorInfo* down = nullptr;
  const TensorInfo* up = nullptr;  // the delta for the diffs
  const TensorInfo* alpha = nullptr;
  const TensorInfo* scale = nullptr;
};

TermKind kind_of(Role role) {
  switch (role) {
    case Role::kDiff:
      return TermKind::kWeightDiff;
    case Role::kDiffBias:
      return TermKind::kBiasDiff;
    case Role::kDiffModulation:
      return TermKind::kModulationDiff;
    default:
      return TermKind::kLowRank;
  }
}

bool is_float(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 || dtype == DType::kBF16;
}

std::uint64_t trailing_product(const std::vector<std::uint64_t>& shape) {
  std::uint64_t n = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) n *= shape[i];  // ≤ the tensor's byte size
  return n;
}

class Reader {
 public:
  Reader(const std::filesystem::path& path, const io::TensorFile& file)
      : source_(io::detail::display(path)), file_(file) {}

  void read(LoraFile& out);

 private:
  [[noreturn]] void fail(std::string_view key, std::string_view problem) const {
    throw Error(ErrorCode::kBadModelFile,
                "LoRA " + source_ + ": " + io::quote_tensor_name(key) + " " + std::string(problem));
  }
  void add(const TensorInfo& t, const ParsedKey& parsed);
  Term low_rank_term(const Group& g) const;
  void check_float(const TensorInfo& t) const;
  float one_value(const TensorInfo& t, std::string_view what) const;
  void read_peft_metadata();
  std::optional<float> peft_alpha(std::string_view module) const;

  std::string source_;
  const io::TensorFile& file_;
  std::vector<Group> groups_;  // in the order of their first key
  // "<style><kind><module>" → index into groups_.
  std::unordered_map<std::string, std::size_t> index_;
  // diffusers/PEFT `lora_adapter_metadata` (§4.1): alpha when the file has no `.alpha` keys.
  std::optional<float> peft_alpha_;
  bool peft_rslora_ = false;
  std::unordered_map<std::string, float> peft_alpha_pattern_;
};

void Reader::read(LoraFile& out) {
  read_peft_metadata();
  const std::vector<TensorInfo>& tensors = file_.tensors();
  index_.reserve(tensors.size());
  for (const TensorInfo& t : tensors) {
    for (const Refused& r : kRefused) {
      if (t.name.find(r.part) != std::string::npos) {
        fail(t.name, "belongs to " + std::string(r.what) +
                         ", which Ferry does not apply: use a plain LoRA (lora_down/lora_up or "
                         "lora_A/lora_B)");
      }
    }
    if (const std::optional<ParsedKey> parsed = parse_key(t.name)) {
      add(t, *parsed);
    } else {
      out.ignored.push_back(t.name);
    }
  }
  for (const Group& g : groups_) {
    if (g.kind != TermKind::kLowRank) {
      check_float(*g.up);
      out.terms.push_back(Term{g.module, g.style, g.kind, "", g.up->name, 0, 1.0f});
    } else if (g.down == nullptr && g.up == nullptr) {
      // An alpha or scale with nothing to scale: not applied, so reported.
      if (g.alpha != nullptr) out.ignored.push_back(g.alpha->name);
      if (g.scale != nullptr) out.ignored.push_back(g.scale->name);
    } else {
      out.terms.push_back(low_rank_term(g));
    }
  }
  if (out.terms.empty()) {
    std::string message = "LoRA " + source_ + " holds no LoRA tensor (";
    message += tensors.empty() ? "no tensors at all"
                               : "none of its " + std::to_string(tensors.size()) + " keys, e.g. " +
                                     io::quote_tensor_name(tensors.front().name) +
                                     ", ends in lora_down/lora_up, lora_A/lora_B or .diff";
    throw Error(ErrorCode::kBadModelFile, message + ")");
  }
}

void Reader::add(const TensorInfo& t, const ParsedKey& parsed) {
  const TermKind kind = kind_of(parsed.role);
  std::string id;
  id.reserve(parsed.module.size() + 2);
  id += static_cast<char>('0' + static_cast<int>(parsed.style));
  id += static_cast<char>('0' + static_cast<int>(kind));
  id += parsed.module;
  const auto [it, inserted] = index_.try_emplace(std::move(id), groups_.size());
  if (inserted) groups_.push_back(Group{std::string(parsed.module), parsed.style, kind});
  Group& g = groups_[it->second];
  const TensorInfo** slot = &g.up;
  std::string_view role = "delta";
  switch (parsed.role) {
    case Role::kDown:
      slot = &g.down;
      role = "down (A)";
      break;
    case Role::kUp:
      role = "up (B)";
      break;
    case Role::kAlpha:
      slot = &g.alpha;
      role = "alpha";
      break;
    case Role::kScale:
      slot = &g.scale;
      role = "scale";
      break;
    default:
      break;
  }
  if (*slot != nullptr) {
    fail(t.name, "and " + io::quote_tensor_name((*slot)->name) + " are both the " +
                     std::string(role) + " of module " + io::quote_tensor_name(g.module));
  }
  *slot = &t;
}

Term Reader::low_rank_term(const Group& g) const {
  if (g.up == nullptr) fail(g.down->name, "is a LoRA down (A) without its up (B)");
  if (g.down == nullptr) fail(g.up->name, "is a LoRA up (B) without its down (A)");
  const TensorInfo& down = *g.down;
  const TensorInfo& up = *g.up;
  check_float(down);
  check_float(up);
  // A Conv down is [r, in, k...] and its up [out, r, 1...]: both apply as matrices.
  if (down.shape.size() < 2)
    fail(down.name, "is not a matrix: shape " + io::shape_text(down.shape));
  bool up_is_matrix = up.shape.size() >= 2;
  for (std::size_t i = 2; i < up.shape.size(); ++i) up_is_matrix = up_is_matrix && up.shape[i] == 1;
  if (!up_is_matrix) fail(up.name, "is not a matrix: shape " + io::shape_text(up.shape));
  if (down.element_count() == 0) fail(down.name, "is empty: shape " + io::shape_text(down.shape));
  if (up.element_count() == 0) fail(up.name, "is empty: shape " + io::shape_text(up.shape));
  const std::uint64_t rank = down.shape[0];
  if (up.shape[1] != rank) {
    fail(up.name, "has rank " + std::to_string(up.shape[1]) + " (shape " +
                      io::shape_text(up.shape) + ") but its down " +
                      io::quote_tensor_name(down.name) + " has rank " + std::to_string(rank) +
                      " (shape " + io::shape_text(down.shape) + ")");
  }
  Term term{g.module,  g.style, TermKind::kLowRank,
            down.name, up.name, static_cast<std::int64_t>(rank),
            1.0f};
  if (g.alpha != nullptr) {
    term.alpha_scale = one_value(*g.alpha, "alpha") / static_cast<float>(rank);
  } else if (const std::optional<float> alpha = peft_alpha(g.module)) {
    const float r = static_cast<float>(rank);
    term.alpha_scale = *alpha / (peft_rslora_ ? std::sqrt(r) : r);
  }
  if (g.scale != nullptr) term.alpha_scale = one_value(*g.scale, "scale");
  return term;
}

void Reader::check_float(const TensorInfo& t) const {
  if (!is_float(t.dtype)) {
    fail(t.name, "is " + std::string(dtype_name(t.dtype)) + ": LoRA tensors are F32, F16 or BF16");
  }
}

float Reader::one_value(const TensorInfo& t, std::string_view what) const {
  const auto refuse = [&] {
    fail(t.name, "is not one finite value, as a LoRA " + std::string(what) + " is (it is " +
                     std::string(dtype_name(t.dtype)) + " " + io::shape_text(t.shape) + ")");
  };
  if (t.element_count() != 1) refuse();
  std::array<std::byte, 8> raw{};
  const std::size_t size = t.dtype == DType::kF64 || t.dtype == DType::kI64    ? 8
                           : t.dtype == DType::kF32 || t.dtype == DType::kI32  ? 4
                           : t.dtype == DType::kF16 || t.dtype == DType::kBF16 ? 2
                                                                               : 0;
  if (size == 0 || t.bytes != size) refuse();
  {
    const io::MappedView view = file_.map(t);
    view.copy_to(0, std::span(raw).first(size));
  }
  double value = 0;
  if (t.dtype == DType::kF64) {
    std::memcpy(&value, raw.data(), 8);
  } else if (t.dtype == DType::kI64) {
    std::int64_t i = 0;
    std::memcpy(&i, raw.data(), 8);
    value = static_cast<double>(i);
  } else if (t.dtype == DType::kF32) {
    float f = 0;
    std::memcpy(&f, raw.data(), 4);
    value = f;
  } else if (t.dtype == DType::kI32) {
    std::int32_t i = 0;
    std::memcpy(&i, raw.data(), 4);
    value = i;
  } else {
    std::uint16_t bits = 0;
    std::memcpy(&bits, raw.data(), 2);
    value = t.dtype == DType::kF16 ? f16_to_f32(bits) : bf16_to_f32(bits);
  }
  const float f = static_cast<float>(value);
  if (!std::isfinite(f)) refuse();
  return f;
}

// diffusers writes the PEFT config into the header (§4.1): `lora_alpha` (and per-module
// `alpha_pattern`, `use_rslora`) give the scale of files that have no `.alpha` keys.
void Reader::read_peft_metadata() {
  constexpr std::string_view kKey = "lora_adapter_metadata";
  const auto it = file_.metadata().find(std::string(kKey));
  if (it == file_.metadata().end()) return;
  const std::string where = "__metadata__." + std::string(kKey);
  const nlohmann::json config = nlohmann::json::parse(it->second, nullptr, false);
  if (config.is_discarded() || !config.is_object()) fail(where, "is not a JSON object");
  const auto number = [&](const nlohmann::json& v, std::string_view name) {
    const double d = v.is_number() ? v.get<double>() : NAN;
    if (!std::isfinite(d) || !std::isfinite(static_cast<float>(d))) {
      fail(where, "has a " + std::string(name) + " that is not a finite number");
    }
    return static_cast<float>(d);
  };
  if (const auto a = config.find("lora_alpha"); a != config.end() && !a->is_null()) {
    peft_alpha_ = number(*a, "lora_alpha");
  }
  if (const auto r = config.find("use_rslora"); r != config.end()) {
    peft_rslora_ = r->is_boolean() && r->get<bool>();
  }
  if (const auto p = config.find("alpha_pattern"); p != config.end() && p->is_object()) {
    for (const auto& [pattern, alpha] : p->items()) {
      peft_alpha_pattern_[pattern] = number(alpha, "alpha_pattern entry");
    }
  }
}

// PEFT matches a pattern against the end of the module name at a dot: the longest one wins.
// The module's dotted tails are looked up, so the work is the module's depth, not the table's
// size.
std::optional<float> Reader::peft_alpha(std::string_view module) const {
  if (!peft_alpha_pattern_.empty()) {
    for (std::size_t from = 0; from != std::string_view::npos;) {
      const auto it = peft_alpha_pattern_.find(std::string(module.substr(from)));
      if (it != peft_alpha_pattern_.end()) return it->second;
      const std::size_t dot = module.find('.', from);
      from = dot == std::string_view::npos ? dot : dot + 1;
    }
  }
  return peft_alpha_;
}

std::vector<std::int64_t> as_matrix(const std::vector<std::uint64_t>& shape) {
  if (shape.empty()) return {};
  return {static_cast<std::int64_t>(shape[0]), static_cast<std::int64_t>(trailing_product(shape))};
}

std::vector<std::int64_t> as_stored(const std::vector<std::uint64_t>& shape) {
  return {shape.begin(), shape.end()};
}

}  // namespace

LoraFile open_lora(const std::filesystem::path& path) {
  LoraFile lora;
  lora.path = path;
  // TensorFile refuses a pickle by its content and checks the header.
  lora.file = std::make_unique<io::TensorFile>(io::TensorFile::open(path));
  if (lora.file->format() != io::TensorFileFormat::kSafetensors) {
    throw Error(ErrorCode::kBadModelFile,
                "LoRA " + io::detail::display(path) +
                    " is a GGUF file: Ferry reads LoRAs from .safetensors files only");
  }
  Reader(path, *lora.file).read(lora);
  return lora;
}

std::vector<std::int64_t> down_shape(const LoraFile& lora, const Term& term) {
  if (term.kind != TermKind::kLowRank) return {};
  return as_matrix(lora.file->at(term.down).shape);
}

std::vector<std::int64_t> up_shape(const LoraFile& lora, const Term& term) {
  const std::vector<std::uint64_t>& shape = lora.file->at(term.up).shape;
  return term.kind == TermKind::kLowRank ? as_matrix(shape) : as_stored(shape);
}

}  // namespace ferry::models::lora
