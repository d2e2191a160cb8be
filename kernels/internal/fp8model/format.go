// Package fp8model is an exact CPU model of the number formats on the fp8
// SDPA path (kernels/sdpa.cu built with SDPA_FP8): E4M3 rounding as the
// kernel's cvt.rn.satfinite does it, fp16 rounding, INT8 symmetric
// quantisation, the scale granularities a kernel could take (per tensor, per
// block of rows, per channel, with K smoothing), and exact attention in
// float64 on the dequantised operands. It answers what no GPU run can: how
// accurate any kernel fed such inputs can be, since a kernel's end-to-end
// error mixes its own rounding with its inputs'.
//
// It is a package of its own under kernels/internal, not a test file of
// kernels, because two programs use it: the floor measurement
// (kernels/internal/fp8floor) and kernels' test that the fp8 gate sits above
// the floor. Nothing in the evotune binary imports it.
package fp8model

import "math"

// E4M3 is an OCP 8-bit float code: a sign bit, 4 exponent bits (bias 7) and
// 3 mantissa bits. It has no infinities: S.1111.111 (0x7f, 0xff) is NaN, so
// the largest finite value is 0x7e = 1.75 * 2^8 = 448. Exponent field 0 holds
// the subnormals m * 2^-9.
type E4M3 uint8

// E4M3Max is the largest finite E4M3 value; the dequantisation scale of a
// per-tensor amax quantiser is amax / E4M3Max.
const E4M3Max = 448.0

// E4M3NaN is the positive NaN code.
const E4M3NaN E4M3 = 0x7f

const (
	e4m3MantBits   = 3
	e4m3MinExp     = -6 // the smallest normal is 2^-6; subnormals have its spacing
	fp16MantBits   = 10
	fp16MinExp     = -14
	fp16MaxFinite  = 65504.0
	int8MaxCode    = 127 // symmetric: -128 is never used
	e4m3MaxCodeMag = 0x7e
)

// Float64 decodes c by the format's definition.
func (c E4M3) Float64() float64 {
	sign := 1.0
	if c&0x80 != 0 {
		sign = -1
	}
	exp, mant := int(c>>3)&0xf, float64(c&7)
	switch {
	case exp == 0xf && c&7 == 7:
		return math.NaN()
	case exp == 0:
		return sign * math.Ldexp(mant, e4m3MinExp-e4m3MantBits)
	default:
		return sign * math.Ldexp(1+mant/8, exp-7)
	}
}

// EncodeE4M3 rounds x to the nearest E4M3 value, ties to the even code, and
// saturates at +-448, as PTX's cvt.rn.satfinite.e4m3x2.f32 does: anything of
// magnitude 448 or more, infinities included, becomes +-448, and NaN stays
// NaN.
func EncodeE4M3(x float64) E4M3 {
	if math.IsNaN(x) {
		return E4M3NaN
	}
	var sign E4M3
	if math.Signbit(x) {
		sign, x = 0x80, -x
	}
	r := roundToFormat(x, e4m3MantBits, e4m3MinExp)
	if r >= E4M3Max {
		return sign | e4m3MaxCodeMag
	}
	// Codes are monotone in the value: the subnormal m * 2^-9 is code m, and
	// m = 8 would be 2^-6, the first normal code.
	if r < math.Ldexp(1, e4m3MinExp) {
		return sign | E4M3(math.Ldexp(r, e4m3MantBits-e4m3MinExp))
	}
	frac, exp := math.Frexp(r) // r = frac * 2^exp, frac in [0.5, 1)
	mant := E4M3(math.Ldexp(frac, 1+e4m3MantBits)) - 8
	return sign | E4M3(exp-1+7)<<3 | mant
}

// RoundE4M3 is x rounded to E4M3 and decoded again.
func RoundE4M3(x float64) float64 { return EncodeE4M3(x).Float64() }

// RoundFP16 rounds x to the nearest IEEE half-precision value, ties to even,
// with subnormals; beyond the largest finite value it gives an infinity, as
// cvt.rn.f16.f32 does.
func RoundFP16(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	// Rounded with an unbounded exponent, anything from half an ulp above
	// the largest finite value (65520) comes out as 2^16: infinity in fp16.
	r := roundToFormat(math.Abs(x), fp16MantBits, fp16MinExp)
	if r > fp16MaxFinite {
		r = math.Inf(1)
	}
	return math.Copysign(r, x)
}

// QuantizeInt8 is symmetric INT8 quantisation with dequantisation scale
// scale: x / scale rounded to the nearest integer (ties to even, as
// cvt.rni does) and clamped to [-127, 127].
func QuantizeInt8(x, scale float64) int8 {
	q := math.RoundToEven(x / scale)
	return int8(math.Max(-int8MaxCode, math.Min(int8MaxCode, q)))
}

// roundToFormat rounds x >= 0 to the nearest value with mantBits fraction
// bits, ties to even, where exponents below minExp keep minExp's spacing
// (subnormals). Exponents above are unbounded: callers saturate or overflow.
// Dividing by a power of two is exact, so the only rounding is
// math.RoundToEven's, and an even integer there is an even code: within a
// binade the integer is the mantissa plus 2^mantBits, and a tie at the top of
// one rounds up to the next power of two, mantissa 0.
func roundToFormat(x float64, mantBits, minExp int) float64 {
	if x == 0 || math.IsInf(x, 0) {
		return x
	}
	_, exp := math.Frexp(x) // x in [2^(exp-1), 2^exp)
	quantum := math.Ldexp(1, max(exp-1, minExp)-mantBits)
	return math.RoundToEven(x/quantum) * quantum
}
