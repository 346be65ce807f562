package termstatus

import (
	"fmt"
	"os"
	"testing"

	"github.com/bmx-dev/bmx/internal/testenv"

	"golang.org/x/sys/unix"
)

// TestWidthPty sizes a real pseudo-terminal and reads its width
// back as a report would.
func TestWidthPty(t *testing.T) {
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		testenv.Skip(t, "no pseudo-terminal: %v", err)
	}
	defer ptm.Close()
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer pts.Close()
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 40, Col: 123}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("COLUMNS", "77")
	if got := Width(pts); got != 123 {
		t.Errorf("a terminal of 123 columns: %d", got)
	}
	if got := LineWidth(pts); got != 123 {
		t.Errorf("LineWidth of a terminal of 123 columns: %d", got)
	}
	// A terminal that does not know its size: COLUMNS decides.
	if err := unix.IoctlSetWinsize(int(pts.Fd()), unix.TIOCSWINSZ, &unix.Winsize{}); err != nil {
		t.Fatal(err)
	}
	if got := Width(pts); got != 77 {
		t.Errorf("a terminal of unknown size, COLUMNS=77: %d", got)
	}
	if got := LineWidth(pts); got != 77 {
		t.Errorf("LineWidth of a terminal of unknown size, COLUMNS=77: %d", got)
	}
}
