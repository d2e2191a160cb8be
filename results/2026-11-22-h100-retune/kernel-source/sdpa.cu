// sdpa.cu: the SDPA forward kernel family, FlashAttention-2 structure.
//
// O = softmax(scale * Q K^T [+ causal mask]) V over [b, h, s, d] tensors,
// fp16 or bf16 in and out, fp32 accumulation.
//
// Structure. A CTA owns BLOCK_M query rows of one (batch, head) and walks
// its key range in tiles of BLOCK_N keys. Its WARPS consumer warps form a
// WARPS_M x WARPS_N grid: a warp owns ROWS_PER_WARP query rows and, of every
// key tile, a slice of COLS_PER_WARP keys. Per tile a warp computes
// S = Q K^T with mma.sync m16n8k16 (ldmatrix for Q and K, ldmatrix.trans
// for V), masks the key tail and the causal triangle with -inf, updates its
// online softmax (row max and sum in registers, quad shuffles), re-packs P
// from the S accumulators straight into A fragments and accumulates P V in
// registers. With WARPS_N > 1 the warps' partial (m, l, O) are merged
// through shared memory at the end. The output is normalised by 1/l and
// stored as packed 32-bit pairs; with SPLIT_KV > 1 each CTA covers one
// chunk of the keys and writes fp32 O and its log-sum-exp, which
// sdpa_combine merges.
//
// K/V tiles flow through a ring of STAGES shared-memory slots filled by
// cp.async. Without WS every warp loads and computes (prefetching
// STAGES-1 tiles ahead); with WS, PRODUCER_WARPS extra warps only load,
// handing slots to the consumers with named barriers (full/empty per slot).
// PERSISTENT CTAs stride over all tiles; causal tiles are ordered heaviest
// first.
//
// Every knob below is a -D macro with the default of kernels/sdpa_space.go.
// Problem macros (SDPA_HEAD_DIM, SDPA_BF16, SDPA_CAUSAL) are fixed per
// problem.

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include <type_traits>

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


