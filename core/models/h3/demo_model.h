// The tiny MiniMax-H3 model set behind `ferry-cli demo --model h3` and the end-to-end tests: the
// five files of DiffSynth's MiniMax-H3-NF4 layout (synthetic_set.h: the same names, dtypes and NF4
// quant states as the real files) at small widths, with fixed random data (SyntheticPart::
// fill_random's, the DiT's and the video VAE's rescaled to layers of gain about 1), and the
// processor/ folder's byte-level tokenizer with H3's added tokens at their real ids — so
// find_model_set, the loaders and the whole run treat it like the real set.
//
// What stays at the release's size: the text encoder's 50 layers and its 151,936-row embedding
// table (the vision tokens' ids are past 151,000), the vision tower's 27 blocks (DeepStack after
// 8, 16 and 24), the video VAE's 16x spatial ratio and the audio VAE's x800 hop. The files take
// about 40 MB (the embedding table is half of it).
#pragma once

#include <filesystem>
#include <string_view>

#include "core/models/h3/synthetic_set.h"

namespace ferry::models::h3 {

struct H3DemoModel {
  // Bumped whenever the shapes or the generator change: a folder of another version is rewritten.
  // 2: the DiT's and the video VAE's weights made sensitive (demo_model.cpp SharpFill).
  static constexpr std::string_view kFormatVersion = "2";
  // Written last, beside the files: its presence with this version marks a complete demo set.
  static constexpr std::string_view kMarkerFile = "ferry-h3-demo.txt";
  static SyntheticShapes shapes();
};

// Writes the demo set into `folder` (created if needed), unless a complete one of this version is
// there. Error(kIo) when a file cannot be written.
void write_h3_demo_model(const std::filesystem::path& folder);

// Whether `folder` holds a demo set written by write_h3_demo_model.
bool is_h3_demo_folder(const std::filesystem::path& folder);

}  // namespace ferry::models::h3
