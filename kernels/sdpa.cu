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
// fp8 (SDPA_FP8=1): Q, K and V are E4M3 bytes with per-tensor
// dequantisation scales (q_scale, k_scale, v_scale in SdpaParams); O is fp16,
// or bf16 with SDPA_OUT_BF16. S = Q K^T runs as mma.sync m16n8k32 e4m3 with
// the same byte-level ldmatrix addressing as fp16 (a 16-byte chunk is 16
// elements instead of 8); q_scale*k_scale folds into the softmax scale. V
// stays [key][d] in shared memory: one ldmatrix.trans of 16-bit pairs gives a
// thread keys (2t, 2t+1) x columns (2g, 2g+1), and two prmt per register pair
// regroup them into the k-major B operand of four keys {2t, 2t+1, 2t+8, 2t+9}
// for one column, even columns and odd columns in separate n8 tiles. P's A
// fragment takes its keys in that same order straight from the S
// accumulators, so no shuffle and no shared-memory transpose is needed; O's
// columns come out permuted (d = 16c + 4t + {0,2} even tile, {1,3} odd
// tile), which the stores undo. P is quantised to E4M3 as exp(s - m + 8 ln2)
// in (0, 256] (the 2^8 cancels in O = sum P V / sum P and keeps small
// probabilities out of E4M3's subnormals), or, with SDPA_PV_FP8=0, P stays
// fp16 and V is widened to fp16 in registers. With SDPA_PV_ACCUM=1 each tile's
// P V goes into a fresh accumulator that is added into the fp32 O (the fp8
// mma's accumulator keeps fewer than 32 mantissa bits). With SDPA_QK_ACCUM=1
// Q K^T does the same over D: each k32 step into a fresh accumulator, added
// in fp32 (Hopper's E4M3 wgmma, chained, failed the gate at input scale 16;
// the wgmma path always splits; kernels/NOTES.md, "wgmma"). With
// SDPA_QK_F16=1 (mma.sync only) Q K^T runs in fp16 instead: Q's fragments are
// widened to fp16 once per CTA, K's per tile, and each k32 step is two
// m16n8k16 fp16 MMAs with D's positions paired alike in A and B (exact: E4M3
// is a subset of fp16, summed in fp32 as sm_90 sums its unpacked E4M3).
// With SDPA_V_GIVEN=1 (the problem's V comes transposed, V^T [b, h, d, sp],
// sp = s rounded up to 16, keys >= s zero) a V tile is D rows of BLOCK_N key
// bytes in shared memory and a plain ldmatrix gives a thread four
// consecutive keys (4t..4t+3) of one column: the m16n8k32 B operand as it
// is, and for P V in fp16 two widened pairs, with no prmt. P's A fragment
// must then hold keys 4t..4t+3 too, so K's tile rows are loaded reordered
// within each 16 (row r holds key key_of_row(r)): the S accumulators of two
// adjacent n8 tiles hold keys {4t, 4t+1} and {4t+2, 4t+3}. O's columns come
// out in order, stored as fp16's are.
//
// int8 (SDPA_INT8=1): Q, K and V are int8 bytes in the same one-byte tiles
// as fp8. Q and K carry one dequantisation scale per row (q_row_scale,
// k_row_scale), V one per column (v_col_scale). S = Q K^T runs as mma.sync
// m16n8k32 s8 into int32, exact; each key's scale multiplies its column of
// S as it leaves the accumulator, each query row's scale folds into that
// row's softmax factor, and V's column scales multiply O at the store. P V
// runs in fp16 as pv_f16 does, V's bytes widened exactly by the 1024-bias
// trick (prmt under an fp16 exponent whose ulp is 1, one HSUB2).
//
// SDPA_WGMMA=1 (the knob wgmma=qk; one-byte inputs, an sm_90a build): Q K^T
// runs as Hopper's wgmma m64nNk32 instead, four warps of consecutive row
// groups forming a warpgroup, Q's A fragments from registers and K's tile
// read by a shared-memory descriptor (its one-byte rows are wgmma's 64- or
// 128-byte swizzle as they are). The scores land in mma.sync's C layout, so
// everything after them is unchanged. SDPA_WGMMA=2 (P V in fp16; not in the space)
// runs P V as wgmma as well, from an fp16 copy of V's tile that the consumer
// threads widen once per tile (columns permuted as O's already are).
// kernels/NOTES.md, "wgmma for Q K^T and P V".
//
// Every knob below is a -D macro with the default of kernels/sdpa_space.go.
// Problem macros (SDPA_HEAD_DIM, SDPA_BF16, SDPA_CAUSAL, SDPA_FP8,
// SDPA_INT8, SDPA_OUT_BF16, SDPA_V_GIVEN) are fixed per problem.

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
#ifndef SDPA_FP8
#define SDPA_FP8 0
#endif
#ifndef SDPA_INT8
#define SDPA_INT8 0
#endif
#ifndef SDPA_OUT_BF16
#define SDPA_OUT_BF16 0
#endif
#ifndef SDPA_V_GIVEN
#define SDPA_V_GIVEN 0
#endif
#ifndef SDPA_PV_FP8
#define SDPA_PV_FP8 1
#endif
#ifndef SDPA_PV_ACCUM
#define SDPA_PV_ACCUM 1
#endif
#ifndef SDPA_QK_ACCUM
#define SDPA_QK_ACCUM 1
#endif
#ifndef SDPA_QK_F16
#define SDPA_QK_F16 0
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
#ifndef SDPA_WGMMA
#define SDPA_WGMMA 0
#endif
// SDPA_WGMMA is the one switch; these two name its parts for the #ifs below.
#if defined(SDPA_QK_WGMMA) || defined(SDPA_PV_WGMMA)
#error "set SDPA_WGMMA (0: mma.sync, 1: Q K^T as wgmma, 2: Q K^T and P V as wgmma), not its parts"
#endif
#define SDPA_QK_WGMMA (SDPA_WGMMA >= 1)
#define SDPA_PV_WGMMA (SDPA_WGMMA >= 2)


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
constexpr bool kFP8 = SDPA_FP8 != 0;
constexpr bool kInt8 = SDPA_INT8 != 0;
// One-byte inputs: E4M3 or int8.
constexpr bool kByte = kFP8 || kInt8;
// The output dtype: the input dtype, or for one-byte inputs fp16 unless
// SDPA_OUT_BF16.
constexpr bool kOutBF16 = kByte ? SDPA_OUT_BF16 != 0 : kBF16;
// fp8's V given transposed by the caller (V^T tiles, K rows reordered).
constexpr bool kVGiven = SDPA_V_GIVEN != 0;
// P V in fp8 (P and V E4M3) or, for fp8 inputs with SDPA_PV_FP8=0, in fp16.
constexpr bool kPVFP8 = kFP8 && SDPA_PV_FP8 != 0;
// Two-level accumulation of P V (one-byte inputs only).
constexpr bool kPVAccum = kByte && SDPA_PV_ACCUM != 0;
// Two-level accumulation of fp8's Q K^T over D on mma.sync (wgmma always).
constexpr bool kQKAccum = kFP8 && SDPA_QK_ACCUM != 0;
// Q K^T of one-byte inputs as Hopper's asynchronous warpgroup MMA (sm_90a).
constexpr bool kWgmma = SDPA_QK_WGMMA != 0;
// fp8's Q K^T in fp16 on mma.sync: Q widened once, K per tile.
constexpr bool kQKF16 = SDPA_QK_F16 != 0;
// P V as wgmma too, from an fp16 copy of V widened once per tile (below).
constexpr bool kPVWgmma = SDPA_PV_WGMMA != 0;
// Bytes of an input element, input elements per 16-byte chunk, chunks per row.
constexpr int kEsz = kByte ? 1 : 2;
constexpr int kVec = 16 / kEsz;
constexpr int kChunks = D * kEsz / 16;

// Warp layout: as many row groups as 16-row slices allow, the rest of the
// warps split each key tile.
constexpr int kWarpsM = cmin(kWarps, BM / 16);
constexpr int kWarpsN = kWarps / kWarpsM;
constexpr int kRowsPerWarp = BM / kWarpsM;
constexpr int kColsPerWarp = BN / kWarpsN;
constexpr int MT = kRowsPerWarp / 16;  // m16 tiles per warp
constexpr int NT = kColsPerWarp / 8;   // n8 tiles of S per warp
constexpr int KT = D * kEsz / 32;      // k steps over the head dimension (k16, or k32 for one-byte inputs)
constexpr int DT = D / 8;              // n8 tiles of O

constexpr int kConsumerThreads = kWarps * 32;
constexpr int kProducerThreads = SDPA_PRODUCER_WARPS * 32;  // used with WS only
constexpr int kThreads = kConsumerThreads + (kWS ? kProducerThreads : 0);

