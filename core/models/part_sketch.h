// One tensor set as a family sees it from its header alone: which part of which model it is, and,
// for a diffusion model, what else its set needs. The model library (core/library) sorts a user's
// loose files into runnable sets with these — a ComfyUI user's diffusion model, text encoder and
// VAE sit in three folders — then confirms each complete set with the family's own open(). The
// keys are the family's business: the library only matches a need's key to a part that provides
// it, so no family name or part kind is known outside core/models/<family>/.
#pragma once

#include <string>
#include <vector>

namespace ferry::models {

struct PartNeed {
  std::string key;          // matched against PartSketch::provides ("wan/vae:wan2.2")
  std::string description;  // said when it is missing: "a Wan 2.2 VAE (48 latent channels)"
};

struct PartSketch {
  std::string role;                   // "diffusion model", "text encoder", "VAE", ...
  std::string description;            // "umT5 text encoder, 4096 wide"
  std::vector<std::string> provides;  // the keys of the needs this part meets
  // A diffusion model heads a set: its name ("Wan 2.2 TI2V-5B") and the other parts it needs.
  // Empty for every other part.
  std::string set_name;
  std::vector<PartNeed> needs;
  // Set when the family recognises the model but cannot run it ("Wan 2.1 I2V conditions on CLIP
  // image features, which Ferry does not compute"): the set is listed, never ready.
  std::string unsupported;

  bool heads_a_set() const { return !set_name.empty(); }
};

}  // namespace ferry::models
