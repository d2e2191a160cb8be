package testtool

import (
	"os/exec"
	"testing"
)

// fakeTB records how a test ended; Fatalf and Skip stop it as testing's do.
type fakeTB struct {
	testing.TB
	failed, skipped string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = format
	panic(f)
}
func (f *fakeTB) Skip(args ...any) {
	f.skipped = "skip"
	panic(f)
}

func run(f *fakeTB, fn func()) {
	defer func() {
		if r := recover(); r != nil && r != f {
			panic(r)
		}
	}()
	fn()
}

func TestMissingFailsInCISkipsElsewhere(t *testing.T) {
	t.Setenv("CI", "true")
	f := &fakeTB{}
	run(f, func() { Missing(f, "no tool", "installs it") })
	if f.failed == "" || f.skipped != "" {
		t.Errorf("in CI: failed %q skipped %q, want a failure", f.failed, f.skipped)
	}
	t.Setenv("CI", "")
	f = &fakeTB{}
	run(f, func() { Missing(f, "no tool", "installs it") })
	if f.skipped == "" || f.failed != "" {
		t.Errorf("outside CI: failed %q skipped %q, want a skip", f.failed, f.skipped)
	}
}

func TestLookPath(t *testing.T) {
	t.Setenv("CI", "")
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on PATH")
	}
	f := &fakeTB{}
	var got string
	run(f, func() { got = LookPath(f, "sh", "needed", "has one") })
	if got != sh || f.failed != "" || f.skipped != "" {
		t.Errorf("LookPath(sh) = %q (failed %q skipped %q), want %q", got, f.failed, f.skipped, sh)
	}
	f = &fakeTB{}
	run(f, func() { LookPath(f, "no-such-program-evotune", "needed", "has one") })
	if f.skipped == "" {
		t.Error("a missing program outside CI: want a skip")
	}
}