// Shared memory, in elements of the input dtype unless named bytes. Rows
// are D elements with the XOR swizzle, D plus one 16-byte chunk with
// padding; either way the 8 rows an ldmatrix reads fall in 8 different
// 16-byte bank groups.
constexpr int kStride = kSwizzle ? D : D + kVec;
constexpr int kQElems = BM * kStride;
constexpr int kTileElems = BN * kStride;
constexpr int kQBytes = kQElems * kEsz;
constexpr int kRingBytes = kStages * 2 * kTileElems * kEsz;
constexpr int kCombineOBytes = (kWarpsN - 1) * BM * D * 4;
constexpr int kCombineBytes = kWarpsN > 1 ? kCombineOBytes + 2 * kWarpsN * BM * 4 : 0;
// Without WS the combine area aliases Q and the ring (all loads are done by
// then); with WS producers may be filling the ring for the next tile, so it
// sits after the ring. kernels/sdpa.go SharedBytes computes the same.
// With SDPA_WGMMA=2 two fp16 copies of a V tile follow the ring (tile j
// widens into copy j & 1), in wgmma's 128-byte MN-major swizzle: 64-column
// atoms of 128-byte key rows, the atoms one after the other.
constexpr int kVWTileBytes = kPVWgmma ? BN * D * 2 : 0;
constexpr int kVWOffset = kQBytes + kRingBytes;
constexpr int kVWBytes = 2 * kVWTileBytes;
constexpr int kCombineOffset = kWS ? kQBytes + kRingBytes + kVWBytes : 0;
constexpr int kSmemBytes = kWS ? kQBytes + kRingBytes + kVWBytes + kCombineBytes
                               : cmax(kQBytes + kRingBytes + kVWBytes, kCombineBytes);

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
static_assert(!(kFP8 && kInt8), "SDPA_FP8 and SDPA_INT8 exclude each other");
static_assert(!kByte || kColsPerWarp % 32 == 0, "one-byte P V takes a warp's keys 32 at a time (one ldmatrix.trans x4)");
static_assert(!kByte || (DT / kWarpsN) % 2 == 0, "one-byte inputs keep O's even and odd column tiles in one key slice");
// wgmma: four warps of consecutive row groups and one key slice form a
// warpgroup; Q's A fragments come from registers and K's B operand straight
// from its swizzled tile, whose rows (64 or 128 bytes) are exactly the 64- or
// 128-byte swizzle of the wgmma shared-memory descriptor.
static_assert(SDPA_WGMMA >= 0 && SDPA_WGMMA <= 2, "SDPA_WGMMA is 0, 1 or 2");
static_assert(!kWgmma || kByte, "SDPA_WGMMA takes one-byte inputs (fp8 or int8)");
static_assert(!kWgmma || (kWarpsM % 4 == 0 && kSwizzle && kQInRegs),
              "SDPA_WGMMA needs row groups in fours (block_m >= 64, warps >= 4), the swizzled layout and Q in registers");
static_assert(!kWgmma || (kColsPerWarp == 32 || kColsPerWarp == 64 || kColsPerWarp == 128 || kColsPerWarp == 256),
              "SDPA_WGMMA takes key slices of 32 to 256 keys");
static_assert(!kQKF16 || (kFP8 && !kWgmma && kQInRegs),
              "SDPA_QK_F16 takes fp8 inputs on mma.sync (SDPA_WGMMA=0) with Q in registers");
static_assert(!kPVWgmma || !kPVFP8, "SDPA_WGMMA=2 needs P V in fp16 (pv_fp8=0 for fp8)");
static_assert(!kVGiven || (kFP8 && !kPVWgmma), "SDPA_V_GIVEN takes fp8 inputs with P V on mma.sync (SDPA_WGMMA 0 or 1)");
// P V as wgmma is wrong from the second key tile on in some builds (every
// ws=1 build tried, D=128 with 128-key tiles): ptxas gives P's fragments the
// registers of Q's, which the next tile's Q K^T reads again
// (results/2026-11-26-h100-fp8-profile, kernels/testdata/sass). The ws=1
// builds are refused; TestCompileWgmmaQK checks the SASS of the others.
static_assert(!kPVWgmma || !kWS, "SDPA_WGMMA=2 is refused with SDPA_WS=1 (ptxas loses Q's fragments: kernels/NOTES.md)");
#if SDPA_QK_WGMMA && defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
// (nvcc's -arch=sm_90a with -c also runs a compute_90 pass, which lands here.)
#error "SDPA_WGMMA needs sm_90a: nvcc -gencode arch=compute_90a,code=sm_90a"
#endif
#if SDPA_QK_WGMMA && defined(__CUDACC_VER_MAJOR__) && __CUDACC_VER_MAJOR__ < 12
#error "SDPA_WGMMA needs nvcc 12.0 or newer (wgmma is PTX ISA 8.0)"
#endif
#ifdef SDPA_EXPECT_SMEM
// Compile tests pass kernels.SharedBytes here so the Go side cannot drift.
static_assert(kSmemBytes == SDPA_EXPECT_SMEM, "kernels.SharedBytes disagrees with the kernel");
#endif

// elem is the input element (bytes for fp8 and int8), oelem the output's.
using oelem = typename std::conditional<kOutBF16, __nv_bfloat16, __half>::type;
using elem = typename std::conditional<kByte, uint8_t, oelem>::type;

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
// cp_async_wait waits until at most N groups are pending. With wgmma the
// landed tiles are read through the async proxy, so each thread's writes are
// fenced for it before the barrier that hands them over.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
    if constexpr (kWgmma) asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
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

// c += a * b for one m16n8k32 tile of E4M3 (sm_89+, PTX ISA 8.4).
__device__ __forceinline__ void mma16832(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if SDPA_FP8
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// c += a * b for one m16n8k16 tile of fp16 (fp8's P V with pv_fp8=0, and its
// Q K^T with SDPA_QK_F16).
__device__ __forceinline__ void mma16816_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

#if SDPA_QK_WGMMA
// The shared-memory descriptor of a K-major tile of one-byte rows at addr:
// 64-byte rows take the 64-byte swizzle, 128-byte rows the 128-byte one (the
// layouts tile_off writes); 8-row groups are 8 rows apart, and the leading
// offset is unused (one k32 step stays inside a row's swizzle atom).
__device__ __forceinline__ uint64_t wg_desc(uint32_t addr) {
    constexpr uint64_t kMode = D * kEsz == 128 ? 1 : 2;
    constexpr uint64_t kGroup = 8 * D * kEsz;
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | (1ull << 16) | ((kGroup >> 4) << 32) | (kMode << 62);
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// wg_pin keeps the compiler from moving a register across the asynchronous
// MMA's issue and wait.
__device__ __forceinline__ void wg_pin(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void wg_pin(int& x) { asm volatile("" : "+r"(x)::"memory"); }
template <class T, int A, int B>
__device__ __forceinline__ void wg_pin(T (&x)[A][B][4]) {
#pragma unroll
    for (int i = 0; i < A; ++i)
#pragma unroll
        for (int j = 0; j < B; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) wg_pin(x[i][j][e]);
}

// The operand lists of the wgmma wrappers below: accumulators first (%0 on),
// then A's four registers, the descriptor and the accumulate flag.
#define WG_D0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define WG_D1 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WG_D2 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define WG_D3 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WG_D4 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79"
#define WG_D5 "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define WG_D6 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111"
#define WG_D7 "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define WG_D16 WG_D0
#define WG_D32 WG_D0 ", " WG_D1
#define WG_D64 WG_D32 ", " WG_D2 ", " WG_D3
#define WG_D128 WG_D64 ", " WG_D4 ", " WG_D5 ", " WG_D6 ", " WG_D7
#define WG_C4(R, c, j) R(c[j][0]), R(c[j][1]), R(c[j][2]), R(c[j][3])
#define WG_C16(R, c) WG_C4(R, c, 0), WG_C4(R, c, 1), WG_C4(R, c, 2), WG_C4(R, c, 3)
#define WG_C16AT(R, c, j) WG_C4(R, c, j), WG_C4(R, c, j + 1), WG_C4(R, c, j + 2), WG_C4(R, c, j + 3)
#define WG_C32(R, c) WG_C16AT(R, c, 0), WG_C16AT(R, c, 4)
#define WG_C64(R, c) WG_C32(R, c), WG_C16AT(R, c, 8), WG_C16AT(R, c, 12)
#define WG_C128(R, c) WG_C64(R, c), WG_C16AT(R, c, 16), WG_C16AT(R, c, 20), WG_C16AT(R, c, 24), WG_C16AT(R, c, 28)
#define WG_F(x) "+f"(x)
#define WG_I(x) "+r"(x)
#define WG_IN "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc)

// wg_qk: c (+)= a * B for the warpgroup's 64 rows and N = 8 * (c's tiles)
// keys, a from registers (the m16n8k32 A layout, per warp), B by descriptor;
// acc = 0 overwrites c. E4M3 into fp32, or int8 into int32.
__device__ __forceinline__ void wg_qk(float (&c)[4][4], const uint32_t (&a)[4], uint64_t desc, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {" WG_D16 "}, "
                 "{%16, %17, %18, %19}, %20, p, 1, 1;\n}\n"
                 : WG_C16(WG_F, c)
                 : WG_IN);
}
__device__ __forceinline__ void wg_qk(float (&c)[8][4], const uint32_t (&a)[4], uint64_t desc, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {" WG_D32 "}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
                 : WG_C32(WG_F, c)
                 : WG_IN);
}
__device__ __forceinline__ void wg_qk(float (&c)[16][4], const uint32_t (&a)[4], uint64_t desc, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {" WG_D64 "}, "
                 "{%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
                 : WG_C64(WG_F, c)
                 : WG_IN);
}
__device__ __forceinline__ void wg_qk(float (&c)[32][4], const uint32_t (&a)[4], uint64_t desc, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {" WG_D128 "}, "
                 "{%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
                 : WG_C128(WG_F, c)
                 : WG_IN);
}
__device__ __forceinline__ void wg_qk(int (&c)[4][4], const uint32_t (&a)[4], uint64_t desc, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {" WG_D16 "}, "
                 "{%16, %17, %18, %19}, %20, p;\n}\n"
                 : WG_C16(WG_I, c)
                 : WG_IN);
}
__device__ __forceinline__ void wg_qk(int (&c)[8][4], const uint32_t (&a)[4], uint64_t desc, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {" WG_D32 "}, "
                 "{%32, %33, %34, %35}, %36, p;\n}\n"
                 : WG_C32(WG_I, c)
                 : WG_IN);
}
__device__ __forceinline__ void wg_qk(int (&c)[16][4], const uint32_t (&a)[4], uint64_t desc, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {" WG_D64 "}, "
                 "{%64, %65, %66, %67}, %68, p;\n}\n"
                 : WG_C64(WG_I, c)
                 : WG_IN);
}
__device__ __forceinline__ void wg_qk(int (&c)[32][4], const uint32_t (&a)[4], uint64_t desc, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {" WG_D128 "}, "
                 "{%128, %129, %130, %131}, %132, p;\n}\n"
                 : WG_C128(WG_I, c)
                 : WG_IN);
}


