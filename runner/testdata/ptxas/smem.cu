// smem.cu: static shared memory in the entry function and a second entry
// (a split-kv combine stand-in) with more registers than the first.
extern "C" __global__ void sdpa_fwd(const float* in, float* out) {
    __shared__ float tile[64][65];
    tile[threadIdx.y][threadIdx.x] = in[threadIdx.y * 64 + threadIdx.x];
    __syncthreads();
    out[threadIdx.y * 64 + threadIdx.x] = tile[threadIdx.x][threadIdx.y];
}

extern "C" __global__ void sdpa_combine(const float* in, float* out, int n) {
    float acc[24];
#pragma unroll
    for (int i = 0; i < 24; i++) acc[i] = in[threadIdx.x + i * n];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < 24; i++) s += acc[i] * acc[23 - i];
    out[threadIdx.x] = s;
}
