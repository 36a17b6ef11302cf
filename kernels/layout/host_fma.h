// KC_HOST_FMA marks a host twin whose time goes into std::fmaf. x86-64's baseline has no
// fused multiply-add instruction, so g++ calls the C library's fmaf (through the PLT) for
// each element: most of the cpu engine's time (96 % of the serve gate's ci fixture at 9157dda
// went to the bf16 dot and that call). A function marked with it is compiled twice, for
// x86-64 with FMA and for the baseline, and the loader picks one for the machine (GCC's
// target_clones, an ifunc). The bytes do not depend on the pick: fmaf is correctly rounded
// both as the instruction and as glibc's routine, and nothing else in a marked function may
// change with the target (-std=c++20 without GNU extensions keeps -ffp-contract=off, so no
// a * b + c is fused behind the source's back). EngineOps.DotsFollowTheDocumentedOrderBitForBit
// compares the chosen clone with a transcription of rows.h compiled for the baseline.
#pragma once
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define KC_HOST_FMA __attribute__((target_clones("fma", "default")))
#else
#define KC_HOST_FMA
#endif