// The descriptor of V's widened fp16 copy at addr, a B operand N-major
// (d contiguous) in the 128-byte swizzle: 8-key groups 1,024 bytes apart
// (the stride offset), 64-column atoms BN * 128 bytes apart (the leading).
__device__ __forceinline__ uint64_t wg_desc_vw(uint32_t addr) {
    constexpr uint64_t kAtom = (uint64_t)BN * 128;
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((kAtom >> 4) << 16) | ((1024ull >> 4) << 32) | (1ull << 62);
}

// wg_pv: c (+)= a * V for the warpgroup's 64 rows and N = D columns, a (P in
// fp16) from registers in the m16n8k16 A layout, V's widened copy N-major
// by descriptor; acc = 0 overwrites c.
__device__ __forceinline__ void wg_pv(float (&c)[8][4], const uint32_t (&a)[4], uint64_t desc, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {" WG_D32 "}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
                 : WG_C32(WG_F, c)
                 : WG_IN);
}
__device__ __forceinline__ void wg_pv(float (&c)[16][4], const uint32_t (&a)[4], uint64_t desc, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {" WG_D64 "}, "
                 "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
                 : WG_C64(WG_F, c)
                 : WG_IN);
}
#endif

// c += a * b for one m16n8k32 tile of int8, exact in int32 (sm_80+).
__device__ __forceinline__ void mma16832_s8(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The score product of one k step: m16n8k16 in the input dtype, m16n8k32
// E4M3, or m16n8k32 int8 into int32 accumulators.
__device__ __forceinline__ void mma_qk(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    if constexpr (kFP8) {
        mma16832(c, a, b0, b1);
    } else {
        mma16816(c, a, b0, b1);
    }
}
__device__ __forceinline__ void mma_qk(int (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    mma16832_s8(c, a, b0, b1);
}

// pack4_e4m3 rounds four floats to E4M3 (saturating), x0 in the low byte.
__device__ __forceinline__ uint32_t pack4_e4m3(float x0, float x1, float x2, float x3) {
    uint32_t r = 0;
#if SDPA_FP8
    asm("{\n.reg .b16 lo, hi;\n"
        "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
        "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
        "mov.b32 %0, {lo, hi};\n}\n"
        : "=r"(r)
        : "f"(x0), "f"(x1), "f"(x2), "f"(x3));
#endif
    return r;
}

// e4m3x2_to_f16x2 widens two E4M3 bytes (the low 16 bits of x) to fp16,
// the low byte into the low half.
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t x) {
    uint32_t r = 0;
#if SDPA_FP8
    asm("{\n.reg .b16 a;\n"
        "cvt.u16.u32 a, %1;\n"
        "cvt.rn.f16x2.e4m3x2 %0, a;\n}\n"
        : "=r"(r)
        : "r"(x));
#endif
    return r;
}

// widen_e4m3x4 widens the four E4M3 bytes of x to fp16 pairs: bytes 0 and 1
// into lo, 2 and 3 into hi (the low byte of each pair into the low half).
// The halves are split by mov, which costs no instruction: the conversion
// reads the high half in place (a shift by 16 would be one more).
__device__ __forceinline__ void widen_e4m3x4(uint32_t x, uint32_t& lo, uint32_t& hi) {
#if SDPA_FP8
    asm("{\n.reg .b16 a, b;\n"
        "mov.b32 {a, b}, %2;\n"
        "cvt.rn.f16x2.e4m3x2 %0, a;\n"
        "cvt.rn.f16x2.e4m3x2 %1, b;\n}\n"
        : "=r"(lo), "=r"(hi)
        : "r"(x));
#else
    lo = hi = 0;
#endif
}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
    uint32_t r;
    asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
    return r;
}

// v_pair_f16 widens two V bytes of r to fp16x2: bytes 0 and 2 (odd: 1 and
// 3), the first into the low half. E4M3 by cvt; int8 exactly: each byte,
// made unsigned by flipping its sign bit (u = x + 128), becomes the low byte
// of the fp16 0x64uu = 1024 + u (the ulp is 1 in [1024, 2048)), and
// subtracting 1152 leaves x.
__device__ __forceinline__ uint32_t v_pair_f16(uint32_t r, bool odd) {
    if constexpr (kInt8) {
        const uint32_t h = prmt(r ^ 0x80808080u, 0x64646464u, odd ? 0x4341u : 0x4240u);
        uint32_t y;
        asm("sub.f16x2 %0, %1, %2;\n" : "=r"(y) : "r"(h), "r"(0x64806480u));
        return y;
    } else {
        return e4m3x2_to_f16x2(prmt(r, 0, odd ? 0x0031u : 0x0020u));
    }
}

// pack2_f16 rounds two floats to fp16, low half first.
__device__ __forceinline__ uint32_t pack2_f16(float lo, float hi) {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
}

