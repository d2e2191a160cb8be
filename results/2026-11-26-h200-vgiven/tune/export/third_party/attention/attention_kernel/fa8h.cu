// fa8h.cu: the Hopper-native fp8 (E4M3) attention family (sm_90a): both
// products on wgmma, a producer warpgroup filling a ring of K and V^T tiles,
// consumer warpgroups overlapping the softmax of one tile with P V of the one
// before. kernels/proto/hopper/fa8.cu is where it was built and measured
// (kernels/NOTES.md, "A Hopper-native fp8 kernel"); this is that kernel behind
// the family's one argument, SdpaParams, as two launches: fa8h_vt writes V^T
// into the plan's workspace (o_part), fa8h_fwd computes O from Q, K and it.
//
// What differs from kernels/sdpa.cu (the first family):
// - Warp specialisation by warpgroup: one producer warpgroup (registers
//   given back with setmaxnreg) copies K and V tiles into a ring of FA8H_STAGES
//   slots with cp.async and signals each slot on an mbarrier as the copies
//   land; FA8H_NCW consumer warpgroups of 64 query rows each take every register
//   it gave up.
// - Both products on wgmma: Q K^T with Q and K by shared-memory descriptor,
//   P V with P from registers (E4M3) and V^T by descriptor. An E4M3 B operand
//   must be K-major, so V is transposed first (fa8h_vt: V^T [B*H][D][Sp], the
//   key stride Sp a multiple of 16, zero-padded).
// - P never moves between threads. wgmma's accumulator gives a thread the
//   keys {2t, 2t+1, 8+2t, 9+2t} of every 16 (t = lane % 4), and its E4M3 A
//   operand wants the keys {4t..4t+3}; so the producer writes K's rows in the
//   order that makes score column c the key perm(c) = 4t + 2h + e for
//   c = 8h + 2t + e, and the accumulator, read as A, is P in V^T's natural
//   key order.
// - The softmax of tile j overlaps P V of tile j-1 (issued right after
//   Q K^T of tile j), and with FA8H_PINGPONG the two consumer warpgroups take
//   turns issuing their MMAs (named barriers), so one's exponentials run
//   while the other's MMAs do (FlashAttention-3's two schedules).
//
// Knobs (macros): FA8H_HD (64, 128), FA8H_BN (64, 128 keys a tile), FA8H_NCW (1, 2 consumer
// warpgroups: 64 or 128 query rows a CTA; 3 builds for the prototype harness, a measured
// negative kept out of the space), FA8H_STAGES (2..), FA8H_CAUSAL, FA8H_PINGPONG,
// FA8H_QK_SPLIT (each k32 step of Q K^T in a fresh accumulator, summed in fp32:
// the E4M3 wgmma loses bits when it adds onto its accumulator, which failed
// the gate at input scale 16; kernels/NOTES.md; 2: one extra accumulator,
// reused step by step, for D=128 with 128-key tiles; 3, D=128: two chains of two steps in two
// accumulators, one lossy add each, summed in fp32), FA8H_PV_ACCUM (each tile's P V in a
// fresh accumulator, added into O in fp32), FA8H_EXP_EMU (of every 8 column blocks
// of the scores, how many take 2^x from a polynomial on the FMA pipe: ex2_fma),
// FA8H_PV_LATE (P V of tile j-1 issued after Q K^T of tile j has landed),
// FA8H_V_SMEM (the producer copies V's rows as they are and transposes each
// tile in shared memory, vt_tile, so the plan has no fa8h_vt launch),
// FA8H_V_GIVEN (the caller gives V transposed, V^T [BH][D][Sp] with the keys
// beyond S zero, in SdpaParams' v: no fa8h_vt launch either; the problem's
// V layout, not a searched knob).
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cstdint>
#include <cuda_bf16.h>
#include "sdpa_params.h"

#ifndef FA8H_HD
#define FA8H_HD 64
#endif
#ifndef FA8H_BN
#define FA8H_BN 128
#endif
#ifndef FA8H_NCW
#define FA8H_NCW 2
#endif
#ifndef FA8H_STAGES
#define FA8H_STAGES 2
#endif
#ifndef FA8H_CAUSAL
#define FA8H_CAUSAL 0
#endif
#ifndef FA8H_PINGPONG
#define FA8H_PINGPONG 1
#endif
#ifndef FA8H_QK_SPLIT
#define FA8H_QK_SPLIT 1
#endif
#ifndef FA8H_PV_ACCUM
#define FA8H_PV_ACCUM 0
#endif
#ifndef FA8H_PERSISTENT
#define FA8H_PERSISTENT 0
#endif
#ifndef FA8H_PREGS
#define FA8H_PREGS 40  // the producer's registers (24, 40 or 56); the consumers take the rest
#endif
#ifndef FA8H_EXP_EMU
#define FA8H_EXP_EMU 0
#endif
#ifndef FA8H_PV_LATE
#define FA8H_PV_LATE 0
#endif
#ifndef FA8H_V_GIVEN
#define FA8H_V_GIVEN 0
#endif
#ifndef FA8H_V_SMEM
#define FA8H_V_SMEM 0
#endif

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
// (nvcc's -arch=sm_90a with -c also runs a compute_90 pass, which lands here.)
#error "fa8h.cu (sdpa-hopper) needs sm_90a: nvcc -gencode arch=compute_90a,code=sm_90a"
#endif
#if defined(__CUDACC_VER_MAJOR__) && (__CUDACC_VER_MAJOR__ < 12 || __CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ < 4)
#error "fa8h.cu (sdpa-hopper) needs nvcc 12.4 or newer"
#endif

