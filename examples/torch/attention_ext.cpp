// attention_ext: the exported kernel as a PyTorch C++/CUDA extension.
// check.py builds it with torch.utils.cpp_extension.load from this file and
// the bundle's attention_launch.cu (evotune export --name attention).
#include <torch/extension.h>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "attention_launch.h"

#ifndef ATTENTION_V_TRANSPOSED  // bundles exported before V could come transposed
#define ATTENTION_V_TRANSPOSED 0
#endif

namespace {

at::ScalarType scalar_type(const char* dtype) {
    const std::string d = dtype;
    if (d == "bf16") return at::kBFloat16;
    if (d == "fp8") return at::kFloat8_e4m3fn;
    if (d == "int8") return at::kChar;
    return at::kHalf;
}

// check_scales refuses an int8 scale array that is not a contiguous fp32
// CUDA tensor of the given sizes.
void check_scales(const torch::Tensor& t, const char* name, at::IntArrayRef sizes) {
    TORCH_CHECK(t.is_cuda() && t.is_contiguous() && t.scalar_type() == at::kFloat && t.sizes() == sizes, "attention: ", name,
                " must be a contiguous float32 CUDA tensor of sizes ", sizes, ", got ", t.sizes(), " ", t.scalar_type());
}

// forward computes softmax(scale * q k^T) v for contiguous [b, h, s, d]
// CUDA tensors of the bundle's dtype (with ATTENTION_V_TRANSPOSED, v is V^T:
// [b, h, d, s rounded up to 16], the padding keys zero); for fp8, q_scale, k_scale and v_scale
// dequantise the inputs; for int8, q_row_scale and k_row_scale ([b, h, s])
// and v_col_scale ([b, h, d]) do.
torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale, double q_scale,
                      double k_scale, double v_scale, const c10::optional<torch::Tensor>& q_row_scale,
                      const c10::optional<torch::Tensor>& k_row_scale, const c10::optional<torch::Tensor>& v_col_scale) {
    const at::ScalarType in = scalar_type(ATTENTION_DTYPE);
    for (const torch::Tensor* t : {&q, &k, &v}) {
        TORCH_CHECK(t->is_cuda() && t->is_contiguous() && t->dim() == 4, "attention: want contiguous 4-d CUDA tensors [b, h, s, d]");
        TORCH_CHECK(t->scalar_type() == in, "attention: the bundle takes ", ATTENTION_DTYPE, " inputs, got ", t->scalar_type());
    }
    TORCH_CHECK(k.sizes() == q.sizes(), "attention: q and k must have one shape");
    if (ATTENTION_V_TRANSPOSED) {
        const int64_t sp = (q.size(2) + 15) / 16 * 16;
        TORCH_CHECK(v.sizes() == at::IntArrayRef({q.size(0), q.size(1), q.size(3), sp}),
                    "attention: the bundle takes V transposed, [b, h, d, s rounded up to 16]; got ", v.sizes());
    } else {
        TORCH_CHECK(v.sizes() == q.sizes(), "attention: q, k and v must have one shape");
    }
    const c10::cuda::CUDAGuard guard(q.device());
    const int b = q.size(0), h = q.size(1), s = q.size(2), d = q.size(3);
    torch::Tensor o = torch::empty(q.sizes(), q.options().dtype(scalar_type(ATTENTION_OUT_DTYPE)));
    const size_t ws_bytes = attention_workspace_bytes(b, h, s, d);
    torch::Tensor ws;
    if (ws_bytes > 0) ws = torch::empty({static_cast<int64_t>(ws_bytes)}, q.options().dtype(at::kByte));
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
#if ATTENTION_INT8
    (void)q_scale, (void)k_scale, (void)v_scale;
    TORCH_CHECK(q_row_scale && k_row_scale && v_col_scale, "attention: an int8 bundle takes q_row_scale, k_row_scale and v_col_scale");
    check_scales(*q_row_scale, "q_row_scale", {b, h, s});
    check_scales(*k_row_scale, "k_row_scale", {b, h, s});
    check_scales(*v_col_scale, "v_col_scale", {b, h, d});
    const cudaError_t err = attention_forward(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), b, h, s, d, float(scale),
                                              q_row_scale->data_ptr<float>(), k_row_scale->data_ptr<float>(),
                                              v_col_scale->data_ptr<float>(), ws_bytes ? ws.data_ptr() : nullptr, ws_bytes, stream);
#elif ATTENTION_FP8
    (void)q_row_scale, (void)k_row_scale, (void)v_col_scale;
    const cudaError_t err = attention_forward(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), b, h, s, d, float(scale),
                                              float(q_scale), float(k_scale), float(v_scale),
                                              ws_bytes ? ws.data_ptr() : nullptr, ws_bytes, stream);
#else
    (void)q_scale, (void)k_scale, (void)v_scale, (void)q_row_scale, (void)k_row_scale, (void)v_col_scale;
    const cudaError_t err = attention_forward(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), b, h, s, d, float(scale),
                                              ws_bytes ? ws.data_ptr() : nullptr, ws_bytes, stream);
#endif
    TORCH_CHECK(err == cudaSuccess, "attention_forward: ", cudaGetErrorName(err), ": ", cudaGetErrorString(err));
    return o;
}

std::string config_key(int64_t b, int64_t h, int64_t s, int64_t d) {
    const char* key = attention_config_key(int(b), int(h), int(s), int(d));
    return key ? key : "";
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("forward", &forward, "the exported SDPA forward", py::arg("q"), py::arg("k"), py::arg("v"), py::arg("scale"),
          py::arg("q_scale") = 1.0, py::arg("k_scale") = 1.0, py::arg("v_scale") = 1.0, py::arg("q_row_scale") = py::none(),
          py::arg("k_row_scale") = py::none(), py::arg("v_col_scale") = py::none());
    m.def("config_key", &config_key, "the config the bundle runs for a shape");
    m.attr("dtype") = ATTENTION_DTYPE;
    m.attr("out_dtype") = ATTENTION_OUT_DTYPE;
    m.attr("head_dim") = ATTENTION_HEAD_DIM;
    m.attr("causal") = bool(ATTENTION_CAUSAL);
    m.attr("v_transposed") = bool(ATTENTION_V_TRANSPOSED);
}
