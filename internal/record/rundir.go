package record

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/matrix"
)

// CreateRunDir makes a new run directory out/<UTC timestamp>-<name>, adding
// a suffix rather than reusing one that exists.
func CreateRunDir(out, name string, now time.Time) (string, error) {
	base := filepath.Join(out, now.UTC().Format("20060102T150405Z")+"-"+safeName(name))
	if err := os.MkdirAll(out, 0o755); err != nil {
		return "", fmt.Errorf("create output directory: %w", err)
	}
	dir := base
	for i := 2; ; i++ {
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			return dir, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("create run directory: %w", err)
		}
		dir = fmt.Sprintf("%s-%d", base, i)
	}
}

// safeName is a config's name as its run directory's name says it: each
// character but [-_.0-9A-Za-z] written as '_', and a name longer than
// runNameMax cut to its start, "~" and a hash of the whole, so that the
// directory's name fits the 255 bytes a file name may have whatever the
// config's name (a sweep of a 5,000-character name failed with "file name
// too long" after its plan passed). The whole name stays in run.json.
func safeName(s string) string {
	out := []rune(s)
	for i, r := range out {
		if !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			out[i] = '_'
		}
	}
	if len(out) == 0 {
		return "run"
	}
	if len(out) > runNameMax { // ASCII now: a rune is a byte
		h := fnv.New32a()
		h.Write([]byte(s))
		return fmt.Sprintf("%s~%08x", string(out[:runNameMax-9]), h.Sum32())
	}
	return string(out)
}

// runNameMax bounds the name part of a run directory's name: with the
// timestamp before it and a shard's or a collision's suffix after it, the
// whole stays far below 255 bytes.
const runNameMax = 120

// ErrNotRun means a directory is not a bmx run directory.
var ErrNotRun = errors.New("not a bmx run directory")

// ReadRunDir reads a run directory's run.json after checking that dir is one:
// it exists, holds run.json and results.jsonl, and its run.json describes a
// run (a config and a start time), so that neither a resume nor a report
// ever takes another directory, or a stray run.json, for a run. The error
// wraps ErrNotRun and says what is missing.
func ReadRunDir(dir string) (*Run, error) {
	notRun := func(why string, args ...any) error {
		return fmt.Errorf("%s is %w: %s", dir, ErrNotRun, fmt.Sprintf(why, args...))
	}
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, notRun("it does not exist")
	case err != nil:
		return nil, notRun("%v", err)
	case !st.IsDir():
		return nil, notRun("it is a file")
	}
	run, err := ReadRun(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, notRun("it has no %s (bmx sweep writes run.json, %s and logs/ into a run directory)", RunFile, ResultsFile)
	case err != nil:
		return nil, notRun("%s cannot be read: %v", RunFile, err)
	case run.Config == "" || run.ConfigPath == "" || run.Started.IsZero():
		return nil, notRun("its %s does not describe a run (no config or start time)", RunFile)
	}
	if _, err := os.Stat(filepath.Join(dir, ResultsFile)); err != nil {
		return nil, notRun("it has no %s: %v", ResultsFile, err)
	}
	return run, nil
}

// IsRunDir reports whether dir is a run directory by ReadRunDir's rule: the
// one rule a resume, a report, shell completion and a Slurm job's progress
// all go by.
func IsRunDir(dir string) bool {
	_, err := ReadRunDir(dir)
	return err == nil
}

// LogName is the log file name of a cell's attempt: its ID, readable, with
// each byte that is awkward in a file name (a path separator, a space, a
// colon, '%' itself) written as %XX, so distinct IDs never share a name:
// "a=p/q" is "a=p%2Fq.log", "a=p_q" stays "a=p_q.log". An ID too long for a
// file name keeps its start and gets "~" and a hash of the whole; a retry's
// log is "<name>~attempt2.log".
func LogName(cell matrix.Cell, attempt int) string {
	var b strings.Builder
	for i := 0; i < len(cell.ID); i++ {
		c := cell.ID[i]
		if logNameSafe(c) && !(i == 0 && c == '.') { // no hidden files, no ".."
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	name := b.String()
	if name == "" {
		name = "~cell"
	}
	if len(name) > logNameMax {
		h := fnv.New64a()
		h.Write([]byte(cell.ID))
		name = fmt.Sprintf("%s~%016x", name[:logNameMax-17], h.Sum64())
	}
	if attempt > 1 {
		name += "~attempt" + strconv.Itoa(attempt) // '~' is never in an escaped ID
	}
	return name + ".log"
}

// logNameMax leaves room for ".attemptN.log" within the 255 bytes a file
// name may have on Linux and macOS file systems.
const logNameMax = 200

func logNameSafe(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("_.,=+-", c) >= 0
}
