// Timeline of one SDPA launch inside a back-to-back sequence: clock64 per
// phase for warp 0 of every CTA, globaltimer at CTA entry and exit.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>
#include "sdpa_trace.cu"
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); exit(1); } } while (0)
int main(int argc, char** argv) {
    int B = atoi(argv[1]), H = atoi(argv[2]), S = atoi(argv[3]);
    const int D = SDPA_HEAD_DIM;
    size_t n = (size_t)B * H * S * D;
    std::vector<__half> h(n);
    srand(1);
    for (auto& x : h) x = __float2half((rand() / (float)RAND_MAX - 0.5f));
    __half *q, *k, *v, *o;
    CK(cudaMalloc(&q, n * 2)); CK(cudaMalloc(&k, n * 2)); CK(cudaMalloc(&v, n * 2)); CK(cudaMalloc(&o, n * 2));
    CK(cudaMemcpy(q, h.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(k, h.data(), n * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(v, h.data(), n * 2, cudaMemcpyHostToDevice));
    SdpaParams p{q, k, v, o, nullptr, nullptr, B, H, S, D, 0.125f};
    int tiles = B * H * ((S + SDPA_BLOCK_M - 1) / SDPA_BLOCK_M);
    int grid = SDPA_PERSISTENT ? std::min(tiles, 132 * SDPA_MIN_BLOCKS) : tiles;
    int smem = sdpa::kSmemBytes, threads = sdpa::kThreads;
    CK(cudaFuncSetAttribute(sdpa_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CK(cudaFuncSetAttribute(empty_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    printf("grid %d, block %d, smem %d\n", grid, threads, smem);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0); cudaEventCreate(&e1);
    cudaStream_t st; cudaStreamCreate(&st);
    auto timeit = [&](auto kern, const char* name) {
        cudaGraph_t g; cudaGraphExec_t ge;
        CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
        for (int i = 0; i < 100; ++i) kern<<<grid, threads, smem, st>>>(p);
        CK(cudaStreamEndCapture(st, &g));
        CK(cudaGraphInstantiateWithFlags(&ge, g, 0));
        for (int w = 0; w < 20; ++w) CK(cudaGraphLaunch(ge, st));
        std::vector<float> ts;
        for (int r = 0; r < 15; ++r) {
            cudaEventRecord(e0, st); CK(cudaGraphLaunch(ge, st)); cudaEventRecord(e1, st);
            CK(cudaEventSynchronize(e1)); float ms; cudaEventElapsedTime(&ms, e0, e1); ts.push_back(ms * 1000 / 100);
        }
        std::sort(ts.begin(), ts.end());
        printf("%s: graph of 100, median %.2f us per call\n", name, ts[ts.size() / 2]);
    };
    timeit(empty_fwd, "empty kernel, same geometry");
    timeit(sdpa_fwd, "sdpa_fwd");
    CK(cudaDeviceSynchronize());
    static unsigned long long tr[1024][16];
    CK(cudaMemcpyFromSymbol(tr, g_trace, sizeof(tr)));
    unsigned long long g0 = ~0ull, g1 = 0, s1 = 0;
    for (int c = 0; c < grid; ++c) { g0 = std::min(g0, tr[c][10]); g1 = std::max(g1, tr[c][11]); s1 = std::max(s1, tr[c][10]); }
    printf("last launch: CTA entries span %.0f ns, first entry to last exit %.0f ns\n", double(s1 - g0), double(g1 - g0));
    const char* names[] = {"entry->Q in regs", "Q->tile0 visible", "tile0->tile1 visible", "tile1->tile2", "tile2->tile3", "tile3->end of loop", "loop->merge ready", "merge->stored"};
    int from[] = {0, 1, 2, 3, 4, 5, 6, 7}, to[] = {1, 2, 3, 4, 5, 6, 7, 8};
    for (int i = 0; i < 8; ++i) {
        std::vector<double> d;
        for (int c = 0; c < grid; ++c) if (tr[c][to[i]] && tr[c][from[i]]) d.push_back(double(tr[c][to[i]] - tr[c][from[i]]));
        if (d.empty()) continue;
        std::sort(d.begin(), d.end());
        printf("%-22s cycles: min %6.0f  median %6.0f  max %6.0f\n", names[i], d[0], d[d.size() / 2], d.back());
    }
    std::vector<double> ent, tot;
    for (int c = 0; c < grid; ++c) { ent.push_back(double(tr[c][10] - g0)); tot.push_back(double(tr[c][11] - tr[c][10])); }
    std::sort(ent.begin(), ent.end()); std::sort(tot.begin(), tot.end());
    printf("CTA entry after first entry, ns: median %.0f, p90 %.0f, max %.0f\n", ent[ent.size() / 2], ent[ent.size() * 9 / 10], ent.back());
    printf("CTA entry to exit, ns: min %.0f, median %.0f, max %.0f\n", tot[0], tot[tot.size() / 2], tot.back());
    return 0;
}
