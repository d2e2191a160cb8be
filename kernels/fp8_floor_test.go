package kernels

import (
	"math/rand/v2"
	"testing"

	"evotune/kernels/internal/fp8model"
)

// TestFP8GateAboveFloor checks ToleranceFor's claim for fp8 against the
// exact model: at 1x1x512x64 on N(0,1), attention on the E4M3-rounded
// inputs (per-tensor amax scales, as the worker quantises) leaves at least
// 2x its own error to the kernel within E2ECos and E2ERelL1, and the whole
// rounding pipeline (P in fp16 or in E4M3) passes the gate. A gate tightened
// below the floor would fail every fp8 candidate on its inputs alone.
func TestFP8GateAboveFloor(t *testing.T) {
	const s, d = 512, 64
	rng := rand.New(rand.NewPCG(13, 1))
	draw := func() fp8model.Matrix {
		m := fp8model.NewMatrix(s, d)
		for i := range m.Data {
			m.Data[i] = rng.NormFloat64()
		}
		return m
	}
	q, k, v := draw(), draw(), draw()
	rows := make([]int, s)
	for i := range rows {
		rows[i] = i
	}
	e4m3 := fp8model.Quantizer{Format: fp8model.FP8, Scale: fp8model.PerTensor}
	qq, kq, vq := e4m3.Apply(q, fp8model.Amax(q.Data)), e4m3.Apply(k, fp8model.Amax(k.Data)), e4m3.Apply(v, fp8model.Amax(v.Data))
	ref := fp8model.Attention(q, k, v, rows, false, fp8model.Exact)
	gate := ToleranceFor("fp8", "")
	for _, c := range []struct {
		name   string
		p      fp8model.Format
		margin float64
	}{
		{"inputs alone", fp8model.Exact, 2},
		{"pv_fp8=0 (P fp16)", fp8model.FP16, 1},
		{"pv_fp8=1 (P E4M3)", fp8model.FP8, 1},
	} {
		var e fp8model.Errors
		e.Add(fp8model.Attention(qq, kq, vq, rows, false, c.p).Data, ref.Data)
		if c.margin*(1-e.Cos()) > 1-gate.E2ECos || c.margin*e.RelL1() > gate.E2ERelL1 {
			t.Errorf("%s: the model's floor is cosine %.5f, relative L1 %.4f; the gate (cosine >= %g, relative L1 <= %g) leaves less than %gx that error",
				c.name, e.Cos(), e.RelL1(), gate.E2ECos, gate.E2ERelL1, c.margin)
		}
		t.Logf("%s: cosine %.5f, relative L1 %.4f", c.name, e.Cos(), e.RelL1())
	}
}

// TestInt8GateAboveFloor checks ToleranceFor's claim for int8 against the
// exact model: at 1x1x512x64 on N(0,1), attention on the INT8-rounded
// inputs (per-row Q and K and per-column V amax scales, as the worker
// quantises) leaves at least 3x its own error to the kernel within E2ECos
// and E2ERelL1, and with P in fp16, as the kernel rounds it, passes the gate.
func TestInt8GateAboveFloor(t *testing.T) {
	const s, d = 512, 64
	rng := rand.New(rand.NewPCG(13, 2))
	draw := func() fp8model.Matrix {
		m := fp8model.NewMatrix(s, d)
		for i := range m.Data {
			m.Data[i] = rng.NormFloat64()
		}
		return m
	}
	q, k, v := draw(), draw(), draw()
	rows := make([]int, s)
	for i := range rows {
		rows[i] = i
	}
	row := fp8model.Quantizer{Format: fp8model.Int8, Scale: fp8model.PerBlock, Block: 1}
	col := fp8model.Quantizer{Format: fp8model.Int8, Scale: fp8model.PerChannel}
	qq, kq, vq := row.Apply(q, 0), row.Apply(k, 0), col.Apply(v, 0)
	ref := fp8model.Attention(q, k, v, rows, false, fp8model.Exact)
	gate := ToleranceFor("int8", "")
	for _, c := range []struct {
		name   string
		p      fp8model.Format
		margin float64
	}{
		{"inputs alone", fp8model.Exact, 3},
		{"P fp16", fp8model.FP16, 1},
	} {
		var e fp8model.Errors
		e.Add(fp8model.Attention(qq, kq, vq, rows, false, c.p).Data, ref.Data)
		if c.margin*(1-e.Cos()) > 1-gate.E2ECos || c.margin*e.RelL1() > gate.E2ERelL1 {
			t.Errorf("%s: the model's floor is cosine %.6f, relative L1 %.4f; the gate (cosine >= %g, relative L1 <= %g) leaves less than %gx that error",
				c.name, e.Cos(), e.RelL1(), gate.E2ECos, gate.E2ERelL1, c.margin)
		}
		t.Logf("%s: cosine %.6f, relative L1 %.4f", c.name, e.Cos(), e.RelL1())
	}
}