// pack2 rounds two floats to the output dtype (for fp16 and bf16 also the
// input dtype, which P takes), low half first.
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    if constexpr (kOutBF16) {
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

// The XOR applied to a row's chunk index. With 8 or more chunks a row
// (128 bytes or more) row & 7 spreads the 8 rows of an ldmatrix over the 8
// bank groups; fp8 rows of D=64 are 4 chunks, two rows per 128 bytes, so the
// rows of a pair share their XOR: (row >> 1) & 3.
__device__ __forceinline__ int swz(int row) { return kChunks >= 8 ? (row & 7) : ((row >> 1) & 3); }

// Element offset of (row, col) in a tile; col is a multiple of kVec (one
// 16-byte chunk) wherever it is used.
__device__ __forceinline__ int tile_off(int row, int col) {
    if constexpr (kSwizzle) {
        return row * D + (((col / kVec) ^ swz(row)) * kVec);
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
constexpr bool kXorStep = kSwizzle && D == 128 && !kByte;
constexpr int kRowBytes = kStride * kEsz;
// Elements of one 32-byte k step along a row (k16 of fp16, k32 of fp8).
constexpr int kKStep = 32 / kEsz;

// The address of the chunk k steps along the row from the chunk at byte
// address a (of the tile at t, row, col): a ^ (k << 5) with kXorStep, else
// computed from (row, col) afresh.
__device__ __forceinline__ uint32_t kstep(uint32_t a, uint32_t t, int row, int col, int k) {
    if constexpr (kXorStep) {
        return a ^ (uint32_t)(k << 5);
    } else {
        return t + tile_off(row, col + k * kKStep) * kEsz;
    }
}

// key_of_row is the key (from the tile's first) that row r of a K tile
// holds: r itself, or with kVGiven r's keys reordered within each 16 so that
// rows 2t, 2t+1 (n8 tile 2c of S) and 8+2t, 9+2t (tile 2c+1) hold keys
// 4t..4t+3, the k order of V^T's ldmatrix fragments (see the header).
__device__ __forceinline__ int key_of_row(int r) {
    if constexpr (kVGiven) {
        return (r & ~15) | (((r & 7) >> 1) << 2) | (((r >> 3) & 1) << 1) | (r & 1);
    } else {
        return r;
    }
}

// key_of_acc is key_of_row of S accumulator e of n8 tile nt in a thread of
// quad lane t4: row nt * 8 + 2 t4 + (e & 1), spelled so that only 2 t4 (or
// 4 t4) is left to compute at run time.
__device__ __forceinline__ int key_of_acc(int nt, int t4, int e) {
    if constexpr (kVGiven) {
        return (nt >> 1) * 16 + (nt & 1) * 2 + (e & 1) + t4 * 4;
    } else {
        return nt * 8 + (e & 1) + t4 * 2;
    }
}

// Copies rows [row0, row0+ROWS) of a [s, D] matrix into a tile with
// cp.async, NTHR threads cooperating; rows at or past s are zero-filled so
// 0 * garbage can never produce NaN. A thread always copies the same
// 16-byte column chunk, kRowStep rows apart, so its addresses are one base
// plus compile-time offsets (few live registers for the loop). With PERM
// (K with kVGiven) tile row r takes matrix row row0 + key_of_row(r); where
// kRowStep is a multiple of 16 that is still one base plus offsets.
template <int ROWS, int NTHR, bool PERM = false>
__device__ __forceinline__ void load_tile(elem* tile, const elem* g, int row0, int s, int tid) {
    constexpr int kChunksPerRow = kChunks;
    static_assert(NTHR % kChunksPerRow == 0, "loader threads must cover whole rows");
    constexpr int kRowStep = NTHR / kChunksPerRow;
    constexpr int kIters = (ROWS + kRowStep - 1) / kRowStep;
    constexpr bool kAffine = !PERM || kRowStep % 16 == 0;
    const int r0 = tid / kChunksPerRow;
    const int c0 = (tid % kChunksPerRow) * kVec;
    const int k0 = PERM ? key_of_row(r0) : r0;
    const elem* src = g + (size_t)(row0 + k0) * D + c0;
    const uint32_t base = smem_addr(tile);
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
        const int r = r0 + it * kRowStep;
        if (ROWS % kRowStep == 0 || r < ROWS) {
            const int key = kAffine ? k0 + it * kRowStep : key_of_row(r);
            const bool ok = row0 + key < s;
            const elem* from = kAffine ? src + it * kRowStep * D : g + (size_t)(row0 + key) * D + c0;
            cp_async16(base + tile_off(r, c0) * kEsz, ok ? from : g, ok ? 16 : 0);
        }
    }
}

// ---- V given transposed (kVGiven) ------------------------------------------

// A V^T tile is D rows (columns of V) of BN key bytes, 16-byte chunks XORed
// so that the 8 consecutive rows an ldmatrix reads fall in 8 different bank
// groups: rows of 128 bytes or more by row & 7, of 64 bytes (two rows a 128)
// by (row >> 1) & 3, of 32 bytes by (row >> 2) & 1. It takes D * BN bytes,
// within its ring slot whether or not K's rows are swizzled.
constexpr int kVtChunks = BN / 16;
// vt_keys is a V^T row's length in keys (bytes): s rounded up to 16.
__device__ __forceinline__ int vt_keys(int s) { return (s + 15) & ~15; }
__device__ __forceinline__ int vt_off(int row, int chunk) {
    const int x = kVtChunks >= 8 ? (row & 7) : kVtChunks == 4 ? ((row >> 1) & 3) : ((row >> 2) & 1);
    return row * BN + ((chunk ^ x) << 4);
}
static_assert(!kVGiven || D * BN <= kTileElems, "a V^T tile fits a ring slot");

// Copies keys [kv0, kv0+BN) of the D rows of a head's V^T (rows of sp
// bytes) into a V^T tile; chunks at or past sp are zero-filled (the keys
// from s to sp are the caller's zeros). A thread copies one chunk column,
// kRowStep rows apart: its global addresses are one pointer stepped by
// kRowStep rows of sp bytes (a zero-filled column does not step), its
// shared-memory ones one base plus compile-time offsets where kRowStep is a
// multiple of 8, so that the rows it visits share their swizzle (vt_off's
// XOR has a period of 8 rows), else each row's own.
template <int NTHR>
__device__ __forceinline__ void load_vt_tile(elem* tile, const elem* vt, int kv0, int sp, int tid) {
    static_assert(NTHR % kVtChunks == 0, "loader threads must cover whole V^T rows");
    constexpr int kRowStep = NTHR / kVtChunks;
    constexpr int kIters = (D + kRowStep - 1) / kRowStep;
    const int r0 = tid / kVtChunks;
    const int c = tid % kVtChunks;
    const bool ok = kv0 + c * 16 < sp;
    const elem* src = ok ? vt + (r0 * sp + kv0 + c * 16) : vt;
    const int step = ok ? kRowStep * sp : 0;
    const uint32_t base = smem_addr(tile);
    const uint32_t dst = base + vt_off(r0, c);
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
        const int r = r0 + it * kRowStep;
        if (D % kRowStep == 0 || r < D)
            cp_async16(kRowStep % 8 == 0 ? dst + it * kRowStep * BN : base + vt_off(r, c), src, ok ? 16 : 0);
        src += step;
    }
}

// A K tile of keys kv0..kv0+BN-1 (rows reordered with kVGiven) and the V
// tile of the same keys (V^T with kVGiven); k and v are the head's (v_head).
template <int NTHR>
__device__ __forceinline__ void load_k_tile(elem* tile, const elem* k, int kv0, int s, int tid) {
    load_tile<BN, NTHR, kVGiven>(tile, k, kv0, s, tid);
}
template <int NTHR>
__device__ __forceinline__ void load_v_tile(elem* tile, const elem* v, int kv0, int s, int tid) {
    if constexpr (kVGiven) {
        load_vt_tile<NTHR>(tile, v, kv0, vt_keys(s), tid);
    } else {
        load_tile<BN, NTHR>(tile, v, kv0, s, tid);
    }
}

// v_head is head bh's V: rows of D from s * D on, or its D rows of V^T.
__device__ __forceinline__ const elem* v_head(const SdpaParams& p, int bh) {
    const size_t rows = kVGiven ? (size_t)D * vt_keys(p.s) : (size_t)p.s * D;
    return static_cast<const elem*>(p.v) + (size_t)bh * rows;
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

// With kQKF16 a k32 step's fragment is widened to the A fragments of two
// m16n8k16 fp16 MMAs (qk_product says how D's positions pair up).
using QFrag = uint32_t[kQInRegs ? MT : 1][kQInRegs ? KT : 1][kQKF16 ? 8 : 4];

// The thread's row and column of Q's A fragment for (mt 0, kt 0), and that
// chunk's address; (mt, kt) is 16 rows per mt on and kstep'ed by kt.
__device__ __forceinline__ int q_frag_row(int wm, int lane) { return wm * kRowsPerWarp + (lane & 15); }
__device__ __forceinline__ int q_frag_col(int lane) { return (lane >> 4) * kVec; }
__device__ __forceinline__ uint32_t q_frag_addr(uint32_t sq, int wm, int lane) {
    return sq + tile_off(q_frag_row(wm, lane), q_frag_col(lane)) * kEsz;
}

// Q's A fragment for (mt, kt), from shared memory.
__device__ __forceinline__ void load_q_frag(uint32_t (&a)[4], uint32_t sq, uint32_t qa, int wm, int mt, int kt,
                                            int lane) {
    ldsm_x4(a, kstep(qa + mt * 16 * kRowBytes, sq, q_frag_row(wm, lane) + mt * 16, q_frag_col(lane), kt));
}

template <class QF>
__device__ __forceinline__ void load_q_regs(QF& qf, uint32_t sq, int wm, int lane) {
    if constexpr (kQInRegs) {
        const uint32_t qa = q_frag_addr(sq, wm, lane);
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int kt = 0; kt < KT; ++kt) {
                if constexpr (kQKF16) {
                    // E4M3 a[0], a[2]: row g; a[1], a[3]: row g + 8; a[0], a[1]
                    // hold D positions 4t..4t+3 of the step, a[2], a[3] those
                    // 16 on. Step h's fp16 A: lo(a[2h]), lo(a[2h+1]),
                    // hi(a[2h]), hi(a[2h+1]).
                    uint32_t a[4];
                    load_q_frag(a, sq, qa, wm, mt, kt, lane);
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        widen_e4m3x4(a[2 * h], qf[mt][kt][4 * h], qf[mt][kt][4 * h + 2]);
                        widen_e4m3x4(a[2 * h + 1], qf[mt][kt][4 * h + 1], qf[mt][kt][4 * h + 3]);
                    }
                } else {
                    load_q_frag(qf[mt][kt], sq, qa, wm, mt, kt, lane);
                }
            }
    }
}

// A warp's scores for one K/V tile, in mma C layout.
using Scores = float[MT][NT][4];

// fill_scores sets every score of c to v; add_scores adds t into c.
template <class T>
__device__ __forceinline__ void fill_scores(T (&c)[MT][NT][4], T v) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) c[mt][nt][e] = v;
}
template <class T>
__device__ __forceinline__ void add_scores(T (&c)[MT][NT][4], const T (&t)[MT][NT][4]) {
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) c[mt][nt][e] += t[mt][nt][e];
}

// qk_product computes init + Q K^T over the warp's rows and key slice of
// the tile at sk into c (fp32, or int32 for int8). One base address per
// fragment pattern; rows move by 16 per tile, columns by kstep.
template <class T>
__device__ __forceinline__ void qk_product(T (&c)[MT][NT][4], T init, const QFrag& qf, uint32_t sq, uint32_t sk,
                                           int wm, int wn, int lane) {
#if SDPA_QK_WGMMA
    if constexpr (kWgmma) {
        // K's rows of the warp's key slice; a k32 step is 32 bytes along them.
        const uint32_t kb = sk + wn * kColsPerWarp * kRowBytes;
        constexpr bool kZero = std::is_same<T, float>::value;  // fp8 starts from 0, int8 from its bias
        if constexpr (!kZero) fill_scores(c, init);
        if constexpr (kZero && KT > 1) {
            // E4M3: each k32 step into a fresh accumulator, added into c in
            // fp32. The E4M3 wgmma adds onto its accumulator with fewer bits
            // than fp32: chained over the k steps, scores in the hundreds
            // (input scale 16) erred by up to 1.56 where the gate allows 1.04;
            // one step per accumulator, within 0.38 (kernels/NOTES.md,
            // "wgmma"). Steps 0 and 1 go out together; each later step
            // reuses t once the sum has taken it.
            T t[MT][NT][4];
            wg_pin(c);
            wg_pin(t);
            wg_fence();
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) wg_qk(c[mt], qf[mt][0], wg_desc(kb), 0);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) wg_qk(t[mt], qf[mt][1], wg_desc(kb + 32), 0);
            wg_commit();
#pragma unroll
            for (int kt = 2; kt <= KT; ++kt) {
                wg_wait();
                wg_pin(c);
                wg_pin(t);
                add_scores(c, t);
                if (kt < KT) {
                    wg_pin(t);
                    wg_fence();
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) wg_qk(t[mt], qf[mt][kt], wg_desc(kb + kt * 32), 0);
                    wg_commit();
                }
            }
            return;
        }
        wg_pin(c);
        wg_fence();
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int kt = 0; kt < KT; ++kt) wg_qk(c[mt], qf[mt][kt], wg_desc(kb + kt * 32), kZero && kt == 0 ? 0 : 1);
        wg_commit();
        wg_wait();
        wg_pin(c);
        return;
    }
