// sdpa_params.h: the one argument every SDPA family kernel takes, by value.
// Shared by the kernel source and the GPU worker so the layouts cannot drift.
#pragma once

struct SdpaParams {
    const void* q;        // [b, h, s, d], fp16, bf16, E4M3 or int8 bytes, contiguous
    const void* k;        // [b, h, s, d]
    const void* v;        // [b, h, s, d]
    void* o;              // [b, h, s, d], the input dtype (fp16 or bf16 for E4M3 and int8 inputs)
    float* o_part;        // split-kv partial outputs [split, b, h, s, d] (fp32), or null
    float* lse_part;      // split-kv partial log-sum-exp [split, b, h, s] (fp32), or null
    int b, h, s, d;       // d must equal SDPA_HEAD_DIM
    float scale;          // softmax scale
    // E4M3 inputs only: the dequantisation scale of each tensor (the value
    // an input byte stands for is its E4M3 value times the scale).
    float q_scale, k_scale, v_scale;
    // int8 inputs only: the dequantisation scales of Q's and K's rows
    // ([b, h, s] each) and of V's columns ([b, h, d]). An input byte stands
    // for its int8 value times its row's (Q, K) or column's (V) scale; every
    // scale must be finite and positive. K's row scales are read in pairs
    // and V's column scales in fours: k_row_scale 8-byte and v_col_scale
    // 16-byte aligned.
    const float* q_row_scale;
    const float* k_row_scale;
    const float* v_col_scale;
};
