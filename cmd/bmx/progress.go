package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bmx-dev/bmx/matrix"
	"github.com/bmx-dev/bmx/reports"
)

// progress reports a sweep on stderr. On a terminal it keeps one status line
// (cells done, what each slot runs, elapsed time, ETA) and prints a line per
// finished cell above it; elsewhere it prints only the per-cell lines, so
// logs stay readable.
type progress struct {
	w       io.Writer
	tty     bool
	total   int
	slots   int
	started time.Time

	mu       sync.Mutex
	finished int
	running  map[int]string
	quit     chan struct{}
	once     sync.Once
	wg       sync.WaitGroup
}

func newProgress(w io.Writer, total, slots int) *progress {
	p := &progress{w: w, tty: isTerminal(w), total: total, slots: slots, started: time.Now(), running: map[int]string{}, quit: make(chan struct{})}
	if p.tty {
		p.wg.Add(1)
		go p.tick()
	}
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

func (p *progress) start(slot int, cell matrix.Cell) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.running[slot] = cell.ID
	p.draw()
}

func (p *progress) done(slot int, r reports.Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.running, slot)
	p.finished++
	p.clear()
	width := len(fmt.Sprint(p.total))
	fmt.Fprintf(p.w, "[%*d/%d] %-8s %s (%.1fs)\n", width, p.finished, p.total, r.Verdict, reports.Clean(r.Cell.ID), float64(r.Timings.TotalMS)/1000)
	p.draw()
}

func (p *progress) tick() {
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

// stop ends the status line; it is safe to call twice.
func (p *progress) stop() {
	p.once.Do(func() {
		close(p.quit)
		p.wg.Wait()
		p.mu.Lock()
		p.clear()
		p.mu.Unlock()
	})
}

func (p *progress) clear() {
	if p.tty {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// draw rewrites the status line; the caller holds mu.
func (p *progress) draw() {
	if !p.tty {
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
			slots = append(slots, fmt.Sprintf("%d:%s", i, reports.Clean(id)))
		}
	}
	line := fmt.Sprintf("cell %d/%d  %s elapsed, ETA %s  running %s", p.finished, p.total, elapsed, eta, strings.Join(slots, " "))
	if r := []rune(line); len(r) > 150 {
		line = string(r[:149]) + "…"
	}
	fmt.Fprint(p.w, "\r\x1b[K"+line)
}
