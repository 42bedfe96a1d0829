// Included last by the sampler sources (flow_*.cpp, sampler.cpp, ti2v.cpp): every fp32 product and
// sum in the rest of the file is rounded on its own, as the separate torch ops of the official
// scheduler round them (no fused multiply-add). MSVC contracts only under /fp:contract, which
// Ferry does not use.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("fp-contract=off")
#elif defined(__clang__)
#pragma clang fp contract(off)
#endif
