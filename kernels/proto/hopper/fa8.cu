// fa8.cu: a Hopper-native fp8 (E4M3) attention forward, a prototype of the
// second family DESIGN.md plans (sm_90a), with its own check and timing.
//
// What differs from kernels/sdpa.cu (the family the tuner serves):
// - Warp specialisation by warpgroup: one producer warpgroup (registers
//   given back with setmaxnreg) copies K and V tiles into a ring of STAGES
//   slots with cp.async and signals each slot on an mbarrier as the copies
//   land; NCW consumer warpgroups of 64 query rows each take every register
//   it gave up.
// - Both products on wgmma: Q K^T with Q and K by shared-memory descriptor,
//   P V with P from registers (E4M3) and V^T by descriptor. An E4M3 B operand
//   must be K-major, so V comes transposed from the caller (V^T: [B*H][D][Sp],
//   the key stride Sp a multiple of 16, zero-padded); this is the "V given
//   pre-transposed" problem option of #13.
// - P never moves between threads. wgmma's accumulator gives a thread the
//   keys {2t, 2t+1, 8+2t, 9+2t} of every 16 (t = lane % 4), and its E4M3 A
//   operand wants the keys {4t..4t+3}; so the producer writes K's rows in the
//   order that makes score column c the key perm(c) = 4t + 2h + e for
//   c = 8h + 2t + e, and the accumulator, read as A, is P in V^T's natural
//   key order.
// - The softmax of tile j overlaps P V of tile j-1 (issued right after
//   Q K^T of tile j), and with PINGPONG the two consumer warpgroups take
//   turns issuing their MMAs (named barriers), so one's exponentials run
//   while the other's MMAs do (FlashAttention-3's two schedules).
//
// Knobs (macros): HD (64, 128), BN (64, 128 keys a tile), NCW (1, 2 consumer
// warpgroups: 64 or 128 query rows a CTA), STAGES (2..), CAUSAL, PINGPONG,
// QK_SPLIT (each k32 step of Q K^T in a fresh accumulator, summed in fp32:
// the E4M3 wgmma loses bits when it adds onto its accumulator, which failed
// the gate at input scale 16; kernels/NOTES.md; 2: one extra accumulator,
// reused step by step, for D=128 with 128-key tiles), PV_ACCUM (each tile's P V in a
// fresh accumulator, added into O in fp32).
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <random>
#include <algorithm>

#ifndef HD
#define HD 64
#endif
#ifndef BN
#define BN 128
#endif
#ifndef NCW
#define NCW 2
#endif
#ifndef STAGES
#define STAGES 2
#endif
#ifndef CAUSAL
#define CAUSAL 0
#endif
#ifndef PINGPONG
#define PINGPONG 1
#endif
#ifndef QK_SPLIT
#define QK_SPLIT 1
#endif
#ifndef PV_ACCUM
#define PV_ACCUM 0
#endif
#ifndef PERSISTENT
#define PERSISTENT 0
#endif
#ifndef PREGS
#define PREGS 40  // the producer's registers (24 or 40); the consumers take the rest
#endif

static_assert(HD == 64 || HD == 128, "HD is 64 or 128");
static_assert(BN == 64 || BN == 128, "BN is 64 or 128");
static_assert(NCW == 1 || NCW == 2, "NCW is 1 or 2");
static_assert(!PINGPONG || NCW == 2, "PINGPONG takes two consumer warpgroups");
static_assert(STAGES >= 2, "STAGES >= 2");
static_assert(QK_SPLIT >= 0 && QK_SPLIT <= 2, "QK_SPLIT is 0, 1 or 2");