#endif
    const uint32_t qa = kQInRegs ? 0u : q_frag_addr(sq, wm, lane);
    const int krow = wn * kColsPerWarp + (lane & 7) + (lane >> 4) * 8, kcol = ((lane >> 3) & 1) * kVec;
    const uint32_t ka = sk + tile_off(krow, kcol) * kEsz;
    fill_scores(c, init);

    // With kQKAccum, steps after the first go into t, added into c after
    // each (t is unused, and dropped by the compiler, without it).
    T t[MT][NT][4];
#pragma unroll
    for (int kt = 0; kt < KT; ++kt) {
        const bool fresh = kQKAccum && kt > 0;
        auto& d = fresh ? t : c;
        if (fresh) fill_scores(t, T(0));
        uint32_t a[MT][4];
        if constexpr (!kQKF16) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                if constexpr (kQInRegs) {
#pragma unroll
                    for (int e = 0; e < 4; ++e) a[mt][e] = qf[mt][kt][e];
                } else {
                    load_q_frag(a[mt], sq, qa, wm, mt, kt, lane);
                }
            }
        }
#pragma unroll
        for (int np = 0; np < NT / 2; ++np) {
            uint32_t b[4];
            ldsm_x4(b, kstep(ka + np * 16 * kRowBytes, sk, krow + np * 16, kcol, kt));
            if constexpr (kQKF16) {
                // Each k32 step as two m16n8k16 fp16 MMAs, h = 0 over the
                // step's first 16 positions of D, Q's fragments widened
                // once (load_q_regs). In both A and B a thread's fp16 pair
                // (2t, 2t+1) of step h takes E4M3 bytes 0 and 1 of its
                // register for h, the pair (2t+8, 2t+9) bytes 2 and 3, so
                // every product pairs Q and K at the same position of D: the
                // sum is the E4M3 product's, in fp32.
                uint32_t bh[4][2];
#pragma unroll
                for (int r = 0; r < 4; ++r) widen_e4m3x4(b[r], bh[r][0], bh[r][1]);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const uint32_t qa4[4] = {qf[mt][kt][4 * h], qf[mt][kt][4 * h + 1], qf[mt][kt][4 * h + 2],
                                                 qf[mt][kt][4 * h + 3]};
                        mma16816_f16(d[mt][2 * np], qa4, bh[h][0], bh[h][1]);
                        mma16816_f16(d[mt][2 * np + 1], qa4, bh[2 + h][0], bh[2 + h][1]);
                    }
            } else {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma_qk(d[mt][2 * np], a[mt], b[0], b[1]);
                    mma_qk(d[mt][2 * np + 1], a[mt], b[2], b[3]);
                }
            }
        }
        if (fresh) add_scores(c, t);
    }
}

// kI8Bias is the bits of 1.5 * 2^23, a float whose ulp is 1: int8 score
// accumulators start there, so after the IMMA chain each holds those bits
// plus S, which read as a float is 1.5 * 2^23 + S exactly (|S| <= 127 *
// 127 * 128 < 2^22). The conversion costs no instruction.
constexpr int kI8Bias = 0x4B400000;
constexpr float kI8BiasF = 12582912.f;

// trim22 clears a float's two lowest mantissa bits, so 1.5 times it is a
// float too (3 m fits 24 bits when m is a multiple of 4); a scale moves by
// at most 2^-22 of itself.
__device__ __forceinline__ float trim22(float x) { return __int_as_float(__float_as_int(x) & ~3); }

// scores computes S = Q K^T over the warp's rows and key slice of the tile
// at sk (keys kv0..kv0+BN-1). With int8 the product is exact in int32 and
// each key's column is scaled by its row scale from krs (the head's
// k_row_scale) as it leaves the accumulator: one FFMA, (1.5 * 2^23 + S) * ks
// - 1.5 * 2^23 * ks, whose one rounding is that of S * ks (the subtrahend is
// exact for a trimmed ks). The scales are loaded before the product so their
// latency hides under it: as float2 at compile-time offsets when the tile
// is in range and s even (8-byte aligned pairs), else clamped one by one
// (keys past s read the last key's; they are masked).
__device__ __forceinline__ void scores(Scores& sacc, const QFrag& qf, uint32_t sq, uint32_t sk, int wm, int wn,
                                       int lane, const float* krs, int kv0, int s) {
    if constexpr (kInt8) {
        float2 ks[NT];
        const int key0 = kv0 + wn * kColsPerWarp + (lane & 3) * 2;
        if (kv0 + BN <= s && (s & 1) == 0) {
            const float2* kp = reinterpret_cast<const float2*>(krs + key0);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) ks[nt] = __ldg(kp + nt * 4);
        } else {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
                ks[nt] = make_float2(__ldg(krs + cmin(key0 + nt * 8, s - 1)), __ldg(krs + cmin(key0 + nt * 8 + 1, s - 1)));
        }
        int iacc[MT][NT][4];
        qk_product(iacc, kI8Bias, qf, sq, sk, wm, wn, lane);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            const float k0 = trim22(ks[nt].x), k1 = trim22(ks[nt].y);
            const float c0 = -kI8BiasF * k0, c1 = -kI8BiasF * k1;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    sacc[mt][nt][e] = fmaf(__int_as_float(iacc[mt][nt][e]), (e & 1) ? k1 : k0, (e & 1) ? c1 : c0);
        }
    } else {
        qk_product(sacc, 0.f, qf, sq, sk, wm, wn, lane);
    }
}

// A RowScale is the factor of a thread's raw scores in the exponent: one
// for all rows, or with int8 one per row (Q's row scale folded in).
struct RowScale {
    float v[kInt8 ? MT : 1][kInt8 ? 2 : 1];
    __device__ __forceinline__ float operator()(int mt, int h) const {
        if constexpr (kInt8) {
            return v[mt][h];
        } else {
            return v[0][0];
        }
    }
};

// mask sets the scores of the key tail and of the causal triangle to -inf,
// in the tiles (keys kv0..kv0+BN-1) that reach them: a uniform branch.
__device__ __forceinline__ void mask(Scores& sacc, int m0, int kv0, int s, int wm, int wn, int lane) {
    const int g = lane >> 2, t4 = lane & 3;
    if (kv0 + BN > s || (kCausal && kv0 + BN - 1 > m0)) {
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int row = m0 + wm * kRowsPerWarp + mt * 16 + g + (e >> 1) * 8;
                    const int key = kv0 + wn * kColsPerWarp + key_of_acc(nt, t4, e);
                    if (key >= s || (kCausal && key > row)) sacc[mt][nt][e] = -INFINITY;
                }
    }
}

// kPBias is added to every exponent when P is quantised to E4M3: P lies in
// (0, 2^8] instead of (0, 1], clear of E4M3's subnormals (below 2^-6) and
// under its 448 maximum. It cancels in O = sum P V / sum P and is taken out
// of the log-sum-exp.
constexpr float kPBias = kPVFP8 ? (kFastExp ? 8.f : 8.f * kLn2) : 0.f;

// vt_frag_addr is the address of a thread's row of V^T's ldmatrix.x4 for
// k32 step kk of a warp's key slice and columns 16 dc..16 dc+15: matrices
// 0 and 1 are columns 0-7, keys 0-15 and 16-31 (the B operand of O's n8
// tile 2 dc), matrices 2 and 3 columns 8-15 (tile 2 dc + 1).
// The chunk (wn * kColsPerWarp + 32 kk) / 16 + (matrix & 1) is the OR of
// disjoint bits (a slice is a power-of-two count of 32-key steps), so its
// XOR with the row's swizzle is the thread's kk = 0 chunk XOR 2 kk, and the
// rows 16 dc on share the swizzle of the first 16: one offset a thread, an
// XOR by kk << 5 and an immediate per fragment.
__device__ __forceinline__ uint32_t vt_frag_addr(uint32_t sv, int wn, int lane, int kk, int dc) {
    static_assert((kColsPerWarp / 32 & (kColsPerWarp / 32 - 1)) == 0, "32-key steps a slice: a power of two");
    const int off = vt_off(((lane >> 4) << 3) + (lane & 7), wn * (kColsPerWarp / 16) + ((lane >> 3) & 1));
    return sv + dc * 16 * BN + (off ^ (kk << 5));
}

