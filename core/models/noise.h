// The initial noise of a generation: standard normal samples from a seed, the same on every run,
// machine and backend. (The official code draws from torch's CUDA generator, whose stream only
// CUDA-torch reproduces; Ferry's seeds are its own. Validation against the reference injects the
// reference's noise instead.)
//
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011) keyed by
// the seed, counter = sample index / 4: any sample can be computed without the ones before it;
// pairs of uniforms become normals by the Box–Muller transform in double precision.
#pragma once

#include <cstdint>
#include <span>

namespace ferry::models {

// out[i] = the (offset + i)-th standard normal sample of `seed`'s stream.
void normal_noise(std::uint64_t seed, std::uint64_t offset, std::span<float> out);

// The raw generator, for tests: the four 32-bit outputs of block `counter` under `key`.
void philox4x32_10(std::uint64_t counter, std::uint64_t key, std::uint32_t out[4]);

}  // namespace ferry::models