// Everything but the entry points is in namespace fa8h, which an export
// bundle renames per config so that several configs compile into one program.
namespace fa8h {

static_assert(FA8H_HD == 64 || FA8H_HD == 128, "FA8H_HD is 64 or 128");
static_assert(FA8H_BN == 64 || FA8H_BN == 128, "FA8H_BN is 64 or 128");
static_assert(FA8H_NCW >= 1 && FA8H_NCW <= 3, "FA8H_NCW is 1, 2 or 3");
static_assert(!FA8H_PINGPONG || FA8H_NCW == 2, "FA8H_PINGPONG takes two consumer warpgroups");
static_assert(FA8H_STAGES >= 2, "FA8H_STAGES >= 2");
static_assert(FA8H_QK_SPLIT >= 0 && FA8H_QK_SPLIT <= 3, "FA8H_QK_SPLIT is 0, 1, 2 or 3");
static_assert(FA8H_QK_SPLIT != 3 || FA8H_HD == 128, "FA8H_QK_SPLIT=3 halves four k32 steps (D=128)");
static_assert(!FA8H_PV_LATE || !FA8H_PINGPONG, "FA8H_PV_LATE has no ping-pong schedule");
static_assert(!(FA8H_V_SMEM && FA8H_V_GIVEN), "FA8H_V_SMEM transposes V's rows; FA8H_V_GIVEN has V^T already");
static_assert(!FA8H_V_SMEM || FA8H_STAGES >= 3, "FA8H_V_SMEM needs three ring slots (a tile is signalled one tile late)");
static_assert(FA8H_EXP_EMU >= 0 && FA8H_EXP_EMU <= 8, "FA8H_EXP_EMU is 0..8 (of every 8 column blocks)");

constexpr int BM = 64 * FA8H_NCW;
// 65,536 registers: the producer's 128 threads keep FA8H_PREGS, the consumers'
// 128 * FA8H_NCW share the rest (a multiple of 8, at most 240).
constexpr int kConsumerRegs = FA8H_NCW == 1 ? 240 : (65536 - 128 * FA8H_PREGS) / (128 * FA8H_NCW) / 8 * 8 > 240 ? 240 : (65536 - 128 * FA8H_PREGS) / (128 * FA8H_NCW) / 8 * 8;
static_assert(FA8H_PREGS == 24 || FA8H_PREGS == 40 || FA8H_PREGS == 56, "FA8H_PREGS is 24, 40 or 56");
constexpr int kThreads = 128 * (FA8H_NCW + 1);
constexpr int KT = FA8H_HD / 32;  // k32 steps of Q K^T
constexpr int NB = FA8H_BN / 8;   // 8-key column blocks of the scores
constexpr int DB = FA8H_HD / 8;   // 8-column blocks of O
constexpr int PK = FA8H_BN / 32;  // k32 steps of P V
constexpr int kQBytes = BM * FA8H_HD;
constexpr int kKBytes = FA8H_BN * FA8H_HD;
constexpr int kVBytes = FA8H_HD * FA8H_BN;
constexpr int kStageBytes = kKBytes + kVBytes;
// FA8H_V_SMEM: two row-major V tiles the producer transposes from, rows
// padded by 16 bytes (kVRow) so that the transpose's reads miss each other's
// banks (below, vt_tile).
constexpr int kVRow = FA8H_HD + 16;
constexpr int kVStagingBytes = FA8H_V_SMEM ? 2 * FA8H_BN * kVRow : 0;
constexpr int kBarOff = 2 * kQBytes + FA8H_STAGES * kStageBytes + kVStagingBytes;
constexpr int kSmemBytes = kBarOff + 2 * FA8H_STAGES * 8 + 32 + 1024;  // + alignment slack
#ifdef FA8H_EXPECT_SMEM
// A test compiles with the shared memory the plan gives (kernels.FA8HPlan).
static_assert(kSmemBytes == FA8H_EXPECT_SMEM, "the plan's shared memory differs from the kernel's");
#endif

#ifndef FA8H_OUT_BF16
#define FA8H_OUT_BF16 0
#endif
#if FA8H_OUT_BF16
typedef __nv_bfloat16 OutT;
typedef __nv_bfloat162 OutT2;
__device__ __forceinline__ OutT2 out2(float a, float b) { return __floats2bfloat162_rn(a, b); }
#else
typedef __half OutT;
typedef __half2 OutT2;
__device__ __forceinline__ OutT2 out2(float a, float b) { return __floats2half2_rn(a, b); }
#endif

// What the forward reads, from the family's SdpaParams (fa8h_fwd below).
struct Params {
    const uint8_t* q;   // [BH][S][FA8H_HD] E4M3
    const uint8_t* k;   // [BH][S][FA8H_HD] E4M3
    const uint8_t* vt;  // [BH][FA8H_HD][Sp] E4M3, keys >= S zero: fa8h_vt's output in the workspace, or the caller's (FA8H_V_GIVEN)
    const uint8_t* v;   // [BH][S][FA8H_HD] E4M3 (FA8H_V_SMEM: the producer transposes it)
    OutT* o;            // [BH][S][FA8H_HD]
    int bh, s, sp;
    float qk_scale2;    // q_scale * k_scale * softmax scale * log2(e)
    float v_scale;
};

// ---- shared memory, barriers, copies ----
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

// The byte offset of 16-byte chunk ch of row r in a K-major tile of R-byte
// rows (64: the 64-byte swizzle, 128: the 128-byte one), as wgmma's
// descriptors read it; tiles start 1024-byte aligned.
template <int R>
__device__ __forceinline__ uint32_t swz(int r, int ch) {
    const int x = R == 128 ? (r & 7) : ((r >> 1) & 3);
    return (uint32_t)(r * R + ((ch ^ x) << 4));
}

__device__ __forceinline__ void cp16(uint32_t dst, const void* src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void bar_init(uint32_t b, int count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(b), "r"(count) : "memory");
}
__device__ __forceinline__ void bar_arrive(uint32_t b) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(b) : "memory");
}
// The arrive happens when this thread's earlier cp.async have landed.
__device__ __forceinline__ void bar_arrive_cp(uint32_t b) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(b) : "memory");
}
__device__ __forceinline__ void bar_wait(uint32_t b, int parity) {
    asm volatile(
        "{\n.reg .pred done;\nWAIT_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra WAIT_%=;\n}\n" ::"r"(b),
        "r"(parity)
        : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }
// The producer warpgroup's own barrier (FA8H_V_SMEM).
__device__ __forceinline__ void producer_sync() { asm volatile("bar.sync 3, 128;\n" ::: "memory"); }
__device__ __forceinline__ uint32_t lds32(uint32_t a) {
    uint32_t x;
    asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(x) : "r"(a) : "memory");
    return x;
}
__device__ __forceinline__ void sts32(uint32_t a, uint32_t x) { asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(a), "r"(x) : "memory"); }
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}
// t4x4 transposes a 4x4 block of bytes: y[i] holds byte i of x[0..3], x[0]'s
// in its low byte (eight byte permutes).
__device__ __forceinline__ void t4x4(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3, uint32_t (&y)[4]) {
    const uint32_t t0 = prmt(x0, x1, 0x5140), t1 = prmt(x0, x1, 0x7362);
    const uint32_t t2 = prmt(x2, x3, 0x5140), t3 = prmt(x2, x3, 0x7362);
    y[0] = prmt(t0, t2, 0x5410), y[1] = prmt(t0, t2, 0x7632), y[2] = prmt(t1, t3, 0x5410), y[3] = prmt(t1, t3, 0x7632);
}
__device__ __forceinline__ void fence_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void named_arrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }

