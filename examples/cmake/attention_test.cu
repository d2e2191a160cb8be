// attention_test: calls the exported kernel as a main build would, checks it
// against an fp32 reference computed on the host from the same inputs, and
// times it.
//
//   attention_test [--scale X] [--iters N] [BxHxS ...]
//
// With no shapes it runs the shapes the bundle was tuned for and some that
// nobody tuned (odd B and H, S = 1, 77 and 1000). --scale is the softmax
// scale (default 0.7/sqrt(D): not the usual 1/sqrt(D), so a kernel that
// ignored the caller's scale would fail). Exits 1 when a check fails.
//
// The bundle comes from evotune export --name attention; its dtype, head
// dimension and mask are fixed there (attention_launch.h says which).

#include "attention_launch.h"

#ifndef ATTENTION_V_TRANSPOSED  // bundles exported before V could come transposed
#define ATTENTION_V_TRANSPOSED 0
#endif

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#if ATTENTION_FP8
#include <cuda_fp8.h>
#endif
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int D = ATTENTION_HEAD_DIM;

#define CHECK_CUDA(call)                                                                                \
    do {                                                                                                \
        cudaError_t err_ = (call);                                                                      \
        if (err_ != cudaSuccess) {                                                                      \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
            std::exit(2);                                                                               \
        }                                                                                               \
    } while (0)

struct Shape {
    int b, h, s;
};

// Tolerances of evotune's correctness gate at input scale 1 (kernels.ToleranceFor):
// int8 errs as fp16 does, or as bf16 with a bf16 output.
double max_abs_tolerance() {
    if (ATTENTION_FP8) return 0.065;
    if (std::strcmp(ATTENTION_OUT_DTYPE, "bf16") == 0) return 1.6e-2;
    return 2e-3;
}

// Input elements: the dtype's bytes and the value they stand for.
size_t elem_bytes() { return ATTENTION_FP8 || ATTENTION_INT8 ? 1 : 2; }

void encode(float x, float scale, uint8_t* out, float* value) {
#if ATTENTION_FP8
    __nv_fp8_e4m3 e(x / scale);
    std::memcpy(out, &e, 1);
    *value = float(e) * scale;
#elif ATTENTION_INT8
    const int8_t e = int8_t(std::max(-127.0f, std::min(127.0f, std::rint(x / scale))));
    std::memcpy(out, &e, 1);
    *value = float(e) * scale;
#else
    (void)scale;
    if (std::strcmp(ATTENTION_DTYPE, "bf16") == 0) {
        __nv_bfloat16 e = __float2bfloat16(x);
        std::memcpy(out, &e, 2);
        *value = __bfloat162float(e);
    } else {
        __half e = __float2half(x);
        std::memcpy(out, &e, 2);
        *value = __half2float(e);
    }
#endif
}

float decode_out(const uint8_t* p) {
    if (std::strcmp(ATTENTION_OUT_DTYPE, "bf16") == 0) {
        __nv_bfloat16 e;
        std::memcpy(&e, p, 2);
        return __bfloat162float(e);
    }
    __half e;
    std::memcpy(&e, p, 2);
    return __half2float(e);
}

uint64_t rng_state = 0x9e3779b97f4a7c15ull;
float uniform() {  // U(-1, 1), splitmix64
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return float((z >> 40) * (2.0 / 16777216.0) - 1.0);
}

// reference_row computes one output row in double from the values the
// kernel was given.
void reference_row(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v, size_t bh, int s,
                   int row, double scale, double* out) {
    const float* qr = &q[(bh * s + row) * D];
    const int keys = ATTENTION_CAUSAL ? row + 1 : s;
    std::vector<double> p(keys);
    double m = -INFINITY;
    for (int j = 0; j < keys; ++j) {
        const float* kr = &k[(bh * s + j) * D];
        double dot = 0;
        for (int e = 0; e < D; ++e) dot += double(qr[e]) * kr[e];
        p[j] = dot * scale;
        m = std::max(m, p[j]);
    }
    double sum = 0;
    for (int j = 0; j < keys; ++j) sum += (p[j] = std::exp(p[j] - m));
    for (int e = 0; e < D; ++e) out[e] = 0;
    for (int j = 0; j < keys; ++j) {
        const float* vr = &v[(bh * s + j) * D];
        for (int e = 0; e < D; ++e) out[e] += p[j] * vr[e];
    }
    for (int e = 0; e < D; ++e) out[e] /= sum;
}

struct Outcome {
    double max_abs_err = 0;
    double us_per_call = 0;
    std::string config;
    bool ok = false;
};