// pv_fp8 adds P V for one warp's key slice with E4M3 mma: k32 steps of P
// (keys in the order {2t, 2t+1, 2t+8, 2t+9} of each 16, see the header) and
// V's B fragments regrouped from ldmatrix.trans by prmt; with kVGiven P's
// keys are 4t..4t+3 (K's rows reordered) and V^T's fragments are the B
// operand as they come, O's tiles columns in order.
__device__ __forceinline__ void pv_fp8(float (&o)[MT][DT][4], const Scores& sacc, uint32_t sv, int wn, int lane) {
    const int vrow = wn * kColsPerWarp + lane;
#pragma unroll
    for (int kk = 0; kk < NT / 4; ++kk) {
        uint32_t pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            const float(*s4)[4] = &sacc[mt][4 * kk];
            pa[mt][0] = pack4_e4m3(s4[0][0], s4[0][1], s4[1][0], s4[1][1]);
            pa[mt][1] = pack4_e4m3(s4[0][2], s4[0][3], s4[1][2], s4[1][3]);
            pa[mt][2] = pack4_e4m3(s4[2][0], s4[2][1], s4[3][0], s4[3][1]);
            pa[mt][3] = pack4_e4m3(s4[2][2], s4[2][3], s4[3][2], s4[3][3]);
        }
#pragma unroll
        for (int dc = 0; dc < D / 16; ++dc) {
            uint32_t r[4];
            if constexpr (kVGiven) {
                ldsm_x4(r, vt_frag_addr(sv, wn, lane, kk, dc));
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma16832(o[mt][2 * dc], pa[mt], r[0], r[1]);
                    mma16832(o[mt][2 * dc + 1], pa[mt], r[2], r[3]);
                }
                continue;
            }
            ldsm_x4_trans(r, sv + tile_off(vrow + kk * 32, dc * 16));
            const uint32_t even0 = prmt(r[0], r[1], 0x6420), even1 = prmt(r[2], r[3], 0x6420);
            const uint32_t odd0 = prmt(r[0], r[1], 0x7531), odd1 = prmt(r[2], r[3], 0x7531);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                mma16832(o[mt][2 * dc], pa[mt], even0, even1);
                mma16832(o[mt][2 * dc + 1], pa[mt], odd0, odd1);
            }
        }
    }
}

// pv_f16 adds P V in fp16 for one-byte inputs: P rounded to fp16 in the
// natural key order, V widened from E4M3 or int8 to fp16 in registers; the
// columns come out in the same even/odd tiles as pv_fp8. With kVGiven a
// k16 half's P holds keys {4t, 4t+1} and {4t+2, 4t+3} (K's rows reordered),
// exactly the two fp16 pairs one V^T register widens to, and O's tiles are
// columns in order (vt_frag_addr).
__device__ __forceinline__ void pv_f16(float (&o)[MT][DT][4], const Scores& sacc, uint32_t sv, int wn, int lane) {
    const int vrow = wn * kColsPerWarp + lane;
#pragma unroll
    for (int kk = 0; kk < NT / 4; ++kk) {
        uint32_t pa[2][MT][4];
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                const float(*s2)[4] = &sacc[mt][4 * kk + 2 * h];
                pa[h][mt][0] = pack2_f16(s2[0][0], s2[0][1]);
                pa[h][mt][1] = pack2_f16(s2[0][2], s2[0][3]);
                pa[h][mt][2] = pack2_f16(s2[1][0], s2[1][1]);
                pa[h][mt][3] = pack2_f16(s2[1][2], s2[1][3]);
            }
#pragma unroll
        for (int dc = 0; dc < D / 16; ++dc) {
            uint32_t r[4];
            if constexpr (kVGiven) {
                ldsm_x4(r, vt_frag_addr(sv, wn, lane, kk, dc));
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    uint32_t e0, e1, o0, o1;
                    widen_e4m3x4(r[h], e0, e1);
                    widen_e4m3x4(r[2 + h], o0, o1);
#pragma unroll
                    for (int mt = 0; mt < MT; ++mt) {
                        mma16816_f16(o[mt][2 * dc], pa[h][mt], e0, e1);
                        mma16816_f16(o[mt][2 * dc + 1], pa[h][mt], o0, o1);
                    }
                }
                continue;
            }
            ldsm_x4_trans(r, sv + tile_off(vrow + kk * 32, dc * 16));
            // r[i] holds keys 8i + {2t, 2t+1} x columns {2g, 2g+1}. The k16
            // B fragment of column 2g (2g+1) is keys {2t, 2t+1} and
            // {2t+8, 2t+9}: bytes 0 and 2 (1 and 3) of r[2h] and r[2h+1].
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const uint32_t e0 = v_pair_f16(r[2 * h], false), e1 = v_pair_f16(r[2 * h + 1], false);
                const uint32_t o0 = v_pair_f16(r[2 * h], true), o1 = v_pair_f16(r[2 * h + 1], true);
#pragma unroll
                for (int mt = 0; mt < MT; ++mt) {
                    mma16816_f16(o[mt][2 * dc], pa[h][mt], e0, e1);
                    mma16816_f16(o[mt][2 * dc + 1], pa[h][mt], o0, o1);
                }
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

#if SDPA_PV_WGMMA
// widen_v writes the fp16 copy of the one-byte V tile at sv to vw, every
// consumer thread taking 16-byte chunks of it. The copy's columns are
// permuted as pv_f16 leaves O's (the even columns of each 16-column chunk,
// then the odd ones), so O keeps its layout and the stores stay as they are.
// The writes are fenced for the async proxy; a consumer barrier must follow
// before pv_wg reads them.
__device__ __forceinline__ void widen_v(uint32_t vw, uint32_t sv, int tid) {
    constexpr int kTotal = BN * kChunks;
#pragma unroll
    for (int c = tid; c < kTotal; c += kConsumerThreads) {
        const int key = c / kChunks, dc = c % kChunks;
        uint32_t x[4];
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(x[0]), "=r"(x[1]), "=r"(x[2]), "=r"(x[3])
                     : "r"(sv + tile_off(key, dc * 16)));
#pragma unroll
        for (int odd = 0; odd < 2; ++odd) {
            const int nc = 2 * dc + odd;  // 8-column chunk of the copy
            const uint32_t dst = vw + (nc >> 3) * (BN * 128) + key * 128 + (((nc & 7) ^ (key & 7)) << 4);
            asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};\n" ::"r"(dst), "r"(v_pair_f16(x[0], odd)),
                         "r"(v_pair_f16(x[1], odd)), "r"(v_pair_f16(x[2], odd)), "r"(v_pair_f16(x[3], odd))
                         : "memory");
        }
    }
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// pv_wg computes o (+)= P V over the warp's key slice with wgmma, P packed to
// fp16 from the score registers (the k16 A layout), V from its widened copy
// at vw; fresh overwrites o instead of adding to it.
__device__ __forceinline__ void pv_wg(float (&o)[MT][DT][4], const Scores& sacc, uint32_t vw, int wn, bool fresh) {
    uint32_t pa[NT / 2][MT][4];
#pragma unroll
    for (int kk = 0; kk < NT / 2; ++kk)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
            pa[kk][mt][0] = pack2_f16(sacc[mt][2 * kk][0], sacc[mt][2 * kk][1]);
            pa[kk][mt][1] = pack2_f16(sacc[mt][2 * kk][2], sacc[mt][2 * kk][3]);
            pa[kk][mt][2] = pack2_f16(sacc[mt][2 * kk + 1][0], sacc[mt][2 * kk + 1][1]);
            pa[kk][mt][3] = pack2_f16(sacc[mt][2 * kk + 1][2], sacc[mt][2 * kk + 1][3]);
        }
    const uint32_t base = vw + wn * kColsPerWarp * 128;
    wg_pin(o);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < NT / 2; ++kk)
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) wg_pv(o[mt], pa[kk][mt], wg_desc_vw(base + kk * 16 * 128), fresh && kk == 0 ? 0 : 1);
    wg_commit();
    wg_wait();
    wg_pin(o);
}
#endif

// softmax_pv folds a tile's masked scores into the warp's state: the online
// softmax, then O += P V with V at sv. Scores stay unscaled until the
// exponential: the scale is folded into one FFMA there (scale > 0, so the
// row max commutes with it).
__device__ __forceinline__ void softmax_pv(Acc& acc, Scores& sacc, uint32_t sv, const RowScale& sc, int wn,
                                           int lane, uint32_t vw) {
    float alpha[MT][2];
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
            mx = fmaxf(acc.m[mt][h], mx * sc(mt, h));
            // A row with every key so far masked keeps m = -inf; subtract 0
            // then, so exp gives 0 rather than NaN.
            const float mu = mx == -INFINITY ? 0.f : mx;
            alpha[mt][h] = exp_s(acc.m[mt][h] - mu);
            acc.m[mt][h] = mx;
            const float nmu = kPVFP8 ? kPBias - mu : -mu;
            float sum = 0.f;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const float p0 = exp_s(fmaf(sacc[mt][nt][2 * h], sc(mt, h), nmu));
                const float p1 = exp_s(fmaf(sacc[mt][nt][2 * h + 1], sc(mt, h), nmu));
                sacc[mt][nt][2 * h] = p0;
                sacc[mt][nt][2 * h + 1] = p1;
                sum += p0 + p1;
            }
            acc.l[mt][h] = acc.l[mt][h] * alpha[mt][h] + sum;
            if constexpr (!kPVAccum) {
#pragma unroll
                for (int dt = 0; dt < DT; ++dt) {
                    acc.o[mt][dt][2 * h] *= alpha[mt][h];
                    acc.o[mt][dt][2 * h + 1] *= alpha[mt][h];
                }
            }
        }

    if constexpr (kByte) {
        if constexpr (kPVWgmma) consumer_sync();  // every consumer's part of V's fp16 copy is written
        // P V into o: wgmma from V's fp16 copy (fresh overwrites o), or
        // mma.sync from the tile (adds to o).
        const auto pv = [&](float(&o)[MT][DT][4], bool fresh) {
#if SDPA_PV_WGMMA
            if constexpr (kPVWgmma) {
                pv_wg(o, sacc, vw, wn, fresh);
                return;
            }
#endif
            if constexpr (kPVFP8) {
                pv_fp8(o, sacc, sv, wn, lane);
            } else {
                pv_f16(o, sacc, sv, wn, lane);
            }
        };
        if constexpr (kPVAccum) {
            // Two-level accumulation: this tile's P V in a fresh
            // accumulator, then O = O * alpha + tile in fp32.
            float t[MT][DT][4];
            if constexpr (!kPVWgmma) {
#pragma unroll
                for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                    for (int dt = 0; dt < DT; ++dt)
#pragma unroll
                        for (int e = 0; e < 4; ++e) t[mt][dt][e] = 0.f;
            }
            pv(t, true);
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int dt = 0; dt < DT; ++dt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) acc.o[mt][dt][e] = fmaf(acc.o[mt][dt][e], alpha[mt][e >> 1], t[mt][dt][e]);
        } else {
            pv(acc.o, false);
        }
        return;
    }

    // O += P V: P's C fragments of two adjacent n8 tiles are the A fragment
    // of one k16 step, so P never leaves registers.
    const int vrow = wn * kColsPerWarp + (lane & 7) + ((lane >> 3) & 1) * 8, vcol = (lane >> 4) * 8;
    const uint32_t va = sv + tile_off(vrow, vcol) * 2;
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