// ---- wgmma ----
// The descriptor of a K-major tile of R-byte rows at addr (swizzled as swz):
// 8-row groups 8 * R bytes apart; a k32 step is 32 bytes along the rows.
// The low word (address >> 4, leading byte offset 1) moves with the tile;
// the high word (stride, swizzle mode) is fixed by R, so a tile's descriptor
// is its base's plus (bytes >> 4) in the low word (shared memory < 256 KB: no
// carry out of the address field).
template <int R>
__device__ __forceinline__ uint64_t desc_lo(uint32_t lo) {
    constexpr uint64_t kHi = (uint64_t)(8 * R >> 4) | (uint64_t)(R == 128 ? 1 : 2) << 30;
    return kHi << 32 | lo;
}
__device__ __forceinline__ uint32_t lo_of(uint32_t addr) { return ((addr & 0x3FFFFu) >> 4) | (1u << 16); }
template <int R>
__device__ __forceinline__ uint64_t desc(uint32_t addr) { return desc_lo<R>(lo_of(addr)); }
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// pin: the register is read and written here, so the compiler keeps it (and
// its uses) on this side of the asynchronous MMA's wait.
__device__ __forceinline__ void pin(float& x) { asm volatile("" : "+f"(x)::"memory"); }
__device__ __forceinline__ void pin(uint32_t& x) { asm volatile("" : "+r"(x)::"memory"); }
template <int A>
__device__ __forceinline__ void pin(float (&x)[A][4]) {
#pragma unroll
    for (int i = 0; i < A; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) pin(x[i][e]);
}
template <int A>
__device__ __forceinline__ void pin(uint32_t (&x)[A][4]) {
#pragma unroll
    for (int i = 0; i < A; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) pin(x[i][e]);
}

#define D0 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define D1 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define D2 "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define D3 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define D32 D0 ", " D1
#define D64 D32 ", " D2 ", " D3
#define C4(c, j) "+f"(c[j][0]), "+f"(c[j][1]), "+f"(c[j][2]), "+f"(c[j][3])
#define C16(c, j) C4(c, j), C4(c, j + 1), C4(c, j + 2), C4(c, j + 3)
#define C32(c) C16(c, 0), C16(c, 4)
#define C64(c) C32(c), C16(c, 8), C16(c, 12)

// c (+)= A B, m64nNk32 E4M3 into fp32, A and B by descriptor.
__device__ __forceinline__ void mma_ss(float (&c)[8][4], uint64_t a, uint64_t b, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {" D32 "}, %32, %33, p, 1, 1;\n}\n"
                 : C32(c)
                 : "l"(a), "l"(b), "r"(acc));
}
__device__ __forceinline__ void mma_ss(float (&c)[16][4], uint64_t a, uint64_t b, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {" D64 "}, %64, %65, p, 1, 1;\n}\n"
                 : C64(c)
                 : "l"(a), "l"(b), "r"(acc));
}
// c (+)= A B, m64nNk32 E4M3 into fp32, A from registers, B by descriptor.
__device__ __forceinline__ void mma_rs(float (&c)[8][4], const uint32_t (&a)[4], uint64_t b, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 {" D32 "}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
                 : C32(c)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc));
}
__device__ __forceinline__ void mma_rs(float (&c)[16][4], const uint32_t (&a)[4], uint64_t b, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {" D64 "}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
                 : C64(c)
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(acc));
}

