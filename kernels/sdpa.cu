// sdpa.cu: the SDPA forward kernel family (FlashAttention-2 structure).
#include "sdpa_params.h"

#ifndef SDPA_HEAD_DIM
#define SDPA_HEAD_DIM 64
#endif
#ifndef SDPA_BF16
#define SDPA_BF16 0
#endif
#ifndef SDPA_CAUSAL
#define SDPA_CAUSAL 0
#endif
#ifndef SDPA_WS
#define SDPA_WS 0
#endif
#ifndef SDPA_PRODUCER_WARPS
#define SDPA_PRODUCER_WARPS 1
#endif
#ifndef SDPA_STAGES
#define SDPA_STAGES 2
#endif
#ifndef SDPA_BLOCK_M
#define SDPA_BLOCK_M 64
#endif
#ifndef SDPA_BLOCK_N
#define SDPA_BLOCK_N 64
#endif
#ifndef SDPA_WARPS
#define SDPA_WARPS 4
#endif
#ifndef SDPA_FAST_EXP
#define SDPA_FAST_EXP 1
#endif
#ifndef SDPA_PERSISTENT
#define SDPA_PERSISTENT 0
#endif
#ifndef SDPA_Q_IN_REGS
#define SDPA_Q_IN_REGS 1
#endif
#ifndef SDPA_KV_SWIZZLE
#define SDPA_KV_SWIZZLE 1
#endif
#ifndef SDPA_MIN_BLOCKS
#define SDPA_MIN_BLOCKS 1
#endif
#ifndef SDPA_SPLIT_KV
#define SDPA_SPLIT_KV 1
#endif

extern "C" __global__ void sdpa_fwd(const SdpaParams p) {}
extern "C" __global__ void sdpa_combine(const SdpaParams p) {}
