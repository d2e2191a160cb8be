// Package testtool holds what the tests of several packages share about
// their machine: a prerequisite that CI provides (nvcc, a C compiler, the
// fp8 toolkit) fails a test there, where its absence is a broken CI, and
// skips it elsewhere, where it is only a machine without it.
package testtool

import (
	"os"
	"os/exec"
	"testing"
)

// Missing ends the test for a missing prerequisite: with CI set, as a
// failure (why, and what CI provides: ciHas); elsewhere, as a skip (why).
func Missing(t testing.TB, why, ciHas string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s, and CI %s", why, ciHas)
	}
	t.Skip(why)
}

// LookPath returns the path of the program name on PATH, or ends the test
// by Missing: "NAME not found on PATH: needed".
func LookPath(t testing.TB, name, needed, ciHas string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name+" not found on PATH: "+needed, ciHas)
	}
	return p
}