// ex2 is 2^x on the MUFU (ex2.approx.ftz: relative error 2^-22, far below
// P's E4M3 rounding).
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// ex2_fma is 2^x on the FMA and ALU pipes (FA8H_EXP_EMU): x = n + f with n =
// rint(x) from the magic-number add (t's low mantissa bits hold n) and f in
// [-0.5, 0.5]; 2^f by a degree-3 polynomial (relative least-squares fit,
// Lawson-weighted toward minimax: at most 7.5e-5 relative error, far below
// P's E4M3 rounding of 2^-4 and under O's fp16 rounding of 2^-11); n added to
// the exponent field. x is clamped at -125, so that 2^-125 stands in for 0
// (it rounds to 0 in E4M3 and adds nothing visible to the fp32 row sum) and
// the exponent cannot wrap. Eight instructions, none on the MUFU, which the
// softmax otherwise keeps saturated in bursts (kernels/NOTES.md).
__device__ __forceinline__ float ex2_fma(float x) {
    x = fmaxf(x, -125.f);
    const float t = x + 12582912.f;  // 1.5 * 2^23
    const float f = x - (t - 12582912.f);
    const float q = fmaf(fmaf(fmaf(0.0551716685f, f, 0.24261114f), f, 0.693260968f), f, 0.999928057f);
    return __int_as_float(__float_as_int(q) + (__float_as_int(t) << 23));
}

// pack4 rounds four floats to E4M3 (saturating), x0 in the low byte.
__device__ __forceinline__ uint32_t pack4(float x0, float x1, float x2, float x3) {
    uint32_t r;
    asm("{\n.reg .b16 lo, hi;\n"
        "cvt.rn.satfinite.e4m3x2.f32 lo, %2, %1;\n"
        "cvt.rn.satfinite.e4m3x2.f32 hi, %4, %3;\n"
        "mov.b32 %0, {lo, hi};\n}\n"
        : "=r"(r)
        : "f"(x0), "f"(x1), "f"(x2), "f"(x3));
    return r;
}

// The key of score column c of a tile (the producer's row order of K).
__device__ __forceinline__ int perm(int c) {
    const int cb = c & 15, h = cb >> 3, t = (cb >> 1) & 3, e = cb & 1;
    return (c & ~15) | (t << 2) | (h << 1) | e;
}

// P is scaled by 2^8 (an exponent bias) into E4M3's normal range; it cancels
// in O = sum P V / sum P.
constexpr float kPBias = 8.f;

// vt_tile (FA8H_V_SMEM): the producer's 128 threads transpose a row-major V
// tile in shared memory (st: key k's chunk c of 16 bytes at k * kVRow +
// ((c ^ (k >> 3 & 3)) << 4), as the producer's copies place it) into the
// ring slot's V^T tile (vt: swz<FA8H_BN>, what P V's descriptor reads). A
// thread moves 4x4-byte blocks, keys 4q..4q+3 by d 4g..4g+3: four 4-byte
// loads, eight byte permutes (t4x4), four 4-byte stores. A warp takes 8 q by 4 g at
// a time (a unit): q = 8a + ql, g = 4c + gl for lane = 8 gl + ql, a and the
// first c fixed per warp, c stepping per unit. Every address is a per-thread
// base plus a constant but the loads' chunk, (c ^ (q >> 1 & 3)), one XOR a
// unit. The row padding and the chunk swizzle keep the loads free of bank
// conflicts; the stores take two ways at most (checked by enumerating the
// addresses for every FA8H_HD and FA8H_BN).
__device__ __forceinline__ void vt_tile(uint32_t st, uint32_t vt, int tid) {
    constexpr int kUQ = FA8H_BN / 32, kUnits = kUQ * (FA8H_HD / 16), kCS = 4 / kUQ;
    static_assert(kUnits % 4 == 0 && 4 % kUQ == 0, "units split evenly over the producer's warps");
    const int lane = tid & 31, ql = lane & 7, gl = lane >> 3, w = tid >> 5;
    const int a = w % kUQ, c0 = w / kUQ;
    // Loads: key 4q + j, chunk c ^ (q >> 1 & 3) (q >> 1 & 3 = ql >> 1 & 3), word gl.
    const uint32_t lbase = st + (uint32_t)((32 * a + 4 * ql) * kVRow + gl * 4);
    const uint32_t lsw = (uint32_t)((ql >> 1) & 3);
    // Stores: d = 4g + i, chunk (q >> 2) ^ x(d), word ql & 3, where q >> 2 =
    // 2a + (ql >> 2), and x(d) = d & 7 = 4 (gl & 1) + i (128-byte rows) or
    // (d >> 1) & 3 = 2 (gl & 1) + (i >> 1) (64-byte rows): the chunk is a
    // per-thread part XOR a constant (i or i >> 1); so is the address, as
    // its fields do not overlap.
    const uint32_t wsw = (uint32_t)(2 * a + (ql >> 2)) ^ (uint32_t)(FA8H_BN == 128 ? 4 * (gl & 1) : 2 * (gl & 1));
    const uint32_t sbase = vt + (uint32_t)((16 * c0 + 4 * gl) * FA8H_BN + (ql & 3) * 4);
    uint32_t sa[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) sa[i] = sbase + ((wsw ^ (uint32_t)(FA8H_BN == 128 ? i : i >> 1)) << 4) + i * FA8H_BN;
#pragma unroll
    for (int it = 0; it < kUnits / 4; ++it) {
        const int c = kCS * it;  // plus c0 (in the bases)
        const uint32_t la = lbase + ((((uint32_t)(c0 + c)) ^ lsw) << 4);
        uint32_t x[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) x[j] = lds32(la + j * kVRow);
        uint32_t y[4];
        t4x4(x[0], x[1], x[2], x[3], y);
#pragma unroll
        for (int i = 0; i < 4; ++i) sts32(sa[i] + 16 * c * FA8H_BN, y[i]);
    }
}