// attend folds one K/V tile (keys kv0..kv0+BN-1) into the warp's state.
__device__ __forceinline__ void attend(Acc& acc, const QFrag& qf, uint32_t sq, uint32_t sk, uint32_t sv,
                                       int m0, int kv0, int s, const RowScale& sc, const float* krs, int wm, int wn,
                                       int lane, uint32_t vw) {
#if SDPA_PV_WGMMA
    widen_v(vw, sv, threadIdx.x);  // its barrier is in softmax_pv, after the scores
#endif
    Scores sacc;
    scores(sacc, qf, sq, sk, wm, wn, lane, krs, kv0, s);
    mask(sacc, m0, kv0, s, wm, wn, lane);
    softmax_pv(acc, sacc, sv, sc, wn, lane, vw);
}


// static_for calls f(std::integral_constant<int, i>) for i = 0..N-1, so f
// can index register arrays with a compile-time i.
template <int N, int I = 0, class F>
__device__ __forceinline__ void static_for(F&& f) {
    if constexpr (I < N) {
        f(std::integral_constant<int, I>{});
        static_for<N, I + 1>(f);
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

    // With WARPS_N > 1 each key slice c merges and stores one block of
    // kDTW n8 tiles of O's columns. Every slice hands its (m, l) and, for
    // every other slice's block, its unscaled O to that slice in one round
    // (fragment order, one conflict-free float4 per lane): two barriers, and
    // the merge and the stores are spread over all the warps.
    constexpr int kDTW = DT / kWarpsN;
    static_assert(DT % kWarpsN == 0, "the key slices split O's columns evenly");
    float4* opart = reinterpret_cast<float4*>(smem + kCombineOffset);
    float2* ml = reinterpret_cast<float2*>(smem + kCombineOffset + kCombineOBytes);  // [WARPS_N][BM]
    // Slot of the block slice j hands to slice c (j != c): (WARPS_N - 1)
    // blocks per slice, so the area is as large as (WARPS_N - 1) whole O's.
    const auto slot = [&](int j, int c, int mt, int dtl) {
        const int pair = j * (kWarpsN - 1) + (c < j ? c : c - 1);
        return ((pair * kWarpsM + wm) * MT + mt) * kDTW + dtl;
    };
    if constexpr (kWarpsN > 1) {
        consumer_sync();  // nothing still reads the area (ring, Q, last tile's merge)
        if (t4 == 0) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int h = 0; h < 2; ++h)
                    ml[wn * BM + wm * kRowsPerWarp + mt * 16 + g + 8 * h] = make_float2(acc.m[mt][h], acc.l[mt][h]);
        }
        static_for<kWarpsN>([&](auto cc) {
            constexpr int c = decltype(cc)::value;
            if (c == wn) return;
#pragma unroll
            for (int mt = 0; mt < MT; ++mt)
#pragma unroll
                for (int dtl = 0; dtl < kDTW; ++dtl) {
                    const float* o = acc.o[mt][c * kDTW + dtl];
                    opart[slot(wn, c, mt, dtl) * 32 + lane] = make_float4(o[0], o[1], o[2], o[3]);
                }
        });
        consumer_sync();
    }

    const size_t rows = (size_t)p.b * p.h * p.s;
    const size_t head = (size_t)w.bh * p.s;
    static_for<kWarpsN>([&](auto cc) {
        constexpr int c = decltype(cc)::value;
        if (kWarpsN > 1 && c != wn) return;
        if constexpr (kWarpsN > 1) {
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) {
                // wgt[j][h]: slice j's weight exp(m_j - max) for row half h.
                float wgt[kWarpsN][2];
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
                        wgt[j][h] = exp_s(v.x - mu);
                        l += v.y * wgt[j][h];
                    }
                    acc.m[mt][h] = mx;
                    acc.l[mt][h] = l;
                }
#pragma unroll
                for (int dtl = 0; dtl < kDTW; ++dtl) {
                    float* o = acc.o[mt][c * kDTW + dtl];
                    float o0 = o[0] * wgt[c][0], o1 = o[1] * wgt[c][0];
                    float o2 = o[2] * wgt[c][1], o3 = o[3] * wgt[c][1];
#pragma unroll
                    for (int j = 0; j < kWarpsN; ++j) {
                        if (j == c) continue;
                        const float4 v = opart[slot(j, c, mt, dtl) * 32 + lane];
                        o0 = fmaf(v.x, wgt[j][0], o0);
                        o1 = fmaf(v.y, wgt[j][0], o1);
                        o2 = fmaf(v.z, wgt[j][1], o2);
                        o3 = fmaf(v.w, wgt[j][1], o3);
                    }
                    o[0] = o0;
                    o[1] = o1;
                    o[2] = o2;
                    o[3] = o3;
                }
            }
        }

#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = w.m0 + wm * kRowsPerWarp + mt * 16 + g + 8 * h;
                if (row >= p.s) continue;
                const float l = acc.l[mt][h];
                // A row with no key writes 0. fp8 V's dequantisation scale
                // applies to the whole row, int8 V's per column.
                const float inv = l > 0.f ? (kFP8 ? p.v_scale : 1.f) / l : 0.f;
                if constexpr (kByte && !kVGiven) {
                    // Tiles 2c' and 2c'+1 hold columns 16c' + 4t + {0, 2}
                    // and {1, 3}: four adjacent columns a thread.
#pragma unroll
                    for (int dt = c * kDTW; dt < (c + 1) * kDTW; dt += 2) {
                        const int col = (dt / 2) * 16 + t4 * 4;
                        float4 f = make_float4(inv, inv, inv, inv);
                        if constexpr (kInt8) {
                            const float4 vs = __ldg(reinterpret_cast<const float4*>(p.v_col_scale + (size_t)w.bh * D + col));
                            f = make_float4(inv * vs.x, inv * vs.y, inv * vs.z, inv * vs.w);
                        }
                        const float* ev = acc.o[mt][dt];
                        const float* od = acc.o[mt][dt + 1];
                        const float o0 = ev[2 * h] * f.x, o1 = od[2 * h] * f.y;
                        const float o2 = ev[2 * h + 1] * f.z, o3 = od[2 * h + 1] * f.w;
                        if constexpr (kSplit == 1) {
                            oelem* o = static_cast<oelem*>(p.o) + (head + row) * D;
                            *reinterpret_cast<uint2*>(o + col) = make_uint2(pack2(o0, o1), pack2(o2, o3));
                        } else {
                            float* o = p.o_part + ((size_t)w.split * rows + head + row) * D;
                            *reinterpret_cast<float4*>(o + col) = make_float4(o0, o1, o2, o3);
                        }
                    }
                } else if constexpr (kSplit == 1) {
                    oelem* o = static_cast<oelem*>(p.o) + (head + row) * D;
#pragma unroll
                    for (int dt = c * kDTW; dt < (c + 1) * kDTW; ++dt)
                        *reinterpret_cast<uint32_t*>(o + dt * 8 + t4 * 2) =
                            pack2(acc.o[mt][dt][2 * h] * inv, acc.o[mt][dt][2 * h + 1] * inv);
                } else {
                    float* o = p.o_part + ((size_t)w.split * rows + head + row) * D;
#pragma unroll
                    for (int dt = c * kDTW; dt < (c + 1) * kDTW; ++dt)
                        *reinterpret_cast<float2*>(o + dt * 8 + t4 * 2) =
                            make_float2(acc.o[mt][dt][2 * h] * inv, acc.o[mt][dt][2 * h + 1] * inv);
                }
                if (kSplit > 1 && c == 0 && t4 == 0) {
                    // l carries P's 2^8 (kPBias) with fp8 P; the log-sum-exp
                    // does not.
                    const float m = (kFastExp ? acc.m[mt][h] * kLn2 : acc.m[mt][h]) - (kFastExp ? kPBias * kLn2 : kPBias);
                    p.lse_part[(size_t)w.split * rows + head + row] = l > 0.f ? m + logf(l) : -INFINITY;
                }
            }
    });
}

// ---- the two pipelines -----------------------------------------------------

// softmax_scale is the factor of a raw score in the exponent: the caller's
// scale, fp8's Q and K dequantisation scales, and log2(e) with fast exp.
__device__ __forceinline__ float softmax_scale(const SdpaParams& p) {
    return p.scale * (kFP8 ? p.q_scale * p.k_scale : 1.f) * (kFastExp ? kLog2e : 1.f);
}

