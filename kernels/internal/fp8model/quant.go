package fp8model

import (
	"fmt"
	"math"
)

// A Matrix is one head's operand: Rows tokens of Cols channels, row-major.
type Matrix struct {
	Rows, Cols int
	Data       []float64
}

// NewMatrix returns a zero rows x cols matrix.
func NewMatrix(rows, cols int) Matrix {
	return Matrix{Rows: rows, Cols: cols, Data: make([]float64, rows*cols)}
}

// Row returns row i, sharing m's storage.
func (m Matrix) Row(i int) []float64 { return m.Data[i*m.Cols : (i+1)*m.Cols] }

// Amax is the largest magnitude in xs (0 for none).
func Amax(xs []float64) float64 {
	a := 0.0
	for _, x := range xs {
		a = math.Max(a, math.Abs(x))
	}
	return a
}

// Smooth returns m with each channel's mean over its rows subtracted. For K
// it changes no attention output: every score of a query row moves by the
// same q . mean, which the softmax takes out. It narrows K's range when K's
// channels have offsets (SageAttention's smoothing).
func Smooth(m Matrix) Matrix {
	out := NewMatrix(m.Rows, m.Cols)
	for c := 0; c < m.Cols; c++ {
		sum := 0.0
		for r := 0; r < m.Rows; r++ {
			sum += m.Data[r*m.Cols+c]
		}
		mean := sum / float64(m.Rows)
		for r := 0; r < m.Rows; r++ {
			out.Data[r*m.Cols+c] = m.Data[r*m.Cols+c] - mean
		}
	}
	return out
}

// A Format is the number format an operand reaches a product in.
type Format int

const (
	// Exact leaves the operand in float64.
	Exact Format = iota
	// FP16 rounds to half precision; it needs no scale.
	FP16
	// FP8 is E4M3 with a dequantisation scale amax / 448.
	FP8
	// Int8 is symmetric INT8 with a dequantisation scale amax / 127.
	Int8
)

func (f Format) String() string {
	switch f {
	case Exact:
		return "exact"
	case FP16:
		return "fp16"
	case FP8:
		return "E4M3"
	case Int8:
		return "INT8"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// A Granularity is what one dequantisation scale covers.
type Granularity int

const (
	// PerTensor is one scale for the whole tensor, every batch and head:
	// what the worker hands the fp8 kernel today.
	PerTensor Granularity = iota
	// PerBlock is one scale per Block consecutive rows (tokens) of a head:
	// for Q and K it folds into the scores of one tile pair, for V into the
	// P V product of one key tile.
	PerBlock
	// PerChannel is one scale per column of a head over all its rows: for V
	// it folds into O's columns after the P V sum.
	PerChannel
)

// A Quantizer says how one operand reaches the kernel.
type Quantizer struct {
	Format Format
	Scale  Granularity
	Block  int  // rows per scale, with PerBlock
	Smooth bool // subtract each channel's mean over the head's rows first (K)
}

// String names the quantiser the way the floor table does.
func (q Quantizer) String() string {
	s := q.Format.String()
	if q.Format == FP8 || q.Format == Int8 {
		switch q.Scale {
		case PerTensor:
			s += " tensor"
		case PerBlock:
			s += fmt.Sprintf(" b%d", q.Block)
		case PerChannel:
			s += " channel"
		}
	}
	if q.Smooth {
		s += " smooth"
	}
	return s
}

// Apply returns one head's operand m as the kernel would see it,
// dequantised. tensorAmax is the largest magnitude over the whole tensor,
// after smoothing when q smooths; only PerTensor reads it.
func (q Quantizer) Apply(m Matrix, tensorAmax float64) Matrix {
	if q.Smooth {
		m = Smooth(m)
	}
	out := NewMatrix(m.Rows, m.Cols)
	switch {
	case q.Format == Exact:
		copy(out.Data, m.Data)
	case q.Format == FP16:
		for i, x := range m.Data {
			out.Data[i] = RoundFP16(x)
		}
	case q.Scale == PerTensor:
		q.round(out.Data, m.Data, tensorAmax)
	case q.Scale == PerBlock:
		for r0 := 0; r0 < m.Rows; r0 += q.Block {
			lo, hi := r0*m.Cols, min(r0+q.Block, m.Rows)*m.Cols
			q.round(out.Data[lo:hi], m.Data[lo:hi], Amax(m.Data[lo:hi]))
		}
	case q.Scale == PerChannel:
		col, rounded := make([]float64, m.Rows), make([]float64, m.Rows)
		for c := 0; c < m.Cols; c++ {
			for r := range col {
				col[r] = m.Data[r*m.Cols+c]
			}
			q.round(rounded, col, Amax(col))
			for r, x := range rounded {
				out.Data[r*m.Cols+c] = x
			}
		}
	}
	return out
}

// round writes xs quantised with one scale for amax and dequantised into
// dst.
func (q Quantizer) round(dst, xs []float64, amax float64) {
	if amax == 0 {
		copy(dst, xs)
		return
	}
	if q.Format == Int8 {
		scale := amax / int8MaxCode
		for i, x := range xs {
			dst[i] = float64(QuantizeInt8(x, scale)) * scale
		}
		return
	}
	scale := amax / E4M3Max
	for i, x := range xs {
		dst[i] = RoundE4M3(x/scale) * scale
	}
}