Outcome run(Shape sh, double scale, int iters) {
    Outcome res;
    const size_t n = size_t(sh.b) * sh.h * sh.s * D;
    const size_t bytes = n * elem_bytes();
    std::vector<uint8_t> host[3];
    std::vector<float> vals[3];
    float scales[3] = {1, 1, 1};
    // int8's scales: one per row (token) of Q and K ([b, h, s]) and one per
    // column of V ([b, h, d]), amax / 127 of what they cover, 1 where it is
    // all zero.
    std::vector<float> fine[3];
    auto fine_index = [&](int t, size_t i) { return t < 2 ? i / D : i / (size_t(sh.s) * D) * D + i % D; };
    for (int t = 0; t < 3; ++t) {
        std::vector<float> x(n);
        float amax = 0;
        for (auto& e : x) amax = std::max(amax, std::fabs(e = uniform()));
        if (ATTENTION_FP8) scales[t] = amax > 0 ? amax / 448.0f : 1.0f;
        if (ATTENTION_INT8) {
            fine[t].assign(t < 2 ? n / D : size_t(sh.b) * sh.h * D, 0.0f);
            for (size_t i = 0; i < n; ++i) fine[t][fine_index(t, i)] = std::max(fine[t][fine_index(t, i)], std::fabs(x[i]));
            for (auto& e : fine[t]) e = e > 0 ? e / 127.0f : 1.0f;
        }
        host[t].resize(bytes);
        vals[t].resize(n);
        for (size_t i = 0; i < n; ++i)
            encode(x[i], ATTENTION_INT8 ? fine[t][fine_index(t, i)] : scales[t], &host[t][i * elem_bytes()], &vals[t][i]);
    }
    if (ATTENTION_V_TRANSPOSED) {
        // The bundle takes V^T: [b, h, D, sp], sp = s rounded up to 16, the
        // padding keys zero (a main build's quantisation pass writes it so).
        const size_t sp = (size_t(sh.s) + 15) / 16 * 16, heads = size_t(sh.b) * sh.h;
        std::vector<uint8_t> vt(heads * D * sp, 0);
        for (size_t bh = 0; bh < heads; ++bh)
            for (int key = 0; key < sh.s; ++key)
                for (int e = 0; e < D; ++e) vt[(bh * D + e) * sp + key] = host[2][(bh * sh.s + key) * D + e];
        host[2] = std::move(vt);
    }
    void* dev[3];
    void* out = nullptr;
    float* dev_fine[3] = {};
    for (int t = 0; t < 3; ++t) {
        CHECK_CUDA(cudaMalloc(&dev[t], host[t].size()));
        CHECK_CUDA(cudaMemcpy(dev[t], host[t].data(), host[t].size(), cudaMemcpyHostToDevice));
        if (ATTENTION_INT8) {
            CHECK_CUDA(cudaMalloc(&dev_fine[t], fine[t].size() * sizeof(float)));
            CHECK_CUDA(cudaMemcpy(dev_fine[t], fine[t].data(), fine[t].size() * sizeof(float), cudaMemcpyHostToDevice));
        }
    }
    CHECK_CUDA(cudaMalloc(&out, n * 2));
    CHECK_CUDA(cudaMemset(out, 0xff, n * 2));  // NaN: a row the kernel skips shows
    const size_t ws_bytes = attention_workspace_bytes(sh.b, sh.h, sh.s, D);
    void* ws = nullptr;
    if (ws_bytes > 0) CHECK_CUDA(cudaMalloc(&ws, ws_bytes));
    const char* key = attention_config_key(sh.b, sh.h, sh.s, D);
    res.config = key ? key : "(none)";

    auto call = [&]() {
#if ATTENTION_FP8
        return attention_forward(dev[0], dev[1], dev[2], out, sh.b, sh.h, sh.s, D, float(scale), scales[0], scales[1], scales[2], ws,
                                 ws_bytes, 0);
#elif ATTENTION_INT8
        return attention_forward(dev[0], dev[1], dev[2], out, sh.b, sh.h, sh.s, D, float(scale), dev_fine[0], dev_fine[1], dev_fine[2],
                                 ws, ws_bytes, 0);
#else
        return attention_forward(dev[0], dev[1], dev[2], out, sh.b, sh.h, sh.s, D, float(scale), ws, ws_bytes, 0);
#endif
    };
    CHECK_CUDA(call());
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<uint8_t> got(n * 2);
    CHECK_CUDA(cudaMemcpy(got.data(), out, n * 2, cudaMemcpyDeviceToHost));

    // Check the first and last rows of every head and up to 256 more.
    const size_t heads = size_t(sh.b) * sh.h;
    std::vector<std::pair<size_t, int>> rows;
    for (size_t bh = 0; bh < heads; ++bh) {
        rows.push_back({bh, 0});
        rows.push_back({bh, sh.s - 1});
    }
    for (int i = 0; i < 256; ++i) {
        const size_t bh = size_t((uniform() + 1) * 0.5 * heads) % heads;
        rows.push_back({bh, int((uniform() + 1) * 0.5 * sh.s) % sh.s});
    }
    std::vector<double> ref(D);
    bool finite = true;
    for (auto [bh, row] : rows) {
        reference_row(vals[0], vals[1], vals[2], bh, sh.s, row, scale, ref.data());
        for (int e = 0; e < D; ++e) {
            const float o = decode_out(&got[((bh * sh.s + row) * D + e) * 2]);
            finite = finite && std::isfinite(o);
            res.max_abs_err = std::max(res.max_abs_err, std::fabs(o - ref[e]));
        }
    }
    res.ok = finite && res.max_abs_err <= max_abs_tolerance();
    if (!finite) res.max_abs_err = INFINITY;

    if (iters > 0) {
        cudaEvent_t a, b;
        CHECK_CUDA(cudaEventCreate(&a));
        CHECK_CUDA(cudaEventCreate(&b));
        for (int i = 0; i < 10; ++i) CHECK_CUDA(call());
        CHECK_CUDA(cudaEventRecord(a));
        for (int i = 0; i < iters; ++i) CHECK_CUDA(call());
        CHECK_CUDA(cudaEventRecord(b));
        CHECK_CUDA(cudaEventSynchronize(b));
        float ms = 0;
        CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
        res.us_per_call = ms * 1000.0 / iters;
        cudaEventDestroy(a);
        cudaEventDestroy(b);
    }
    for (int t = 0; t < 3; ++t) {
        cudaFree(dev[t]);
        if (dev_fine[t]) cudaFree(dev_fine[t]);
    }
    cudaFree(out);
    if (ws) cudaFree(ws);
    return res;
}

