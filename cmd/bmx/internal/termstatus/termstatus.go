// Package termstatus shows what bmx is doing on a terminal: a sweep's
// progress (a status line that is redrawn, and one line per finished cell)
// and whether output may be coloured. Off a terminal it prints plain lines
// only, so logs stay readable; it never writes data, only stderr's status.
package termstatus

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// Progress reports a sweep on stderr. On a terminal it keeps one status line
// (cells done, what each slot runs, elapsed time, ETA) and prints a line per
// finished cell above it; elsewhere it prints only the per-cell lines, so
// logs stay readable.
type Progress struct {
	w       io.Writer
	tty     bool
	total   int
	slots   int
	started time.Time

	mu sync.Mutex
	// active is true from Begin to End on a terminal: while the status
	// line is drawn.
	active   bool
	finished int
	running  map[int]string
	quit     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

// NewProgress reports to w; Begin starts it.
func NewProgress(w io.Writer) *Progress {
	return &Progress{w: w, tty: IsTerminal(w), running: map[int]string{}, quit: make(chan struct{})}
}

// Begin starts the status line (on a terminal) for total cells on slots.
func (p *Progress) Begin(total, slots int) {
	p.mu.Lock()
	p.total, p.slots, p.started = total, slots, time.Now()
	p.active = p.tty
	p.mu.Unlock()
	if p.tty {
		p.wg.Add(1)
		go p.tick()
	}
}

// IsTerminal says whether w is a terminal that understands cursor control.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

// Start shows that a cell runs on a slot.
func (p *Progress) Start(slot int, cell matrix.Cell) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[slot] = cell.ID
	p.draw()
}

// Done prints a finished cell's line.
func (p *Progress) Done(slot int, r record.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, slot)
	p.finished++
	p.clear()
	width := len(fmt.Sprint(p.total))
	fmt.Fprintf(p.w, "[%*d/%d] %-8s %s (%.1fs)\n", width, p.finished, p.total, r.Verdict, record.Clean(r.Cell.ID), float64(r.Timings.TotalMS)/1000)
	p.draw()
}

func (p *Progress) tick() {
	defer p.wg.Done()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
			p.mu.Lock()
			p.draw()
			p.mu.Unlock()
		}
	}
}

// End ends the status line; it is safe to call twice.
func (p *Progress) End() {
	p.once.Do(func() {
		close(p.quit)
		p.wg.Wait()
		p.mu.Lock()
		p.clear()
		p.active = false
		p.mu.Unlock()
	})
}

// Write prints whole lines of text (the sweep's notes and warnings, through
// a log.Logger) above the status line: on a terminal the status line is
// cleared first and drawn again after, so a note never runs into it.
func (p *Progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	n, err := p.w.Write(b)
	p.draw()
	return n, err
}

// clear erases the status line; the caller holds mu.
func (p *Progress) clear() {
	if p.active {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// draw rewrites the status line; the caller holds mu.
func (p *Progress) draw() {
	if !p.active {
		return
	}
	elapsed := time.Since(p.started).Round(time.Second)
	eta := "?"
	if p.finished > 0 {
		per := time.Since(p.started) / time.Duration(p.finished)
		left := time.Duration(p.total-p.finished) * per
		eta = left.Round(time.Second).String()
	}
	var slots []string
	for i := range p.slots {
		if id, ok := p.running[i]; ok {
			slots = append(slots, fmt.Sprintf("%d:%s", i, record.Clean(id)))
		}
	}
	line := fmt.Sprintf("cell %d/%d  %s elapsed, ETA %s  running %s", p.finished, p.total, elapsed, eta, strings.Join(slots, " "))
	if r := []rune(line); len(r) > 150 {
		line = string(r[:149]) + "…"
	}
	fmt.Fprint(p.w, "\r\x1b[K"+line)
}

// ColorOK says whether to colour output to w: only on a terminal, and never
// when NO_COLOR is set (https://no-color.org).
func ColorOK(w io.Writer) bool {
	if _, set := os.LookupEnv("NO_COLOR"); set {
		return false
	}
	return IsTerminal(w)
}
