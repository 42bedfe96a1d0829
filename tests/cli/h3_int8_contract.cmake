# Comfy-Org's int8 ConvRot MiniMax-H3 set (issues 18 and 19), as `ferry-cli synth --set h3-int8`
# writes it header-only at the real shapes (minimax_h3.md §G.3): it is recognised like the real
# folder, and `plan` streams the DiT's int8 bytes. The bytes each group must hold are computed here
# from the model's shapes (§B.1, §C.1), not read from an output.
# Inputs: CLI (the executable), EMULATOR (wine for the mingw lane, or empty), WORK (scratch).
include("${CMAKE_CURRENT_LIST_DIR}/cli_contract.cmake")
file(REMOVE_RECURSE "${WORK}")

# ---- The bytes of Comfy-Org's layout, from the shapes ------------------------------------------
# The DiT (§C.1): hidden 5376, 56 heads of 128, FFN 14336, AdaLN of the 2688-wide time embedding
# into 18 modulation rows of the hidden width (full) or from 8 (pruned).
set(H 5376)
math(EXPR INNER "56 * 128")
set(FFN 14336)
set(TIME 2688)
math(EXPR MOD "18 * ${H}")
# A .comfy_quant: the JSON Comfy's converter writes, group 256 (64 for the full AdaLN, whose 2688
# input features 256 does not divide).
string(LENGTH "{\"format\": \"int8_tensorwise\", \"convrot\": true, \"convrot_groupsize\": 256}" JSON256)
string(LENGTH "{\"format\": \"int8_tensorwise\", \"convrot\": true, \"convrot_groupsize\": 64}" JSON64)
# An int8 ConvRot Linear [out, in]: one byte a weight, an F32 scale a row, its JSON.
function(int8_bytes out_var rows cols json)
  math(EXPR b "${rows} * ${cols} + 4 * ${rows} + ${json}")
  set(${out_var} ${b} PARENT_SCOPE)
endfunction()
int8_bytes(QKV "3 * ${INNER}" ${H} ${JSON256})
int8_bytes(OUT ${H} ${INNER} ${JSON256})
int8_bytes(FC1 "2 * ${FFN}" ${H} ${JSON256})
int8_bytes(FC2 ${H} ${FFN} ${JSON256})
# norm1, norm2 (hidden), q_norm, k_norm (128), bf16.
math(EXPR NORMS "2 * (2 * ${H} + 2 * 128)")
math(EXPR BODY "${QKV} + ${OUT} + ${FC1} + ${FC2} + ${NORMS}")
# Full: the AdaLN Linear int8 with a bf16 bias. Pruned: F16 [18·H, 8] and its F16 bias.
int8_bytes(ADALN ${MOD} ${TIME} ${JSON64})
math(EXPR BLOCK_FULL "${BODY} + ${ADALN} + 2 * ${MOD}")
math(EXPR BLOCK_PRUNED "${BODY} + 2 * (${MOD} * 8 + ${MOD})")
math(EXPR LINEAR_WEIGHTS "(3 * ${INNER} + 2 * ${FFN}) * ${H} + ${H} * ${INNER} + ${H} * ${FFN}")
math(EXPR WEIGHTS_FULL "${LINEAR_WEIGHTS} + ${MOD} * ${TIME}")
# The rest of the full DiT's groups: the embeddings (patch projections and time MLP F32,
# condition_proj bf16; §C.1's 96 video and 32 audio channels, 256 frequencies, 5120-wide text),
# the two bf16 refiner blocks and their norm, the head (norm bf16, AdaLN int8, outputs F32).
math(EXPR EMBEDDINGS "4 * (${H} * 96 + ${H}) + 4 * (${H} * 32 + ${H}) + 2 * (${H} * 5120 + ${H}) + 4 * (${H} * 256 + ${H}) + 4 * (${TIME} * ${H} + ${TIME})")
math(EXPR REFINER "2 * (${LINEAR_WEIGHTS}) + ${NORMS}")
int8_bytes(HEAD_ADALN "2 * ${H}" ${TIME} ${JSON64})
math(EXPR HEAD "2 * ${H} + ${HEAD_ADALN} + 2 * 2 * ${H} + 4 * (96 * ${H} + 96) + 4 * (32 * ${H} + 32)")
math(EXPR DIT_FULL "${EMBEDDINGS} + 2 * ${REFINER} + 2 * ${H} + 50 * ${BLOCK_FULL} + ${HEAD}")
# The text encoder's layer (§B.1): width 5120, 64 query and 8 key/value heads of 128, FFN 25600;
# the seven Linears int8, the four norms bf16.
set(D 5120)
math(EXPR Q "64 * 128")
math(EXPR KV "8 * 128")
set(TFFN 25600)
int8_bytes(TQ ${Q} ${D} ${JSON256})
int8_bytes(TK ${KV} ${D} ${JSON256})
int8_bytes(TO ${D} ${Q} ${JSON256})
int8_bytes(TGATE ${TFFN} ${D} ${JSON256})
int8_bytes(TDOWN ${D} ${TFFN} ${JSON256})
math(EXPR LAYER "${TQ} + 2 * ${TK} + ${TO} + 2 * ${TGATE} + ${TDOWN} + 2 * (2 * ${D} + 2 * 128)")