namespace sdpa {

__host__ __device__ constexpr int cmin(int a, int b) { return a < b ? a : b; }
__host__ __device__ constexpr int cmax(int a, int b) { return a > b ? a : b; }

constexpr int D = SDPA_HEAD_DIM;
constexpr bool kBF16 = SDPA_BF16 != 0;
constexpr bool kCausal = SDPA_CAUSAL != 0;
constexpr bool kWS = SDPA_WS != 0;
constexpr int kStages = SDPA_STAGES;
constexpr int BM = SDPA_BLOCK_M;
constexpr int BN = SDPA_BLOCK_N;
constexpr int kWarps = SDPA_WARPS;
constexpr bool kFastExp = SDPA_FAST_EXP != 0;
constexpr bool kPersistent = SDPA_PERSISTENT != 0;
constexpr bool kQInRegs = SDPA_Q_IN_REGS != 0;
constexpr bool kSwizzle = SDPA_KV_SWIZZLE != 0;
constexpr int kSplit = SDPA_SPLIT_KV;

// Warp layout: as many row groups as 16-row slices allow, the rest of the
// warps split each key tile.
constexpr int kWarpsM = cmin(kWarps, BM / 16);
constexpr int kWarpsN = kWarps / kWarpsM;
constexpr int kRowsPerWarp = BM / kWarpsM;
constexpr int kColsPerWarp = BN / kWarpsN;
constexpr int MT = kRowsPerWarp / 16;  // m16 tiles per warp
constexpr int NT = kColsPerWarp / 8;   // n8 tiles of S per warp
constexpr int KT = D / 16;             // k16 steps over the head dimension
constexpr int DT = D / 8;              // n8 tiles of O

constexpr int kConsumerThreads = kWarps * 32;
constexpr int kProducerThreads = SDPA_PRODUCER_WARPS * 32;  // used with WS only
constexpr int kThreads = kConsumerThreads + (kWS ? kProducerThreads : 0);

// Shared memory, in elements of the input dtype unless named bytes. Rows
// are D elements with the XOR swizzle, D+8 with padding; either way the 8
// rows an ldmatrix reads fall in 8 different 16-byte bank groups.
constexpr int kStride = kSwizzle ? D : D + 8;
constexpr int kQElems = BM * kStride;
constexpr int kTileElems = BN * kStride;
constexpr int kQBytes = kQElems * 2;
constexpr int kRingBytes = kStages * 2 * kTileElems * 2;
constexpr int kCombineOBytes = (kWarpsN - 1) * BM * D * 4;
constexpr int kCombineBytes = kWarpsN > 1 ? kCombineOBytes + 2 * kWarpsN * BM * 4 : 0;
// Without WS the combine area aliases Q and the ring (all loads are done by
// then); with WS producers may be filling the ring for the next tile, so it
// sits after the ring. kernels/sdpa.go SharedBytes computes the same.
constexpr int kCombineOffset = kWS ? kQBytes + kRingBytes : 0;
constexpr int kSmemBytes = kWS ? kQBytes + kRingBytes + kCombineBytes
                               : cmax(kQBytes + kRingBytes, kCombineBytes);

// Named barriers: 0 is __syncthreads, 1 syncs consumers only, then one
// "full" and one "empty" barrier per ring slot.
constexpr int kBarConsumers = 1;
constexpr int kBarFull = 2;
constexpr int kBarEmpty = 2 + kStages;

static_assert(D == 64 || D == 128, "SDPA_HEAD_DIM must be 64 or 128");
static_assert(BM % 16 == 0 && BM >= 16, "SDPA_BLOCK_M must be a multiple of 16");
static_assert(kWarps >= 1 && kWarps % kWarpsM == 0, "SDPA_WARPS must split into row groups evenly");
static_assert(BN % kWarpsN == 0 && kColsPerWarp % 16 == 0,
              "SDPA_BLOCK_N / warps per row group must be a multiple of 16 keys");
static_assert(kRowsPerWarp <= 64, "at most 64 query rows per warp");
static_assert(kStages >= 1 && kBarEmpty + kStages <= 16, "SDPA_STAGES out of range for named barriers");
static_assert(!kWS || kStages >= 2, "SDPA_WS=1 needs SDPA_STAGES >= 2");
static_assert(!kWS || SDPA_PRODUCER_WARPS >= 1, "SDPA_WS=1 needs producer warps");
static_assert(kThreads <= 1024, "more than 1024 threads per CTA");
static_assert(kSplit >= 1, "SDPA_SPLIT_KV must be positive");
static_assert(kSmemBytes <= 232448, "shared memory beyond any supported GPU");
#ifdef SDPA_EXPECT_SMEM
// Compile tests pass kernels.SharedBytes here so the Go side cannot drift.
static_assert(kSmemBytes == SDPA_EXPECT_SMEM, "kernels.SharedBytes disagrees with the kernel");
#endif

using elem = typename std::conditional<kBF16, __nv_bfloat16, __half>::type;

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ---- PTX wrappers ----------------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// cp.async of 16 bytes; src_bytes 0 zero-fills the destination (tail rows).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void bar_sync(int id, int n) {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int n) {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr)
                 : "memory");
}

// c += a * b for one m16n8k16 tile.
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    if constexpr (kBF16) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
            "{%0,%1,%2,%3};\n"
            : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

// pack2 rounds two floats to the input dtype, low half first.
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    if constexpr (kBF16) {
        __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
        return *reinterpret_cast<uint32_t*>(&v);
    } else {
        __half2 v = __floats2half2_rn(lo, hi);
        return *reinterpret_cast<uint32_t*>(&v);
    }
}

// exp_s is the softmax exponential in the domain the scores were scaled
// into: base 2 with scale*log2(e) folded in (fast), or base e (precise).
__device__ __forceinline__ float exp_s(float x) {
    if constexpr (kFastExp) {
        float y;
        asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
        return y;
    } else {
        return expf(x);
    }
}

// ---- shared-memory layout --------------------------------------------------

// Element offset of (row, col) in a tile; col is a multiple of 8 (one
// 16-byte chunk) wherever it is used.
__device__ __forceinline__ int tile_off(int row, int col) {
    if constexpr (kSwizzle) {
        return row * D + ((((col >> 3) ^ (row & 7))) << 3);
    } else {
        return row * kStride + col;
    }
}

