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

// TestInt8GateAboveFloor checks int8's end-to-end gate against the exact
// model at 1x1x512x64: attention on the INT8-rounded inputs (per-row Q and
// K and per-column V amax scales, as the worker quantises), exact or with P
// in fp16 as the kernel rounds it, leaves the kernel at least 3x its own
// error within E2ECos and E2ERelL1 on U(-1, 1) inputs, the check cases'
// draw where the gate applies, and still passes with 1.5x room on N(0,1),
// whose tails make the per-row steps coarser.
func TestInt8GateAboveFloor(t *testing.T) {
	const s, d = 512, 64
	rng := rand.New(rand.NewPCG(13, 2))
	rows := make([]int, s)
	for i := range rows {
		rows[i] = i
	}
	row := fp8model.Quantizer{Format: fp8model.Int8, Scale: fp8model.PerBlock, Block: 1}
	col := fp8model.Quantizer{Format: fp8model.Int8, Scale: fp8model.PerChannel}
	gate := ToleranceFor("int8", "")
	for _, dist := range []struct {
		name   string
		draw   func() float64
		margin float64
	}{
		{"U(-1, 1)", func() float64 { return 2*rng.Float64() - 1 }, 3},
		{"N(0, 1)", rng.NormFloat64, 1.5},
	} {
		draw := func() fp8model.Matrix {
			m := fp8model.NewMatrix(s, d)
			for i := range m.Data {
				m.Data[i] = dist.draw()
			}
			return m
		}
		q, k, v := draw(), draw(), draw()
		qq, kq, vq := row.Apply(q, 0), row.Apply(k, 0), col.Apply(v, 0)
		ref := fp8model.Attention(q, k, v, rows, false, fp8model.Exact)
		for _, p := range []fp8model.Format{fp8model.Exact, fp8model.FP16} {
			var e fp8model.Errors
			e.Add(fp8model.Attention(qq, kq, vq, rows, false, p).Data, ref.Data)
			if dist.margin*(1-e.Cos()) > 1-gate.E2ECos || dist.margin*e.RelL1() > gate.E2ERelL1 {
				t.Errorf("%s, P %v: the model's floor is cosine %.6f, relative L1 %.4f; the gate (cosine >= %g, relative L1 <= %g) leaves less than %gx that error",
					dist.name, p, e.Cos(), e.RelL1(), gate.E2ECos, gate.E2ERelL1, dist.margin)
			}
			t.Logf("%s, P %v: cosine %.6f, relative L1 %.4f", dist.name, p, e.Cos(), e.RelL1())
		}
	}
}
