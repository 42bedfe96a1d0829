# `ferry-cli models list` run as a user would (issue 22): a header-only ComfyUI-layout TI2V-5B set
# (ferry-cli synth --set) is "ready"; without its VAE it says what is missing; a pickle is listed,
# never loaded. (`models get` is tested against a fake hub in tests/net/.) Inputs: CLI, EMULATOR
# (wine for the mingw lane, or empty), WORK (scratch).
include("${CMAKE_CURRENT_LIST_DIR}/cli_contract.cmake")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/data")
set(ENV{FERRY_DATA_DIR} "${WORK}/data")

ferry_cli(0 synth --set ti2v-5b-fp16 --blocks 1 --out "${WORK}/ComfyUI/models")
file(MAKE_DIRECTORY "${WORK}/ComfyUI/models/loras")
file(WRITE "${WORK}/ComfyUI/models/loras/old.ckpt" "pickle bytes")
ferry_cli(0 models list --no-hf-cache --folder "${WORK}/ComfyUI")
expect_in("${out}" "Wan 2.2 TI2V-5B (fp16) — ready")
expect_in("${out}" "umt5_xxl_fp16.safetensors")
expect_in("${out}" "1 pickle file(s) skipped, never loaded")
expect_in("${out}" "wan2.2-ti2v-5b")  # the catalogue

file(REMOVE "${WORK}/ComfyUI/models/vae/wan2.2_vae.safetensors")
ferry_cli(0 models list --no-hf-cache --folder "${WORK}/ComfyUI/models")
expect_in("${out}" "Wan 2.2 TI2V-5B (fp16) — missing a Wan 2.2 VAE")
