// worker.cu: evotune's GPU worker.
//
// A long-lived process, one per GPU. It reads one JSON request a line on
// stdin (kernels.Request in protocol.go) and writes exactly one JSON response
// a line on stdout (kernels.Response), flushed after each. Diagnostics go to
// stderr. Candidate kernels are loaded from cubins with the driver API, so a
// crashing candidate takes down only this process: after a context-destroying
// error the worker answers with "sticky":true and exits with status 3.
//
// Build: nvcc -O2 -std=c++17 -arch=sm_XX -I<dir of sdpa_params.h> -o worker worker.cu -lcuda
//
// fp8 (dtype "fp8"): Q, K and V are E4M3 bytes quantised from fp32 inputs
// the way a user would, each tensor by its own amax (scale = amax / 448, the
// largest E4M3 value); the kernel gets the dequantisation scales in
// SdpaParams and writes O in out_dtype (fp16 or bf16). A check compares O
// with two fp32 references: one on the dequantised inputs (what the kernel
// could have computed exactly; the gate's atol/rtol and error measures) and
// one on the unquantised inputs (end to end: cosine similarity, relative L1
// and max abs error). With v_transposed the kernel reads V as V^T
// [b, h, d, sp], sp = s rounded up to 16 and the keys from s to sp zero (a
// caller's quantisation pass writes it so at no cost); the references read V
// as it was.
//
// int8 (dtype "int8"): the same, with symmetric INT8 bytes and fine scales:
// each row (token) of Q and K is quantised by its own amax, each column of V
// by its amax over the head's s rows; scale = amax / 127 (1 for an all-zero
// row or column) and byte = clamp(rint(x / scale), -127, 127), rint rounding
// ties to even. The kernel gets the three scale arrays as device pointers in
// SdpaParams (q_row_scale, k_row_scale: [b, h, s]; v_col_scale: [b, h, d]).
// The references are fp32 attention on the dequantised inputs (byte x scale)
// and on the unquantised ones, as for fp8; the check response's q_scale,
// k_scale and v_scale are the largest row (Q, K) or column (V) scale of each
// tensor. Timing inputs are bytes uniform over [-127, 127] with every scale
// 1/127, so that they stand for U(-1, 1) as the other dtypes' do.
//
// Self-test: worker --dump-ref DIR --shape BxHxSxD --dtype fp16|bf16 --seed N
//            [--causal] [--scale X] [--input-scale X]
// writes the seeded inputs and the fp32 reference so that bench/torch_sdpa.py
// --check-ref DIR can compare the reference with PyTorch.

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <list>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sdpa_params.h"

namespace {

// ---------------------------------------------------------------------------
// Errors

// A BadRequest is a request the worker cannot serve; the CUDA context is fine.
struct BadRequest : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A CudaFailure is a failed CUDA call. Sticky is decided later, by the code
// and by probing the context, because an asynchronous fault can surface on
// any later call.
struct CudaFailure : std::runtime_error {
    bool sticky;
    CudaFailure(const std::string& msg, bool s) : std::runtime_error(msg), sticky(s) {}
};

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char buf[1024];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return "";
    if (static_cast<size_t>(n) < sizeof buf) return std::string(buf, n);
    std::string s(n + 1, '\0');
    va_start(ap, fmt);
    vsnprintf(&s[0], s.size(), fmt, ap);
    va_end(ap);
    s.resize(n);
    return s;
}

// Errors after which the context is unusable: every later call fails.
bool stickyDriverError(CUresult r) {
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return true;
    default:
        return false;
    }
}

bool stickyRuntimeError(cudaError_t e) {
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorMisalignedAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorHardwareStackError:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
        return true;
    default:
        return false;
    }
}

void checkCu(CUresult r, const std::string& call) {
    if (r == CUDA_SUCCESS) return;
    const char* name = nullptr;
    const char* text = nullptr;
    if (cuGetErrorName(r, &name) != CUDA_SUCCESS || name == nullptr) name = "CUDA_ERROR_UNKNOWN_CODE";
    if (cuGetErrorString(r, &text) != CUDA_SUCCESS || text == nullptr) text = "";
    throw CudaFailure(format("%s: %s (%d): %s", call.c_str(), name, static_cast<int>(r), text), stickyDriverError(r));
}

void checkRt(cudaError_t e, const std::string& call) {
    if (e == cudaSuccess) return;
    cudaGetLastError();  // clear a non-sticky error so later calls start clean
    throw CudaFailure(format("%s: %s (%d): %s", call.c_str(), cudaGetErrorName(e), static_cast<int>(e),
                             cudaGetErrorString(e)),
                      stickyRuntimeError(e));
}

#define CU(call) checkCu((call), #call)
#define RT(call) checkRt((call), #call)

// ---------------------------------------------------------------------------
// JSON: a small reader for requests and a writer for responses.

struct Json {
    enum Kind { Null, Bool, Number, String, Array, Object };
    Kind kind = Null;
    bool boolean = false;
    std::string text;  // a string's value, or a number's literal text
    std::vector<Json> items;
    std::vector<std::pair<std::string, Json>> fields;

    const Json* get(const char* key) const {
        for (const auto& f : fields)
            if (f.first == key) return &f.second;
        return nullptr;
    }
};

class JsonParser {
public:
    explicit JsonParser(const std::string& s) : s_(s) {}

    Json parse() {
        Json v = value(0);
        skipSpace();
        if (pos_ != s_.size()) fail("unexpected text after the value");
        return v;
    }

private:
    static constexpr int kMaxDepth = 64;
    const std::string& s_;
    size_t pos_ = 0;

    [[noreturn]] void fail(const char* what) {
        throw BadRequest(format("bad request JSON at byte %zu: %s", pos_, what));
    }

    void skipSpace() {
        while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) pos_++;
    }

    bool consume(const char* lit) {
        size_t n = strlen(lit);
        if (s_.compare(pos_, n, lit) == 0) {
            pos_ += n;
            return true;
        }
        return false;
    }

    Json value(int depth) {
        if (depth > kMaxDepth) fail("nested too deeply");
        skipSpace();
        if (pos_ >= s_.size()) fail("unexpected end of input");
        Json v;
        char c = s_[pos_];
        if (c == '{') {
            v.kind = Json::Object;
            pos_++;
            skipSpace();
            if (pos_ < s_.size() && s_[pos_] == '}') {
                pos_++;
                return v;
            }
            for (;;) {
                skipSpace();
                if (pos_ >= s_.size() || s_[pos_] != '"') fail("want a string key");
                std::string key = string();
                skipSpace();
                if (pos_ >= s_.size() || s_[pos_] != ':') fail("want ':'");
                pos_++;
                v.fields.emplace_back(std::move(key), value(depth + 1));
                skipSpace();
                if (pos_ < s_.size() && s_[pos_] == ',') {
                    pos_++;
                    continue;
                }
                if (pos_ < s_.size() && s_[pos_] == '}') {
                    pos_++;
                    return v;
                }
                fail("want ',' or '}'");
            }
        }
        if (c == '[') {
            v.kind = Json::Array;
            pos_++;
            skipSpace();
            if (pos_ < s_.size() && s_[pos_] == ']') {
                pos_++;
                return v;
            }
            for (;;) {
                v.items.push_back(value(depth + 1));
                skipSpace();
                if (pos_ < s_.size() && s_[pos_] == ',') {
                    pos_++;
                    continue;
                }
                if (pos_ < s_.size() && s_[pos_] == ']') {
                    pos_++;
                    return v;
                }
                fail("want ',' or ']'");
            }
        }
        if (c == '"') {
            v.kind = Json::String;
            v.text = string();
            return v;
        }
        if (consume("true")) {
            v.kind = Json::Bool;
            v.boolean = true;
            return v;
        }
        if (consume("false")) {
            v.kind = Json::Bool;
            return v;
        }
        if (consume("null")) return v;
        if (c == '-' || (c >= '0' && c <= '9')) {
            v.kind = Json::Number;
            v.text = number();
            return v;
        }
        fail("unexpected character");
    }

    std::string number() {
        size_t start = pos_;
        auto digits = [&] {
            size_t d = pos_;
            while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
            return pos_ - d;
        };
        if (s_[pos_] == '-') pos_++;
        if (pos_ < s_.size() && s_[pos_] == '0') {
            pos_++;
        } else if (digits() == 0) {
            fail("bad number");
        }
        if (pos_ < s_.size() && s_[pos_] == '.') {
            pos_++;
            if (digits() == 0) fail("bad number fraction");
        }
        if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
            pos_++;
            if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) pos_++;
            if (digits() == 0) fail("bad number exponent");
        }
        return s_.substr(start, pos_ - start);
    }

    unsigned hex4() {
        if (pos_ + 4 > s_.size()) fail("short \\u escape");
        unsigned v = 0;
        for (int i = 0; i < 4; i++) {
            char c = s_[pos_++];
            v <<= 4;
            if (c >= '0' && c <= '9') v |= c - '0';
            else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
            else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
            else fail("bad \\u escape");
        }
        return v;
    }

    static void utf8(std::string& out, unsigned cp) {
        if (cp < 0x80) {
            out += static_cast<char>(cp);
        } else if (cp < 0x800) {
            out += static_cast<char>(0xC0 | (cp >> 6));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out += static_cast<char>(0xE0 | (cp >> 12));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (cp >> 18));
            out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (cp & 0x3F));
        }
    }

    std::string string() {
        pos_++;  // opening quote
        std::string out;
        for (;;) {
            if (pos_ >= s_.size()) fail("unterminated string");
            char c = s_[pos_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
            if (c != '\\') {
                out += c;
                continue;
            }
            if (pos_ >= s_.size()) fail("unterminated escape");
            char e = s_[pos_++];
            switch (e) {
            case '"': out += '"'; break;
            case '\\': out += '\\'; break;
            case '/': out += '/'; break;
            case 'b': out += '\b'; break;
            case 'f': out += '\f'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            case 't': out += '\t'; break;
            case 'u': {
                unsigned cp = hex4();
                if (cp >= 0xD800 && cp < 0xDC00 && pos_ + 1 < s_.size() && s_[pos_] == '\\' && s_[pos_ + 1] == 'u') {
                    pos_ += 2;
                    unsigned lo = hex4();
                    if (lo >= 0xDC00 && lo < 0xE000) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    } else {
                        utf8(out, 0xFFFD);
                        cp = lo;
                    }
                }
                if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;  // lone surrogate
                utf8(out, cp);
                break;
            }
            default: fail("bad escape");
            }
        }
    }
};

// Field accessors: each names the field in its error.

const char* kindName(Json::Kind k) {
    static const char* names[] = {"null", "bool", "number", "string", "array", "object"};
    return names[k];
}

