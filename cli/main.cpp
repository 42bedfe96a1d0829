// ferry-cli: the command-line face of the engine (architecture.md §7). Errors are one line on
// stderr and an exit code: 0 done, 2 bad input, 3 does not fit, 4 I/O error, 130 cancelled,
// 1 anything else.
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "core/error.h"
#include "core/memory/process_memory.h"

#ifdef _WIN32
#include <windows.h>
#endif

namespace {

constexpr const char* kUsage =
    "Ferry " FERRY_VERSION
    " - video diffusion with model weights streamed from disk\n"
    "\n"
    "usage: ferry-cli COMMAND [options]\n"
    "\n"
    "commands:\n"
    "  inspect [--summary] PATH   validate a .safetensors file, a sharded index or a model\n"
    "                             folder, and list its tensors\n"
    "  synth --out FILE [--config t2v-1.3b|ti2v-5b|t2v-14b] [--blocks N] [--dtype bf16|f32]\n"
    "        [--seed N]           write a Wan DiT checkpoint with random weights\n"
    "  synth --set KIND --out DIR [--blocks N]\n"
    "                             write a whole model set as distributed (ti2v-5b-q4_k_m,\n"
    "                             i2v-a14b-fp8, t2v-14b-bf16, ...), header-only: real shapes\n"
    "                             and sizes, data left as sparse holes; for `plan`\n"
    "  plan --model PATH [--preset NAME] [--width W --height H --frames F] [--image FILE]\n"
    "       [--lora FILE[:S]]... [--decode vae|taehv] [--latents FILE] [--vram-mib N\n"
    "       --ram-mib N] [--json]\n"
    "                             every stage's plan: where each block will live, and the\n"
    "                             predicted VRAM and RAM peaks (exit 3 when it does not fit);\n"
    "                             --json: the same for scripts, in bytes\n"
    "  generate --model PATH --prompt TEXT --out FILE.mp4 [--image PNG/JPG/WEBP]\n"
    "       [--end-image PNG/JPG/WEBP] [--negative TEXT] [--preset NAME] [--width W --height H]\n"
    "       [--frames F] [--fps N] [--steps N] [--cfg X] [--cfg-low X] [--shift X]\n"
    "       [--sampler unipc|euler|distill4] [--seed N]\n"
    "       [--stats FILE.jsonl] [--noise FILE.safetensors] [--save-noise FILE.safetensors]\n"
    "       [--save-latents FILE.safetensors [--save-text-states]]\n"
    "       [--lora FILE.safetensors[:STRENGTH]]... [--decode vae|taehv]\n"
    "       [--latents FILE.safetensors] [--wav FILE.wav]\n"
    "                             make a video; unset options take the model's defaults\n"
    "\n"
    "images and experts:\n"
    "  --image FILE         the start frame (image-to-video models: TI2V-5B, A14B I2V); the\n"
    "                       video takes its aspect, --width x --height only set the area\n"
    "  --model PATH         a model folder, or (repeated) its parts' files or folders one by one\n"
    "  --wav FILE           models with sound (MiniMax-H3): the soundtrack as a 16-bit WAV too\n"
    "                       (32 kHz stereo, the decoded sound before AAC), written with the\n"
    "                       video\n"
    "  --end-image FILE     the end frame too (first-last frame; Wan 2.2 A14B I2V)\n"
    "  --cfg X / --cfg-low X  Wan 2.2 A14B: the high-noise expert's guide scale and the\n"
    "                       low-noise expert's (defaults: T2V 4.0 / 3.0, I2V 3.5 / 3.5)\n"
    "\n"
    "LoRAs (applied at runtime, never merged: the model's files and weights stay as they are):\n"
    "  --lora FILE[:S]      a LoRA at strength S (default 1; negative undoes a style); repeat\n"
    "                       it to stack LoRAs. Official, diffusers, kohya and PEFT key names;\n"
    "                       a LoRA for another model is refused (exit 2), keys that adapt\n"
    "                       nothing in this model are named in a warning. A step-distillation\n"
    "                       LoRA (LightX2V, Lightning) wants --sampler distill4\n"
    "\n"
    "replays (the same noise gives the same video in any tool; all tensors safetensors):\n"
    "  --noise FILE         the initial noise instead of the seed's. Wan: one tensor `noise`,\n"
    "                       F32, [C, T, h, w] = [latent channels (16, TI2V 48), (frames-1)/4+1,\n"
    "                       height/8 (TI2V /16), width/8 (TI2V /16)]\n"
    "  --save-noise FILE    the initial noise this run used, in the same layout\n"
    "  --save-latents FILE  the final latents before decoding. Wan: `latent`, F32, as `noise`;\n"
    "                       with --save-text-states also the text encoder's output `context`\n"
    "                       and `negative_context` (runs with CFG), BF16 [tokens, width]\n"
    "\n"
    "drafts (a video in seconds, then the full decode of the same latents):\n"
    "  --decode taehv       decode with the TAEHV preview decoder (taew2_1.safetensors for\n"
    "                       Wan 2.1 and A14B, taew2_2.safetensors for TI2V-5B, from\n"
    "                       github.com/madebyollin/taehv, next to the diffusion model): full\n"
    "                       size, softer detail; the clip's settings say \"decode\":\n"
    "                       \"taehv-draft\" and its final latents are kept beside it\n"
    "                       (FILE.latents.safetensors, or where --save-latents says)\n"
    "  --latents FILE       decode these saved latents (a draft's, or --save-latents') instead\n"
    "                       of denoising: no text encoder, no diffusion model. Give the\n"
    "                       settings of the run that made them; with --decode vae (the\n"
    "                       default) the frames equal a full run's\n"
    "  models list [--folder DIR]... [--no-hf-cache]\n"
    "                             the model sets already on disk (Ferry's models folder, the\n"
    "                             Hugging Face cache, each --folder: a ComfyUI install is\n"
    "                             recognised), ready or what each is missing, the LoRAs and the\n"
    "                             sets they fit, and the catalogue of sets to download\n"
    "  models get NAME [--precision P] [--to DIR] [--accept-licence]\n"
    "                             download a catalogue set (sizes and SHA-256 from the hub,\n"
    "                             verified; resumes after an interruption; HF_TOKEN for gated\n"
    "                             repositories, HF_ENDPOINT for a mirror)\n"
    "  models clean [--to DIR]    remove the partial files of interrupted downloads\n"
    "  models login < TOKEN-FILE  store a hub token in Windows' credential store (elsewhere:\n"
    "                             HF_TOKEN or `huggingface-cli login`); models logout removes it\n"
    "  demo [generate options]    the whole path on a tiny built-in model with random weights\n"
    "  version                    print the version\n"
    "\n"
    "exit codes: 0 done, 2 bad input, 3 does not fit the budget, 4 I/O error, 130 cancelled,\n"
    "1 anything else\n";

int run(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0] == "help" || argv[0] == "--help" || argv[0] == "-h") {
    std::fputs(kUsage, argv.empty() ? stderr : stdout);
    return argv.empty() ? 2 : 0;
  }
  const std::string& command = argv[0];
  const std::vector<std::string> rest(argv.begin() + 1, argv.end());
  if (command == "inspect") return ferry::cli::run_inspect(rest);
  if (command == "synth") return ferry::cli::run_synth(rest);
  if (command == "plan") return ferry::cli::run_plan(rest);
  if (command == "generate") return ferry::cli::run_generate(rest);
  if (command == "demo") return ferry::cli::run_demo(rest);
  if (command == "models") return ferry::cli::run_models(rest);
  if (command == "version" || command == "--version") {
    std::printf("ferry-cli %s\n", FERRY_VERSION);
    return 0;
  }
  throw ferry::Error(ferry::ErrorCode::kBadArgument,
                     "unknown command '" + command + "' (try ferry-cli help)");
}

int guarded_run(const std::vector<std::string>& argv) {
  try {
    const int code = run(argv);
    std::fflush(stdout);
    return code;
  } catch (const ferry::Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ferry-cli: error: %s\n", e.what());
    return ferry::exit_code(e.code());
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ferry-cli: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace

#ifdef _WIN32
// Wide arguments, converted to UTF-8 once here; the console is switched to UTF-8 output.
int wmain(int argc, wchar_t** argv) {
  SetConsoleOutputCP(CP_UTF8);
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    const int n = WideCharToMultiByte(CP_UTF8, 0, argv[i], -1, nullptr, 0, nullptr, nullptr);
    std::string arg(static_cast<std::size_t>(n > 0 ? n - 1 : 0), '\0');
    if (n > 1) WideCharToMultiByte(CP_UTF8, 0, argv[i], -1, arg.data(), n, nullptr, nullptr);
    args.push_back(std::move(arg));
  }
  ferry::memory::configure_allocator();
  return guarded_run(args);
}
#else
int main(int argc, char** argv) {
  ferry::memory::configure_allocator();
  return guarded_run(std::vector<std::string>(argv + 1, argv + argc));
}
#endif
