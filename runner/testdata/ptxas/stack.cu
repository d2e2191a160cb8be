// stack.cu: a dynamically indexed local array (stack frame), a mangled C++
// entry named sdpa_fwd, and a non-inlined device function.
__device__ __noinline__ float pick(const float* v, int i) { return v[i & 31] * 2.f; }

__global__ void sdpa_fwd(const float* in, float* out, int k) {
    float local[32];
    for (int i = 0; i < 32; i++) local[i] = in[threadIdx.x * 32 + i];
    out[threadIdx.x] = local[k & 31] + pick(local, k + 1);
}