const Json* field(const Json& obj, const char* key, Json::Kind want) {
    const Json* v = obj.get(key);
    if (v == nullptr || v->kind == Json::Null) return nullptr;
    if (v->kind != want) throw BadRequest(format("field %s: want %s, got %s", key, kindName(want), kindName(v->kind)));
    return v;
}

double getDouble(const Json& obj, const char* key, double def) {
    const Json* v = field(obj, key, Json::Number);
    if (v == nullptr) return def;
    char* end = nullptr;
    double d = strtod(v->text.c_str(), &end);
    if (!std::isfinite(d)) throw BadRequest(format("field %s: %s is out of range", key, v->text.c_str()));
    return d;
}

long long intValue(const Json* v, const char* key, long long lo, long long hi) {
    errno = 0;
    char* end = nullptr;
    long long n = strtoll(v->text.c_str(), &end, 10);
    if (errno != 0 || *end != '\0') {
        double d = strtod(v->text.c_str(), nullptr);
        if (!(d == std::floor(d)) || d < -9.2e18 || d > 9.2e18)
            throw BadRequest(format("field %s: %s is not an integer", key, v->text.c_str()));
        n = static_cast<long long>(d);
    }
    if (n < lo || n > hi) throw BadRequest(format("field %s: %lld is outside [%lld, %lld]", key, n, lo, hi));
    return n;
}

long long getInt(const Json& obj, const char* key, long long def, long long lo, long long hi) {
    const Json* v = field(obj, key, Json::Number);
    return v == nullptr ? def : intValue(v, key, lo, hi);
}

uint64_t getUint64(const Json& obj, const char* key, uint64_t def) {
    const Json* v = field(obj, key, Json::Number);
    if (v == nullptr) return def;
    errno = 0;
    char* end = nullptr;
    if (v->text[0] == '-') throw BadRequest(format("field %s: %s is negative", key, v->text.c_str()));
    unsigned long long n = strtoull(v->text.c_str(), &end, 10);
    if (errno != 0 || *end != '\0') throw BadRequest(format("field %s: %s is not a 64-bit unsigned integer", key, v->text.c_str()));
    return n;
}

bool getBool(const Json& obj, const char* key) {
    const Json* v = field(obj, key, Json::Bool);
    return v != nullptr && v->boolean;
}

std::string getString(const Json& obj, const char* key) {
    const Json* v = field(obj, key, Json::String);
    return v == nullptr ? std::string() : v->text;
}

class JsonWriter {
public:
    JsonWriter() { out_ = "{"; }

    void key(const char* k) {
        if (!first_) out_ += ',';
        first_ = false;
        quote(k);
        out_ += ':';
    }
    void str(const char* k, const std::string& v) {
        key(k);
        quote(v);
    }
    void integer(const char* k, long long v) {
        key(k);
        out_ += std::to_string(v);
    }
    void boolean(const char* k, bool v) {
        key(k);
        out_ += v ? "true" : "false";
    }
    void number(const char* k, double v) {
        key(k);
        num(v);
    }
    void numbers(const char* k, const std::vector<double>& v) {
        key(k);
        out_ += '[';
        for (size_t i = 0; i < v.size(); i++) {
            if (i > 0) out_ += ',';
            num(v[i]);
        }
        out_ += ']';
    }
    std::string finish() { return out_ + "}"; }

private:
    std::string out_;
    bool first_ = true;

    // JSON has no NaN or Inf; a non-finite error must still read as huge
    // (never as the zero a null would decode to), so it becomes the largest double.
    void num(double v) {
        if (!std::isfinite(v)) v = (v < 0) ? -1.7976931348623157e308 : 1.7976931348623157e308;
        char buf[32];
        snprintf(buf, sizeof buf, "%.17g", v);
        out_ += buf;
    }

    void quote(const std::string& s) {
        out_ += '"';
        for (unsigned char c : s) {
            switch (c) {
            case '"': out_ += "\\\""; break;
            case '\\': out_ += "\\\\"; break;
            case '\n': out_ += "\\n"; break;
            case '\r': out_ += "\\r"; break;
            case '\t': out_ += "\\t"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    snprintf(buf, sizeof buf, "\\u%04x", c);
                    out_ += buf;
                } else {
                    out_ += static_cast<char>(c);
                }
            }
        }
        out_ += '"';
    }
};

// ---------------------------------------------------------------------------
// Requests

enum class Dtype { F16, BF16, FP8, INT8 };

// quantized says whether t's inputs are quantised from fp32 with
// dequantisation scales, writing O in fp16 or bf16.
bool quantized(Dtype t) { return t == Dtype::FP8 || t == Dtype::INT8; }

struct LaunchSpec {
    std::string kernel;
    unsigned grid[3];
    unsigned block[3];
    unsigned smem;
};

struct Request {
    long long id = 0;
    std::string op;
    std::string cubin;
    std::vector<LaunchSpec> launches;
    long long workspaceBytes = 0;
    long long lseOffsetBytes = 0;
    int b = 0, h = 0, s = 0, d = 0;
    Dtype dtype = Dtype::F16;
    Dtype outDtype = Dtype::F16;  // the input dtype, or fp16 / bf16 for fp8 and int8
    bool normal = false;          // inputs ~ N(0, input_scale^2) instead of U(-input_scale, input_scale)
    bool causal = false;
    double scale = 0;
    uint64_t seed = 0;
    double inputScale = 1;
    double atol = 0, rtol = 0;
    int warmup = 3;
    int samples = 50;
    double minSampleUs = 200;
    bool noRotate = false;
    bool eager = false;
    bool vTransposed = false;  // fp8: the kernel reads V^T [b, h, d, sp] (sp: s rounded up to 16, keys >= s zero)

    size_t elems() const { return static_cast<size_t>(b) * h * s * d; }
    // vPad is V^T's key stride: s rounded up to 16.
    int vPad() const { return (s + 15) / 16 * 16; }
    // vElems is the elements of V as the kernel reads it.
    size_t vElems() const { return vTransposed ? static_cast<size_t>(b) * h * d * vPad() : elems(); }
    size_t inElemBytes() const { return quantized(dtype) ? 1 : 2; }
    float softmaxScale() const { return scale != 0 ? static_cast<float>(scale) : 1.0f / std::sqrt(static_cast<float>(d)); }
};

const char* dtypeName(Dtype t) {
    return t == Dtype::F16 ? "fp16" : t == Dtype::BF16 ? "bf16" : t == Dtype::FP8 ? "fp8" : "int8";
}

Dtype parseDtype(const std::string& s, const char* what) {
    if (s == "fp16") return Dtype::F16;
    if (s == "bf16") return Dtype::BF16;
    if (s == "fp8") return Dtype::FP8;
    if (s == "int8") return Dtype::INT8;
    throw BadRequest(format("%s %s: want fp16, bf16, fp8 or int8", what, s.empty() ? "(empty)" : s.c_str()));
}

// parseOutDtype reads out_dtype: empty means the input dtype (fp16 for fp8
// and int8); fp8 and int8 inputs write fp16 or bf16, the others their own
// dtype.
Dtype parseOutDtype(const std::string& s, Dtype in) {
    if (s.empty()) return quantized(in) ? Dtype::F16 : in;
    Dtype o = parseDtype(s, "field out_dtype:");
    if (quantized(in) ? quantized(o) : o != in)
        throw BadRequest(format("field out_dtype: %s with dtype %s: want %s", s.c_str(), dtypeName(in),
                                quantized(in) ? "fp16 or bf16" : dtypeName(in)));
    return o;
}

// checkShape accepts a shape whose dimensions are all positive and whose
// tensors stay below 4e9 elements.
void checkShape(int b, int h, int s, int d) {
    if (b <= 0 || h <= 0 || s <= 0 || d <= 0) throw BadRequest(format("shape %dx%dx%dx%d: every dimension must be positive", b, h, s, d));
    double n = static_cast<double>(b) * h * s * d;
    if (n > 4e9) throw BadRequest(format("shape %dx%dx%dx%d: %.0f elements a tensor is too many", b, h, s, d, n));
}

