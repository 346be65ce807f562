package launcher

import (
	"bytes"
	"io"
	"os"
	"regexp"
	"strings"
)

// Tail bounds: the classifier reads the last TailLines lines of a server's
// log, at most TailBytes, so a server that floods its log costs bmx no memory.
const (
	TailLines = 200
	TailBytes = 256 << 10
)

// readTail returns the last lines of the file at path, at most TailLines
// lines and TailBytes bytes.
func readTail(path string) (string, error) {
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

// follower reads a growing log file incrementally and reports whether a line
// matching re has appeared. It keeps only the unfinished last line in memory.
type follower struct {
	path    string
	re      *regexp.Regexp
	off     int64
	partial []byte
	matched bool
}

// poll reads what was appended since the last call.
func (f *follower) poll() bool {
	if f.matched || f.re == nil {
		return f.matched
	}
	file, err := os.Open(f.path)
	if err != nil {
		return false
	}
	defer file.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := file.ReadAt(buf, f.off)
		f.off += int64(n)
		data := append(f.partial, buf[:n]...)
		for {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			if f.re.Match(data[:i]) {
				f.matched = true
				return true
			}
			data = data[i+1:]
		}
		if len(data) > 64<<10 { // a line without end: keep its tail only
			data = data[len(data)-(64<<10):]
		}
		f.partial = append(f.partial[:0], data...)
		if err != nil || n == 0 {
			return false
		}
	}
}