// ldmatrix addresses along a row. A thread's fragments step along a tile
// row in k16 steps (32 bytes). With the swizzle the chunk index is XORed
// with row & 7, and since a step adds 2 to an even chunk index,
// (2k + c) ^ r == (2k) ^ (c ^ r): the step is an XOR by k << 5 with a
// compile-time k, as long as every row starts 256-byte aligned (the kernel
// checks its shared-memory base; tiles are whole multiples of 2 KB), and
// ptxas keeps one address per fragment pattern instead of one per step.
// Measured on the H100 (kernels/NOTES.md): at D=128 this frees 13-18
// registers and is 3-4% faster; at D=64 the per-step addresses, which ptxas
// folds into immediate offsets, are 3% faster on the long shapes. So the
// XOR stepping is used at D=128 only.
constexpr bool kXorStep = kSwizzle && D == 128;
constexpr int kRowBytes = kStride * 2;

// The address of the chunk k steps along the row from the chunk at byte
// address a (of the tile at t, row, col): a ^ (k << 5) with kXorStep, else
// computed from (row, col) afresh.
__device__ __forceinline__ uint32_t kstep(uint32_t a, uint32_t t, int row, int col, int k) {
    if constexpr (kXorStep) {
        return a ^ (uint32_t)(k << 5);
    } else {
        return t + tile_off(row, col + k * 16) * 2;
    }
}

// Copies rows [row0, row0+ROWS) of a [s, D] matrix into a tile with
// cp.async, NTHR threads cooperating; rows at or past s are zero-filled so
// 0 * garbage can never produce NaN. A thread always copies the same
// 16-byte column chunk, kRowStep rows apart, so its addresses are one base
// plus compile-time offsets (few live registers for the loop).
template <int ROWS, int NTHR>
__device__ __forceinline__ void load_tile(elem* tile, const elem* g, int row0, int s, int tid) {
    constexpr int kChunksPerRow = D / 8;
    static_assert(NTHR % kChunksPerRow == 0, "loader threads must cover whole rows");
    constexpr int kRowStep = NTHR / kChunksPerRow;
    constexpr int kIters = (ROWS + kRowStep - 1) / kRowStep;
    const int r0 = tid / kChunksPerRow;
    const int c0 = (tid % kChunksPerRow) * 8;
    const elem* src = g + (size_t)(row0 + r0) * D + c0;
    const uint32_t base = smem_addr(tile);
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
        const int r = r0 + it * kRowStep;
        if (ROWS % kRowStep == 0 || r < ROWS) {
            const bool ok = row0 + r < s;
            cp_async16(base + tile_off(r, c0) * 2, ok ? src + it * kRowStep * D : g, ok ? 16 : 0);
        }
    }
}

// ---- work decomposition ----------------------------------------------------

struct Tile {
    int bh;        // batch * heads + head
    int m0;        // first query row
    int split;     // key chunk
    int kb0, nkb;  // first key block and number of key blocks
};

__device__ __forceinline__ int num_tiles(const SdpaParams& p) {
    return p.b * p.h * ((p.s + BM - 1) / BM) * kSplit;
}

__device__ __forceinline__ Tile decode_tile(const SdpaParams& p, int t) {
    const int bhs = p.b * p.h;
    const int mblocks = (p.s + BM - 1) / BM;
    Tile w;
    w.split = t % kSplit;
    t /= kSplit;
    int mb;
    if constexpr (kCausal) {
        // Heaviest query blocks (most keys) first, so the tail of the grid
        // is short work.
        w.bh = t % bhs;
        mb = mblocks - 1 - t / bhs;
    } else {
        // Query blocks of one head side by side share its K/V in L2.
        mb = t % mblocks;
        w.bh = t / mblocks;
    }
    w.m0 = mb * BM;
    const int kblocks = (p.s + BN - 1) / BN;
    const int chunk = (kblocks + kSplit - 1) / kSplit;
    w.kb0 = w.split * chunk;
    int kb1 = cmin(kblocks, w.kb0 + chunk);
    if constexpr (kCausal) kb1 = cmin(kb1, (cmin(p.s, w.m0 + BM) + BN - 1) / BN);
    w.nkb = cmax(0, kb1 - w.kb0);
    return w;
}

