// ferry-cli's commands. Each takes the arguments after its name, prints to stdout, and throws
// ferry::Error for anything the user must hear about (main turns it into one line + exit code).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/models/request.h"

namespace ferry::cli {

int run_inspect(const std::vector<std::string>& args);
int run_synth(const std::vector<std::string>& args);
// `synth --set KIND --out DIR [--blocks N]` (synth_set.cpp): a whole header-only model set.
int run_synth_set(const std::string& kind, const std::filesystem::path& out, std::uint64_t blocks);
int run_plan(const std::vector<std::string>& args);
int run_generate(const std::vector<std::string>& args);
int run_demo(const std::vector<std::string>& args);
// `models list|get|clean` (models.cpp; get and clean in models_get.cpp, built with Qt Network).
int run_models(const std::vector<std::string>& args);
int run_models_get(const std::vector<std::string>& args);
int run_models_clean(const std::vector<std::string>& args);
int run_models_login(const std::vector<std::string>& args);
int run_models_logout(const std::vector<std::string>& args);

// --lora FILE[:STRENGTH] (generate, demo and plan). Error(kBadArgument) for a strength that is
// not within ±100.
models::LoraChoice lora_option(const std::string& text);

// --decode vae|taehv (generate, demo and plan): the model's VAE (the default) or a TAEHV draft.
// Error(kBadArgument) for another name.
class Args;
models::VideoDecoder decoder_option(const Args& args);

// "12.3 MiB", "4.00 GiB", "512 B".
std::string human_bytes(unsigned long long bytes);

}  // namespace ferry::cli