__device__ __forceinline__ void fwd(const Params& p) {
    extern __shared__ uint8_t smem_raw[];
    {
        // The plan must give the shared memory this config lays out.
        uint32_t dyn;
        asm("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(dyn));
        if (dyn < (uint32_t)kSmemBytes) __trap();
    }
    uint8_t* smem = (uint8_t*)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const uint32_t sq = smem_u32(smem);  // two Q buffers (work items alternate)
    const uint32_t sring = sq + 2 * kQBytes;
    const uint32_t full = sq + kBarOff, empty = full + FA8H_STAGES * 8, qfull = empty + FA8H_STAGES * 8, qempty = qfull + 16;
    const int tid = threadIdx.x, wg = tid / 128;
    const int mtiles = (p.s + BM - 1) / BM, items = mtiles * p.bh;
    const int ktiles = (p.s + FA8H_BN - 1) / FA8H_BN;
    // Work item w: causal ones longest first (heads interleaved), the others
    // a head's query tiles one after another (they share K and V in the L2).
    // FA8H_PERSISTENT: gridDim.x CTAs stride over the items; else one item a CTA.
    auto item = [&](int w, int& m0, int& bh, int& n) {
        const int mt = FA8H_CAUSAL ? mtiles - 1 - w / p.bh : w % mtiles;
        bh = FA8H_CAUSAL ? w % p.bh : w / mtiles;
        m0 = mt * BM;
        n = FA8H_CAUSAL ? min(ktiles, (m0 + BM + FA8H_BN - 1) / FA8H_BN) : ktiles;
    };
    const int w0 = blockIdx.x, wstep = FA8H_PERSISTENT ? gridDim.x : items;

    if (tid == 0) {
        for (int s = 0; s < FA8H_STAGES; ++s) {
            bar_init(full + 8 * s, 128);
            bar_init(empty + 8 * s, FA8H_NCW * 4);
        }
        for (int b = 0; b < 2; ++b) {
            bar_init(qfull + 8 * b, 128);
            bar_init(qempty + 8 * b, FA8H_NCW * 4);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        // Producer: Q with tile 0, then K and V^T a tile a slot.
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(FA8H_PREGS));
        // A thread copies the same chunk of rows tid / CPR + RPI * it of every
        // tile: rows RPI apart share their swizzle and their place in perm, so
        // the offsets are fixed per thread and only the tile's base moves.
        constexpr int kCPR = FA8H_HD / 16, kRPI = 128 / kCPR;   // K and Q: chunks a row, rows an iteration
        constexpr int vCPR = FA8H_BN / 16, vRPI = 128 / vCPR;   // V^T
        static_assert(kRPI % 16 == 0 && vRPI % 8 == 0, "rows an iteration keep swizzle and perm");
        const int kr = tid / kCPR, kch = tid % kCPR, vd = tid / vCPR, vch = tid % vCPR;
        const uint32_t kdst = swz<FA8H_HD>(kr, kch), vdst = swz<FA8H_BN>(vd, vch);
        const int kkey = perm(kr);
        unsigned g = 0;  // the ring's tile count over every item
#if FA8H_V_SMEM
        const uint32_t sstage = sring + FA8H_STAGES * kStageBytes;
        // Ring tile gg's V rows have landed (pending: cp.async groups this
        // thread may leave in flight); every producer thread's have, once
        // past the barrier. Transpose them into the slot, let the staging
        // buffer go (the second barrier), and signal the slot full: K's copies
        // landed with the same group, and the arrive releases the stores.
        auto signal_vt = [&](unsigned gg, int pending) {
            if (pending) cp_wait<1>();
            else cp_wait<0>();
            producer_sync();
            vt_tile(sstage + (gg & 1) * (FA8H_BN * kVRow), sring + (gg % FA8H_STAGES) * kStageBytes + kKBytes, tid);
            producer_sync();
            bar_arrive(full + 8 * (gg % FA8H_STAGES));
        };
#endif
        for (int w = w0, it = 0; w < items; w += wstep, ++it) {
            int m0, bh, n;
            item(w, m0, bh, n);
            const uint8_t* qg = p.q + (size_t)bh * p.s * FA8H_HD;
            const uint8_t* kg = p.k + (size_t)bh * p.s * FA8H_HD;
#if !FA8H_V_SMEM
            const uint8_t* vg = p.vt + (size_t)bh * FA8H_HD * p.sp;
#endif
            const int qb = it & 1;
            if (it >= 2) bar_wait(qempty + 8 * qb, ((it >> 1) - 1) & 1);
#pragma unroll
            for (int i = 0; i < BM / kRPI; ++i) {
                const int r = kr + i * kRPI;
                const bool ok = m0 + r < p.s;
                cp16(sq + qb * kQBytes + swz<FA8H_HD>(r, kch), qg + (size_t)(ok ? m0 + r : 0) * FA8H_HD + kch * 16, ok);
            }
            bar_arrive_cp(qfull + 8 * qb);
            const uint8_t* ksrc = kg + (size_t)kkey * FA8H_HD + kch * 16;
#if FA8H_V_SMEM
            const uint8_t* vrg = p.v + (size_t)bh * p.s * FA8H_HD;
#else
            const uint8_t* vsrc = vg + (size_t)vd * p.sp + vch * 16;
#endif
            for (int j = 0; j < n; ++j, ++g) {
                const unsigned s = g % FA8H_STAGES;
                if (g >= FA8H_STAGES) bar_wait(empty + 8 * s, ((g / FA8H_STAGES) - 1) & 1);
                const uint32_t sk = sring + s * kStageBytes;
                const int n0 = j * FA8H_BN;
#pragma unroll
                for (int i = 0; i < FA8H_BN / kRPI; ++i) {
                    const int key = n0 + kkey + i * kRPI;
                    const bool ok = key < p.s;
                    cp16(sk + kdst + i * kRPI * FA8H_HD, ok ? ksrc + (size_t)(n0 + i * kRPI) * FA8H_HD : kg, ok);
                }
#if FA8H_V_SMEM
                // V's rows, as they are, into staging buffer g & 1 (keys
                // beyond S zero-filled); the tile before this one is
                // transposed while they fly, and only then signalled.
                const uint32_t sst = sstage + (g & 1) * (FA8H_BN * kVRow);
#pragma unroll
                for (int i = 0; i < FA8H_BN / kRPI; ++i) {
                    const int r = kr + i * kRPI, key = n0 + r;
                    const bool ok = key < p.s;
                    cp16(sst + r * kVRow + ((kch ^ ((r >> 3) & 3)) << 4), ok ? vrg + (size_t)key * FA8H_HD + kch * 16 : p.v, ok);
                }
                cp_commit();
                if (g > 0) signal_vt(g - 1, 1);
#else
                const uint32_t sv = sk + kKBytes;
                const bool vok = n0 + vch * 16 < p.sp;
#pragma unroll
                for (int i = 0; i < FA8H_HD / vRPI; ++i)
                    cp16(sv + vdst + i * vRPI * FA8H_BN, vok ? vsrc + (size_t)i * vRPI * p.sp + n0 : vg, vok);
                bar_arrive_cp(full + 8 * s);
#endif
            }
        }
#if FA8H_V_SMEM
        if (g > 0) signal_vt(g - 1, 0);
#endif
        return;
    }

    // Consumers.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    const int cw = wg - 1, warp = (tid % 128) / 32, lane = tid % 32, t4 = lane % 4;
    int m0, bh, n, row0;  // the work item's (row0 and row0 + 8: this thread's rows)
    uint64_t qdesc;
    float o[DB][4];
    float sc[NB][4];
#if FA8H_QK_SPLIT
    // FA8H_QK_SPLIT=1: a fresh accumulator per k32 step after the first; 2: one,
    // reused (steps 2.. are issued after the first two land, one at a time).
    // 3: two chains of two steps, one in each accumulator, summed in fp32.
    constexpr int kST = FA8H_QK_SPLIT == 1 ? KT - 1 : 1;
    float st[kST][NB][4];
#endif
    uint32_t pa[PK][4];
    float mrow[2], lrow[2], alpha[2];
    // The descriptors' low word of ring slot 0's K tile; a slot's is this
    // plus slot * (kStageBytes >> 4), its V^T tile's (kKBytes >> 4) more.
    const uint32_t ring_lo = lo_of(sring);
    auto slot_lo = [&](unsigned rg) { return ring_lo + (rg % FA8H_STAGES) * (kStageBytes >> 4); };

    // Q K^T of ring tile rg into sc (issued, committed; not waited for).
    auto issue_qk = [&](unsigned rg) {
        const uint32_t kl = slot_lo(rg);
#if FA8H_QK_SPLIT == 3
#pragma unroll
        for (int k = 0; k < KT; ++k)
            mma_ss(k < KT / 2 ? sc : st[0], qdesc + (k * 32 >> 4), desc_lo<FA8H_HD>(kl + (k * 32 >> 4)), k % (KT / 2) > 0);
#elif FA8H_QK_SPLIT
        mma_ss(sc, qdesc, desc_lo<FA8H_HD>(kl), 0);
#pragma unroll
        for (int k = 1; k < 1 + kST; ++k) mma_ss(st[k - 1], qdesc + (k * 32 >> 4), desc_lo<FA8H_HD>(kl + (k * 32 >> 4)), 0);
#else
#pragma unroll
        for (int k = 0; k < KT; ++k) mma_ss(sc, qdesc + (k * 32 >> 4), desc_lo<FA8H_HD>(kl + (k * 32 >> 4)), k > 0);
#endif
        wg_commit();
    };
    // P V of ring tile rg into o (issued, committed).
#if FA8H_PV_ACCUM
    float ot[DB][4];
#endif
    auto issue_pv = [&](unsigned rg) {
        const uint32_t vl = slot_lo(rg) + (kKBytes >> 4);
#pragma unroll
        for (int k = 0; k < PK; ++k)
#if FA8H_PV_ACCUM
            mma_rs(ot, pa[k], desc_lo<FA8H_BN>(vl + (k * 32 >> 4)), k > 0);
#else
            mma_rs(o, pa[k], desc_lo<FA8H_BN>(vl + (k * 32 >> 4)), 1);
#endif
        wg_commit();
    };
    // After Q K^T's first steps of ring tile rg landed: their sum into sc
    // (FA8H_QK_SPLIT 1, 2 and 3), and with FA8H_QK_SPLIT=2 the remaining steps.
    auto qk_finish = [&](unsigned rg) {
        pin(sc);
#if FA8H_QK_SPLIT
#pragma unroll
        for (int k = 0; k < kST; ++k) pin(st[k]);
#pragma unroll
        for (int k = 0; k < kST; ++k)
#pragma unroll
            for (int i = 0; i < NB; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) sc[i][e] += st[k][i][e];
#if FA8H_QK_SPLIT == 2
        // The remaining steps, one at a time into st (this waits for the
        // P V in flight as well).
        const uint32_t kl = slot_lo(rg);
#pragma unroll
        for (int k = 2; k < KT; ++k) {
            wg_fence();
            mma_ss(st[0], qdesc + (k * 32 >> 4), desc_lo<FA8H_HD>(kl + (k * 32 >> 4)), 0);
            wg_commit();
            wg_wait<0>();
            pin(st[0]);
#pragma unroll
            for (int i = 0; i < NB; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) sc[i][e] += st[0][i][e];
        }
#endif
#endif
    };
    // Then, for the item's tile j: mask, online softmax, P (fp32, in sc).
    auto softmax_rest = [&](int j) {
        const int n0 = j * FA8H_BN;
        if (n0 + FA8H_BN > p.s || (FA8H_CAUSAL && n0 + FA8H_BN - 1 > m0 + cw * 64)) {
#pragma unroll
            for (int i = 0; i < NB; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int key = n0 + perm(i * 8 + 2 * t4 + (e & 1));
                    const int row = row0 + (e >> 1) * 8;
                    if (key >= p.s || (FA8H_CAUSAL && key > row)) sc[i][e] = -INFINITY;
                }
        }
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            // Max and sum as trees of independent steps, not one chain.
            float mv[NB];
#pragma unroll
            for (int i = 0; i < NB; ++i) mv[i] = fmaxf(sc[i][2 * r], sc[i][2 * r + 1]);
#pragma unroll
            for (int lv = 1; lv < NB; lv *= 2)
#pragma unroll
                for (int i = 0; i < NB; i += 2 * lv) mv[i] = fmaxf(mv[i], mv[i + lv]);
            float mx = fmaxf(mrow[r], mv[0]);
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
            const float mnew = mx == -INFINITY ? 0.f : mx;
            alpha[r] = ex2((mrow[r] - mnew) * p.qk_scale2);
            mrow[r] = mx;
            const float off = mnew * p.qk_scale2 - kPBias;
            float ps[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int i = 0; i < NB; ++i)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    // FA8H_EXP_EMU of every 8 column blocks take the FMA pipe's 2^x.
                    const float a = fmaf(sc[i][2 * r + e], p.qk_scale2, -off);
                    const float x = (i & 7) < FA8H_EXP_EMU ? ex2_fma(a) : ex2(a);
                    sc[i][2 * r + e] = x;
                    ps[(2 * i + e) & 3] += x;
                }
            const float sum = (ps[0] + ps[1]) + (ps[2] + ps[3]);
            lrow[r] = lrow[r] * alpha[r] + sum;
        }
    };
    auto softmax = [&](int j, unsigned rg) {
        qk_finish(rg);
        softmax_rest(j);
    };
    auto to_p = [&] {
#pragma unroll
        for (int k = 0; k < PK; ++k) {
            const float(*s4)[4] = &sc[4 * k];
            pa[k][0] = pack4(s4[0][0], s4[0][1], s4[1][0], s4[1][1]);
            pa[k][1] = pack4(s4[0][2], s4[0][3], s4[1][2], s4[1][3]);
            pa[k][2] = pack4(s4[2][0], s4[2][1], s4[3][0], s4[3][1]);
            pa[k][3] = pack4(s4[2][2], s4[2][3], s4[3][2], s4[3][3]);
        }
        pin(pa);
    };
    auto rescale = [&] {
#pragma unroll
        for (int i = 0; i < DB; ++i) {
            o[i][0] *= alpha[0];
            o[i][1] *= alpha[0];
            o[i][2] *= alpha[1];
            o[i][3] *= alpha[1];
        }
        pin(o);  // the multiplies stay before the next wgmma.fence
    };
    auto release = [&](unsigned rg) {
        if (lane == 0) bar_arrive(empty + 8 * (rg % FA8H_STAGES));
    };
    auto acquire = [&](unsigned rg) {
        bar_wait(full + 8 * (rg % FA8H_STAGES), (rg / FA8H_STAGES) & 1);
        fence_async();
    };