# A stage's weight bytes in the plan.
function(stage_bytes out_var json stage_name)
  string(JSON stages LENGTH "${json}" stages)
  math(EXPR last "${stages} - 1")
  foreach(s RANGE ${last})
    string(JSON name GET "${json}" stages ${s} stage)
    if(name STREQUAL "${stage_name}")
      string(JSON bytes GET "${json}" stages ${s} weight_bytes)
      set(${out_var} ${bytes} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  message(FATAL_ERROR "no stage '${stage_name}' in the plan:\n${json}")
endfunction()

# The plan's groups of a stage: each name and bytes, checked against the expected figure.
function(check_blocks json stage_name prefix count expected)
  string(JSON stages LENGTH "${json}" stages)
  math(EXPR last "${stages} - 1")
  set(found 0)
  foreach(s RANGE ${last})
    string(JSON name GET "${json}" stages ${s} stage)
    if(NOT name STREQUAL "${stage_name}")
      continue()
    endif()
    string(JSON groups LENGTH "${json}" stages ${s} groups)
    math(EXPR g_last "${groups} - 1")
    foreach(g RANGE ${g_last})
      string(JSON group GET "${json}" stages ${s} groups ${g} name)
      if(group MATCHES "^${prefix}[0-9]+$")
        string(JSON bytes GET "${json}" stages ${s} groups ${g} bytes)
        expect_equal("${stage_name} ${group} bytes" ${bytes} ${expected})
        math(EXPR found "${found} + 1")
      endif()
    endforeach()
  endforeach()
  expect_equal("${stage_name}: groups named ${prefix}N" ${found} ${count})
endfunction()

# ---- The full DiT ---------------------------------------------------------------------------------
ferry_cli(0 synth --set h3-int8 --out "${WORK}/h3-int8")
expect_in("${out}" "minimax_h3_fl2va_int8_convrot.safetensors")
expect_in("${out}" "qwen3vl_32b_minimax_h3_int8_convrot.safetensors")
expect_in("${out}" "minimax_h3_video_vae_fp16.safetensors")
expect_in("${out}" "minimax_h3_audio_vae_fp32.safetensors")
ferry_cli(0 inspect --summary "${WORK}/h3-int8")
expect_in("${out}" "model set: minimax-h3-fl2va (h3)")
expect_in("${out}" "text encoder: Qwen3-VL-32B, 50 of 64 layers, int8 ConvRot, bf16 rest, with its vision tower")
expect_in("${out}" "diffusion model: FL2VA (5376 wide, 50 blocks, 56 heads, original names), int8 ConvRot")
expect_in("${out}" "video VAE: MiniMax-H3 (ViT decoder), fp16")
expect_in("${out}" "audio VAE: MiniMax-H3 (DAC + BigVGAN), fp32")
ferry_cli(0 plan --model "${WORK}/h3-int8" --preset laptop-8gb --vram-mib 8192 --ram-mib 24576 --width 832 --height 480 --frames 124)
expect_in("${out}" "model:   minimax-h3-fl2va (h3)")
expect_in("${out}" "== diffusion model: MiniMax-H3 DiT (50 blocks, hidden 5376)")
expect_in("${out}" "15356 rows (512 text, 0 keyframe, 414 audio, 14430 video)")
message(STATUS "plan of h3-int8 (laptop-8gb, 8 GB VRAM, 24 GB RAM, 832x480x124):\n${out}")
ferry_cli(0 plan --model "${WORK}/h3-int8" --preset laptop-8gb --vram-mib 8192 --ram-mib 24576 --width 832 --height 480 --frames 124 --json)
set(plan "${out}")
# Every block streams its int8 bytes: about one byte a weight, plus the row scales and JSONs.
check_blocks("${plan}" "diffusion model" "blocks." 50 ${BLOCK_FULL})
math(EXPR overhead_permille "(${BLOCK_FULL} - ${WEIGHTS_FULL}) * 1000 / ${WEIGHTS_FULL}")
if(overhead_permille GREATER 5)
  message(FATAL_ERROR "an int8 block holds ${BLOCK_FULL} bytes for ${WEIGHTS_FULL} weights")
endif()
stage_bytes(dit "${plan}" "diffusion model")
expect_equal("the int8 DiT's bytes" ${dit} ${DIT_FULL})
message(STATUS "h3-int8 DiT block: ${BLOCK_FULL} bytes for ${WEIGHTS_FULL} Linear weights; DiT ${DIT_FULL} bytes")
# The text encoder streams its 50 int8 layers (the embedding is read row by row from the file).
check_blocks("${plan}" "text encoder" "layers." 50 ${LAYER})
stage_bytes(text "${plan}" "text encoder")
math(EXPR TEXT "50 * ${LAYER}")
expect_equal("the int8 text encoder's bytes" ${text} ${TEXT})

# ---- The pruned DiT: the same int8 block Linears, its rank-8 AdaLN F16 ------------------------------
ferry_cli(0 synth --set h3-int8-pruned --blocks 2 --out "${WORK}/h3-int8-pruned")
expect_in("${out}" "minimax_h3_fl2va_pruned_int8_convrot.safetensors")
ferry_cli(0 inspect --summary "${WORK}/h3-int8-pruned")
expect_in("${out}" "model set: minimax-h3-fl2va-pruned (h3)")
expect_in("${out}" "diffusion model: FL2VA, pruned AdaLN (5376 wide, 2 blocks, 56 heads, original names), int8 ConvRot")
ferry_cli(0 plan --model "${WORK}/h3-int8-pruned" --preset laptop-8gb --vram-mib 8192 --ram-mib 24576 --width 832 --height 480 --frames 124 --json)
check_blocks("${out}" "diffusion model" "blocks." 2 ${BLOCK_PRUNED})
message(STATUS "Comfy-Org int8 ConvRot H3 contract holds")