template <class F>
__device__ __forceinline__ void for_each_tile(const SdpaParams& p, F f) {
    if constexpr (kPersistent) {
        const int n = num_tiles(p);
        for (int t = blockIdx.x; t < n; t += gridDim.x) f(decode_tile(p, t));
    } else {
        f(decode_tile(p, blockIdx.x));
    }
}

// ---- consumer math ---------------------------------------------------------

// The per-warp accumulator state: O in mma C layout, and for each of the
// thread's two rows per m16 tile the running max (scaled domain) and the
// thread's partial row sum (reduced over the quad at the end).
struct Acc {
    float o[MT][DT][4];
    float m[MT][2];
    float l[MT][2];
};

__device__ __forceinline__ void acc_init(Acc& a) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
        for (int dt = 0; dt < DT; ++dt)
#pragma unroll
            for (int e = 0; e < 4; ++e) a.o[mt][dt][e] = 0.f;
        a.m[mt][0] = a.m[mt][1] = -INFINITY;
        a.l[mt][0] = a.l[mt][1] = 0.f;
    }
}

using QFrag = uint32_t[kQInRegs ? MT : 1][kQInRegs ? KT : 1][4];

// The thread's row and column of Q's A fragment for (mt 0, kt 0), and that
// chunk's address; (mt, kt) is 16 rows per mt on and kstep'ed by kt.
__device__ __forceinline__ int q_frag_row(int wm, int lane) { return wm * kRowsPerWarp + (lane & 15); }
__device__ __forceinline__ int q_frag_col(int lane) { return (lane >> 4) * 8; }
__device__ __forceinline__ uint32_t q_frag_addr(uint32_t sq, int wm, int lane) {
    return sq + tile_off(q_frag_row(wm, lane), q_frag_col(lane)) * 2;
}

// Q's A fragment for (mt, kt), from shared memory.
__device__ __forceinline__ void load_q_frag(uint32_t (&a)[4], uint32_t sq, uint32_t qa, int wm, int mt, int kt,
                                            int lane) {
    ldsm_x4(a, kstep(qa + mt * 16 * kRowBytes, sq, q_frag_row(wm, lane) + mt * 16, q_frag_col(lane), kt));
}

__device__ __forceinline__ void load_q_regs(QFrag& qf, uint32_t sq, int wm, int lane) {
    if constexpr (kQInRegs) {
        const uint32_t qa = q_frag_addr(sq, wm, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int kt = 0; kt < KT; ++kt) load_q_frag(qf[mt][kt], sq, qa, wm, mt, kt, lane);
    }
}

