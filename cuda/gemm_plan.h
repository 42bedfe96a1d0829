// How a chunked GEMM (linear, conv3d) splits its work so that what it stages in the backend's
// fixed workspace fits: a block of rows of the left operand (converted to the GEMM's input type,
// or an im2col block), a panel of weight rows (widened or dequantised), and an f32 staging block
// of the result. Plain C++: unit-tested without a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace ferry::cuda {

inline constexpr std::size_t kWorkspaceAlignment = 256;

inline std::size_t workspace_footprint(std::size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

struct GemmChunks {
  std::int64_t rows = 0;   // rows of the left operand (tokens, output positions) per block
  std::int64_t panel = 0;  // weight rows (output features, output channels) per panel
};

struct GemmStaging {
  std::int64_t total_rows = 0;
  std::int64_t total_panel = 0;
  std::size_t a_row_bytes = 0;  // workspace per left-operand row; 0 when it is read in place
  std::size_t w_row_bytes = 0;  // workspace per weight row; 0 when the weight is read in place
  bool staging = false;         // whether the result goes through an f32 block first
};

// Workspace bytes a plan takes: the three blocks, each aligned.
inline std::size_t gemm_footprint(const GemmStaging& s, const GemmChunks& c) {
  const auto rows = static_cast<std::size_t>(c.rows);
  const auto panel = static_cast<std::size_t>(c.panel);
  return workspace_footprint(rows * s.a_row_bytes) + workspace_footprint(panel * s.w_row_bytes) +
         (s.staging ? workspace_footprint(rows * panel * sizeof(float)) : 0);
}

// The largest blocks that fit `budget`: the weight panel takes at most half of it when anything
// else is staged (all of it otherwise), the rows take what is left. nullopt when not even one
// row and one weight row fit.
inline std::optional<GemmChunks> plan_gemm_chunks(const GemmStaging& s, std::size_t budget) {
  if (s.total_rows <= 0 || s.total_panel <= 0) return GemmChunks{s.total_rows, s.total_panel};
  const bool per_row_cost = s.a_row_bytes > 0 || s.staging;
  std::int64_t panel = s.total_panel;
  if (s.w_row_bytes > 0) {
    const std::size_t share = per_row_cost ? budget / 2 : budget;
    const auto fit = static_cast<std::int64_t>(share / s.w_row_bytes);
    panel = fit < 1 ? 1 : fit < s.total_panel ? fit : s.total_panel;
  }
  for (;;) {
    GemmChunks c{s.total_rows, panel};
    if (per_row_cost) {
      const std::size_t w_bytes =
          workspace_footprint(static_cast<std::size_t>(panel) * s.w_row_bytes);
      const std::size_t per_row =
          s.a_row_bytes + (s.staging ? static_cast<std::size_t>(panel) * sizeof(float) : 0);
      // Two alignment paddings for the two row-sized blocks.
      const std::size_t slack = w_bytes + 2 * kWorkspaceAlignment;
      const std::int64_t fit =
          budget > slack ? static_cast<std::int64_t>((budget - slack) / per_row) : 0;
      c.rows = fit < s.total_rows ? fit : s.total_rows;
    }
    if (c.rows >= 1 && gemm_footprint(s, c) <= budget) return c;
    if (panel == 1) return std::nullopt;
    panel = (panel + 1) / 2;
  }
}

}  // namespace ferry::cuda
