package elites

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"evotune/space"
)

// The index's results are written in a fixed layout of their own rather
// than with a generic encoder: opening an archive of 100,000 results must
// take well under a second, and a reflective decoder spends most of that
// allocating (gob: 6 million allocations, 0.75 s). Every string of the
// index (keys, knob names and values, flags, the environment) is written
// once in a table and decoded into one string that the results share, and
// the small structs they point to are carved out of shared slabs. A config
// is written as its key where the key gives it back (see compact). codecFields (in the test)
// fails when space.Result gains a field that this layout does not carry.

// indexEncoder appends the index's layout to buf.
type indexEncoder struct {
	buf     []byte
	strs    map[string]uint64
	table   []string
	probs   []*space.Problem
	scratch []byte
}

func (e *indexEncoder) uvarint(v uint64) { e.buf = binary.AppendUvarint(e.buf, v) }
func (e *indexEncoder) varint(v int64)   { e.buf = binary.AppendVarint(e.buf, v) }
func (e *indexEncoder) float(f float64) {
	e.buf = binary.LittleEndian.AppendUint64(e.buf, math.Float64bits(f))
}

// str writes s as its number in the string table.
func (e *indexEncoder) str(s string) {
	id, ok := e.strs[s]
	if !ok {
		id = uint64(len(e.table))
		e.strs[s] = id
		e.table = append(e.table, s)
	}
	e.uvarint(id)
}

func (e *indexEncoder) strs64(ss []string) {
	e.uvarint(uint64(len(ss)))
	for _, s := range ss {
		e.str(s)
	}
}

func (e *indexEncoder) time(t time.Time) error {
	b, err := t.MarshalBinary()
	if err != nil {
		return err
	}
	e.uvarint(uint64(len(b)))
	e.buf = append(e.buf, b...)
	return nil
}

func (e *indexEncoder) bools(bs ...bool) {
	var b byte
	for i, v := range bs {
		if v {
			b |= 1 << i
		}
	}
	e.buf = append(e.buf, b)
}

// problem writes p as 0 (none) or one more than its number among the
// distinct problems of the index.
func (e *indexEncoder) problem(p *space.Problem) {
	if p == nil {
		e.uvarint(0)
		return
	}
	for i, q := range e.probs {
		if q == p || sameProblem(*q, *p) {
			e.uvarint(uint64(i + 1))
			return
		}
	}
	e.probs = append(e.probs, p)
	e.uvarint(uint64(len(e.probs)))
}

// result writes r, the line it was read from and where that line lies.
func (e *indexEncoder) result(r *space.Result, line int, sp span) error {
	e.varint(int64(r.Seq))
	e.str(r.Key)
	// 0: the config is the one its key gives back (space.FromKey), as it
	// almost always is; n+1: n pairs follow.
	if r.Config == nil || derivable(*r) {
		e.uvarint(0)
	} else {
		e.uvarint(uint64(len(r.Config)) + 1)
		for name, value := range r.Config {
			e.str(name)
			e.str(value)
		}
	}
	e.str(string(r.Status))
	e.str(string(r.Gate))
	e.str(r.Reason)
	e.strs64(r.Flags)
	e.bools(r.Ptxas != nil, r.Accuracy != nil)
	if p := r.Ptxas; p != nil {
		for _, v := range []int{p.Registers, p.SpillStores, p.SpillLoads, p.SharedBytes, p.StackBytes} {
			e.varint(int64(v))
		}
	}
	if a := r.Accuracy; a != nil {
		for _, f := range []float64{a.MaxAbsErr, a.MeanAbsErr, a.RelL2, a.BadFrac, a.E2ECos, a.E2ERelL1} {
			e.float(f)
		}
		for _, v := range []int{a.NaN, a.Inf, a.Cases} {
			e.varint(int64(v))
		}
	}
	e.uvarint(uint64(len(r.Timings)))
	for i := range r.Timings {
		t := &r.Timings[i]
		if len(t.SamplesUS) > 0 {
			return errors.New("the index holds no timing samples") // stripped on load
		}
		for _, v := range []int{t.Shape.B, t.Shape.H, t.Shape.S, t.Shape.D, t.LaunchesPerSample, t.SMClockMHz, t.TempC} {
			e.varint(int64(v))
		}
		for _, f := range []float64{t.P50US, t.P90US, t.P99US, t.CILowUS, t.CIHighUS, t.PowerW, t.EnergyPerCallUJ} {
			e.float(f)
		}
		e.strs64(t.ThrottleReasons)
		e.bools(t.Throttled, t.Remeasured)
	}
	e.float(r.Objective)
	e.float(r.Cost.CompileSec)
	e.float(r.Cost.CheckSec)
	e.float(r.Cost.TimeSec)
	v := &r.Env
	for _, s := range []string{v.GPU, v.GPUUUID, v.ComputeCap, v.Driver, v.Arch, v.NVCC, v.SourceHash, v.Replay} {
		e.str(s)
	}
	e.problem(r.Problem)
	if err := e.time(r.Started); err != nil {
		return err
	}
	if err := e.time(r.Finished); err != nil {
		return err
	}
	e.uvarint(uint64(line))
	e.uvarint(uint64(sp.Offset))
	e.uvarint(uint64(sp.Len))
	e.buf = binary.LittleEndian.AppendUint32(e.buf, sp.CRC)
	return nil
}