// attend folds one K/V tile (keys kv0..kv0+BN-1) into the warp's state.
__device__ __forceinline__ void attend(Acc& acc, const QFrag& qf, uint32_t sq, uint32_t sk, uint32_t sv,
                                       int m0, int kv0, int s, float sc, int wm, int wn, int lane) {
    // S = Q K^T over this warp's rows and key slice. One base address per
    // fragment pattern; rows move by 16 per tile, columns by kstep.
    const uint32_t qa = kQInRegs ? 0u : q_frag_addr(sq, wm, lane);
    const int krow = wn * kColsPerWarp + (lane & 7) + (lane >> 4) * 8, kcol = ((lane >> 3) & 1) * 8;
    const int vrow = wn * kColsPerWarp + (lane & 7) + ((lane >> 3) & 1) * 8, vcol = (lane >> 4) * 8;
    const uint32_t ka = sk + tile_off(krow, kcol) * 2;
    const uint32_t va = sv + tile_off(vrow, vcol) * 2;
    float sacc[MT][NT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) sacc[mt][nt][e] = 0.f;

#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            if constexpr (kQInRegs) {
#pragma unroll
                for (int e = 0; e < 4; ++e) a[mt][e] = qf[mt][kt][e];
            } else {
                load_q_frag(a[mt], sq, qa, wm, mt, kt, lane);
            }
        }
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
            uint32_t b[4];
            ldsm_x4(b, kstep(ka + np * 16 * kRowBytes, sk, krow + np * 16, kcol, kt));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816(sacc[mt][2 * np], a[mt], b[0], b[1]);
                mma16816(sacc[mt][2 * np + 1], a[mt], b[2], b[3]);
            }
        }
    }

    // Mask the key tail and the causal triangle where this tile reaches
    // them. Scores stay unscaled until the exponential: the scale is folded
    // into one FFMA there (scale > 0, so the row max commutes with it).
    const int g = lane >> 2, t4 = lane & 3;
    if (kv0 + BN > s || (kCausal && kv0 + BN - 1 > m0)) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int row = m0 + wm * kRowsPerWarp + mt * 16 + g + (e >> 1) * 8;
                    const int key = kv0 + wn * kColsPerWarp + nt * 8 + t4 * 2 + (e & 1);
                    if (key >= s || (kCausal && key > row)) sacc[mt][nt][e] = -INFINITY;
                }
    }

    // Online softmax, one row half (h) at a time: rows g and g+8. The
    // running max acc.m is kept in the scaled domain.
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float mx = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) mx = fmaxf(mx, fmaxf(sacc[mt][nt][2 * h], sacc[mt][nt][2 * h + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            mx = fmaxf(acc.m[mt][h], mx * sc);
            // A row with every key so far masked keeps m = -inf; subtract 0
            // then, so exp gives 0 rather than NaN.
            const float mu = mx == -INFINITY ? 0.f : mx;
            const float alpha = exp_s(acc.m[mt][h] - mu);
            acc.m[mt][h] = mx;
            float sum = 0.f;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const float p0 = exp_s(fmaf(sacc[mt][nt][2 * h], sc, -mu));
                const float p1 = exp_s(fmaf(sacc[mt][nt][2 * h + 1], sc, -mu));
                sacc[mt][nt][2 * h] = p0;
                sacc[mt][nt][2 * h + 1] = p1;
                sum += p0 + p1;
            }
            acc.l[mt][h] = acc.l[mt][h] * alpha + sum;
#pragma unroll
            for (int dt = 0; dt < DT; ++dt) {
                acc.o[mt][dt][2 * h] *= alpha;
                acc.o[mt][dt][2 * h + 1] *= alpha;
            }
        }

    // O += P V: P's C fragments of two adjacent n8 tiles are the A fragment
    // of one k16 step, so P never leaves registers.
#pragma unroll
    for (int kk = 0; kk < NT / 2; ++kk) {
        uint32_t pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            pa[mt][0] = pack2(sacc[mt][2 * kk][0], sacc[mt][2 * kk][1]);
            pa[mt][1] = pack2(sacc[mt][2 * kk][2], sacc[mt][2 * kk][3]);
            pa[mt][2] = pack2(sacc[mt][2 * kk + 1][0], sacc[mt][2 * kk + 1][1]);
            pa[mt][3] = pack2(sacc[mt][2 * kk + 1][2], sacc[mt][2 * kk + 1][3]);
        }
#pragma unroll
        for (int dp = 0; dp < DT / 2; ++dp) {
            uint32_t b[4];
            ldsm_x4_trans(b, kstep(va + kk * 16 * kRowBytes, sv, vrow + kk * 16, vcol, dp));
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16816(acc.o[mt][2 * dp], pa[mt], b[0], b[1]);
                mma16816(acc.o[mt][2 * dp + 1], pa[mt], b[2], b[3]);
            }
        }
    }
}

// consumer_sync is a barrier over the consumer warps only.
__device__ __forceinline__ void consumer_sync() {
    if constexpr (kWS) {
        bar_sync(kBarConsumers, kConsumerThreads);
    } else {
        __syncthreads();
    }
}

// finish reduces the row sums over the quad, merges the WARPS_N partial
// states through shared memory, normalises and stores the tile's output
// (or, with split-kv, its fp32 partial and log-sum-exp).
__device__ __forceinline__ void finish(Acc& acc, const SdpaParams& p, const Tile& w, char* smem, int wm,
                                       int wn, int lane) {
    const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            acc.l[mt][h] += __shfl_xor_sync(0xffffffffu, acc.l[mt][h], 1);
            acc.l[mt][h] += __shfl_xor_sync(0xffffffffu, acc.l[mt][h], 2);
        }

    if constexpr (kWarpsN > 1) {
        float4* opart = reinterpret_cast<float4*>(smem + kCombineOffset);
        float2* ml = reinterpret_cast<float2*>(smem + kCombineOffset + kCombineOBytes);  // [WARPS_N][BM]
        consumer_sync();  // nothing still reads the area (ring, Q, last tile's merge)
        if (t4 == 0) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    ml[wn * BM + wm * kRowsPerWarp + mt * 16 + g + 8 * h] = make_float2(acc.m[mt][h], acc.l[mt][h]);
        }
        consumer_sync();
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int r = wm * kRowsPerWarp + mt * 16 + g + 8 * h;
                float mx = -INFINITY;