// row_scale sets r to the factor of the raw scores in the exponent for the
// thread's rows of tile w: sc (softmax_scale), times each query row's scale
// with int8 (rows past s take the last row's; they are never stored).
__device__ __forceinline__ void row_scale(RowScale& r, const SdpaParams& p, const Tile& w, float sc, int wm,
                                          int lane) {
    if constexpr (!kInt8) {
        r.v[0][0] = sc;
    } else {
        const float* qrs = p.q_row_scale + (size_t)w.bh * p.s;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = w.m0 + wm * kRowsPerWarp + mt * 16 + (lane >> 2) + 8 * h;
                r.v[mt][h] = sc * __ldg(qrs + cmin(row, p.s - 1));
            }
    }
}

// k_row_scales is the head's K row scales with int8, else null.
__device__ __forceinline__ const float* k_row_scales(const SdpaParams& p, const Tile& w) {
    return kInt8 ? p.k_row_scale + (size_t)w.bh * p.s : nullptr;
}

// With kSplitFirst the cooperative pipeline loads the first K/V tile of a
// query block as two cp.async groups, K then V, and starts that tile's
// scores once K has landed. Measured on the H100 (kernels/NOTES.md): 5%
// off the causal 8x16x4096x64 tune's best and 1% off the short shapes at
// D=64; at D=128 it cost 2%, so it is compiled at D=64 only.
constexpr bool kSplitFirst = D == 64 && kStages >= 2;

// Every warp loads and computes; up to STAGES-1 tiles are in flight ahead of
// the one being computed.
__device__ __forceinline__ void run_cooperative(const SdpaParams& p, char* smem) {
    elem* sq = reinterpret_cast<elem*>(smem);
    elem* ring = sq + kQElems;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp % kWarpsM, wn = warp / kWarpsM;
    const float sc = softmax_scale(p);

    for_each_tile(p, [&](const Tile& w) {
        Acc acc;
        acc_init(acc);
        QFrag qf;
        if constexpr (kPersistent) __syncthreads();  // the last tile's readers are done
        if (w.nkb > 0) {
            RowScale rs;
            row_scale(rs, p, w, sc, wm, lane);
            const float* krs = k_row_scales(p, w);
            const size_t head = (size_t)w.bh * p.s * D;
            const elem* q = static_cast<const elem*>(p.q) + head;
            const elem* k = static_cast<const elem*>(p.k) + head;
            const elem* v = v_head(p, w.bh);
            // Tile j's K in its ring slot; its V follows.
            const auto slot_of = [&](int j) { return ring + (j % kStages) * 2 * kTileElems; };
            const auto k_at = [&](int j) { return smem_addr(slot_of(j)); };
            // Tile j's fp16 copy of V (SDPA_PV_WGMMA).
            const auto vw_at = [&](int j) { return smem_addr(smem + kVWOffset) + (j & 1) * kVWTileBytes; };
            const auto load_kv = [&](int j) {
                const int kv0 = (w.kb0 + j) * BN;
                load_k_tile<kConsumerThreads>(slot_of(j), k, kv0, p.s, tid);
                load_v_tile<kConsumerThreads>(slot_of(j) + kTileElems, v, kv0, p.s, tid);
            };
            load_tile<BM, kConsumerThreads>(sq, q, w.m0, p.s, tid);
            cp_async_commit();
            if constexpr (kSplitFirst) {
                load_k_tile<kConsumerThreads>(ring, k, w.kb0 * BN, p.s, tid);
                cp_async_commit();
                load_v_tile<kConsumerThreads>(ring + kTileElems, v, w.kb0 * BN, p.s, tid);
                cp_async_commit();
            }
#pragma unroll
            for (int j = kSplitFirst ? 1 : 0; j < kStages - 1; ++j) {
                if (j < w.nkb) load_kv(j);
                cp_async_commit();  // empty groups keep the group count fixed
            }
            if constexpr (kQInRegs) {
                cp_async_wait<kStages - 1 + (kSplitFirst ? 1 : 0)>();  // Q only
                __syncthreads();
                load_q_regs(qf, smem_addr(sq), wm, lane);
            }
            int j0 = 0;
            if constexpr (kSplitFirst) {
                // Groups so far: Q, K0, V0, tiles 1..S-2. Tile 0's scores
                // need K only, so they start before V lands.
                cp_async_wait<kStages - 1>();
                __syncthreads();
                if (kStages - 1 < w.nkb) load_kv(kStages - 1);
                cp_async_commit();
                Scores sacc;
                scores(sacc, qf, smem_addr(sq), k_at(0), wm, wn, lane, krs, w.kb0 * BN, p.s);
                mask(sacc, w.m0, w.kb0 * BN, p.s, wm, wn, lane);
                cp_async_wait<kStages - 1>();
                __syncthreads();
#if SDPA_PV_WGMMA
                widen_v(vw_at(0), k_at(0) + kTileElems * kEsz, tid);
#endif
                softmax_pv(acc, sacc, k_at(0) + kTileElems * kEsz, rs, wn, lane, vw_at(0));
                j0 = 1;
            }
            for (int j = j0; j < w.nkb; ++j) {
                if constexpr (kStages == 1) {
                    load_kv(j);
                    cp_async_commit();
                    cp_async_wait<0>();
                    __syncthreads();
                } else {
                    // Groups so far: Q, tiles 0..S-2 (tile 0 as K and V
                    // with kSplitFirst), then one per earlier iteration;
                    // tile j's is done when S-2 are pending.
                    cp_async_wait<kStages - 2>();
                    // One barrier per tile: past it tile j is visible to
                    // every warp, and every warp is done with tile j-1, so
                    // its slot takes tile j+S-1 while tile j is computed.
                    __syncthreads();
                    if (j + kStages - 1 < w.nkb) load_kv(j + kStages - 1);
                    cp_async_commit();  // empty groups keep the count fixed
                }
                attend(acc, qf, smem_addr(sq), k_at(j), k_at(j) + kTileElems * kEsz, w.m0, (w.kb0 + j) * BN, p.s, rs, krs,
                       wm, wn, lane, vw_at(j));
                if constexpr (kStages == 1) __syncthreads();  // the slot is free for the next load
            }
        }
        finish(acc, p, w, smem, wm, wn, lane);
    });
}

// Tiles a producer keeps in flight. With two, tile i is handed over only
// after tile i+1 has been issued, which is free when the consumers need it
// two or more tiles later (STAGES >= 3); with two slots they would wait on
// that issue every tile, so STAGES = 2 keeps one.
constexpr int kProducerLead = kStages >= 3 ? 2 : 1;

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
        // Tile i is handed over once its data has landed.
        const auto hand_over = [&](int i) {
            __threadfence_block();
            bar_arrive(kBarFull + i % kStages, kThreads);
        };
        for_each_tile(p, [&](const Tile& w) {
            const size_t head = (size_t)w.bh * p.s * D;
            const elem* k = static_cast<const elem*>(p.k) + head;
            const elem* v = v_head(p, w.bh);
            for (int j = 0; j < w.nkb; ++j, ++it) {
                const int slot = it % kStages;
                if (it >= kStages) bar_sync(kBarEmpty + slot, kThreads);
                elem* sk = ring + slot * 2 * kTileElems;
                const int kv0 = (w.kb0 + j) * BN;
                load_k_tile<kProducerThreads>(sk, k, kv0, p.s, ptid);
                load_v_tile<kProducerThreads>(sk + kTileElems, v, kv0, p.s, ptid);
                cp_async_commit();
                if constexpr (kProducerLead == 1) {
                    cp_async_wait<0>();
                    hand_over(it);
                } else if (it >= 1) {
                    // Two tiles in flight: the one before this has landed.
                    cp_async_wait<1>();
                    hand_over(it - 1);
                }
            }
        });
        if (kProducerLead == 2 && it >= 1) {
            cp_async_wait<0>();
            hand_over(it - 1);
        }
        // Match the consumers' last hand-backs so no barrier is left pending.
        for (int j = cmax(it - kStages, 0); j < it; ++j) bar_sync(kBarEmpty + j % kStages, kThreads);
        return;
    }

    const int wm = warp % kWarpsM, wn = warp / kWarpsM;
    const float sc = softmax_scale(p);
    int it = 0;
    for_each_tile(p, [&](const Tile& w) {
        Acc acc;
        acc_init(acc);
        QFrag qf;
        if constexpr (kPersistent) consumer_sync();  // the last tile's Q readers are done
        if (w.nkb > 0) {
            RowScale rs;
            row_scale(rs, p, w, sc, wm, lane);
            const float* krs = k_row_scales(p, w);
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
                attend(acc, qf, smem_addr(sq), sk, sk + kTileElems * kEsz, w.m0, (w.kb0 + j) * BN, p.s, rs, krs, wm,
                       wn, lane, smem_addr(smem + kVWOffset) + (j & 1) * kVWTileBytes);
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
    // kstep needs the tiles 256-byte aligned, wgmma's swizzle 1024-byte.
    uint32_t dyn;
    asm("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(dyn));
    if (dyn < (uint32_t)sdpa::kSmemBytes || p.d != sdpa::D || (sdpa::smem_addr(smem) & (sdpa::kWgmma ? 1023u : 255u)) != 0)
        __trap();
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
        oelem* o = static_cast<oelem*>(p.o) + row * D + lane * kPerLane;
#pragma unroll
        for (int e = 0; e < kPerLane; e += 2) *reinterpret_cast<uint32_t*>(o + e) = pack2(acc[e], acc[e + 1]);
    }
}