Request parseRequest(const Json& j) {
    if (j.kind != Json::Object) throw BadRequest("request: want a JSON object");
    Request r;
    r.id = getInt(j, "id", 0, INT64_MIN, INT64_MAX);
    r.op = getString(j, "op");
    if (r.op == "info" || r.op == "quit") return r;
    if (r.op != "check" && r.op != "time")
        throw BadRequest(format("field op: unknown op \"%s\" (want info, check, time or quit)", r.op.c_str()));

    r.cubin = getString(j, "cubin");
    if (r.cubin.empty()) throw BadRequest("field cubin: missing");
    const Json* plan = field(j, "plan", Json::Object);
    if (plan == nullptr) throw BadRequest("field plan: missing");
    const Json* launches = field(*plan, "launches", Json::Array);
    if (launches == nullptr || launches->items.empty()) throw BadRequest("field plan.launches: empty");
    if (launches->items.size() > 64) throw BadRequest("field plan.launches: more than 64 launches");
    for (const Json& l : launches->items) {
        if (l.kind != Json::Object) throw BadRequest("field plan.launches: want objects");
        LaunchSpec ls;
        ls.kernel = getString(l, "kernel");
        if (ls.kernel.empty()) throw BadRequest("field plan.launches[].kernel: missing");
        for (const char* key : {"grid", "block"}) {
            const Json* a = field(l, key, Json::Array);
            if (a == nullptr || a->items.size() != 3) throw BadRequest(format("launch %s: field %s: want 3 integers", ls.kernel.c_str(), key));
            unsigned* dst = (key[0] == 'g') ? ls.grid : ls.block;
            for (int i = 0; i < 3; i++) {
                if (a->items[i].kind != Json::Number) throw BadRequest(format("launch %s: field %s: want 3 integers", ls.kernel.c_str(), key));
                dst[i] = static_cast<unsigned>(intValue(&a->items[i], key, 1, INT32_MAX));
            }
        }
        if (static_cast<unsigned long long>(ls.block[0]) * ls.block[1] * ls.block[2] > 1024)
            throw BadRequest(format("launch %s: block %ux%ux%u has more than 1024 threads", ls.kernel.c_str(), ls.block[0], ls.block[1], ls.block[2]));
        ls.smem = static_cast<unsigned>(getInt(l, "smem", 0, 0, 1 << 30));
        r.launches.push_back(ls);
    }
    r.workspaceBytes = getInt(*plan, "workspace_bytes", 0, 0, 1LL << 36);
    r.lseOffsetBytes = getInt(*plan, "lse_offset_bytes", 0, 0, 1LL << 36);
    if (r.workspaceBytes > 0 && (r.lseOffsetBytes > r.workspaceBytes || r.lseOffsetBytes % 16 != 0))
        throw BadRequest(format("field plan.lse_offset_bytes: %lld must be a multiple of 16 within workspace_bytes %lld",
                                r.lseOffsetBytes, r.workspaceBytes));

    const Json* shape = field(j, "shape", Json::Object);
    if (shape == nullptr) throw BadRequest("field shape: missing");
    r.b = static_cast<int>(getInt(*shape, "b", 0, 0, INT32_MAX));
    r.h = static_cast<int>(getInt(*shape, "h", 0, 0, INT32_MAX));
    r.s = static_cast<int>(getInt(*shape, "s", 0, 0, INT32_MAX));
    r.d = static_cast<int>(getInt(*shape, "d", 0, 0, INT32_MAX));
    checkShape(r.b, r.h, r.s, r.d);
    r.dtype = parseDtype(getString(j, "dtype"), "field dtype:");
    r.outDtype = parseOutDtype(getString(j, "out_dtype"), r.dtype);
    {
        std::string dist = getString(j, "input_dist");
        if (dist != "" && dist != "uniform" && dist != "normal")
            throw BadRequest(format("field input_dist: %s: want uniform or normal", dist.c_str()));
        r.normal = dist == "normal";
    }
    r.causal = getBool(j, "causal");
    r.scale = getDouble(j, "scale", 0);
    r.seed = getUint64(j, "seed", 0);
    r.inputScale = getDouble(j, "input_scale", 0);
    if (r.inputScale == 0) r.inputScale = 1;
    if (!(r.inputScale > 0) || r.inputScale > 60000) throw BadRequest(format("field input_scale: %g must be in (0, 60000]", r.inputScale));
    r.atol = getDouble(j, "atol", 0);
    r.rtol = getDouble(j, "rtol", 0);
    if (r.atol < 0 || r.rtol < 0) throw BadRequest("fields atol and rtol must not be negative");
    r.warmup = static_cast<int>(getInt(j, "warmup", 3, 0, 100000));
    if (r.warmup == 0) r.warmup = 3;
    r.samples = static_cast<int>(getInt(j, "samples", 50, 0, 100000));
    if (r.samples == 0) r.samples = 50;
    r.samples = std::max(r.samples, 30);
    r.minSampleUs = getDouble(j, "min_sample_us", 0);
    if (r.minSampleUs <= 0) r.minSampleUs = 200;
    if (r.minSampleUs > 1e6) throw BadRequest(format("field min_sample_us: %g is over one second", r.minSampleUs));
    r.noRotate = getBool(j, "no_rotate");
    r.eager = getBool(j, "eager");
    r.vTransposed = getBool(j, "v_transposed");
    if (r.vTransposed && r.dtype != Dtype::FP8)
        throw BadRequest(format("field v_transposed: only fp8 takes V transposed, not %s", dtypeName(r.dtype)));
    return r;
}

// ---------------------------------------------------------------------------
// Device code: input generation, the reference, comparison.

__host__ __device__ inline uint64_t splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// int8Scale is the dequantisation scale of a row or column whose largest
// magnitude is amax: amax / 127, so that amax's byte is +-127; 1 where that
// is not positive (an all-zero row, or an amax so small that amax / 127
// underflows), so that every scale is finite and positive.
__host__ __device__ inline float int8Scale(float amax) {
    float scale = amax / 127.0f;
    return scale > 0 ? scale : 1.0f;
}

// int8Code is x's symmetric INT8 byte for the dequantisation scale scale:
// x / scale (IEEE division: the worker is built without fast math) rounded
// to the nearest integer, ties to even (rintf in the default rounding mode,
// cvt.rni on the device, as fp8model.QuantizeInt8's math.RoundToEven), and
// clamped to [-127, 127]; -128 is never used, so that the range is
// symmetric. Clamping is done on the float, before the conversion, so that
// no out-of-range float is ever converted.
__host__ __device__ inline int8_t int8Code(float x, float scale) {
    float q = rintf(x / scale);
    return static_cast<int8_t>(fminf(fmaxf(q, -127.0f), 127.0f));
}

template <typename T> __device__ inline float toFloat(T x);
template <> __device__ inline float toFloat<__half>(__half x) { return __half2float(x); }
template <> __device__ inline float toFloat<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __device__ inline float toFloat<__nv_fp8_e4m3>(__nv_fp8_e4m3 x) { return static_cast<float>(x); }
template <> __device__ inline float toFloat<float>(float x) { return x; }

template <typename T> __device__ inline T fromFloat(float x);
template <> __device__ inline __half fromFloat<__half>(float x) { return __float2half_rn(x); }
template <> __device__ inline __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
// E4M3 rounds to nearest and saturates at +-448, as a quantiser would.
template <> __device__ inline __nv_fp8_e4m3 fromFloat<__nv_fp8_e4m3>(float x) { return __nv_fp8_e4m3(x); }
template <> __device__ inline float fromFloat<float>(float x) { return x; }
// int8 timing inputs are bytes drawn directly: x rounded and clamped to [-127, 127].
template <> __device__ inline int8_t fromFloat<int8_t>(float x) { return int8Code(x, 1.0f); }

// fillUniform writes element i = dtype(round((2u-1)*scale)) with
// u = top 24 bits of splitmix64(key + (i+1)*golden) / 2^24: counter based, so
// the inputs depend only on (key, i), never on the launch geometry. With
// normal, element i is scale * N(0, 1) by Box-Muller from two such draws.
template <typename T>
__global__ void fillUniform(T* out, size_t n, uint64_t key, float scale, bool normal = false) {
    size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        uint64_t r = splitmix64(key + (i + 1) * 0x9E3779B97F4A7C15ull);
        float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);
        float x = 2.0f * u - 1.0f;
        if (normal) {
            float u1 = (static_cast<float>(r & 0xFFFFFF) + 0.5f) * (1.0f / 16777216.0f);
            x = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u);
        }
        out[i] = fromFloat<T>(x * scale);
    }
}

// absMax folds max |x| of n floats into *bits (a non-negative float's bits
// order like the float).
__global__ void absMax(const float* x, size_t n, unsigned int* bits) {
    float m = 0;
    size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) m = fmaxf(m, fabsf(x[i]));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_down_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) atomicMax(bits, __float_as_uint(m));
}

// transposeBytes writes V^T: vt[h][c][k] = v[h][k][c] for the s keys of
// each of heads heads, and zero for the keys from s to sp (what a caller
// who gives V transposed provides: whole 16-byte rows, padding finite).
__global__ void transposeBytes(const uint8_t* v, uint8_t* vt, size_t heads, int s, int sp, int d) {
    size_t n = heads * d * sp, stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n; i += stride) {
        const int k = static_cast<int>(i % sp), c = static_cast<int>(i / sp % d);
        const size_t hd = i / (static_cast<size_t>(sp) * d);
        vt[i] = k < s ? v[(hd * s + k) * d + c] : 0;
    }
}

// quantizeE4M3 writes out[i] = E4M3(x[i] / scale).
__global__ void quantizeE4M3(const float* x, __nv_fp8_e4m3* out, size_t n, float scale) {
    const float inv = 1.0f / scale;
    size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = __nv_fp8_e4m3(x[i] * inv);
}

// quantizeRowsInt8 quantises each of rows rows of d floats by its own amax,
// one warp a row (blockDim.x a multiple of 32): scales[row] =
// int8Scale(amax of the row), out = int8Code(x, scales[row]). Q's and K's
// rows are tokens of one head, so scales is [b, h, s].
__global__ void quantizeRowsInt8(const float* x, int8_t* out, float* scales, size_t rows, int d) {
    const int lane = threadIdx.x & 31;
    const size_t warpsPerBlock = blockDim.x >> 5;
    const size_t warps = static_cast<size_t>(gridDim.x) * warpsPerBlock;
    // row is the same for the warp's 32 lanes, so all of them take part in
    // every shuffle.
    for (size_t row = static_cast<size_t>(blockIdx.x) * warpsPerBlock + (threadIdx.x >> 5); row < rows; row += warps) {
        const float* xr = x + row * d;
        float amax = 0;
        for (int c = lane; c < d; c += 32) amax = fmaxf(amax, fabsf(xr[c]));
        for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        const float scale = int8Scale(amax);
        if (lane == 0) scales[row] = scale;
        int8_t* outr = out + row * d;
        for (int c = lane; c < d; c += 32) outr[c] = int8Code(xr[c], scale);
    }
}

// quantizeColsInt8 quantises each column of each head of x ([heads, s, d])
// by its own amax over the head's s rows, one thread a column (neighbouring
// threads read neighbouring columns, so loads coalesce): scales[head * d +
// c] = int8Scale(amax of the column) ([b, h, d] for V), out = int8Code(x,
// that scale).
__global__ void quantizeColsInt8(const float* x, int8_t* out, float* scales, size_t heads, int s, int d) {
    const size_t cols = heads * d;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t col = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < cols; col += stride) {
        const size_t head = col / d;
        const size_t first = head * s * d + col % d;  // the column's element in row 0
        float amax = 0;
        for (int j = 0; j < s; j++) amax = fmaxf(amax, fabsf(x[first + static_cast<size_t>(j) * d]));
        const float scale = int8Scale(amax);
        scales[col] = scale;
        for (int j = 0; j < s; j++) {
            const size_t i = first + static_cast<size_t>(j) * d;
            out[i] = int8Code(x[i], scale);
        }
    }
}

// dequantizeInt8 writes out[i] = x[i] * its scale: the scale of its row
// (scales [heads, s]) or, with perColumn, of its head's column (scales
// [heads, d]), for n = heads * s * d elements.
__global__ void dequantizeInt8(const int8_t* x, const float* scales, float* out, size_t n, int s, int d, bool perColumn) {
    const size_t headElems = static_cast<size_t>(s) * d;
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const size_t sc = perColumn ? i / headElems * d + i % d : i / d;
        out[i] = static_cast<float>(x[i]) * scales[sc];
    }
}

// fillConstant writes value to n floats.
__global__ void fillConstant(float* x, size_t n, float value) {
    const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) x[i] = value;
}

constexpr int kRefThreads = 256;