// encodeIndex returns the body of an index file (what follows indexMagic,
// before the checksum): the head, then the tables, then the results.
func encodeIndex(head indexHead, results []space.Result, lineOf []int, spans []span) ([]byte, error) {
	body := indexEncoder{strs: make(map[string]uint64)}
	for i := range results {
		if err := body.result(&results[i], lineOf[i], spans[i]); err != nil {
			return nil, fmt.Errorf("result %s: %w", results[i].Key, err)
		}
	}
	warnings, err := json.Marshal(head.Warnings)
	if err != nil {
		return nil, err
	}
	probs, err := json.Marshal(body.probs)
	if err != nil {
		return nil, err
	}
	out := indexEncoder{buf: make([]byte, 0, len(body.buf)+len(body.table)*24+len(warnings)+64)}
	for _, v := range []uint64{uint64(head.Covered), uint64(head.Lines), uint64(head.HeadCRC), uint64(head.TailCRC), uint64(len(results))} {
		out.uvarint(v)
	}
	for _, blob := range [][]byte{warnings, probs} {
		out.uvarint(uint64(len(blob)))
		out.buf = append(out.buf, blob...)
	}
	out.uvarint(uint64(len(body.table)))
	for _, s := range body.table {
		out.uvarint(uint64(len(s)))
	}
	for _, s := range body.table {
		out.buf = append(out.buf, s...)
	}
	return append(out.buf, body.buf...), nil
}

// errIndexLayout is what a decode that runs off its data, or finds a
// number out of range, reports: a damaged index.
var errIndexLayout = errors.New("index damaged (layout)")

// indexDecoder reads the layout; its first error sticks, and every read
// after it returns zero values.
type indexDecoder struct {
	data  []byte
	err   error
	table []string
	probs []*space.Problem
	// slabs the results' small structs are carved from
	ptxas    []space.Ptxas
	accuracy []space.Accuracy
	timings  []space.Timing
	strings  []string
}

const slabSize = 4096

// The fewest bytes a timing and a result take in the layout: a timing
// holds seven floats, a result four floats and two times.
const (
	minTimingBytes = 7 * 8
	minResultBytes = 4*8 + 2*2
)

func (d *indexDecoder) fail() {
	if d.err == nil {
		d.err = errIndexLayout
	}
	d.data = nil
}

func (d *indexDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.data)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.data = d.data[n:]
	return v
}

func (d *indexDecoder) varint() int64 {
	v, n := binary.Varint(d.data)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.data = d.data[n:]
	return v
}

func (d *indexDecoder) int() int { return int(d.varint()) }

// count reads a length that the remaining data could hold, each element
// taking at least one byte.
func (d *indexDecoder) count() int { return d.countOf(1) }

// countOf reads the length of a list whose elements take at least size
// bytes each, refusing one the remaining data cannot hold: a damaged
// length must not make the decoder allocate without bound.
func (d *indexDecoder) countOf(size int) int {
	v := d.uvarint()
	if v > uint64(len(d.data)/size) {
		d.fail()
		return 0
	}
	return int(v)
}

func (d *indexDecoder) float() float64 {
	if len(d.data) < 8 {
		d.fail()
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.data))
	d.data = d.data[8:]
	return v
}

func (d *indexDecoder) bytes(n int) []byte {
	if n < 0 || n > len(d.data) {
		d.fail()
		return nil
	}
	b := d.data[:n]
	d.data = d.data[n:]
	return b
}

func (d *indexDecoder) byte() byte {
	b := d.bytes(1)
	if b == nil {
		return 0
	}
	return b[0]
}

func (d *indexDecoder) str() string {
	id := d.uvarint()
	if id >= uint64(len(d.table)) {
		d.fail()
		return ""
	}
	return d.table[id]
}

// strList reads a list of strings into the shared slab.
func (d *indexDecoder) strList() []string {
	n := d.count()
	if n == 0 {
		return nil
	}
	if len(d.strings) < n {
		d.strings = make([]string, max(n, slabSize))
	}
	ss := d.strings[:n:n]
	d.strings = d.strings[n:]
	for i := range ss {
		ss[i] = d.str()
	}
	return ss
}

func (d *indexDecoder) time() time.Time {
	var t time.Time
	if err := t.UnmarshalBinary(d.bytes(d.count())); err != nil {
		d.fail()
	}
	return t
}

