// One mma.sync m16n8k32 with INT8 operands and one with E4M3 operands, to
// read what ptxas makes of each (sass.txt): whether an INT8 Q K^T would run
// natively where E4M3 is emulated (sm_90).
#include <cstdint>

__global__ void mma_s8(const uint32_t* a, const uint32_t* b, int* c) {
    const int t = threadIdx.x;
    int c0 = 0, c1 = 0, c2 = 0, c3 = 0;
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+r"(c0), "+r"(c1), "+r"(c2), "+r"(c3)
                 : "r"(a[t]), "r"(a[t + 32]), "r"(a[t + 64]), "r"(a[t + 96]), "r"(b[t]), "r"(b[t + 32]));
    c[t] = c0, c[t + 32] = c1, c[t + 64] = c2, c[t + 96] = c3;
}

__global__ void mma_e4m3(const uint32_t* a, const uint32_t* b, float* c) {
    const int t = threadIdx.x;
    float c0 = 0, c1 = 0, c2 = 0, c3 = 0;
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
                 : "r"(a[t]), "r"(a[t + 32]), "r"(a[t + 64]), "r"(a[t + 96]), "r"(b[t]), "r"(b[t + 32]));
    c[t] = c0, c[t + 32] = c1, c[t + 64] = c2, c[t + 96] = c3;
}