__device__ float blockReduce(float v, bool isMax, float* scratch) {
    for (int o = 16; o > 0; o >>= 1) {
        float w = __shfl_xor_sync(0xffffffffu, v, o);
        v = isMax ? fmaxf(v, w) : v + w;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();  // scratch may still be read from a previous reduction
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    int nwarps = blockDim.x >> 5;
    v = scratch[0];
    for (int i = 1; i < nwarps; i++) v = isMax ? fmaxf(v, scratch[i]) : v + scratch[i];
    return v;
}

template <typename T>
__device__ inline float dotRow(const float* q, const T* k, int d) {
    float acc = 0;
    for (int c = 0; c < d; c++) acc += q[c] * toFloat<T>(k[c]);
    return acc;
}

// referenceAttention computes O in fp32 from the rounded inputs, one block a
// query row, the plain way: pass 1 finds the row's max score, pass 2 sums
// exp(score - max) and the weighted V rows, chunk by chunk. Causal rows see
// keys 0..row. Chosen for being obviously right, not fast. The inputs stand
// for their values times qs, ks and vs (fp8's dequantisation scales; 1
// otherwise).
template <typename T>
__global__ void __launch_bounds__(kRefThreads) referenceAttention(const T* q, const T* k, const T* v, float* o,
                                                                  size_t rows, int s, int d, float scale, int causal,
                                                                  float qsc = 1, float ksc = 1, float vsc = 1) {
    scale *= ksc;
    extern __shared__ float smem[];
    float* qs = smem;         // [d]
    float* acc = qs + d;      // [d]
    float* ps = acc + d;      // [kRefThreads]
    float* scratch = ps + kRefThreads;  // [32]
    for (size_t row = blockIdx.x; row < rows; row += gridDim.x) {
        size_t bh = row / s;
        int i = static_cast<int>(row % s);
        const T* kb = k + bh * s * d;
        const T* vb = v + bh * s * d;
        __syncthreads();
        for (int c = threadIdx.x; c < d; c += blockDim.x) {
            qs[c] = toFloat<T>(q[row * d + c]) * qsc;
            acc[c] = 0;
        }
        __syncthreads();
        int nkeys = causal ? i + 1 : s;
        float m = -INFINITY;
        for (int j = threadIdx.x; j < nkeys; j += blockDim.x) m = fmaxf(m, dotRow(qs, kb + static_cast<size_t>(j) * d, d) * scale);
        m = blockReduce(m, true, scratch);
        float l = 0;
        for (int c0 = 0; c0 < nkeys; c0 += blockDim.x) {
            int j = c0 + threadIdx.x;
            float p = 0;
            if (j < nkeys) p = expf(dotRow(qs, kb + static_cast<size_t>(j) * d, d) * scale - m);
            ps[threadIdx.x] = p;
            l += p;
            __syncthreads();
            int cn = min(static_cast<int>(blockDim.x), nkeys - c0);
            for (int c = threadIdx.x; c < d; c += blockDim.x) {
                float a = acc[c];
                for (int jj = 0; jj < cn; jj++) a += ps[jj] * toFloat<T>(vb[static_cast<size_t>(c0 + jj) * d + c]);
                acc[c] = a;
            }
            __syncthreads();
        }
        l = blockReduce(l, false, scratch);
        for (int c = threadIdx.x; c < d; c += blockDim.x) o[row * d + c] = acc[c] * vsc / l;
    }
}

struct CompareStats {
    double sumAbs, sumSqErr, sumSqRef, sumOut, sumOut2, sumRef, sumRef2, sumOutRef, sumAbsRef;
    unsigned long long bad, nan, inf, finite;
    unsigned int maxAbsBits;  // a non-negative float's bits order like the float
};

__device__ inline double warpSum(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}
__device__ inline unsigned long long warpSum(unsigned long long v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

template <typename T>
__global__ void compareOutput(const T* out, const float* ref, size_t n, float atol, float rtol, CompareStats* st) {
    double sumAbs = 0, sumSqErr = 0, sumSqRef = 0, sumOut = 0, sumOut2 = 0, sumRef = 0, sumRef2 = 0, sumOutRef = 0,
           sumAbsRef = 0;
    unsigned long long bad = 0, nan = 0, inf = 0, finite = 0;
    float maxAbs = 0;
    size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        float o = toFloat<T>(out[i]);
        float r = ref[i];
        sumSqRef += static_cast<double>(r) * r;
        sumRef += r;
        sumRef2 += static_cast<double>(r) * r;
        sumAbsRef += fabsf(r);
        if (isnan(o)) {
            nan++;
            bad++;
            continue;
        }
        if (isinf(o)) {
            inf++;
            bad++;
            continue;
        }
        finite++;
        float e = fabsf(o - r);
        maxAbs = fmaxf(maxAbs, e);
        sumAbs += e;
        sumSqErr += static_cast<double>(e) * e;
        sumOut += o;
        sumOut2 += static_cast<double>(o) * o;
        sumOutRef += static_cast<double>(o) * r;
        if (e > atol + rtol * fabsf(r)) bad++;
    }
    sumAbs = warpSum(sumAbs);
    sumSqErr = warpSum(sumSqErr);
    sumSqRef = warpSum(sumSqRef);
    sumOut = warpSum(sumOut);
    sumOut2 = warpSum(sumOut2);
    sumRef = warpSum(sumRef);
    sumRef2 = warpSum(sumRef2);
    sumOutRef = warpSum(sumOutRef);
    sumAbsRef = warpSum(sumAbsRef);
    bad = warpSum(bad);
    nan = warpSum(nan);
    inf = warpSum(inf);
    finite = warpSum(finite);
    for (int o = 16; o > 0; o >>= 1) maxAbs = fmaxf(maxAbs, __shfl_down_sync(0xffffffffu, maxAbs, o));
    if ((threadIdx.x & 31) == 0) {
        atomicAdd(&st->sumAbs, sumAbs);
        atomicAdd(&st->sumSqErr, sumSqErr);
        atomicAdd(&st->sumSqRef, sumSqRef);
        atomicAdd(&st->sumOut, sumOut);
        atomicAdd(&st->sumOut2, sumOut2);
        atomicAdd(&st->sumRef, sumRef);
        atomicAdd(&st->sumRef2, sumRef2);
        atomicAdd(&st->sumOutRef, sumOutRef);
        atomicAdd(&st->sumAbsRef, sumAbsRef);
        atomicAdd(&st->bad, bad);
        atomicAdd(&st->nan, nan);
        atomicAdd(&st->inf, inf);
        atomicAdd(&st->finite, finite);
        atomicMax(&st->maxAbsBits, __float_as_uint(maxAbs));
    }
}

// countMismatch counts 16-bit words that differ between two outputs.
__global__ void countMismatch(const uint16_t* a, const uint16_t* b, size_t n, unsigned long long* count) {
    unsigned long long c = 0;
    size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
    for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) c += (a[i] != b[i]);
    c = warpSum(c);
    if ((threadIdx.x & 31) == 0 && c != 0) atomicAdd(count, c);
}

unsigned gridFor(size_t n, unsigned threads) {
    size_t blocks = (n + threads - 1) / threads;
    return static_cast<unsigned>(std::min<size_t>(std::max<size_t>(blocks, 1), 65535));
}

// ---------------------------------------------------------------------------
// Host state

// A DeviceBuffer owns device memory.
class DeviceBuffer {
public:
    DeviceBuffer() = default;
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
    ~DeviceBuffer() { release(); }

    void allocate(size_t bytes, const char* what) {
        release();
        if (bytes == 0) return;
        checkRt(cudaMalloc(&p_, bytes), format("cudaMalloc(%s, %zu bytes)", what, bytes));
        n_ = bytes;
    }
    // reserve grows the buffer to at least bytes; contents are not kept.
    void reserve(size_t bytes, const char* what) {
        if (bytes > n_) allocate(bytes, what);
    }
    void release() {
        if (p_ != nullptr) cudaFree(p_);  // fails only in a lost context, where nothing can be done
        p_ = nullptr;
        n_ = 0;
    }
    template <typename T = void> T* get() const { return static_cast<T*>(p_); }
    size_t size() const { return n_; }

private:
    void* p_ = nullptr;
    size_t n_ = 0;
};

// InputScales are the dequantisation scales a kernel gets in SdpaParams:
// fp8's one a tensor, int8's device arrays of one a row (Q, K: [b, h, s])
// and one a column (V: [b, h, d]). fp16 and bf16 inputs have none.
struct InputScales {
    float q = 1, k = 1, v = 1;
    const float* qRow = nullptr;
    const float* kRow = nullptr;
    const float* vCol = nullptr;
};

// A CaseData is a check case's inputs and reference output, kept on the
// device because every candidate of a run is checked on the same cases.
struct CaseData {
    std::string key;
    DeviceBuffer q, k, v, ref;
    DeviceBuffer vt;  // fp8 with v_transposed: V^T, what the kernel reads (v is the reference's)
    // fp8 and int8: the reference on the unquantised inputs.
    DeviceBuffer refRaw;
    // int8: the row (Q, K) and column (V) scales that scales points into.
    DeviceBuffer qRowScale, kRowScale, vColScale;
    InputScales scales;  // what the kernel gets
    // What a check reports: fp8's tensor scales, int8's largest row (Q, K)
    // or column (V) scale of each tensor.
    float qs = 1, ks = 1, vs = 1;
    size_t bytes() const {
        return q.size() + k.size() + v.size() + vt.size() + ref.size() + refRaw.size() + qRowScale.size() + kRowScale.size() +
               vColScale.size();
    }
};

std::string caseKey(const Request& r) {
    return format("%dx%dx%dx%d/%s/%d/%.9g/%llu/%.9g/%d/%d", r.b, r.h, r.s, r.d, dtypeName(r.dtype), r.causal ? 1 : 0,
                  static_cast<double>(r.softmaxScale()), static_cast<unsigned long long>(r.seed), r.inputScale,
                  r.normal ? 1 : 0, r.vTransposed ? 1 : 0);
}

// Tensor tags keep Q, K and V streams apart for one seed.
constexpr uint64_t kTagQ = 0x5151515151515151ull, kTagK = 0x4B4B4B4B4B4B4B4Bull, kTagV = 0x5656565656565656ull;

uint64_t tensorKey(uint64_t seed, uint64_t tag) { return splitmix64(seed ^ tag); }

class Worker {
public:
    ~Worker() {
        if (module_ != nullptr) cuModuleUnload(module_);
        if (stream_ != nullptr) cudaStreamDestroy(stream_);
    }