#if FA8H_PV_ACCUM
    auto add_pv = [&] {
        pin(ot);
#pragma unroll
        for (int i = 0; i < DB; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[i][e] += ot[i][e];
    };
#endif

    // Waits for P V of ring tile rg (and everything before it), keeps P and O
    // live up to here, and hands the tile's slot back to the producer.
    auto pv_done = [&](unsigned rg) {
        wg_wait<0>();
        pin(pa);
#if FA8H_PV_ACCUM
        add_pv();
#else
        pin(o);
#endif
        release(rg);
    };
    unsigned g = 0;  // the ring's tile count over every item, as the producer's
    for (int w = w0, it = 0; w < items; w += wstep, ++it) {
        item(w, m0, bh, n);
        row0 = m0 + cw * 64 + warp * 16 + (lane / 4);
        const int qb = it & 1;
        qdesc = desc<FA8H_HD>(sq + qb * kQBytes + cw * 64 * FA8H_HD);
#pragma unroll
        for (int i = 0; i < DB; ++i)
#pragma unroll
            for (int e = 0; e < 4; ++e) o[i][e] = 0.f;
        mrow[0] = mrow[1] = -INFINITY;
        lrow[0] = lrow[1] = 0.f;
        alpha[0] = alpha[1] = 1.f;
        bar_wait(qfull + 8 * qb, (it >> 1) & 1);

        // Tile 0.
        acquire(g);
#if FA8H_PINGPONG
        if (cw == 1 && n > 1) named_arrive(1);
#endif
        wg_fence();
        issue_qk(g);
        wg_wait<0>();
        softmax(0, g);
        to_p();
        for (int j = 1; j < n; ++j) {
#if FA8H_PV_LATE
            // Q K^T of tile j with nothing else in flight (its split steps
            // wait for themselves alone), then P V of tile j-1 under the
            // softmax of tile j.
            acquire(g + j);
            wg_fence();
            issue_qk(g + j);
            wg_wait<0>();
            qk_finish(g + j);
            rescale();
            wg_fence();
            issue_pv(g + j - 1);
            softmax_rest(j);
            pv_done(g + j - 1);
            to_p();
#else
            acquire(g + j);
            rescale();
#if FA8H_PINGPONG
            named_sync(1 + cw);
#endif
            wg_fence();
            issue_qk(g + j);
            issue_pv(g + j - 1);
#if FA8H_PINGPONG
            if (!(cw == 1 && j == n - 1)) named_arrive(2 - cw);
#endif
            wg_wait<1>();
            softmax(j, g + j);
            pv_done(g + j - 1);
            to_p();
#endif
        }
        // Every Q K^T of the item has landed: its Q buffer goes back.
        if (lane == 0) bar_arrive(qempty + 8 * qb);
        rescale();
        wg_fence();
        issue_pv(g + n - 1);
        pv_done(g + n - 1);
        g += n;

        // O / l, in fp16.
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            float l = lrow[r];
            l += __shfl_xor_sync(0xffffffff, l, 1);
            l += __shfl_xor_sync(0xffffffff, l, 2);
            const float inv = l > 0.f ? p.v_scale / l : 0.f;
            const int row = row0 + r * 8;
            if (row < p.s) {
                OutT* out = p.o + ((size_t)bh * p.s + row) * FA8H_HD + 2 * t4;
#pragma unroll
                for (int i = 0; i < DB; ++i) *(OutT2*)(out + i * 8) = out2(o[i][2 * r] * inv, o[i][2 * r + 1] * inv);
            }
        }
    }
}

