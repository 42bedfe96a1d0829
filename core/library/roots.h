// Where a user's models already are (issue 22): the folders a scan root stands for. A ComfyUI
// install is recognised when the user points at its root or at its models/ folder, and stands for
// its model folders (diffusion_models, unet, text_encoders, clip, vae, vae_approx, loras); the
// Hugging Face hub cache stands for each repository's current snapshot (refs/main, else every
// snapshot), whose links the scan follows only inside that repository's models--* folder
// (io::scan_root); any other folder stands for itself.
#pragma once

#include <filesystem>
#include <vector>

namespace ferry::library {

// Ferry's own models folder, where `models get` puts downloads: <user data>/models (not created).
std::filesystem::path ferry_models_dir();
// The user's catalogues (catalogue.h): <user data>/catalogues (not created).
std::filesystem::path user_catalogue_dir();

// The hub cache as huggingface_hub finds it: $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub (%USERPROFILE% on Windows).
// Empty when none of these can be formed. The folder may not exist.
std::filesystem::path hf_hub_cache_dir();

// The model folders of a ComfyUI install at `folder` (its root or its models/ folder) that exist;
// empty when `folder` is not one.
std::vector<std::filesystem::path> comfyui_model_folders(const std::filesystem::path& folder);

// The snapshot folders of a hub cache (`folder` holds models--org--name folders) or of one
// repository's folder (`folder` is models--org--name); empty when `folder` is neither.
std::vector<std::filesystem::path> hf_snapshot_folders(const std::filesystem::path& folder);

// What a scan of `root` reads: the above, or `root` itself.
std::vector<std::filesystem::path> folders_to_scan(const std::filesystem::path& root);

}  // namespace ferry::library