    // init makes the device's primary context current; failures are reported
    // per request, so a worker without a GPU still answers.
    void init() {
        if (ready_) return;
        RT(cudaSetDevice(0));
        RT(cudaFree(nullptr));
        RT(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
        RT(cudaDeviceGetAttribute(&l2Bytes_, cudaDevAttrL2CacheSize, 0));
        ready_ = true;
    }

    void info(JsonWriter& w) {
        init();
        CUdevice dev;
        CU(cuCtxGetDevice(&dev));
        char name[256] = {0};
        CU(cuDeviceGetName(name, sizeof name - 1, dev));
        int major = 0, minor = 0, sms = 0, smem = 0, l2 = 0, driver = 0;
        CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
        CU(cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
        CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
        CU(cuDeviceGetAttribute(&smem, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, dev));
        CU(cuDeviceGetAttribute(&l2, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, dev));
        CU(cuDriverGetVersion(&driver));
        w.str("device", name);
        w.str("compute_cap", format("%d.%d", major, minor));
        w.integer("sms", sms);
        w.integer("smem_per_block_optin", smem);
        w.integer("l2_bytes", l2);
        w.integer("driver_version", driver);
    }

    void check(const Request& r, JsonWriter& w) {
        std::vector<CUfunction> fns = load(r);
        CaseData& cd = caseData(r);
        size_t n = r.elems();
        size_t outBytes = n * 2;
        out_.reserve(outBytes, "output");
        first_.reserve(outBytes, "first output");
        workspace_.reserve(static_cast<size_t>(r.workspaceBytes), "workspace");
        stats_.reserve(sizeof(CompareStats), "compare stats");

        runOnce(r, fns, cd, outBytes);
        unsigned blocks = gridFor(n, 256);
        CompareStats st = compare(r, cd.ref, static_cast<float>(r.atol), static_cast<float>(r.rtol));
        if (quantized(r.dtype)) {
            // End to end: against fp32 attention on the unquantised inputs.
            CompareStats e2e = compare(r, cd.refRaw, 0, 0);
            double cos = 0, relL1 = INFINITY, maxAbs = INFINITY;
            if (e2e.nan + e2e.inf == 0 && e2e.finite > 0) {
                float m;
                memcpy(&m, &e2e.maxAbsBits, sizeof m);
                maxAbs = m;
                double den = std::sqrt(e2e.sumOut2 * e2e.sumSqRef);
                cos = den > 0 ? e2e.sumOutRef / den : (e2e.sumOut2 == e2e.sumSqRef ? 1 : 0);
                relL1 = e2e.sumAbsRef > 0 ? e2e.sumAbs / e2e.sumAbsRef : (e2e.sumAbs > 0 ? INFINITY : 0);
            }
            w.number("e2e_cos", cos);
            w.number("e2e_rel_l1", relL1);
            w.number("e2e_max_abs", maxAbs);
            w.number("q_scale", cd.qs);
            w.number("k_scale", cd.ks);
            w.number("v_scale", cd.vs);
        }
        RT(cudaMemcpyAsync(first_.get(), out_.get(), outBytes, cudaMemcpyDeviceToDevice, stream_));
        RT(cudaStreamSynchronize(stream_));

        runOnce(r, fns, cd, outBytes);
        unsigned long long zero = 0, mismatch = 0;
        RT(cudaMemcpyAsync(stats_.get(), &zero, sizeof zero, cudaMemcpyHostToDevice, stream_));
        countMismatch<<<blocks, 256, 0, stream_>>>(first_.get<uint16_t>(), out_.get<uint16_t>(), n,
                                                   stats_.get<unsigned long long>());
        RT(cudaGetLastError());
        RT(cudaMemcpyAsync(&mismatch, stats_.get(), sizeof mismatch, cudaMemcpyDeviceToHost, stream_));
        RT(cudaStreamSynchronize(stream_));

        double maxAbs, meanAbs, relL2;
        float maxAbsF;
        memcpy(&maxAbsF, &st.maxAbsBits, sizeof maxAbsF);
        // A NaN or Inf anywhere makes every error measure infinite, so a gate
        // that reads only one of them still rejects the output.
        if (st.nan + st.inf > 0 || st.finite == 0) {
            maxAbs = meanAbs = relL2 = INFINITY;
        } else {
            maxAbs = maxAbsF;
            meanAbs = st.sumAbs / static_cast<double>(st.finite);
            relL2 = st.sumSqRef > 0 ? std::sqrt(st.sumSqErr / st.sumSqRef) : (st.sumSqErr > 0 ? INFINITY : 0);
        }
        double nd = static_cast<double>(n);
        double refMean = st.sumRef / nd;
        double refVar = std::max(0.0, st.sumRef2 / nd - refMean * refMean);
        double outStd = 0;
        if (st.finite > 0) {
            double f = static_cast<double>(st.finite);
            double outMean = st.sumOut / f;
            outStd = std::sqrt(std::max(0.0, st.sumOut2 / f - outMean * outMean));
        }
        w.number("max_abs_err", maxAbs);
        w.number("mean_abs_err", meanAbs);
        w.number("rel_l2", relL2);
        w.number("bad_frac", static_cast<double>(st.bad) / nd);
        w.integer("nan", static_cast<long long>(st.nan));
        w.integer("inf", static_cast<long long>(st.inf));
        w.boolean("repeatable", mismatch == 0);
        w.number("out_std", outStd);
        w.number("ref_std", std::sqrt(refVar));
    }

    // compare runs compareOutput of the output against ref and returns the
    // statistics.
    CompareStats compare(const Request& r, const DeviceBuffer& ref, float atol, float rtol) {
        size_t n = r.elems();
        unsigned blocks = gridFor(n, 256);
        CompareStats st;
        RT(cudaMemsetAsync(stats_.get(), 0, sizeof st, stream_));
        if (r.outDtype == Dtype::BF16)
            compareOutput<<<blocks, 256, 0, stream_>>>(out_.get<__nv_bfloat16>(), ref.get<float>(), n, atol, rtol,
                                                      stats_.get<CompareStats>());
        else
            compareOutput<<<blocks, 256, 0, stream_>>>(out_.get<__half>(), ref.get<float>(), n, atol, rtol,
                                                      stats_.get<CompareStats>());
        RT(cudaGetLastError());
        RT(cudaMemcpyAsync(&st, stats_.get(), sizeof st, cudaMemcpyDeviceToHost, stream_));
        RT(cudaStreamSynchronize(stream_));
        return st;
    }

    void time(const Request& r, JsonWriter& w) {
        std::vector<CUfunction> fns = load(r);
        prepareTimeSets(r);
        workspace_.reserve(static_cast<size_t>(r.workspaceBytes), "workspace");
        if (r.eager) {
            timeEager(r, fns, w);
            return;
        }

        // Calibrate: grow the graph until one replay lasts min_sample_us.
        constexpr int kMaxLaunches = 4096;
        int n = 1;
        GraphExec exec;
        double us = 0;  // one replay of the last graph
        for (;;) {
            exec = capture(r, fns, n);
            launchGraph(exec);  // first replay uploads the graph
            RT(cudaStreamSynchronize(stream_));
            us = replayMicros(exec);
            if (us >= r.minSampleUs || n >= kMaxLaunches) break;
            double want = r.minSampleUs * 1.2 / std::max(us, 1e-3);
            int grow = 2;
            while (grow < want && grow < kMaxLaunches) grow *= 2;
            n = std::min(n * grow, kMaxLaunches);
        }

        warmUp(r, us, [&] { launchGraph(exec); });

        std::vector<cudaEvent_t> ev(2 * static_cast<size_t>(r.samples), nullptr);
        struct EventGuard {
            std::vector<cudaEvent_t>& ev;
            ~EventGuard() {
                for (cudaEvent_t e : ev)
                    if (e != nullptr) cudaEventDestroy(e);
            }
        } guard{ev};
        for (cudaEvent_t& e : ev) RT(cudaEventCreate(&e));
        for (int i = 0; i < r.samples; i++) {
            RT(cudaEventRecord(ev[2 * i], stream_));
            launchGraph(exec);
            RT(cudaEventRecord(ev[2 * i + 1], stream_));
        }
        RT(cudaStreamSynchronize(stream_));
        std::vector<double> samples;
        for (int i = 0; i < r.samples; i++) {
            float ms = 0;
            RT(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]));
            samples.push_back(static_cast<double>(ms) * 1000.0 / n);
        }
        w.numbers("samples_us", samples);
        w.integer("launches_per_sample", n);
        w.integer("input_sets", timeSets_);
    }

    // timeEager times plain launches, no graph: each sample is a batch of
    // launches between two events, so the host's launch cost counts as it
    // does for a framework calling the kernel eagerly. The batch holds at
    // least kMinEagerCalls launches (as torch_sdpa.py's eager loop) and
    // grows until it lasts min_sample_us.
    void timeEager(const Request& r, const std::vector<CUfunction>& fns, JsonWriter& w) {
        constexpr int kMinEagerCalls = 100;
        constexpr int kMaxLaunches = 4096;
        int n = kMinEagerCalls;
        double us = 0;  // one batch of the last size
        for (;;) {
            launchEager(r, fns, n);  // also a warm-up of the batch size
            RT(cudaStreamSynchronize(stream_));
            us = eagerMicros(r, fns, n);
            if (us >= r.minSampleUs || n >= kMaxLaunches) break;
            double want = r.minSampleUs * 1.2 / std::max(us, 1e-3);
            int grow = 2;
            while (grow < want && grow < kMaxLaunches) grow *= 2;
            n = std::min(n * grow, kMaxLaunches);
        }

        warmUp(r, us, [&] { launchEager(r, fns, n); });

        // Each sample waits for the previous one, so that a batch's launches
        // are not hidden behind a queue of earlier work.
        std::vector<double> samples;
        for (int i = 0; i < r.samples; i++) samples.push_back(eagerMicros(r, fns, n) / n);
        w.numbers("samples_us", samples);
        w.integer("launches_per_sample", n);
        w.integer("input_sets", timeSets_);
    }

    // launchEager enqueues calls plain launches over the rotating input sets.
    void launchEager(const Request& r, const std::vector<CUfunction>& fns, int calls) {
        size_t tensor = tensorStride_;
        for (int i = 0; i < calls; i++) {
            char* base = timeBuf_.get<char>() + static_cast<size_t>(i % timeSets_) * setStride_;
            SdpaParams p = params(r, base, base + tensor, base + 2 * tensor, base + 3 * tensor, timeScales_);
            launchPlan(r, fns, p);
        }
    }

    // eagerMicros is the time of one batch of calls plain launches between events.
    double eagerMicros(const Request& r, const std::vector<CUfunction>& fns, int calls) {
        cudaEvent_t a = nullptr, b = nullptr;
        RT(cudaEventCreate(&a));
        cudaError_t err = cudaEventCreate(&b);
        if (err != cudaSuccess) {
            cudaEventDestroy(a);
            RT(err);
        }
        float ms = 0;
        try {
            RT(cudaEventRecord(a, stream_));
            launchEager(r, fns, calls);
            RT(cudaEventRecord(b, stream_));
            RT(cudaEventSynchronize(b));
            RT(cudaEventElapsedTime(&ms, a, b));
        } catch (...) {
            cudaEventDestroy(a);
            cudaEventDestroy(b);
            throw;
        }
        cudaEventDestroy(a);
        cudaEventDestroy(b);
        return static_cast<double>(ms) * 1000.0;
    }

