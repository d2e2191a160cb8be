// partial_write.cu: the last quarter of each CTA's query rows is never stored, so the
// worker's NaN poison stays there (and the output of an earlier correct
// candidate must not show through). Right at S=1; caught at S=77.
// Expected: incorrect (NaN outputs).
//
// A deliberately simple SDPA candidate for evotune's fault tests: the entry
// points and argument of kernels/sdpa.cu (sdpa_fwd and sdpa_combine taking
// SdpaParams) and its launch geometry for split_kv=1, persistent=0 (one CTA
// of SDPA_WARPS warps per SDPA_BLOCK_M query rows of one batch-head). Each
// CTA stages key/value tiles of BN rows in shared memory; each of its first
// SDPA_BLOCK_M threads owns one query row and keeps an online softmax in
// fp32. The dynamic shared memory the plan passes is not used.

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

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
#ifndef SDPA_BLOCK_M
#define SDPA_BLOCK_M 64
#endif
#ifndef SDPA_WARPS
#define SDPA_WARPS 4
#endif

#if SDPA_BF16
typedef __nv_bfloat16 elem;
__device__ inline float tof(elem x) { return __bfloat162float(x); }
__device__ inline elem fromf(float x) { return __float2bfloat16_rn(x); }
#else
typedef __half elem;
__device__ inline float tof(elem x) { return __half2float(x); }
__device__ inline elem fromf(float x) { return __float2half_rn(x); }
#endif

constexpr int D = SDPA_HEAD_DIM;
constexpr int BM = SDPA_BLOCK_M;
constexpr int BN = 32;  // keys per shared-memory tile
static_assert(SDPA_WARPS * 32 >= BM, "one thread per query row");

extern "C" __global__ void __launch_bounds__(SDPA_WARPS * 32) sdpa_fwd(const SdpaParams p) {
    __shared__ float sk[BN][D];
    __shared__ float sv[BN][D];

    const int mblocks = (p.s + BM - 1) / BM;
    const int bh = blockIdx.x / mblocks;
    const int row = (blockIdx.x % mblocks) * BM + threadIdx.x;
    const bool owner = threadIdx.x < BM && row < p.s;
    const elem* q = static_cast<const elem*>(p.q) + ((size_t)bh * p.s + (owner ? row : 0)) * D;
    const elem* k = static_cast<const elem*>(p.k) + (size_t)bh * p.s * D;
    const elem* v = static_cast<const elem*>(p.v) + (size_t)bh * p.s * D;

    float qf[D], acc[D];
#pragma unroll
    for (int d = 0; d < D; ++d) {
        qf[d] = owner ? tof(q[d]) * p.scale : 0.f;
        acc[d] = 0.f;
    }
    float m = -INFINITY, l = 0.f;
    const int keys = p.s;
    for (int k0 = 0; k0 < keys; k0 += BN) {
        for (int i = threadIdx.x; i < BN * D; i += blockDim.x) {
            const int j = k0 + i / D;
            sk[i / D][i % D] = j < keys ? tof(k[(size_t)j * D + i % D]) : 0.f;
            sv[i / D][i % D] = j < keys ? tof(v[(size_t)j * D + i % D]) : 0.f;
        }
        __syncthreads();
        const int n = min(BN, keys - k0);
        for (int j = 0; j < n && owner; ++j) {
            if (SDPA_CAUSAL && k0 + j > row) break;
            float s = 0.f;
#pragma unroll
            for (int d = 0; d < D; ++d) s += qf[d] * sk[j][d];
            const float mn = fmaxf(m, s);
            const float c = expf(m - mn), w = expf(s - mn);
            l = l * c + w;
#pragma unroll
            for (int d = 0; d < D; ++d) acc[d] = acc[d] * c + w * sv[j][d];
            m = mn;
        }
        __syncthreads();  // the tile is consumed before the next load
    }
    if (!owner) return;
    elem* o = static_cast<elem*>(p.o) + ((size_t)bh * p.s + row) * D;
    // Defect: the last quarter of the rows is never written.
    if (threadIdx.x >= BM * 3 / 4) return;
#pragma unroll
    for (int d = 0; d < D; ++d) o[d] = fromf(acc[d] / l);
}

// Only launched with split_kv > 1, which this candidate does not support.
extern "C" __global__ void __launch_bounds__(128) sdpa_combine(const SdpaParams p) {}
