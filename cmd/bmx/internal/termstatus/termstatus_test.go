package termstatus

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/record"
)

func TestProgressLines(t *testing.T) {
	var buf bytes.Buffer
	p := NewProgress(&buf)
	p.Begin(2, 1)
	cell := record.Result{Verdict: classify.Crash, Timings: record.Timings{TotalMS: 1500}}
	cell.Cell.ID = "a=x\x1b[31m"
	p.Start(0, cell.Cell)
	p.Done(0, cell)
	p.End()
	if got := buf.String(); got != "[1/2] crash    a=x (1.5s)\n" {
		t.Errorf("not a terminal: %q", got)
	}
	buf.Reset()
	p = &Progress{w: &buf, tty: true, active: true, total: 2, slots: 2, started: time.Now(), running: map[int]string{}, quit: make(chan struct{})}
	p.Start(1, cell.Cell)
	if !strings.Contains(buf.String(), "\r\x1b[Kcell 0/2") || !strings.Contains(buf.String(), "1:a=x") {
		t.Errorf("status line %q", buf.String())
	}
	p.End()
}

// TestProgressNote: a note printed while the status line is drawn clears
// it first and draws it again after, so the two never share a line; off a
// terminal, and after End, a note is printed as it is.
func TestProgressNote(t *testing.T) {
	var buf bytes.Buffer
	p := &Progress{w: &buf, tty: true, running: map[int]string{}, quit: make(chan struct{})}
	if _, err := fmt.Fprintf(p, "bmx: sweeping 2 cells\n"); err != nil {
		t.Fatal(err)
	}
	if got := buf.String(); got != "bmx: sweeping 2 cells\n" {
		t.Errorf("before Begin: %q", got)
	}
	p.Begin(2, 1)
	var cell record.Result
	cell.Cell.ID = "a=x"
	p.Start(0, cell.Cell)
	buf.Reset()
	fmt.Fprintf(p, "bmx: first correct cell after 1 server start(s)\n")
	got := buf.String()
	if !strings.HasPrefix(got, "\r\x1b[Kbmx: first correct cell after 1 server start(s)\n\r\x1b[Kcell 0/2") {
		t.Errorf("on a terminal, the note must clear the status line and the status line come back after it: %q", got)
	}
	p.End()
	buf.Reset()
	fmt.Fprintf(p, "bmx: note: done\n")
	if got := buf.String(); got != "bmx: note: done\n" {
		t.Errorf("after End: %q", got)
	}
}