    // dumpReference writes the inputs and the reference of one case.
    void dumpReference(const Request& r, const std::string& dir) {
        init();
        CaseData& cd = caseData(r);
        size_t n = r.elems();
        auto write = [&](const char* name, const DeviceBuffer& b, size_t bytes) {
            std::vector<char> host(bytes);
            RT(cudaMemcpy(host.data(), b.get(), bytes, cudaMemcpyDeviceToHost));
            std::string path = dir + "/" + name;
            FILE* f = fopen(path.c_str(), "wb");
            if (f == nullptr) throw BadRequest(format("writing %s: %s", path.c_str(), strerror(errno)));
            size_t wrote = fwrite(host.data(), 1, bytes, f);
            if (fclose(f) != 0 || wrote != bytes) throw BadRequest(format("writing %s: short write", path.c_str()));
        };
        write("q.bin", cd.q, n * 2);
        write("k.bin", cd.k, n * 2);
        write("v.bin", cd.v, n * 2);
        write("ref.bin", cd.ref, n * 4);
        std::string meta = format("{\"shape\":{\"b\":%d,\"h\":%d,\"s\":%d,\"d\":%d},\"dtype\":\"%s\",\"causal\":%s,\"scale\":%.9g,"
                      "\"seed\":%llu,\"input_scale\":%.9g,\"layout\":\"bhsd\",\"files\":{\"q\":\"q.bin\",\"k\":\"k.bin\","
                      "\"v\":\"v.bin\",\"ref\":\"ref.bin\"},\"ref_dtype\":\"fp32\"}\n",
                      r.b, r.h, r.s, r.d, dtypeName(r.dtype), r.causal ? "true" : "false",
                      static_cast<double>(r.softmaxScale()), static_cast<unsigned long long>(r.seed), r.inputScale);
        std::string path = dir + "/meta.json";
        FILE* f = fopen(path.c_str(), "w");
        if (f == nullptr) throw BadRequest(format("writing %s: %s", path.c_str(), strerror(errno)));
        fputs(meta.c_str(), f);
        if (fclose(f) != 0) throw BadRequest(format("writing %s: %s", path.c_str(), strerror(errno)));
    }

    // recover is called after a failure: it ends a half-made capture so the
    // stream is usable again, and reports whether the context is lost.
    bool recover() {
        if (capturing_) {
            CUgraph g = nullptr;
            cuStreamEndCapture(reinterpret_cast<CUstream>(stream_), &g);
            if (g != nullptr) cuGraphDestroy(g);
            capturing_ = false;
        }
        if (!ready_) return false;
        cudaGetLastError();
        return cuCtxSynchronize() != CUDA_SUCCESS;
    }

private:
    // A GraphExec owns an instantiated graph.
    class GraphExec {
    public:
        GraphExec() = default;
        explicit GraphExec(CUgraphExec e) : e_(e) {}
        GraphExec(const GraphExec&) = delete;
        GraphExec& operator=(GraphExec&& o) noexcept {
            std::swap(e_, o.e_);
            return *this;
        }
        ~GraphExec() {
            if (e_ != nullptr) cuGraphExecDestroy(e_);
        }
        CUgraphExec get() const { return e_; }

    private:
        CUgraphExec e_ = nullptr;
    };

    bool ready_ = false;
    bool capturing_ = false;
    cudaStream_t stream_ = nullptr;
    int l2Bytes_ = 0;

    // The last cubin, identified by path, size and modification time so a
    // rewritten file is loaded again.
    CUmodule module_ = nullptr;
    std::string modulePath_;
    long long moduleSize_ = -1, moduleMtime_ = -1;
    std::map<std::string, CUfunction> functions_;

    std::list<CaseData> cases_;  // most recently used first
    DeviceBuffer out_, first_, workspace_, stats_;

    // Rotating input sets for timing: one allocation of timeSets_ sets.
    std::string timeKey_;
    DeviceBuffer timeBuf_;
    int timeSets_ = 0;
    size_t setStride_ = 0;     // bytes of one set: Q, K, V, then O
    size_t tensorStride_ = 0;  // bytes from one input tensor of a set to the next
    DeviceBuffer timeScaleBuf_;  // int8: the scales of every set (prepareTimeSets)
    InputScales timeScales_;     // what the timed kernel gets

    CUstream cuStream() const { return reinterpret_cast<CUstream>(stream_); }

    static struct stat statCubin(const Request& r) {
        struct stat sb;
        if (stat(r.cubin.c_str(), &sb) != 0) throw BadRequest(format("cubin %s: %s", r.cubin.c_str(), strerror(errno)));
        if (!S_ISREG(sb.st_mode)) throw BadRequest(format("cubin %s: not a regular file", r.cubin.c_str()));
        return sb;
    }