#pragma unroll
                for (int j = 0; j < kWarpsN; ++j) mx = fmaxf(mx, ml[j * BM + r].x);
                const float mu = mx == -INFINITY ? 0.f : mx;
                float l = 0.f;
#pragma unroll
                for (int j = 0; j < kWarpsN; ++j) {
                    const float2 v = ml[j * BM + r];
                    l += v.y * exp_s(v.x - mu);
                }
                const float wgt = exp_s(acc.m[mt][h] - mu);
                acc.m[mt][h] = mx;
                acc.l[mt][h] = l;
#pragma unroll
                for (int dt = 0; dt < DT; ++dt) {
                    acc.o[mt][dt][2 * h] *= wgt;
                    acc.o[mt][dt][2 * h + 1] *= wgt;
                }
            }
        // Slices 1.. hand their scaled O to slice 0 in fragment order, so
        // every access is one conflict-free float4 per lane.
        const auto slot = [&](int j, int mt, int dt) { return (((j - 1) * kWarpsM + wm) * MT + mt) * DT + dt; };
        if (wn > 0) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int dt = 0; dt < DT; ++dt)
                    opart[slot(wn, mt, dt) * 32 + lane] =
                        make_float4(acc.o[mt][dt][0], acc.o[mt][dt][1], acc.o[mt][dt][2], acc.o[mt][dt][3]);
        }
        consumer_sync();
        if (wn > 0) return;
#pragma unroll
        for (int j = 1; j < kWarpsN; ++j)
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int dt = 0; dt < DT; ++dt) {
                    const float4 v = opart[slot(j, mt, dt) * 32 + lane];
                    acc.o[mt][dt][0] += v.x;
                    acc.o[mt][dt][1] += v.y;
                    acc.o[mt][dt][2] += v.z;
                    acc.o[mt][dt][3] += v.w;
                }
    }

    const size_t rows = (size_t)p.b * p.h * p.s;
    const size_t head = (size_t)w.bh * p.s;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = w.m0 + wm * kRowsPerWarp + mt * 16 + g + 8 * h;
            if (row >= p.s) continue;
            const float l = acc.l[mt][h];
            const float inv = l > 0.f ? 1.f / l : 0.f;  // a row with no key writes 0
            if constexpr (kSplit == 1) {
                elem* o = static_cast<elem*>(p.o) + (head + row) * D;
#pragma unroll
                for (int dt = 0; dt < DT; ++dt)
                    *reinterpret_cast<uint32_t*>(o + dt * 8 + t4 * 2) =
                        pack2(acc.o[mt][dt][2 * h] * inv, acc.o[mt][dt][2 * h + 1] * inv);
            } else {
                float* o = p.o_part + ((size_t)w.split * rows + head + row) * D;
#pragma unroll
                for (int dt = 0; dt < DT; ++dt)
                    *reinterpret_cast<float2*>(o + dt * 8 + t4 * 2) =
                        make_float2(acc.o[mt][dt][2 * h] * inv, acc.o[mt][dt][2 * h + 1] * inv);
                if (t4 == 0) {
                    const float m = kFastExp ? acc.m[mt][h] * kLn2 : acc.m[mt][h];
                    p.lse_part[(size_t)w.split * rows + head + row] = l > 0.f ? m + logf(l) : -INFINITY;
                }
            }
        }
}

// ---- the two pipelines -----------------------------------------------------

