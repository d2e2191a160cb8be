package elites

import (
	"reflect"
	"testing"
	"time"

	"evotune/space"
)

// fill sets every field reachable from v to a value that differs from its
// zero value and from the other fields' (n counts up), so that a field the
// index layout forgets cannot round-trip by luck.
func fill(t *testing.T, v reflect.Value, n *int) {
	t.Helper()
	*n++
	if v.Type() == reflect.TypeFor[time.Time]() {
		v.Set(reflect.ValueOf(time.Date(2026, 11, 25, 10, *n%60, 7, 123456789+*n, time.UTC)))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("s" + string(rune('a'+*n%26)) + string(rune('A'+*n/26%26)))
	case reflect.Int, reflect.Int32, reflect.Int64:
		v.SetInt(int64(*n))
	case reflect.Float64:
		v.SetFloat(float64(*n) + 0.25)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), n)
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(t, v.Index(i), n)
		}
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range 3 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			fill(t, k, n)
			fill(t, e, n)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	default:
		t.Fatalf("fill: a field of kind %s: teach fill and the index layout (indexcodec.go) about it", v.Kind())
	}
}

// codecResults returns results with every field set (samples left out: the
// index holds none), sharing a problem as the results of one log do, and
// one with every field zero.
func codecResults(t *testing.T) []space.Result {
	var rs []space.Result
	n := 0
	for range 3 {
		var r space.Result
		fill(t, reflect.ValueOf(&r).Elem(), &n)
		for i := range r.Timings {
			r.Timings[i].SamplesUS = nil
		}
		rs = append(rs, r)
	}
	rs[2].Problem = rs[0].Problem
	return append(rs, space.Result{})
}

func TestIndexLayoutRoundTrip(t *testing.T) {
	rs := codecResults(t)
	rs[1].Key = rs[1].Config.Key() // a config the index writes as its key
	head := indexHead{Covered: 12345, Lines: 17, HeadCRC: 0xdeadbeef, TailCRC: 7, Count: len(rs),
		Warnings: []LoadWarning{{Line: 3, Offset: 99, Reason: "not a JSON object", Damaged: true, Key: "k", Status: space.StatusOK, Objective: 5.5}}}
	lineOf := []int{1, 2, 5, 9}
	spans := []span{{0, 10, 1}, {10, 20, 0xffffffff}, {30, 1 << 30, 7}, {1 << 40, 1, 0}}
	body, err := encodeIndex(head, rs, lineOf, spans)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := decodeIndex(body)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Results[1].Config != nil || ix.Results[0].Config == nil {
		t.Errorf("configs decoded as %v and %v; want the first given in full and the second left to its key", ix.Results[0].Config, ix.Results[1].Config)
	}
	for i := range ix.Results {
		ix.Results[i] = full(ix.Results[i])
	}
	want := logIndex{head, rs, lineOf, spans}
	if !reflect.DeepEqual(ix, want) {
		t.Errorf("round trip through the index layout changed the results:\n got %+v\nwant %+v", ix, want)
	}
	if ix.Results[0].Problem != ix.Results[2].Problem {
		t.Error("results that shared a problem no longer share it")
	}
	if ix.Results[0].Env.GPU != rs[0].Env.GPU {
		t.Fatal("unreachable: DeepEqual passed")
	}
}

func TestIndexLayoutRefusesSamples(t *testing.T) {
	rs := codecResults(t)[:1]
	rs[0].Timings[0].SamplesUS = []float64{1, 2}
	if _, err := encodeIndex(indexHead{}, rs, []int{1}, []span{{}}); err == nil {
		t.Fatal("an index with timing samples was written: the index must hold none")
	}
}

// Every cut of the body and every flipped byte either decodes or fails with
// an error; none panics or allocates without bound.
func TestIndexLayoutDamaged(t *testing.T) {
	rs := codecResults(t)
	body, err := encodeIndex(indexHead{Count: len(rs)}, rs, make([]int, len(rs)), make([]span, len(rs)))
	if err != nil {
		t.Fatal(err)
	}
	for n := range len(body) {
		if _, err := decodeIndex(body[:n]); err == nil {
			t.Fatalf("a body cut to %d of %d bytes decoded", n, len(body))
		}
	}
	for i := range body {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			bad := append([]byte(nil), body...)
			bad[i] ^= x
			_, _ = decodeIndex(bad) // must not panic
		}
	}
	if _, err := decodeIndex(append(body, 0)); err == nil {
		t.Fatal("a body with a trailing byte decoded")
	}
}
