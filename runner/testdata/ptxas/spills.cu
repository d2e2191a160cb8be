// spills.cu: a kernel whose register cap (-maxrregcount=32) forces spills.
// Used to capture ptxas -v output with nonzero spill stores and loads.
extern "C" __global__ void sdpa_fwd(const float* in, float* out, int n) {
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; i++) acc[i] = in[threadIdx.x + i * n];
    float s = 0.f;
#pragma unroll
    for (int r = 0; r < 8; r++) {
#pragma unroll
        for (int i = 0; i < 64; i++) acc[i] = acc[i] * acc[(i + r + 1) & 63] + s;
        s += acc[r];
    }
#pragma unroll
    for (int i = 0; i < 64; i++) out[threadIdx.x + i * n] = acc[i];
}