constexpr int BM = 64 * NCW;
// 65,536 registers: the producer's 128 threads keep PREGS, the consumers'
// 128 * NCW share the rest (a multiple of 8, at most 240).
constexpr int kConsumerRegs = NCW == 1 ? 240 : (65536 - 128 * PREGS) / 256 / 8 * 8 > 240 ? 240 : (65536 - 128 * PREGS) / 256 / 8 * 8;
static_assert(PREGS == 24 || PREGS == 40, "PREGS is 24 or 40");
constexpr int kThreads = 128 * (NCW + 1);
constexpr int KT = HD / 32;  // k32 steps of Q K^T
constexpr int NB = BN / 8;   // 8-key column blocks of the scores
constexpr int DB = HD / 8;   // 8-column blocks of O
constexpr int PK = BN / 32;  // k32 steps of P V
constexpr int kQBytes = BM * HD;
constexpr int kKBytes = BN * HD;
constexpr int kVBytes = HD * BN;
constexpr int kStageBytes = kKBytes + kVBytes;
constexpr int kBarOff = 2 * kQBytes + STAGES * kStageBytes;
constexpr int kSmemBytes = kBarOff + 2 * STAGES * 8 + 32 + 1024;  // + alignment slack

struct Params {
    const uint8_t* q;   // [BH][S][HD] E4M3
    const uint8_t* k;   // [BH][S][HD] E4M3
    const uint8_t* vt;  // [BH][HD][Sp] E4M3, keys >= S zero
    __half* o;          // [BH][S][HD]
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
__device__ __forceinline__ void fence_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void named_sync(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void named_arrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }

// ---- wgmma ----
// The descriptor of a K-major tile of R-byte rows at addr (swizzled as swz):
// 8-row groups 8 * R bytes apart; a k32 step is 32 bytes along the rows.
template <int R>
__device__ __forceinline__ uint64_t desc(uint32_t addr) {
    constexpr uint64_t kMode = R == 128 ? 1 : 2;
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | (1ull << 16) | ((uint64_t)(8 * R >> 4) << 32) | (kMode << 62);
}
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

__global__ void __launch_bounds__(kThreads, 1) fa8_fwd(const Params p) {
    extern __shared__ uint8_t smem_raw[];
    uint8_t* smem = (uint8_t*)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
    const uint32_t sq = smem_u32(smem);  // two Q buffers (work items alternate)
    const uint32_t sring = sq + 2 * kQBytes;
    const uint32_t full = sq + kBarOff, empty = full + STAGES * 8, qfull = empty + STAGES * 8, qempty = qfull + 16;
    const int tid = threadIdx.x, wg = tid / 128;
    const int mtiles = (p.s + BM - 1) / BM, items = mtiles * p.bh;
    const int ktiles = (p.s + BN - 1) / BN;
    // Work item w: causal ones longest first (heads interleaved), the others
    // a head's query tiles one after another (they share K and V in the L2).
    // PERSISTENT: gridDim.x CTAs stride over the items; else one item a CTA.
    auto item = [&](int w, int& m0, int& bh, int& n) {
        const int mt = CAUSAL ? mtiles - 1 - w / p.bh : w % mtiles;
        bh = CAUSAL ? w % p.bh : w / mtiles;
        m0 = mt * BM;
        n = CAUSAL ? min(ktiles, (m0 + BM + BN - 1) / BN) : ktiles;
    };
    const int w0 = blockIdx.x, wstep = PERSISTENT ? gridDim.x : items;

    if (tid == 0) {
        for (int s = 0; s < STAGES; ++s) {
            bar_init(full + 8 * s, 128);
            bar_init(empty + 8 * s, NCW * 4);
        }
        for (int b = 0; b < 2; ++b) {
            bar_init(qfull + 8 * b, 128);
            bar_init(qempty + 8 * b, NCW * 4);
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        // Producer: Q with tile 0, then K and V^T a tile a slot.
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(PREGS));
        // A thread copies the same chunk of rows tid / CPR + RPI * it of every
        // tile: rows RPI apart share their swizzle and their place in perm, so
        // the offsets are fixed per thread and only the tile's base moves.
        constexpr int kCPR = HD / 16, kRPI = 128 / kCPR;   // K and Q: chunks a row, rows an iteration
        constexpr int vCPR = BN / 16, vRPI = 128 / vCPR;   // V^T
        static_assert(kRPI % 16 == 0 && vRPI % 8 == 0, "rows an iteration keep swizzle and perm");
        const int kr = tid / kCPR, kch = tid % kCPR, vd = tid / vCPR, vch = tid % vCPR;
        const uint32_t kdst = swz<HD>(kr, kch), vdst = swz<BN>(vd, vch);
        const int kkey = perm(kr);
        int g = 0;  // the ring's tile count over every item
        for (int w = w0, it = 0; w < items; w += wstep, ++it) {
            int m0, bh, n;
            item(w, m0, bh, n);
            const uint8_t* qg = p.q + (size_t)bh * p.s * HD;
            const uint8_t* kg = p.k + (size_t)bh * p.s * HD;
            const uint8_t* vg = p.vt + (size_t)bh * HD * p.sp;
            const int qb = it & 1;
            if (it >= 2) bar_wait(qempty + 8 * qb, ((it >> 1) - 1) & 1);
#pragma unroll
            for (int i = 0; i < BM / kRPI; ++i) {
                const int r = kr + i * kRPI;
                const bool ok = m0 + r < p.s;
                cp16(sq + qb * kQBytes + swz<HD>(r, kch), qg + (size_t)(ok ? m0 + r : 0) * HD + kch * 16, ok);
            }
            bar_arrive_cp(qfull + 8 * qb);
            const uint8_t* ksrc = kg + (size_t)kkey * HD + kch * 16;
            const uint8_t* vsrc = vg + (size_t)vd * p.sp + vch * 16;
            for (int j = 0; j < n; ++j, ++g) {
                const int s = g % STAGES;
                if (g >= STAGES) bar_wait(empty + 8 * s, ((g / STAGES) - 1) & 1);
                const uint32_t sk = sring + s * kStageBytes, sv = sk + kKBytes;
                const int n0 = j * BN;
#pragma unroll
                for (int i = 0; i < BN / kRPI; ++i) {
                    const int key = n0 + kkey + i * kRPI;
                    const bool ok = key < p.s;
                    cp16(sk + kdst + i * kRPI * HD, ok ? ksrc + (size_t)(n0 + i * kRPI) * HD : kg, ok);
                }
                const bool vok = n0 + vch * 16 < p.sp;
#pragma unroll
                for (int i = 0; i < HD / vRPI; ++i)
                    cp16(sv + vdst + i * vRPI * BN, vok ? vsrc + (size_t)i * vRPI * p.sp + n0 : vg, vok);
                bar_arrive_cp(full + 8 * s);
            }
        }
        return;
    }

    // Consumers.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    const int cw = wg - 1, warp = (tid % 128) / 32, lane = tid % 32, t4 = lane % 4;
    int m0, bh, n, row0;  // the work item's (row0 and row0 + 8: this thread's rows)
    uint64_t qdesc;
    float o[DB][4];
    float sc[NB][4];
#if QK_SPLIT
    // QK_SPLIT=1: a fresh accumulator per k32 step after the first; 2: one,
    // reused (steps 2.. are issued after the first two land, one at a time).
    constexpr int kST = QK_SPLIT == 1 ? KT - 1 : 1;
    float st[kST][NB][4];
#endif
    uint32_t pa[PK][4];
    float mrow[2], lrow[2], alpha[2];

    // Q K^T of ring tile rg into sc (issued, committed; not waited for).
    auto issue_qk = [&](int rg) {
        const uint32_t sk = sring + (rg % STAGES) * kStageBytes;
#if QK_SPLIT
        mma_ss(sc, qdesc, desc<HD>(sk), 0);
#pragma unroll
        for (int k = 1; k < 1 + kST; ++k) mma_ss(st[k - 1], qdesc + (k * 32 >> 4), desc<HD>(sk + k * 32), 0);
#else
#pragma unroll
        for (int k = 0; k < KT; ++k) mma_ss(sc, qdesc + (k * 32 >> 4), desc<HD>(sk + k * 32), k > 0);
#endif
        wg_commit();
    };
    // P V of ring tile rg into o (issued, committed).
#if PV_ACCUM
    float ot[DB][4];
#endif
    auto issue_pv = [&](int rg) {
        const uint32_t sv = sring + (rg % STAGES) * kStageBytes + kKBytes;
#pragma unroll
        for (int k = 0; k < PK; ++k)
#if PV_ACCUM
            mma_rs(ot, pa[k], desc<BN>(sv + k * 32), k > 0);
#else
            mma_rs(o, pa[k], desc<BN>(sv + k * 32), 1);
#endif
        wg_commit();
    };
    // After Q K^T of the item's tile j (ring tile rg) landed: mask, online
    // softmax, P (fp32, in sc).
    auto softmax = [&](int j, int rg) {
        pin(sc);
#if QK_SPLIT
#pragma unroll
        for (int k = 0; k < kST; ++k) pin(st[k]);
#pragma unroll
        for (int k = 0; k < kST; ++k)
#pragma unroll
            for (int i = 0; i < NB; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) sc[i][e] += st[k][i][e];
#if QK_SPLIT == 2
        // The remaining steps, one at a time into st (this waits for the
        // P V in flight as well).
        const uint32_t sk = sring + (rg % STAGES) * kStageBytes;
#pragma unroll
        for (int k = 2; k < KT; ++k) {
            wg_fence();
            mma_ss(st[0], qdesc + (k * 32 >> 4), desc<HD>(sk + k * 32), 0);
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
        const int n0 = j * BN;
        if (n0 + BN > p.s || (CAUSAL && n0 + BN - 1 > m0 + cw * 64)) {
#pragma unroll
            for (int i = 0; i < NB; ++i)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int key = n0 + perm(i * 8 + 2 * t4 + (e & 1));
                    const int row = row0 + (e >> 1) * 8;
                    if (key >= p.s || (CAUSAL && key > row)) sc[i][e] = -INFINITY;
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
            alpha[r] = exp2f((mrow[r] - mnew) * p.qk_scale2);
            mrow[r] = mx;
            const float off = mnew * p.qk_scale2 - kPBias;
            float ps[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int i = 0; i < NB; ++i)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float x = exp2f(fmaf(sc[i][2 * r + e], p.qk_scale2, -off));
                    sc[i][2 * r + e] = x;
                    ps[(2 * i + e) & 3] += x;
                }
            const float sum = (ps[0] + ps[1]) + (ps[2] + ps[3]);
            lrow[r] = lrow[r] * alpha[r] + sum;
        }
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
    auto release = [&](int rg) {
        if (lane == 0) bar_arrive(empty + 8 * (rg % STAGES));
    };
    auto acquire = [&](int rg) {
        bar_wait(full + 8 * (rg % STAGES), (rg / STAGES) & 1);
        fence_async();
    };
#if PV_ACCUM
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
    auto pv_done = [&](int rg) {
        wg_wait<0>();
        pin(pa);
#if PV_ACCUM
        add_pv();
#else
        pin(o);
#endif
        release(rg);
    };
    int g = 0;  // the ring's tile count over every item, as the producer's
    for (int w = w0, it = 0; w < items; w += wstep, ++it) {
        item(w, m0, bh, n);
        row0 = m0 + cw * 64 + warp * 16 + (lane / 4);
        const int qb = it & 1;
        qdesc = desc<HD>(sq + qb * kQBytes + cw * 64 * HD);
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
#if PINGPONG
        if (cw == 1 && n > 1) named_arrive(1);
#endif
        wg_fence();
        issue_qk(g);
        wg_wait<0>();
        softmax(0, g);
        to_p();
        for (int j = 1; j < n; ++j) {
            acquire(g + j);
            rescale();
#if PINGPONG
            named_sync(1 + cw);
#endif
            wg_fence();
            issue_qk(g + j);
            issue_pv(g + j - 1);
#if PINGPONG
            if (!(cw == 1 && j == n - 1)) named_arrive(2 - cw);
#endif
            wg_wait<1>();
            softmax(j, g + j);
            pv_done(g + j - 1);
            to_p();
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
                __half* out = p.o + ((size_t)bh * p.s + row) * HD + 2 * t4;
#pragma unroll
                for (int i = 0; i < DB; ++i)
                    *(__half2*)(out + i * 8) = __floats2half2_rn(o[i][2 * r] * inv, o[i][2 * r + 1] * inv);
            }
        }
    }
}

// V [BH][S][HD] -> V^T [BH][HD][Sp] (keys from S to Sp zero): what a caller
// whose V is not already transposed pays first. A CTA moves 64 keys of one
// head through shared memory, 16-byte loads and 4-byte stores.
__global__ void __launch_bounds__(256) vt_transpose(const uint8_t* v, uint8_t* vt, int s, int sp) {
    __shared__ uint8_t t[64][HD + 4];
    const int bh = blockIdx.y, k0 = blockIdx.x * 64;
    const uint8_t* src = v + (size_t)bh * s * HD;
    for (int i = threadIdx.x; i < 64 * HD / 16; i += 256) {
        const int r = i / (HD / 16), c = i % (HD / 16);
        uint4 x = make_uint4(0, 0, 0, 0);
        if (k0 + r < s) x = *(const uint4*)(src + (size_t)(k0 + r) * HD + c * 16);
        const uint8_t* b = (const uint8_t*)&x;
#pragma unroll
        for (int e = 0; e < 16; ++e) t[r][c * 16 + e] = b[e];
    }
    __syncthreads();
    uint8_t* dst = vt + (size_t)bh * HD * sp;
    for (int i = threadIdx.x; i < HD * 16; i += 256) {
        const int d = i / 16, k = (i % 16) * 4;
        if (k0 + k < sp)
            *(uint32_t*)(dst + (size_t)d * sp + k0 + k) =
                t[k][d] | (uint32_t)t[k + 1][d] << 8 | (uint32_t)t[k + 2][d] << 16 | (uint32_t)t[k + 3][d] << 24;
    }
}

// ---- host: inputs, reference, check, timing ----
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e_), __LINE__); exit(1); } } while (0)

