package server

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Tail bounds: the classifier reads the last TailLines lines of a server's
// log, at most TailBytes, so a server that floods its log costs bmx no memory.
const (
	// TailLines holds a Python traceback through a chain of exceptions
	// together with the lines that led up to it.
	TailLines = 200
	// TailBytes bounds those lines when a server prints very long ones.
	TailBytes = 256 << 10
)

// watchInterval is how often a server's log is read for the ready line and
// fatal lines when no write notification comes (where inotify works, a write
// wakes the reader at once and the poll is only a safety net), and the step
// in which the quiet window after a fatal line is checked. An idle log costs
// one read per interval.
const watchInterval = 20 * time.Millisecond

// minReadGap spaces the reads of a log that is written without pause (a
// flood wakes the reader on every write): at most one read per gap.
const minReadGap = 2 * time.Millisecond

// ReadTail returns the last lines of the file at path, at most TailLines
// lines and TailBytes bytes: what the classifier reads of a server's log.
func ReadTail(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	off := max(st.Size()-TailBytes, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return "", err
	}
	if off > 0 {
		// Drop the partial first line.
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	lines := strings.SplitAfter(string(buf), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) > TailLines {
		lines = lines[len(lines)-TailLines:]
	}
	return strings.Join(lines, ""), nil
}

// logWatch follows a growing log file in its own goroutine and reports the
// ready line (if a pattern is set) and the first fatal line (as isFatal
// tells them). It reads in bounded chunks and keeps only an unfinished last
// line in memory.
type logWatch struct {
	ready chan struct{} // closed when the ready pattern has matched
	fatal chan string   // receives the first fatal line, once

	path      string
	isFatal   func(line []byte) bool
	mu        sync.Mutex
	grown     time.Time // when the watcher last saw the file grow
	firstLine string    // the first fatal line, kept after it was sent
	syncCh    chan chan struct{}
	stopCh    chan struct{}
	done      chan struct{}
}

func watchLog(path string, readyRe *regexp.Regexp, isFatal func(line []byte) bool) *logWatch {
	w := &logWatch{
		path: path, isFatal: isFatal, ready: make(chan struct{}), fatal: make(chan string, 1),
		grown: time.Now(), syncCh: make(chan chan struct{}), stopCh: make(chan struct{}), done: make(chan struct{}),
	}
	go w.run(path, readyRe)
	return w
}

func (w *logWatch) stop() {
	close(w.stopCh)
	<-w.done
}

// sync reads the log up to its current end and returns the first fatal
// line found so far ("" if none), whether or not it was taken from the fatal
// channel already.
func (w *logWatch) sync() string {
	reply := make(chan struct{})
	select {
	case w.syncCh <- reply:
		<-reply
	case <-w.done:
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.firstLine
}

// lastGrowth is when the log was last written: the file's modification
// time (kept by the kernel at its clock tick, a few ms), so a quiet window
// counts from the write itself rather than from when the watcher read it.
// If the file cannot be read, when the watcher last saw it grow.
func (w *logWatch) lastGrowth() time.Time {
	if st, err := os.Stat(w.path); err == nil {
		return st.ModTime()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.grown
}

func (w *logWatch) run(path string, readyRe *regexp.Regexp) {
	defer close(w.done)
	r := &logReader{w: w, readyRe: readyRe, ready: readyRe == nil, store: make([]byte, 2*maxLogLine)}
	defer func() {
		if r.f != nil {
			r.f.Close()
		}
	}()
	if r.ready {
		close(w.ready)
	}
	wake, stopNotify := notifyWrites(path)
	defer stopNotify()
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	var lastRead time.Time
	gap := time.NewTimer(minReadGap)
	gap.Stop()
	defer gap.Stop()
	for {
		if d := minReadGap - time.Since(lastRead); d > 0 {
			// A sync (bmx judging the server now) does not wait out
			// the gap.
			gap.Reset(d)
			select {
			case <-gap.C:
			case reply := <-w.syncCh:
				lastRead = time.Now()
				r.read()
				close(reply)
				continue
			case <-w.stopCh:
				return
			}
		}
		lastRead = time.Now()
		r.read()
		select {
		case <-w.stopCh:
			return
		case reply := <-w.syncCh:
			r.read()
			close(reply)
		case <-wake:
		case <-tick.C:
		}
	}
}

// maxLogLine bounds the part of a line the watcher judges: longer lines
// are judged by their last 64 KiB.
const maxLogLine = 64 << 10

// logReader reads what a watched log gained since its last read, line by
// line, for the ready line and the first fatal line. It keeps only an
// unfinished last line (store[:plen]).
type logReader struct {
	w        *logWatch
	readyRe  *regexp.Regexp
	off      int64
	store    []byte
	plen     int
	ready    bool
	fatalHit bool
	// f is the log, open from the first read that found it: the server
	// writes to the file it opened, so the watcher reads that file even
	// when its name is gone (the run directory removed mid-sweep): it
	// still sees the ready line instead of waiting out the ready timeout.
	f *os.File
}

// read reads what the log gained since the last call.
func (r *logReader) read() {
	if r.f == nil {
		f, err := os.Open(r.w.path)
		if err != nil {
			return
		}
		r.f = f
	}
	f := r.f
	for {
		n, rerr := f.ReadAt(r.store[r.plen:], r.off)
		if n > 0 {
			r.off += int64(n)
			r.w.mu.Lock()
			r.w.grown = time.Now()
			r.w.mu.Unlock()
			data := r.store[:r.plen+n]
			for {
				i := bytes.IndexByte(data, '\n')
				if i < 0 {
					break
				}
				r.line(data[:i])
				data = data[i+1:]
			}
			if len(data) > maxLogLine {
				data = data[len(data)-maxLogLine:]
			}
			r.plen = copy(r.store, data)
		}
		if rerr != nil || n == 0 {
			return
		}
	}
}

// line judges one complete line of the log.
func (r *logReader) line(line []byte) {
	w := r.w
	if !r.ready && r.readyRe.Match(line) {
		r.ready = true
		close(w.ready)
	}
	if !r.fatalHit && w.isFatal(line) {
		r.fatalHit = true
		first := strings.TrimSpace(string(line))
		w.mu.Lock()
		w.firstLine = first
		w.mu.Unlock()
		w.fatal <- first
	}
}