func (d *indexDecoder) result(r *space.Result) (line int, sp span) {
	r.Seq = d.int()
	r.Key = d.str()
	if n := d.count(); n > 0 {
		r.Config = make(space.Config, n-1)
		for range n - 1 {
			name := d.str()
			r.Config[name] = d.str()
		}
	}
	r.Status = space.Status(d.str())
	r.Gate = space.Gate(d.str())
	r.Reason = d.str()
	r.Flags = d.strList()
	present := d.byte()
	if present&1 != 0 {
		if len(d.ptxas) == 0 {
			d.ptxas = make([]space.Ptxas, slabSize)
		}
		p := &d.ptxas[0]
		d.ptxas = d.ptxas[1:]
		p.Registers, p.SpillStores, p.SpillLoads, p.SharedBytes, p.StackBytes = d.int(), d.int(), d.int(), d.int(), d.int()
		r.Ptxas = p
	}
	if present&2 != 0 {
		if len(d.accuracy) == 0 {
			d.accuracy = make([]space.Accuracy, slabSize)
		}
		a := &d.accuracy[0]
		d.accuracy = d.accuracy[1:]
		a.MaxAbsErr, a.MeanAbsErr, a.RelL2, a.BadFrac, a.E2ECos, a.E2ERelL1 = d.float(), d.float(), d.float(), d.float(), d.float(), d.float()
		a.NaN, a.Inf, a.Cases = d.int(), d.int(), d.int()
		r.Accuracy = a
	}
	if n := d.countOf(minTimingBytes); n > 0 {
		if len(d.timings) < n {
			d.timings = make([]space.Timing, max(n, slabSize))
		}
		r.Timings = d.timings[:n:n]
		d.timings = d.timings[n:]
		for i := range r.Timings {
			t := &r.Timings[i]
			t.Shape = space.Shape{B: d.int(), H: d.int(), S: d.int(), D: d.int()}
			t.LaunchesPerSample, t.SMClockMHz, t.TempC = d.int(), d.int(), d.int()
			t.P50US, t.P90US, t.P99US, t.CILowUS, t.CIHighUS = d.float(), d.float(), d.float(), d.float(), d.float()
			t.PowerW, t.EnergyPerCallUJ = d.float(), d.float()
			t.ThrottleReasons = d.strList()
			b := d.byte()
			t.Throttled, t.Remeasured = b&1 != 0, b&2 != 0
		}
	}
	r.Objective = d.float()
	r.Cost = space.Cost{CompileSec: d.float(), CheckSec: d.float(), TimeSec: d.float()}
	r.Env = space.Env{GPU: d.str(), GPUUUID: d.str(), ComputeCap: d.str(), Driver: d.str(),
		Arch: d.str(), NVCC: d.str(), SourceHash: d.str(), Replay: d.str()}
	if p := d.uvarint(); p > 0 {
		if p > uint64(len(d.probs)) {
			d.fail()
		} else {
			r.Problem = d.probs[p-1]
		}
	}
	r.Started, r.Finished = d.time(), d.time()
	line = int(d.uvarint())
	sp = span{Offset: int64(d.uvarint()), Len: int32(d.uvarint())}
	if crc := d.bytes(4); crc != nil {
		sp.CRC = binary.LittleEndian.Uint32(crc)
	}
	return line, sp
}

// decodeIndex decodes an index body (see encodeIndex).
func decodeIndex(body []byte) (logIndex, error) {
	d := &indexDecoder{data: body}
	var ix logIndex
	ix.Covered, ix.Lines = int64(d.uvarint()), int(d.uvarint())
	ix.HeadCRC, ix.TailCRC = uint32(d.uvarint()), uint32(d.uvarint())
	ix.Count = d.countOf(minResultBytes)
	if d.err == nil {
		if err := json.Unmarshal(d.bytes(d.count()), &ix.Warnings); err != nil {
			return logIndex{}, fmt.Errorf("index damaged (warnings): %v", err)
		}
		if err := json.Unmarshal(d.bytes(d.count()), &d.probs); err != nil {
			return logIndex{}, fmt.Errorf("index damaged (problems): %v", err)
		}
	}
	lens := make([]int, d.count())
	total := 0
	for i := range lens {
		lens[i] = d.count()
		total += lens[i]
	}
	// One string holds the whole table; the results' strings are its
	// substrings.
	all := string(d.bytes(total))
	d.table = make([]string, len(lens))
	for i, n := range lens {
		if d.err != nil {
			break
		}
		d.table[i], all = all[:n], all[n:]
	}
	for _, p := range d.probs {
		if p == nil {
			d.fail()
		}
	}
	if d.err != nil {
		return logIndex{}, d.err
	}
	ix.Results = make([]space.Result, ix.Count)
	ix.LineOf = make([]int, ix.Count)
	ix.Spans = make([]span, ix.Count)
	for i := range ix.Results {
		ix.LineOf[i], ix.Spans[i] = d.result(&ix.Results[i])
		if d.err != nil {
			return logIndex{}, d.err
		}
	}
	if len(d.data) != 0 {
		return logIndex{}, errors.New("index damaged (trailing bytes)")
	}
	return ix, nil
}
