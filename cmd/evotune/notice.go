package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// noticeAfter is how long loading runs silently before it is announced.
const noticeAfter = time.Second

// loading announces on w, once it has taken longer than after, the work
// that what names ("replay FILE", "archive DIR"), so that a slow start is
// not mistaken for a hang; the returned done then says how long it took.
// done must be called once the work ends, from the goroutine that writes to
// w; nothing is printed when the work ends within after.
func loading(w io.Writer, what string, after time.Duration) (done func()) {
	var (
		mu      sync.Mutex
		printed bool
		ended   bool
	)
	start := time.Now()
	t := time.AfterFunc(after, func() {
		mu.Lock()
		defer mu.Unlock()
		if !ended {
			printed = true
			fmt.Fprintf(w, "evotune: loading %s...\n", what)
		}
	})
	return func() {
		t.Stop()
		mu.Lock()
		defer mu.Unlock()
		ended = true
		if printed {
			fmt.Fprintf(w, "evotune: loaded %s in %s\n", what, human(time.Since(start)))
		}
	}
}

// loading announces slow loading on the terminal (see loading); in a log,
// where nobody waits on the line, it stays silent.
func (c *cli) loading(what string) (done func()) {
	if !c.terminal {
		return func() {}
	}
	return loading(c.stderr, what, noticeAfter)
}