// Every warp loads and computes; up to STAGES-1 tiles are in flight ahead of
// the one being computed.
__device__ __forceinline__ void run_cooperative(const SdpaParams& p, char* smem) {
    elem* sq = reinterpret_cast<elem*>(smem);
    elem* ring = sq + kQElems;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp % kWarpsM, wn = warp / kWarpsM;
    const float sc = p.scale * (kFastExp ? kLog2e : 1.f);

    for_each_tile(p, [&](const Tile& w) {
        Acc acc;
        acc_init(acc);
        QFrag qf;
        if constexpr (kPersistent) __syncthreads();  // the last tile's readers are done
        if (w.nkb > 0) {
            const size_t head = (size_t)w.bh * p.s * D;
            const elem* q = static_cast<const elem*>(p.q) + head;
            const elem* k = static_cast<const elem*>(p.k) + head;
            const elem* v = static_cast<const elem*>(p.v) + head;
            const auto load_kv = [&](int j) {
                elem* sk = ring + (j % kStages) * 2 * kTileElems;
                const int kv0 = (w.kb0 + j) * BN;
                load_tile<BN, kConsumerThreads>(sk, k, kv0, p.s, tid);
                load_tile<BN, kConsumerThreads>(sk + kTileElems, v, kv0, p.s, tid);
            };
            load_tile<BM, kConsumerThreads>(sq, q, w.m0, p.s, tid);
            cp_async_commit();
#pragma unroll
            for (int j = 0; j < kStages - 1; ++j) {
                if (j < w.nkb) load_kv(j);
                cp_async_commit();  // empty groups keep the group count fixed
            }
            if constexpr (kQInRegs) {
                cp_async_wait<kStages - 1>();  // Q only
                __syncthreads();
                load_q_regs(qf, smem_addr(sq), wm, lane);
            }
            for (int j = 0; j < w.nkb; ++j) {
                if constexpr (kStages == 1) {
                    load_kv(j);
                    cp_async_commit();
                    cp_async_wait<0>();
                    __syncthreads();
                } else {
                    // Groups so far: Q, tiles 0..S-2, then one per earlier
                    // iteration; tile j's is done when S-2 are pending.
                    cp_async_wait<kStages - 2>();
                    // One barrier per tile: past it tile j is visible to
                    // every warp, and every warp is done with tile j-1, so
                    // its slot takes tile j+S-1 while tile j is computed.
                    __syncthreads();
                    if (j + kStages - 1 < w.nkb) load_kv(j + kStages - 1);
                    cp_async_commit();  // empty groups keep the count fixed
                }
                const uint32_t sk = smem_addr(ring + (j % kStages) * 2 * kTileElems);
                attend(acc, qf, smem_addr(sq), sk, sk + kTileElems * 2, w.m0, (w.kb0 + j) * BN, p.s, sc, wm, wn,
                       lane);
                if constexpr (kStages == 1) __syncthreads();  // the slot is free for the next load
            }
        }
        finish(acc, p, w, smem, wm, wn, lane);
    });
}

// Producer warps stream K/V tiles into the ring; consumer warps compute.
// Slot i of the ring is handed over with barrier kBarFull+i (producers
// arrive, consumers wait) and handed back with kBarEmpty+i (consumers
// arrive, producers wait). The ring position runs on across tiles.
__device__ __forceinline__ void run_specialised(const SdpaParams& p, char* smem) {
    elem* sq = reinterpret_cast<elem*>(smem);
    elem* ring = sq + kQElems;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    if (warp >= kWarps) {
        const int ptid = tid - kConsumerThreads;
        int it = 0;
        for_each_tile(p, [&](const Tile& w) {
            const size_t head = (size_t)w.bh * p.s * D;
            const elem* k = static_cast<const elem*>(p.k) + head;
            const elem* v = static_cast<const elem*>(p.v) + head;
            for (int j = 0; j < w.nkb; ++j, ++it) {
                const int slot = it % kStages;
                if (it >= kStages) bar_sync(kBarEmpty + slot, kThreads);
                elem* sk = ring + slot * 2 * kTileElems;
                const int kv0 = (w.kb0 + j) * BN;
                load_tile<BN, kProducerThreads>(sk, k, kv0, p.s, ptid);
                load_tile<BN, kProducerThreads>(sk + kTileElems, v, kv0, p.s, ptid);
                cp_async_commit();
                cp_async_wait<0>();  // the data has landed before "full" is signalled
                __threadfence_block();
                bar_arrive(kBarFull + slot, kThreads);
            }
        });
        // Match the consumers' last hand-backs so no barrier is left pending.
        for (int j = cmax(it - kStages, 0); j < it; ++j) bar_sync(kBarEmpty + j % kStages, kThreads);
        return;
    }

    const int wm = warp % kWarpsM, wn = warp / kWarpsM;
    const float sc = p.scale * (kFastExp ? kLog2e : 1.f);
    int it = 0;
    for_each_tile(p, [&](const Tile& w) {
        Acc acc;
        acc_init(acc);
        QFrag qf;
        if constexpr (kPersistent) consumer_sync();  // the last tile's Q readers are done
        if (w.nkb > 0) {
            const elem* q = static_cast<const elem*>(p.q) + (size_t)w.bh * p.s * D;
            load_tile<BM, kConsumerThreads>(sq, q, w.m0, p.s, tid);
            cp_async_commit();
            cp_async_wait<0>();
            consumer_sync();
            load_q_regs(qf, smem_addr(sq), wm, lane);
            for (int j = 0; j < w.nkb; ++j, ++it) {
                const int slot = it % kStages;
                bar_sync(kBarFull + slot, kThreads);
                const uint32_t sk = smem_addr(ring + slot * 2 * kTileElems);
                attend(acc, qf, smem_addr(sq), sk, sk + kTileElems * 2, w.m0, (w.kb0 + j) * BN, p.s, sc, wm, wn,
                       lane);
                bar_arrive(kBarEmpty + slot, kThreads);
            }
        }
        finish(acc, p, w, smem, wm, wn, lane);
    });
}

}  // namespace sdpa