// Bad arguments are refused with an error and launch nothing.
bool refusals() {
    alignas(16) static char buf[64];
    bool ok = true;
    auto expect = [&](const char* what, cudaError_t got) {
        if (got != cudaErrorInvalidValue) {
            std::printf("FAIL %s: %s, want cudaErrorInvalidValue\n", what, cudaGetErrorName(got));
            ok = false;
        }
    };
#if ATTENTION_FP8
    expect("null q", attention_forward(nullptr, buf, buf, buf, 1, 1, 64, D, 0.125f, 1, 1, 1, nullptr, 0, 0));
    expect("head dim", attention_forward(buf, buf, buf, buf, 1, 1, 64, D + 8, 0.125f, 1, 1, 1, nullptr, 0, 0));
#elif ATTENTION_INT8
    float* f = reinterpret_cast<float*>(buf);
    expect("null q", attention_forward(nullptr, buf, buf, buf, 1, 1, 64, D, 0.125f, f, f, f, nullptr, 0, 0));
    expect("null k_row_scale", attention_forward(buf, buf, buf, buf, 1, 1, 64, D, 0.125f, f, nullptr, f, nullptr, 0, 0));
    expect("null v_col_scale", attention_forward(buf, buf, buf, buf, 1, 1, 64, D, 0.125f, f, f, nullptr, nullptr, 0, 0));
#else
    expect("null q", attention_forward(nullptr, buf, buf, buf, 1, 1, 64, D, 0.125f, nullptr, 0, 0));
    expect("head dim", attention_forward(buf, buf, buf, buf, 1, 1, 64, D + 8, 0.125f, nullptr, 0, 0));
    expect("s = 0", attention_forward(buf, buf, buf, buf, 1, 1, 0, D, 0.125f, nullptr, 0, 0));
#endif
    return ok;
}

}  // namespace

int main(int argc, char** argv) {
    double scale = 0.7 / std::sqrt(double(D));
    int iters = 100;
    std::vector<Shape> shapes;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--scale") == 0 && i + 1 < argc) {
            scale = std::atof(argv[++i]);
        } else if (std::strcmp(argv[i], "--iters") == 0 && i + 1 < argc) {
            iters = std::atoi(argv[++i]);
        } else {
            Shape s;
            if (std::sscanf(argv[i], "%dx%dx%d", &s.b, &s.h, &s.s) != 3 || s.b <= 0 || s.h <= 0 || s.s <= 0) {
                std::fprintf(stderr, "attention_test: %s: want --scale X, --iters N or a shape BxHxS\n", argv[i]);
                return 2;
            }
            shapes.push_back(s);
        }
    }
    if (shapes.empty()) shapes = {{1, 8, 512}, {2, 8, 512}, {3, 5, 77}, {1, 1, 1}, {2, 3, 1000}, {5, 7, 77}};
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    std::printf("# attention_test on %s: %s D=%d%s, softmax scale %.6g\n\n", prop.name, ATTENTION_DTYPE, D,
                ATTENTION_CAUSAL ? " causal" : "", scale);
    std::printf("| shape | config | max abs err | µs per call | check |\n|---|---|---|---|---|\n");
    bool all = refusals();
    for (Shape s : shapes) {
        Outcome r = run(s, scale, iters);
        std::printf("| %dx%dx%dx%d | `%s` | %.3g | %.2f | %s |\n", s.b, s.h, s.s, D, r.config.c_str(), r.max_abs_err, r.us_per_call,
                    r.ok ? "ok" : "FAIL");
        all = all && r.ok;
    }
    std::printf("\n%s (tolerance %.3g)\n", all ? "all checks passed" : "FAILED", max_abs_tolerance());
    return all ? 0 : 1;
}