    std::vector<CUfunction> load(const Request& r) {
        struct stat sb = statCubin(r);
        init();
        long long mtime = static_cast<long long>(sb.st_mtim.tv_sec) * 1000000000LL + sb.st_mtim.tv_nsec;
        if (module_ == nullptr || modulePath_ != r.cubin || moduleSize_ != sb.st_size || moduleMtime_ != mtime) {
            if (module_ != nullptr) {
                CUmodule old = module_;
                module_ = nullptr;
                functions_.clear();
                CU(cuModuleUnload(old));
            }
            CUmodule m = nullptr;
            checkCu(cuModuleLoad(&m, r.cubin.c_str()), format("cuModuleLoad(%s)", r.cubin.c_str()));
            module_ = m;
            modulePath_ = r.cubin;
            moduleSize_ = sb.st_size;
            moduleMtime_ = mtime;
        }
        std::vector<CUfunction> fns;
        for (const LaunchSpec& l : r.launches) {
            auto it = functions_.find(l.kernel);
            CUfunction f = nullptr;
            if (it != functions_.end()) {
                f = it->second;
            } else {
                checkCu(cuModuleGetFunction(&f, module_, l.kernel.c_str()),
                        format("cuModuleGetFunction(%s in %s)", l.kernel.c_str(), r.cubin.c_str()));
                functions_[l.kernel] = f;
            }
            // Static and dynamic shared memory together beyond 48 KB need the
            // opt-in, whatever the split between the two.
            int static_smem = 0;
            checkCu(cuFuncGetAttribute(&static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f),
                    format("cuFuncGetAttribute(%s, SHARED_SIZE_BYTES)", l.kernel.c_str()));
            if (static_cast<unsigned>(static_smem) + l.smem > 48 * 1024)
                checkCu(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(l.smem)),
                        format("cuFuncSetAttribute(%s, MAX_DYNAMIC_SHARED_SIZE_BYTES, %u; %d bytes static)", l.kernel.c_str(),
                               l.smem, static_smem));
            fns.push_back(f);
        }
        return fns;
    }

    SdpaParams params(const Request& r, const void* q, const void* k, const void* v, void* o, const InputScales& sc) {
        SdpaParams p;
        memset(&p, 0, sizeof p);
        p.q = q;
        p.k = k;
        p.v = v;
        p.o = o;
        if (r.workspaceBytes > 0) {
            p.o_part = workspace_.get<float>();
            p.lse_part = reinterpret_cast<float*>(workspace_.get<char>() + r.lseOffsetBytes);
        }
        p.b = r.b;
        p.h = r.h;
        p.s = r.s;
        p.d = r.d;
        p.scale = r.softmaxScale();
        p.q_scale = sc.q;
        p.k_scale = sc.k;
        p.v_scale = sc.v;
        p.q_row_scale = sc.qRow;
        p.k_row_scale = sc.kRow;
        p.v_col_scale = sc.vCol;
        return p;
    }

    void launchPlan(const Request& r, const std::vector<CUfunction>& fns, SdpaParams& p) {
        void* args[] = {&p};
        for (size_t i = 0; i < fns.size(); i++) {
            const LaunchSpec& l = r.launches[i];
            CUresult res = cuLaunchKernel(fns[i], l.grid[0], l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.smem,
                                          cuStream(), args, nullptr);
            // The message is formatted only on failure: a timing graph holds thousands of launches.
            if (res != CUDA_SUCCESS)
                checkCu(res, format("cuLaunchKernel(%s, grid %ux%ux%u, block %ux%ux%u, smem %u)", l.kernel.c_str(), l.grid[0],
                           l.grid[1], l.grid[2], l.block[0], l.block[1], l.block[2], l.smem));
        }
    }

    // runOnce poisons the output and workspace with NaN bit patterns, runs
    // the candidate and waits for it: an element it does not write stays NaN.
    void runOnce(const Request& r, const std::vector<CUfunction>& fns, CaseData& cd, size_t outBytes) {
        RT(cudaMemsetAsync(out_.get(), 0xFF, outBytes, stream_));
        if (r.workspaceBytes > 0) RT(cudaMemsetAsync(workspace_.get(), 0xFF, static_cast<size_t>(r.workspaceBytes), stream_));
        SdpaParams p = params(r, cd.q.get(), cd.k.get(), r.vTransposed ? cd.vt.get() : cd.v.get(), out_.get(), cd.scales);
        launchPlan(r, fns, p);
        checkCu(cuStreamSynchronize(cuStream()), "cuStreamSynchronize(after the candidate's launches)");
    }

    template <typename T> void fill(T* dst, size_t n, uint64_t key, float scale, bool normal = false) {
        fillUniform<T><<<gridFor(n, 256), 256, 0, stream_>>>(dst, n, key, scale, normal);
        RT(cudaGetLastError());
    }

    // fillInputs fills Q, K and V in the input dtype for timing and for
    // fp16 and bf16 checks (fp8 and int8 checks quantise fp32 inputs,
    // caseData). fp8 timing inputs are E4M3 values of U(-scale, scale)
    // directly; int8 timing inputs are bytes of U(-127 scale, 127 scale)
    // rounded and clamped to [-127, 127], so that with scale 1 they spread
    // over the whole int8 range (prepareTimeSets gives them scales 1/127).
    // nv, where not 0, is V's count (fp8's V^T with its padding keys,
    // filled like the others: finite, and masked by the kernel).
    void fillInputs(Dtype dt, void* q, void* k, void* v, size_t n, uint64_t seed, float scale, bool normal = false,
                    size_t nv = 0) {
        if (dt == Dtype::FP8) {
            fill(static_cast<__nv_fp8_e4m3*>(q), n, tensorKey(seed, kTagQ), scale, normal);
            fill(static_cast<__nv_fp8_e4m3*>(k), n, tensorKey(seed, kTagK), scale, normal);
            fill(static_cast<__nv_fp8_e4m3*>(v), nv != 0 ? nv : n, tensorKey(seed, kTagV), scale, normal);
        } else if (dt == Dtype::INT8) {
            fill(static_cast<int8_t*>(q), n, tensorKey(seed, kTagQ), 127.0f * scale, normal);
            fill(static_cast<int8_t*>(k), n, tensorKey(seed, kTagK), 127.0f * scale, normal);
            fill(static_cast<int8_t*>(v), n, tensorKey(seed, kTagV), 127.0f * scale, normal);
        } else if (dt == Dtype::F16) {
            fill(static_cast<__half*>(q), n, tensorKey(seed, kTagQ), scale, normal);
            fill(static_cast<__half*>(k), n, tensorKey(seed, kTagK), scale, normal);
            fill(static_cast<__half*>(v), n, tensorKey(seed, kTagV), scale, normal);
        } else {
            fill(static_cast<__nv_bfloat16*>(q), n, tensorKey(seed, kTagQ), scale, normal);
            fill(static_cast<__nv_bfloat16*>(k), n, tensorKey(seed, kTagK), scale, normal);
            fill(static_cast<__nv_bfloat16*>(v), n, tensorKey(seed, kTagV), scale, normal);
        }
    }

    // amaxOf returns the largest |x| of n floats on the device.
    float amaxOf(const float* x, size_t n) {
        unsigned int bits = 0;
        RT(cudaMemsetAsync(stats_.get(), 0, sizeof bits, stream_));
        absMax<<<gridFor(n, 256), 256, 0, stream_>>>(x, n, stats_.get<unsigned int>());
        RT(cudaGetLastError());
        RT(cudaMemcpyAsync(&bits, stats_.get(), sizeof bits, cudaMemcpyDeviceToHost, stream_));
        RT(cudaStreamSynchronize(stream_));
        float amax;
        memcpy(&amax, &bits, sizeof amax);
        return amax;
    }

    // quantize fills raw with fp32 inputs of tag's stream and writes their
    // E4M3 quantisation by the tensor's amax to out; it returns the
    // dequantisation scale.
    float quantize(const Request& r, DeviceBuffer& raw, DeviceBuffer& out, uint64_t tag) {
        size_t n = r.elems();
        fill(raw.get<float>(), n, tensorKey(r.seed, tag), static_cast<float>(r.inputScale), r.normal);
        float amax = amaxOf(raw.get<float>(), n);
        float scale = amax > 0 ? amax / 448.0f : 1.0f;
        quantizeE4M3<<<gridFor(n, 256), 256, 0, stream_>>>(raw.get<float>(), out.get<__nv_fp8_e4m3>(), n, scale);
        RT(cudaGetLastError());
        return scale;
    }

    // quantizeInt8 fills raw with fp32 inputs of tag's stream (fp8's inputs
    // for the same request) and writes their INT8 quantisation to out and the
    // dequantisation scales to scales: by rows ([b, h, s] scales, Q and K) or,
    // with perColumn, by columns ([b, h, d] scales, V). It returns the
    // largest scale.
    float quantizeInt8(const Request& r, DeviceBuffer& raw, DeviceBuffer& out, DeviceBuffer& scales, uint64_t tag,
                       bool perColumn) {
        size_t n = r.elems();
        size_t heads = static_cast<size_t>(r.b) * r.h;
        fill(raw.get<float>(), n, tensorKey(r.seed, tag), static_cast<float>(r.inputScale), r.normal);
        size_t count = heads * (perColumn ? r.d : r.s);
        if (perColumn)
            quantizeColsInt8<<<gridFor(count, 256), 256, 0, stream_>>>(raw.get<float>(), out.get<int8_t>(), scales.get<float>(),
                                                                      heads, r.s, r.d);
        else  // 256 threads are 8 warps: 8 rows a block
            quantizeRowsInt8<<<gridFor(count, 256 / 32), 256, 0, stream_>>>(raw.get<float>(), out.get<int8_t>(),
                                                                           scales.get<float>(), count, r.d);
        RT(cudaGetLastError());
        return amaxOf(scales.get<float>(), count);  // scales are positive: the largest magnitude is the largest scale
    }

    // dequantizeInt8Into writes the values of int8 inputs (byte x scale) to
    // out, by rows or, with perColumn, by columns as quantizeInt8 scaled them.
    void dequantizeInt8Into(const Request& r, const DeviceBuffer& in, const DeviceBuffer& scales, DeviceBuffer& out,
                            bool perColumn) {
        size_t n = r.elems();
        dequantizeInt8<<<gridFor(n, 256), 256, 0, stream_>>>(in.get<int8_t>(), scales.get<float>(), out.get<float>(), n, r.s,
                                                             r.d, perColumn);
        RT(cudaGetLastError());
    }

    CaseData& caseData(const Request& r) {
        std::string key = caseKey(r);
        for (auto it = cases_.begin(); it != cases_.end(); ++it) {
            if (it->key == key) {
                cases_.splice(cases_.begin(), cases_, it);
                return cases_.front();
            }
        }
        size_t n = r.elems();
        size_t heads = static_cast<size_t>(r.b) * r.h;
        size_t rows = heads * r.s;
        size_t smem = (2 * static_cast<size_t>(r.d) + kRefThreads + 32) * sizeof(float);
        if (smem > 48 * 1024) throw BadRequest(format("head dimension %d is too large for the reference", r.d));
        // Evict least recently used cases beyond a budget of 1 GiB or 64 cases
        // (fp8 checks up to 7 shapes x 3 input scales x 3 seeds = 63).
        size_t need = n * r.inElemBytes() * 3 + n * 4 * (quantized(r.dtype) ? 2 : 1) + (r.vTransposed ? r.vElems() : 0);
        if (r.dtype == Dtype::INT8) need += (2 * rows + heads * r.d) * sizeof(float);
        size_t total = need;
        for (const CaseData& c : cases_) total += c.bytes();
        while (!cases_.empty() && (total > (1ull << 30) || cases_.size() >= 64)) {
            total -= cases_.back().bytes();
            cases_.pop_back();
        }
        CaseData cd;
        cd.key = key;
        cd.q.allocate(n * r.inElemBytes(), "check Q");
        cd.k.allocate(n * r.inElemBytes(), "check K");
        cd.v.allocate(n * r.inElemBytes(), "check V");
        cd.ref.allocate(n * 4, "reference O");
        stats_.reserve(sizeof(CompareStats), "compare stats");
        unsigned blocks = static_cast<unsigned>(std::min<size_t>(rows, 1u << 20));
        float scale = r.softmaxScale();
        // referenceF32 computes o from fp32 inputs.
        auto referenceF32 = [&](const DeviceBuffer& q, const DeviceBuffer& k, const DeviceBuffer& v, DeviceBuffer& o) {
            referenceAttention<float><<<blocks, kRefThreads, smem, stream_>>>(q.get<float>(), k.get<float>(), v.get<float>(),
                                                                              o.get<float>(), rows, r.s, r.d, scale, r.causal);
            RT(cudaGetLastError());
        };
        // The unquantised inputs of fp8 and int8; freed only after the
        // synchronisation below, when no kernel reads them any more.
        DeviceBuffer rawQ, rawK, rawV;
        if (quantized(r.dtype)) {
            cd.refRaw.allocate(n * 4, "unquantised reference O");
            rawQ.allocate(n * 4, "unquantised Q");
            rawK.allocate(n * 4, "unquantised K");
            rawV.allocate(n * 4, "unquantised V");
        }
        if (r.dtype == Dtype::FP8) {
            cd.qs = quantize(r, rawQ, cd.q, kTagQ);
            cd.ks = quantize(r, rawK, cd.k, kTagK);
            cd.vs = quantize(r, rawV, cd.v, kTagV);
            cd.scales.q = cd.qs;
            cd.scales.k = cd.ks;
            cd.scales.v = cd.vs;
            referenceAttention<__nv_fp8_e4m3><<<blocks, kRefThreads, smem, stream_>>>(
                cd.q.get<__nv_fp8_e4m3>(), cd.k.get<__nv_fp8_e4m3>(), cd.v.get<__nv_fp8_e4m3>(), cd.ref.get<float>(), rows, r.s,
                r.d, scale, r.causal, cd.qs, cd.ks, cd.vs);
            RT(cudaGetLastError());
            referenceF32(rawQ, rawK, rawV, cd.refRaw);
            if (r.vTransposed) {
                cd.vt.allocate(r.vElems(), "check V^T");
                transposeBytes<<<gridFor(r.vElems(), 256), 256, 0, stream_>>>(cd.v.get<uint8_t>(), cd.vt.get<uint8_t>(), heads, r.s,
                                                                               r.vPad(), r.d);
                RT(cudaGetLastError());
            }
        } else if (r.dtype == Dtype::INT8) {
            cd.qRowScale.allocate(rows * sizeof(float), "int8 Q row scales");
            cd.kRowScale.allocate(rows * sizeof(float), "int8 K row scales");
            cd.vColScale.allocate(heads * r.d * sizeof(float), "int8 V column scales");
            cd.qs = quantizeInt8(r, rawQ, cd.q, cd.qRowScale, kTagQ, false);
            cd.ks = quantizeInt8(r, rawK, cd.k, cd.kRowScale, kTagK, false);
            cd.vs = quantizeInt8(r, rawV, cd.v, cd.vColScale, kTagV, true);
            cd.scales.qRow = cd.qRowScale.get<float>();
            cd.scales.kRow = cd.kRowScale.get<float>();
            cd.scales.vCol = cd.vColScale.get<float>();
            referenceF32(rawQ, rawK, rawV, cd.refRaw);
            // The unquantised inputs' buffers, read by now in stream order,
            // take the dequantised inputs for the reference on those.
            dequantizeInt8Into(r, cd.q, cd.qRowScale, rawQ, false);
            dequantizeInt8Into(r, cd.k, cd.kRowScale, rawK, false);
            dequantizeInt8Into(r, cd.v, cd.vColScale, rawV, true);
            referenceF32(rawQ, rawK, rawV, cd.ref);
        } else {
            fillInputs(r.dtype, cd.q.get(), cd.k.get(), cd.v.get(), n, r.seed, static_cast<float>(r.inputScale), r.normal);
            if (r.dtype == Dtype::F16)
                referenceAttention<__half><<<blocks, kRefThreads, smem, stream_>>>(
                    cd.q.get<__half>(), cd.k.get<__half>(), cd.v.get<__half>(), cd.ref.get<float>(), rows, r.s, r.d, scale,
                    r.causal);
            else
                referenceAttention<__nv_bfloat16><<<blocks, kRefThreads, smem, stream_>>>(
                    cd.q.get<__nv_bfloat16>(), cd.k.get<__nv_bfloat16>(), cd.v.get<__nv_bfloat16>(), cd.ref.get<float>(), rows,
                    r.s, r.d, scale, r.causal);
            RT(cudaGetLastError());
        }
        RT(cudaStreamSynchronize(stream_));
        cases_.push_front(std::move(cd));
        return cases_.front();
    }

    // prepareTimeSets allocates enough input sets that one pass over them
    // exceeds twice the L2 size, so each call reads its inputs from memory
    // as it would in a real model; no_rotate keeps one L2-hot set.
    //
    // int8's scale arrays, every scale 1/127 so that the bytes stand for
    // U(-1, 1) as the other dtypes' timing inputs do, are kept once for all
    // the sets, not rotated: Q's and K's row scales are 4/d of their bytes
    // and V's column scales 4/s of V's, so rotating them would change little
    // of the traffic.
    void prepareTimeSets(const Request& r) {
        size_t n = r.elems();
        // Every tensor of a set takes the largest one's room (V^T's padded keys).
        size_t tensor = (std::max(n, r.vElems()) * r.inElemBytes() + 255) / 256 * 256;
        size_t setBytes = 3 * tensor + (n * 2 + 255) / 256 * 256;
        std::string key = format("%dx%dx%dx%d/%s/%d/%d", r.b, r.h, r.s, r.d, dtypeName(r.dtype), r.noRotate ? 1 : 0,
                                 r.vTransposed ? 1 : 0);
        if (key == timeKey_) return;
        timeKey_.clear();
        timeBuf_.release();
        timeScaleBuf_.release();
        timeScales_ = InputScales();
        size_t freeBytes = 0, totalBytes = 0;
        RT(cudaMemGetInfo(&freeBytes, &totalBytes));
        size_t cap = std::min<size_t>(2ull << 30, freeBytes / 2);
        size_t sets = 1;
        if (!r.noRotate) {
            sets = 2 * static_cast<size_t>(l2Bytes_) / setBytes + 1;
            sets = std::max<size_t>(1, std::min(sets, cap / setBytes));
        }
        timeBuf_.allocate(sets * setBytes, "timing input sets");
        for (size_t i = 0; i < sets; i++) {
            char* base = timeBuf_.get<char>() + i * setBytes;
            fillInputs(r.dtype, base, base + tensor, base + 2 * tensor, n, 0x7157ull + i, 1.0f, false, r.vElems());
            RT(cudaMemsetAsync(base + 3 * tensor, 0, n * 2, stream_));
        }
        if (r.dtype == Dtype::INT8) {
            size_t heads = static_cast<size_t>(r.b) * r.h;
            // Q's row scales, K's and V's column scales, each array from a
            // multiple of 256 bytes as cudaMalloc aligns the check cases'.
            size_t rowBytes = (heads * r.s * sizeof(float) + 255) / 256 * 256;
            size_t bytes = 2 * rowBytes + heads * r.d * sizeof(float);
            timeScaleBuf_.allocate(bytes, "timing int8 scales");
            size_t count = bytes / sizeof(float);
            fillConstant<<<gridFor(count, 256), 256, 0, stream_>>>(timeScaleBuf_.get<float>(), count, 1.0f / 127.0f);
            RT(cudaGetLastError());
            const char* base = timeScaleBuf_.get<char>();
            timeScales_.qRow = reinterpret_cast<const float*>(base);
            timeScales_.kRow = reinterpret_cast<const float*>(base + rowBytes);
            timeScales_.vCol = reinterpret_cast<const float*>(base + 2 * rowBytes);
        }
        RT(cudaStreamSynchronize(stream_));
        timeKey_ = key;
        timeSets_ = static_cast<int>(sets);
        setStride_ = setBytes;
        tensorStride_ = tensor;
    }

    GraphExec capture(const Request& r, const std::vector<CUfunction>& fns, int calls) {
        size_t tensor = tensorStride_;
        CU(cuStreamBeginCapture(cuStream(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        capturing_ = true;
        for (int i = 0; i < calls; i++) {
            char* base = timeBuf_.get<char>() + static_cast<size_t>(i % timeSets_) * setStride_;
            SdpaParams p = params(r, base, base + tensor, base + 2 * tensor, base + 3 * tensor, timeScales_);
            launchPlan(r, fns, p);
        }
        CUgraph g = nullptr;
        capturing_ = false;
        CU(cuStreamEndCapture(cuStream(), &g));
        CUgraphExec e = nullptr;
        CUresult res = cuGraphInstantiateWithFlags(&e, g, 0);
        cuGraphDestroy(g);
        checkCu(res, format("cuGraphInstantiateWithFlags(%d calls)", calls));
        return GraphExec(e);
    }

    void launchGraph(const GraphExec& e) { CU(cuGraphLaunch(e.get(), cuStream())); }

    // warmUp runs launch (one sample's worth of work) and waits for it, at
    // least r.warmup times and for as long as the samples of sampleUs each
    // will take, between 20 ms and 2 s. A GPU that idled while candidates
    // compiled starts a long kernel at its top boost clock and reaches its
    // power limit only after tens of milliseconds; 20 ms alone left the
    // samples of a 1 ms kernel split between the two clocks
    // (kernels/NOTES.md, "Timing long kernels").
    template <class Launch>
    void warmUp(const Request& r, double sampleUs, Launch launch) {
        const double warmMs = std::min(2000.0, std::max(20.0, r.samples * sampleUs / 1000.0));
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0;; i++) {
            launch();
            RT(cudaStreamSynchronize(stream_));
            double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            if (i + 1 >= r.warmup && ms >= warmMs) break;
        }
    }

    double replayMicros(const GraphExec& e) {
        cudaEvent_t a = nullptr, b = nullptr;
        RT(cudaEventCreate(&a));
        cudaError_t err = cudaEventCreate(&b);
        if (err != cudaSuccess) {
            cudaEventDestroy(a);
            RT(err);
        }
        float ms = 0;
        try {
            RT(cudaEventRecord(a, stream_));
            launchGraph(e);
            RT(cudaEventRecord(b, stream_));
            RT(cudaEventSynchronize(b));
            RT(cudaEventElapsedTime(&ms, a, b));
        } catch (...) {
            cudaEventDestroy(a);
            cudaEventDestroy(b);
            throw;
        }
        cudaEventDestroy(a);
        cudaEventDestroy(b);
        return static_cast<double>(ms) * 1000.0;
    }
};

// ---------------------------------------------------------------------------
// Main loop

// serve answers one request line. It returns the response line and sets
// exitCode to >= 0 when the worker must exit after writing it.
std::string serve(Worker& worker, const std::string& line, int& exitCode) {
    long long id = 0;
    JsonWriter w;
    try {
        Json j = JsonParser(line).parse();
        if (j.kind == Json::Object) {
            // The id first, so that a later field's error still answers the right request.
            id = getInt(j, "id", 0, INT64_MIN, INT64_MAX);
        }
        Request r = parseRequest(j);
        w.integer("id", id);
        if (r.op == "info") {
            worker.info(w);
        } else if (r.op == "check") {
            worker.check(r, w);
        } else if (r.op == "time") {
            worker.time(r, w);
        } else if (r.op == "quit") {
            exitCode = 0;
        }
        return w.finish();
    } catch (const CudaFailure& e) {
        bool lost = worker.recover();
        bool sticky = e.sticky || lost;
        fprintf(stderr, "worker: request %lld: %s%s\n", id, e.what(), sticky ? " (context lost)" : "");
        JsonWriter ew;
        ew.integer("id", id);
        ew.str("error", e.what());
        if (sticky) {
            ew.boolean("sticky", true);
            exitCode = 3;
        }
        return ew.finish();
    } catch (const std::exception& e) {
        bool lost = worker.recover();
        JsonWriter ew;
        ew.integer("id", id);
        ew.str("error", e.what());
        if (lost) {
            ew.boolean("sticky", true);
            exitCode = 3;
        }
        return ew.finish();
    }
}

int dumpMain(int argc, char** argv) {
    Request r;
    std::string dir;
    std::string shape;
    std::string dtype = "fp16";
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                fprintf(stderr, "worker: %s needs a value\n", a.c_str());
                exit(2);
            }
            return argv[++i];
        };
        if (a == "--dump-ref") dir = next();
        else if (a == "--shape") shape = next();
        else if (a == "--dtype") dtype = next();
        else if (a == "--seed") r.seed = strtoull(next().c_str(), nullptr, 10);
        else if (a == "--scale") r.scale = atof(next().c_str());
        else if (a == "--input-scale") r.inputScale = atof(next().c_str());
        else if (a == "--causal") r.causal = true;
        else {
            fprintf(stderr, "worker: unknown argument %s\nusage: worker --dump-ref DIR --shape BxHxSxD [--dtype fp16|bf16] [--seed N] [--causal] [--scale X] [--input-scale X]\n", a.c_str());
            return 2;
        }
    }
    try {
        if (dir.empty()) throw BadRequest("--dump-ref: want a directory");
        if (sscanf(shape.c_str(), "%dx%dx%dx%d", &r.b, &r.h, &r.s, &r.d) != 4) throw BadRequest(format("--shape %s: want BxHxSxD", shape.c_str()));
        checkShape(r.b, r.h, r.s, r.d);
        r.dtype = parseDtype(dtype, "--dtype");
        if (quantized(r.dtype)) throw BadRequest(format("--dtype %s: --dump-ref writes fp16 and bf16 cases only", dtype.c_str()));
        r.outDtype = r.dtype;
        if (!(r.inputScale > 0)) throw BadRequest("--input-scale: must be positive");
        Worker worker;
        worker.dumpReference(r, dir);
    } catch (const std::exception& e) {
        fprintf(stderr, "worker: %s\n", e.what());
        return 1;
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1) return dumpMain(argc, argv);

    // The protocol owns the real stdout; anything else that writes to fd 1
    // (a candidate's device printf, a library) lands on stderr instead of
    // corrupting the response stream.
    int protoFd = dup(STDOUT_FILENO);
    if (protoFd < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
        perror("worker: redirecting stdout");
        return 1;
    }
    FILE* proto = fdopen(protoFd, "w");
    if (proto == nullptr) {
        perror("worker: fdopen");
        return 1;
    }
    int exitCode = -1;
    {
        Worker worker;
        std::string line;
        while (exitCode < 0 && std::getline(std::cin, line)) {
            if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
            std::string resp = serve(worker, line, exitCode);
            resp += '\n';
            if (fwrite(resp.data(), 1, resp.size(), proto) != resp.size() || fflush(proto) != 0) {
                perror("worker: writing a response");
                _exit(1);
            }
            // A lost context can hang teardown; leave without it.
            if (exitCode > 0) _exit(exitCode);
        }
    }
    fclose(proto);
    return exitCode > 0 ? exitCode : 0;
}