// V [BH][S][FA8H_HD] -> V^T [BH][FA8H_HD][Sp] (keys from S to Sp zero): what a caller
// whose V is not already transposed pays first (v_smem=0). A warp takes 128
// keys by 32 bytes of d, a thread keys 4q..4q+3: two 16-byte loads a key (a
// warp's load reads 32 whole sectors), 4x4-byte blocks transposed in
// registers (t4x4, as vt_tile), and for each of its 32 d one 4-byte
// store of the four keys (a warp's store writes 128 consecutive bytes). No
// shared memory; a CTA (256 threads) covers kVtKeys keys of one head.
// (FA8H_VT_KEYS: the plan's numbers, kernels.FA8HPlan; the harness reads it.)
#define FA8H_VT_KEYS (128 * 8 * 32 / FA8H_HD)
constexpr int kVtGroups = FA8H_HD / 32;
constexpr int kVtKeys = FA8H_VT_KEYS;
#ifdef FA8H_EXPECT_VT_KEYS
static_assert(kVtKeys == FA8H_EXPECT_VT_KEYS, "the plan's transpose grid differs from the kernel's");
#endif
__device__ __forceinline__ void vt_transpose(const uint8_t* v, uint8_t* vt, int s, int sp) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, bh = blockIdx.y;
    const int dg = warp % kVtGroups, k0 = blockIdx.x * kVtKeys + (warp / kVtGroups) * 128 + 4 * lane;
    if (k0 >= sp) return;  // Sp is a multiple of 16: a thread's four keys are all in or all out
    const uint8_t* src = v + (size_t)bh * s * FA8H_HD + dg * 32;
    uint32_t x[4][8];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        uint4 a = make_uint4(0, 0, 0, 0), b = a;
        if (k0 + j < s) {
            a = __ldg((const uint4*)(src + (size_t)(k0 + j) * FA8H_HD));
            b = __ldg((const uint4*)(src + (size_t)(k0 + j) * FA8H_HD + 16));
        }
        x[j][0] = a.x, x[j][1] = a.y, x[j][2] = a.z, x[j][3] = a.w;
        x[j][4] = b.x, x[j][5] = b.y, x[j][6] = b.z, x[j][7] = b.w;
    }
    uint8_t* dst = vt + ((size_t)bh * FA8H_HD + dg * 32) * sp + k0;
