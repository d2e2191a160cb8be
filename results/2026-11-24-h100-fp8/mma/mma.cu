// mma.cu: mma.sync throughput, fp16 m16n8k16 against E4M3 m16n8k32, with
// f32 accumulation, 8 independent accumulators a warp. "fixed" keeps the A
// and B registers constant (what a register-only loop measures: ptxas may
// hoist anything it derives from them out of the loop); "varying" changes A
// every iteration with one integer add per 8 mma, as a kernel's operands
// change every tile. Build: nvcc -O3 -arch=sm_90 -o mma mma.cu
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

constexpr int kIters = 4096, kAcc = 8;

template <bool FP8>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    if constexpr (FP8) {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
}

template <bool FP8, bool VARY>
__global__ void loop(float* out, uint32_t seed) {
    uint32_t a[4] = {seed, seed * 3u, seed * 5u, seed * 7u}, b0 = seed * 11u, b1 = seed * 13u;
    float c[kAcc][4] = {};
    for (int i = 0; i < kIters; i++) {
        if (VARY) {
            a[0] += 0x00010001u;
            a[2] += 0x00010001u;
        }
#pragma unroll
        for (int j = 0; j < kAcc; j++) mma<FP8>(c[j], a, b0, b1);
    }
    float s = 0;
    for (int j = 0; j < kAcc; j++) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

template <bool FP8, bool VARY>
double tflops(float* out, int blocks, int threads) {
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    loop<FP8, VARY><<<blocks, threads>>>(out, 1);  // warm-up
    cudaEventRecord(e0);
    for (int r = 0; r < 5; r++) loop<FP8, VARY><<<blocks, threads>>>(out, 1);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    double flops = 5.0 * blocks * (threads / 32) * kIters * kAcc * 2.0 * 16 * 8 * (FP8 ? 32 : 16);
    return flops / (ms * 1e-3) / 1e12;
}

int main() {
    cudaDeviceProp p;
    cudaGetDeviceProperties(&p, 0);
    int blocks = p.multiProcessorCount * 8, threads = 256;
    float* out;
    cudaMalloc(&out, blocks * threads * sizeof(float));
    printf("device %s sm_%d%d, %d SMs, %d blocks x %d threads, %d iterations x %d mma a warp\n", p.name, p.major, p.minor,
           p.multiProcessorCount, blocks, threads, kIters, kAcc);
    printf("fp16 m16n8k16 f32acc fixed   %.0f TFLOP/s\n", tflops<false, false>(out, blocks, threads));
    printf("fp16 m16n8k16 f32acc varying %.0f TFLOP/s\n", tflops<false, true>(out, blocks, threads));
    printf("e4m3 m16n8k32 f32acc fixed   %.0f TFLOP/s\n", tflops<true, false>(out, blocks, threads));
    printf("e4m3 m16n8k32 f32acc varying %.0f TFLOP/s\n", tflops<true, true>(out, blocks, threads));
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        printf("error: %s\n", cudaGetErrorString(err));
        return 1;
    }
    return 0;
}