extern "C" __global__ void __launch_bounds__(sdpa::kThreads, SDPA_MIN_BLOCKS) sdpa_fwd(const SdpaParams p) {
    extern __shared__ __align__(1024) char smem[];
    // A launch with less shared memory than this build uses, or for another
    // head dimension, would silently corrupt; stop it instead. The XOR
    // kstep needs the tiles 256-byte aligned.
    uint32_t dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(dyn));
    if (dyn < (uint32_t)sdpa::kSmemBytes || p.d != sdpa::D || (sdpa::smem_addr(smem) & 255u) != 0) __trap();
    if constexpr (sdpa::kWS) {
        sdpa::run_specialised(p, smem);
    } else {
        sdpa::run_cooperative(p, smem);
    }
}

// sdpa_combine merges the SPLIT_KV partial outputs of each row, weighting
// each by exp(lse - max lse); a row whose chunks are all empty writes 0.
// One warp per row, 4 rows per 128-thread block, striding over all rows.
extern "C" __global__ void __launch_bounds__(128) sdpa_combine(const SdpaParams p) {
    using namespace sdpa;
    constexpr int kRowsPerBlock = 4;
    constexpr int kPerLane = D / 32;  // 2 or 4 elements, in float2 pairs
    const size_t rows = (size_t)p.b * p.h * p.s;
    const int lane = threadIdx.x & 31;
    for (size_t row = (size_t)blockIdx.x * kRowsPerBlock + (threadIdx.x >> 5); row < rows;
         row += (size_t)gridDim.x * kRowsPerBlock) {
        float lse[kSplit];
        float mx = -INFINITY;
#pragma unroll
        for (int s = 0; s < kSplit; ++s) {
            lse[s] = p.lse_part[s * rows + row];
            mx = fmaxf(mx, lse[s]);
        }
        float acc[kPerLane] = {};
        if (mx != -INFINITY) {
            float total = 0.f;
#pragma unroll
            for (int s = 0; s < kSplit; ++s) {
                const float wgt = expf(lse[s] - mx);
                total += wgt;
                const float* o = p.o_part + (s * rows + row) * D + lane * kPerLane;
#pragma unroll
                for (int e = 0; e < kPerLane; e += 2) {
                    const float2 v = *reinterpret_cast<const float2*>(o + e);
                    acc[e] += wgt * v.x;
                    acc[e + 1] += wgt * v.y;
                }
            }
            const float inv = 1.f / total;
#pragma unroll
            for (int e = 0; e < kPerLane; ++e) acc[e] *= inv;
        }
        elem* o = static_cast<elem*>(p.o) + row * D + lane * kPerLane;
#pragma unroll
        for (int e = 0; e < kPerLane; e += 2) *reinterpret_cast<uint32_t*>(o + e) = pack2(acc[e], acc[e + 1]);
    }
}
