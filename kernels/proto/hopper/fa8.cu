// fa8.cu: the check and timing harness of the Hopper-native fp8 attention
// kernel, kernels/fa8h.cu (the family sdpa-hopper), built for sm_90a with the
// short macro names run.sh's steps use (HD, BN, NCW, STAGES, CAUSAL,
// PINGPONG, QK_SPLIT, PV_ACCUM, PERSISTENT, PREGS, EMU, PV_LATE, VSMEM: fa8h.cu's
// FA8H_ macros).
// The kernel was first written here (kernels/NOTES.md, "A Hopper-native fp8
// kernel"; the git history holds the standalone version the measurements of
// results/2026-11-26-h100-fa8proto used); now it lives in fa8h.cu alone and
// this harness includes it (build with -I on the kernels folder).
#ifdef HD
#define FA8H_HD HD
#endif
#ifdef BN
#define FA8H_BN BN
#endif
#ifdef NCW
#define FA8H_NCW NCW
#endif
#ifdef STAGES
#define FA8H_STAGES STAGES
#endif
#ifdef CAUSAL
#define FA8H_CAUSAL CAUSAL
#endif
#ifdef PINGPONG
#define FA8H_PINGPONG PINGPONG
#endif
#ifdef QK_SPLIT
#define FA8H_QK_SPLIT QK_SPLIT
#endif
#ifdef PV_ACCUM
#define FA8H_PV_ACCUM PV_ACCUM
#endif
#ifdef PERSISTENT
#define FA8H_PERSISTENT PERSISTENT
#endif
#ifdef PREGS
#define FA8H_PREGS PREGS
#endif
#ifdef EMU
#define FA8H_EXP_EMU EMU
#endif
#ifdef PV_LATE
#define FA8H_PV_LATE PV_LATE
#endif
#ifdef VSMEM
#define FA8H_V_SMEM VSMEM
#endif
#include "fa8h.cu"
#ifndef FA8H_EXP_EMU
#define FA8H_EXP_EMU 0  // a kernel from before the knob (a step's -Ibase build)
#endif
#ifndef FA8H_V_SMEM
#define FA8H_V_SMEM 0  // a kernel from before the knob
#endif
using namespace fa8h;
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cmath>
#include <vector>
#include <random>
#include <algorithm>

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
    const int d = FA8H_HD, sp = (s + 15) / 16 * 16;
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
    uint8_t *dqp, *dkp, *dvp, *dvt;
    __half* dout;
    CK(cudaMalloc(&dqp, n));
    CK(cudaMalloc(&dkp, n));
    CK(cudaMalloc(&dvp, n));
    CK(cudaMalloc(&dvt, vt.size()));
    CK(cudaMalloc(&dout, n * 2));
    CK(cudaMemcpy(dqp, bytes[0].data(), n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dkp, bytes[1].data(), n, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dvp, bytes[2].data(), n, cudaMemcpyHostToDevice));
    CK(cudaMemset(dvt, 0xAB, vt.size()));
    CK(cudaMemset(dout, 0xFF, n * 2));
    const double smscale = sm_mul / sqrt((double)d);
    // The family's one argument; V^T goes to the workspace (o_part).
    SdpaParams p;
    memset(&p, 0, sizeof p);
    p.q = dqp; p.k = dkp; p.v = dvp; p.o = dout; p.o_part = (float*)dvt;
    p.b = b; p.h = h; p.s = s; p.d = d;
    p.scale = (float)smscale;
    p.q_scale = tsc[0]; p.k_scale = tsc[1]; p.v_scale = tsc[2];
    CK(cudaFuncSetAttribute(fa8h_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes));
    const int items = (s + BM - 1) / BM * b * h;
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int grid = FA8H_PERSISTENT ? std::min(items, sms) : items;
#ifdef FA8H_VT_KEYS
    const dim3 tgrid((sp + FA8H_VT_KEYS - 1) / FA8H_VT_KEYS, b * h);
#else
    const dim3 tgrid((sp + 63) / 64, b * h);  // a kernel from before the register transpose (a -Ibase build)
#endif
    auto transpose = [&] { fa8h_vt<<<tgrid, 256>>>(p); };
    auto launch = [&] { fa8h_fwd<<<grid, kThreads, kSmemBytes>>>(p); };
    transpose();
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    {
        std::vector<uint8_t> got(vt.size());
        CK(cudaMemcpy(got.data(), dvt, got.size(), cudaMemcpyDeviceToHost));
        if (got != vt) {
            printf("fa8h_vt: V^T differs from the host's\n");
            exit(1);
        }
    }
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
        const int i = r % s, nk = FA8H_CAUSAL ? i + 1 : s;
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
        // The transpose (fa8h_vt, checked above) is the family's first
        // launch, timed here on its own, as the forward is; with FA8H_V_SMEM
        // the forward transposes V itself and the plan has no such launch.
        if (!FA8H_V_SMEM) printf("V transpose %dx%dx%dx%d: matches the host's V^T, %.2f us\n", b, h, s, d, time_us(transpose, iters));
    }
    cudaFree(dqp); cudaFree(dkp); cudaFree(dvp); cudaFree(dvt); cudaFree(dout);
    return res;
}

static void report(const char* what, int b, int h, int s, float sc, float sm, const Result& r, bool gate) {
    const double tol = r.tol;
    printf("%s %dx%dx%dx%d%s scale %g sm %g: max err %.3e (gate %.3e) rel L1 %.2e | e2e cos %.6f rel L1 %.4f | nonfinite %ld unwritten %ld%s",
           what, b, h, s, FA8H_HD, FA8H_CAUSAL ? " causal" : "", sc, sm, r.maxerr, tol, r.rel_l1, r.cos_e2e, r.rel_l1_e2e, r.bad, r.unwritten,
           gate && (r.maxerr > tol || r.bad || r.unwritten) ? " FAIL" : "");
    if (r.us > 0) {
        const double flops = 4.0 * b * h * (double)s * s * FA8H_HD * (FA8H_CAUSAL ? 0.5 : 1.0);
        printf(" | %.2f us %.0f TFLOP/s", r.us, flops / r.us * 1e-6);
    }
    printf("\n");
}

int main(int argc, char** argv) {
    printf("fa8: HD=%d BN=%d NCW=%d STAGES=%d CAUSAL=%d PINGPONG=%d QK_SPLIT=%d PV_ACCUM=%d PERSISTENT=%d PREGS=%d EMU=%d VSMEM=%d smem %d\n", FA8H_HD,
           FA8H_BN, FA8H_NCW, FA8H_STAGES, FA8H_CAUSAL, FA8H_PINGPONG, FA8H_QK_SPLIT, FA8H_PV_ACCUM, FA8H_PERSISTENT, FA8H_PREGS, FA8H_EXP_EMU, FA8H_V_SMEM, kSmemBytes);
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