static float half2f(__half h) { return __half2float(h); }

// time_us: the mean of iters launches after 20, L2-warm (CUDA events).
template <class F>
static double time_us(F launch, int iters) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    for (int it = 0; it < 20; it++) launch();
    CK(cudaEventRecord(e0));
    for (int it = 0; it < iters; it++) launch();
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    CK(cudaGetLastError());
    float ms;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return ms * 1000 / iters;
}

struct Result { double maxerr, tol, rel_l1, cos_e2e, rel_l1_e2e; long bad, unwritten; double us; };

// run: inputs N(0,1) * in_scale, quantised per tensor (amax / 448) as a user
// would; the kernel's error against float64 on the dequantised inputs
// (sampled rows), and end to end against float64 on the unquantised ones.
static Result run(int b, int h, int s, float in_scale, float sm_mul, bool timeit, int iters) {
    const int d = HD, sp = (s + 15) / 16 * 16;
    const size_t rows = (size_t)b * h * s, n = rows * d;
    std::mt19937_64 rng(1000003ull * s + 17 * b + h);
    std::normal_distribution<float> nd(0, 1);
    std::vector<float> x[3];
    for (auto& t : x) {
        t.resize(n);
        for (auto& e : t) e = nd(rng) * in_scale;
    }
    std::vector<double> dq[3];
    std::vector<uint8_t> bytes[3];
    float tsc[3];
    for (int t = 0; t < 3; t++) {
        float a = 0;
        for (float e : x[t]) a = std::max(a, fabsf(e));
        tsc[t] = a > 0 ? a / 448 : 1;
        dq[t].resize(n);
        bytes[t].resize(n);
        for (size_t i = 0; i < n; i++) {
            __nv_fp8_e4m3 q(x[t][i] / tsc[t]);
            memcpy(&bytes[t][i], &q, 1);
            dq[t][i] = (double)(float)q * tsc[t];
        }
    }
    // V^T with the key stride padded to 16, zeros beyond s.
    std::vector<uint8_t> vt((size_t)b * h * d * sp, 0);
    for (size_t bhi = 0; bhi < (size_t)b * h; bhi++)
        for (int i = 0; i < s; i++)
            for (int c = 0; c < d; c++) vt[(bhi * d + c) * sp + i] = bytes[2][(bhi * s + i) * d + c];
    uint8_t *dqp, *dkp, *dvp;
    __half* dout;
    CK(cudaMalloc(&dqp, n));
    CK(cudaMalloc(&dkp, n));
    CK(cudaMalloc(&dvp, vt.size()));
    CK(cudaMalloc(&dout, n * 2));
    CK(cudaMemcpy(dqp, bytes[0].data(), n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dkp, bytes[1].data(), n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dvp, vt.data(), vt.size(), cudaMemcpyHostToDevice));
    CK(cudaMemset(dout, 0xFF, n * 2));
    const double smscale = sm_mul / sqrt((double)d);
    Params p;
    p.q = dqp; p.k = dkp; p.vt = dvp; p.o = dout;
    p.bh = b * h; p.s = s; p.sp = sp;
    p.qk_scale2 = (float)(tsc[0] * tsc[1] * smscale * 1.4426950408889634);
    p.v_scale = tsc[2];
    CK(cudaFuncSetAttribute(fa8_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    const int items = (s + BM - 1) / BM * b * h;
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int grid = PERSISTENT ? std::min(items, sms) : items;
    auto launch = [&] { fa8_fwd<<<grid, kThreads, kSmemBytes>>>(p); };
    launch();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<__half> out(n);
    CK(cudaMemcpy(out.data(), dout, n * 2, cudaMemcpyDeviceToHost));
    Result res{};
    // The gate (kernels.ToleranceFor's reasoning for E4M3 P): each p is off
    // by at most 2^-4 of itself, so an output, a p-weighted mean of V, by at
    // most 2^-4 max|V|, plus O's fp16 rounding (2^-11 of max|O| <= max|V|).
    double vmax = 0;
    for (double e : dq[2]) vmax = std::max(vmax, fabs(e));
    res.tol = (0.0625 + 1.0 / 2048) * vmax;
    double l1 = 0, l1ref = 0, e2e_l1 = 0, e2e_ref = 0, dot = 0, nn1 = 0, nn2 = 0;
    const size_t step = rows > 1024 ? rows / 509 : 1;
    std::vector<double> sq(s), sx(s), pq(s), px(s);
    for (size_t r = 0; r < rows; r += step) {
        const size_t bhi = r / s;
        const int i = r % s, nk = CAUSAL ? i + 1 : s;
        double mq = -1e300, mx = -1e300;
        for (int j = 0; j < nk; j++) {
            double aq = 0, ax = 0;
            const size_t kr = bhi * s + j;
            for (int c = 0; c < d; c++) {
                aq += dq[0][r * d + c] * dq[1][kr * d + c];
                ax += (double)x[0][r * d + c] * x[1][kr * d + c];
            }
            sq[j] = aq * smscale; sx[j] = ax * smscale;
            mq = std::max(mq, sq[j]); mx = std::max(mx, sx[j]);
        }
        double lq = 0, lx = 0;
        for (int j = 0; j < nk; j++) { pq[j] = exp(sq[j] - mq); lq += pq[j]; px[j] = exp(sx[j] - mx); lx += px[j]; }
        for (int c = 0; c < d; c++) {
            double oq = 0, ox = 0;
            for (int j = 0; j < nk; j++) {
                oq += pq[j] * dq[2][(bhi * s + j) * d + c];
                ox += px[j] * x[2][(bhi * s + j) * d + c];
            }
            oq /= lq; ox /= lx;
            const double got = half2f(out[r * d + c]);
            if (!std::isfinite(got)) { res.bad++; continue; }
            res.maxerr = std::max(res.maxerr, fabs(got - oq));
            l1 += fabs(got - oq); l1ref += fabs(oq);
            e2e_l1 += fabs(got - ox); e2e_ref += fabs(ox);
            dot += got * ox; nn1 += got * got; nn2 += ox * ox;
        }
    }
    for (size_t i = 0; i < n; i++) {
        uint16_t u; memcpy(&u, &out[i], 2);
        if (u == 0xFFFF) res.unwritten++;
    }
    res.rel_l1 = l1ref > 0 ? l1 / l1ref : 0;
    res.rel_l1_e2e = e2e_ref > 0 ? e2e_l1 / e2e_ref : 0;
    res.cos_e2e = nn1 > 0 && nn2 > 0 ? dot / sqrt(nn1 * nn2) : 0;
    if (timeit) {
        res.us = time_us(launch, iters);
        // The transpose a caller with V in [BH][S][HD] would run first:
        // checked against the host's V^T, then timed as the kernel is.
        uint8_t *dv, *dvt2;
        CK(cudaMalloc(&dv, n));
        CK(cudaMalloc(&dvt2, vt.size()));
        CK(cudaMemcpy(dv, bytes[2].data(), n, cudaMemcpyHostToDevice));
        CK(cudaMemset(dvt2, 0xAB, vt.size()));
        dim3 tg((sp + 63) / 64, b * h);
        auto tr = [&] { vt_transpose<<<tg, 256>>>(dv, dvt2, s, sp); };
        tr();
        CK(cudaDeviceSynchronize());
        std::vector<uint8_t> got(vt.size());
        CK(cudaMemcpy(got.data(), dvt2, got.size(), cudaMemcpyDeviceToHost));
        printf("V transpose %dx%dx%dx%d: %s, %.2f us\n", b, h, s, d, got == vt ? "matches the host's V^T" : "WRONG",
               time_us(tr, iters));
        cudaFree(dv); cudaFree(dvt2);
    }
    cudaFree(dqp); cudaFree(dkp); cudaFree(dvp); cudaFree(dout);
    return res;
}

static void report(const char* what, int b, int h, int s, float sc, float sm, const Result& r, bool gate) {
    const double tol = r.tol;
    printf("%s %dx%dx%dx%d%s scale %g sm %g: max err %.3e (gate %.3e) rel L1 %.2e | e2e cos %.6f rel L1 %.4f | nonfinite %ld unwritten %ld%s",
           what, b, h, s, HD, CAUSAL ? " causal" : "", sc, sm, r.maxerr, tol, r.rel_l1, r.cos_e2e, r.rel_l1_e2e, r.bad, r.unwritten,
           gate && (r.maxerr > tol || r.bad || r.unwritten) ? " FAIL" : "");
    if (r.us > 0) {
        const double flops = 4.0 * b * h * (double)s * s * HD * (CAUSAL ? 0.5 : 1.0);
        printf(" | %.2f us %.0f TFLOP/s", r.us, flops / r.us * 1e-6);
    }
    printf("\n");
}

int main(int argc, char** argv) {
    printf("fa8: HD=%d BN=%d NCW=%d STAGES=%d CAUSAL=%d PINGPONG=%d QK_SPLIT=%d PV_ACCUM=%d PERSISTENT=%d PREGS=%d smem %d\n", HD,
           BN, NCW, STAGES, CAUSAL, PINGPONG, QK_SPLIT, PV_ACCUM, PERSISTENT, PREGS, kSmemBytes);
    bool all = argc < 2 || strcmp(argv[1], "time") != 0;
    if (all) {
        const int shapes[][3] = {{1, 2, 1}, {1, 2, 77}, {1, 3, 500}, {1, 8, 512}, {1, 2, 4096}};
        for (auto& sh : shapes)
            for (float sc : {1.f, 4.f, 16.f})
                for (float sm : {1.f, 2.f}) report("check", sh[0], sh[1], sh[2], sc, sm, run(sh[0], sh[1], sh[2], sc, sm, false, 0), true);
    }
    if (argc >= 5) {
        const int b = atoi(argv[2]), h = atoi(argv[3]), s = atoi(argv[4]);
        report("time", b, h, s, 1.f, 1.f, run(b, h, s, 1.f, 1.f, true, 200), true);
    }
    return 0;
}
