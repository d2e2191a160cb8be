package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// TestLoadingNotice: quick work prints nothing; slow work is announced once
// the threshold passes, and its duration said when it ends.
func TestLoadingNotice(t *testing.T) {
	var out bytes.Buffer
	loading(&out, "archive quick", time.Hour)()
	if out.Len() != 0 {
		t.Errorf("quick work printed %q", out.String())
	}
	w := &signalWriter{wrote: make(chan struct{}, 1)}
	done := loading(w, "archive slow", 5*time.Millisecond)
	select {
	case <-w.wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("slow work was not announced")
	}
	done()
	got := w.buf.String()
	if !strings.HasPrefix(got, "evotune: loading archive slow...\nevotune: loaded archive slow in ") || strings.Count(got, "\n") != 2 {
		t.Errorf("slow work printed %q", got)
	}
}

// A signalWriter collects what is written and signals the first write.
type signalWriter struct {
	buf   bytes.Buffer
	wrote chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	n, err := w.buf.Write(p)
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return n, err
}