#pragma unroll
    for (int w = 0; w < 8; ++w) {
        uint32_t y[4];
        t4x4(x[0][w], x[1][w], x[2][w], x[3][w], y);
#pragma unroll
        for (int i = 0; i < 4; ++i) *(uint32_t*)(dst + (size_t)(4 * w + i) * sp) = y[i];
    }
}

}  // namespace fa8h

// The V transpose: V [BH][S][D] -> V^T [BH][D][Sp] in the workspace (Sp: S
// rounded up to 16, the keys beyond S zero). Grid (Sp / kVtKeys rounded up,
// B*H), 256 threads.
extern "C" __global__ void __launch_bounds__(256) fa8h_vt(const SdpaParams p) {
    fa8h::vt_transpose((const uint8_t*)p.v, (uint8_t*)p.o_part, p.s, (p.s + 15) / 16 * 16);
}

// The forward. Grid: one CTA per work item (B*H times S / BM rounded up), or
// with FA8H_PERSISTENT at most one per SM, striding over them; kThreads
// threads; kSmemBytes of dynamic shared memory.
extern "C" __global__ void __launch_bounds__(fa8h::kThreads, 1) fa8h_fwd(const SdpaParams sp) {
    fa8h::Params p;
    p.q = (const uint8_t*)sp.q;
    p.k = (const uint8_t*)sp.k;
    p.vt = (const uint8_t*)(FA8H_V_GIVEN ? sp.v : sp.o_part);
    p.v = (const uint8_t*)sp.v;
    p.o = (fa8h::OutT*)sp.o;
    p.bh = sp.b * sp.h;
    p.s = sp.s;
    p.sp = (sp.s + 15) / 16 * 16;
    p.qk_scale2 = sp.q_scale * sp.k_scale * sp.scale * 1.4426950408889634f;
    p.v_scale = sp.v_scale;
    fa8h::fwd(p);
}
