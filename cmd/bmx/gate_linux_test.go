package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/bmx-dev/bmx/internal/testenv"
)

// TestGateSummaryTerminal: with stderr on a terminal of 72 columns, a real
// bmx process fits each line of the gate's summary to it (COLUMNS does
// not override a terminal that knows its size), where piped it keeps them
// whole (TestGateSummaryBoundedCLI).
func TestGateSummaryTerminal(t *testing.T) {
	t.Parallel()
	ptm, pts := openPty(t, 72)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, "sweep", "-c", fastBuiltin(t, t.TempDir(), "sim-sm120", ""), "--out", t.TempDir(), "-q", "--only", "fp4_gemm=flashinfer_cudnn", "--fail-on", "unexpected")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, pts
	cmd.Env = append(os.Environ(), "TERM=xterm", "COLUMNS=200")
	var got bytes.Buffer
	done := make(chan struct{})
	go func() { io.Copy(&got, ptm); close(done) }()
	err = cmd.Run()
	pts.Close()
	<-done
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != ExitFailed {
		t.Fatalf("exit %v, want 1\n%s", err, got.String())
	}
	text := strings.ReplaceAll(got.String(), "\r\n", "\n")
	i := strings.LastIndex(text, "bmx: --fail-on ")
	if i < 0 {
		t.Fatalf("no gate summary on the terminal:\n%q", text)
	}
	cut := false
	for _, l := range strings.Split(strings.TrimRight(text[i:], "\n"), "\n") {
		if n := utf8.RuneCountInString(l); n > 72 {
			t.Errorf("a line of %d columns on a terminal of 72: %q", n, l)
		}
		cut = cut || strings.HasSuffix(l, "…")
	}
	if !cut {
		t.Errorf("no line fitted to the terminal (the cause is longer than 72 columns):\n%s", text[i:])
	}
}

// openPty opens a pseudo-terminal of cols columns: its master, to read,
// and its slave, for a process's output.
func openPty(t *testing.T, cols uint16) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testenv.Skip(t, "no pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { ptm.Close() })
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: cols}); err != nil {
		t.Fatal(err)
	}
	return ptm, pts
}
