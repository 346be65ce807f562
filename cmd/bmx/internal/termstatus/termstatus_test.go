package termstatus

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/classify"
	"github.com/bmx-dev/bmx/record"
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
	p = &Progress{w: &buf, tty: true, total: 2, slots: 2, started: time.Now(), running: map[int]string{}, quit: make(chan struct{})}
	p.Start(1, cell.Cell)
	if !strings.Contains(buf.String(), "\r\x1b[Kcell 0/2") || !strings.Contains(buf.String(), "1:a=x") {
		t.Errorf("status line %q", buf.String())
	}
	p.End()
}
