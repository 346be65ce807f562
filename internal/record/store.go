package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/bmx-dev/bmx/internal/evidence"
)

// Store appends results to results.jsonl, one line per cell, and syncs each
// line to disk before returning, so a crash of bmx or of the host loses at
// most the cell that was running.
type Store struct {
	mu sync.Mutex
	f  *os.File
}

// ResultsFile is the name of the results store in a run directory.
const ResultsFile = "results.jsonl"

// OpenStore opens (creating if needed) the results store of a run directory.
func OpenStore(dir string) (*Store, error) {
	// 0600 like run.json: the results hold the servers' argv, env and
	// answers. A store an older bmx made 0644 is narrowed when resumed.
	f, err := OpenFile(filepath.Join(dir, ResultsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open results: %w", err)
	}
	_ = f.Chmod(0o600)
	return &Store{f: f}, nil
}

// Append writes one result and syncs it.
func (s *Store) Append(r Result) error {
	line, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode result %s: %w", r.Cell.ID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.f.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write result %s: %w", r.Cell.ID, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("sync results: %w", err)
	}
	return nil
}

// Close closes the store.
func (s *Store) Close() error { return s.f.Close() }

// ReadResults reads a results.jsonl. A torn last line (bmx killed while
// writing) is skipped and reported in torn; a bad line elsewhere is an error
// naming its line number.
//
// Lines are decoded on every CPU at once (decoding is most of the time of
// reading a large run: 10,000 cells are about 580 MB) and taken in file
// order, so what is returned is what reading them one by one returns.
func ReadResults(r io.Reader) (results []Result, torn bool, err error) {
	lines := readLines(r)
	defer lines.stop()
	shared := sharedStrings{}
	for l := range lines.decoded {
		<-l.done
		if l.err != nil {
			if l.last { // the last line, without its newline
				return results, true, nil
			}
			return results, false, fmt.Errorf("line %d: %w", l.n, l.err)
		}
		shared.share(&l.res)
		results = append(results, l.res)
	}
	return results, false, lines.readErr
}

// pendingLine is one non-blank line of a results file as it is decoded.
type pendingLine struct {
	n    int   // line number
	last bool  // no newline after it: the end of the file
	cut  int64 // the line's size, when it was read cut (readLine)
	data []byte
	res  Result
	err  error
	done chan struct{} // closed once res and err are set
}

// lineReader reads a results file's lines and decodes them on every CPU;
// decoded yields them in file order, each to be waited on (done).
type lineReader struct {
	decoded chan *pendingLine
	quit    chan struct{}
	readErr error // set before decoded is closed
}

func readLines(r io.Reader) *lineReader {
	workers := runtime.GOMAXPROCS(0)
	lr := &lineReader{decoded: make(chan *pendingLine, 4*workers), quit: make(chan struct{})}
	todo := make(chan *pendingLine, 4*workers)
	for range workers {
		go func() {
			for l := range todo {
				l.res, l.err = decodeResult(l.data)
				if l.cut > 0 && l.err == nil {
					l.res.readCut(l.cut)
				}
				l.data = nil
				close(l.done)
			}
		}()
	}
	go func() {
		defer close(lr.decoded)
		defer close(todo)
		br := bufio.NewReaderSize(r, 1<<20)
		for n := 1; ; n++ {
			line, full, err := readLine(br) // bounded: MaxLine
			if len(bytes.TrimSpace(line)) > 0 {
				l := &pendingLine{n: n, last: err == io.EOF, data: line, cut: full, done: make(chan struct{})}
				// In order first, then to the decoders: every line sent
				// to decoded is decoded, whenever the reader stops.
				select {
				case lr.decoded <- l:
				case <-lr.quit:
					return
				}
				todo <- l
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					lr.readErr = err
				}
				return
			}
		}
	}()
	return lr
}

// stop ends the reading early (a bad line): the reader sends no more lines.
func (lr *lineReader) stop() { close(lr.quit) }

// plainResult is a Result for decoding: resultJSON's Observations shadow
// its own.
type plainResult Result

// resultJSON is a result line as decodeResult reads it.
type resultJSON struct {
	*plainResult
	Observations []evidence.ObservationJSON `json:"observations"`
}

// decodeResult reads one result line. Its observations, most of a line's
// bytes, are decoded as evidence.ObservationJSON, so each is scanned once
// as the line is (their UnmarshalJSON would scan them twice more).
func decodeResult(line []byte) (Result, error) {
	var res Result
	aux := resultJSON{plainResult: (*plainResult)(&res)}
	if err := json.Unmarshal(line, &aux); err != nil {
		return Result{}, err
	}
	if aux.Observations != nil {
		res.Observations = make([]evidence.Observation, len(aux.Observations))
		for i := range aux.Observations {
			res.Observations[i] = aux.Observations[i].Observation()
			compactSteps(res.Observations[i].Logprobs)
		}
	}
	return res, nil
}

// compactSteps gives a decoded observation's logprob steps their exact
// size, and the alternatives of all its steps one array: decoding grows each
// slice by doubling, so five alternatives a step held room for eight, each
// its own allocation. The steps are most of a run's memory once read (300
// of 531 MiB for 10,000 cells).
func compactSteps(lp *evidence.Logprobs) {
	if lp == nil || len(lp.Steps) == 0 {
		return
	}
	steps := slices.Clone(lp.Steps)
	n := 0
	for _, st := range steps {
		n += len(st.Top)
	}
	alts := make([]evidence.Alt, 0, n)
	for i := range steps {
		if steps[i].Top == nil {
			continue
		}
		from := len(alts)
		alts = append(alts, steps[i].Top...)
		steps[i].Top = alts[from:len(alts):len(alts)]
	}
	lp.Steps = steps
}

// sharedStrings holds one copy of each string that the results of a run
// repeat by their nature: the probe set's prompts, which every cell was
// sent, and the tokens of logprob steps, which come from the model's
// vocabulary. Decoding makes a copy per occurrence; a run of 10,000 cells
// holds millions of tokens but tens of thousands of distinct ones.
type sharedStrings map[string]string

// maxShared bounds sharedStrings: past it, strings are kept as decoded.
const maxShared = 1 << 20

func (m sharedStrings) of(s string) string {
	if t, ok := m[s]; ok {
		return t
	}
	if len(m) < maxShared {
		m[s] = s
	}
	return s
}

// share replaces the result's prompts and step tokens by their shared
// copies (equal strings: nothing read changes).
func (m sharedStrings) share(r *Result) {
	for i := range r.Observations {
		o := &r.Observations[i]
		o.Prompt = m.of(o.Prompt)
		if o.Logprobs == nil {
			continue
		}
		for j := range o.Logprobs.Steps {
			st := &o.Logprobs.Steps[j]
			st.Token = m.of(st.Token)
			for k := range st.Top {
				st.Top[k].Token = m.of(st.Top[k].Token)
			}
		}
	}
}

// RecoverResults reads a run directory's results.jsonl for a resume. A torn
// last line (bmx killed mid-write) is cut off the file, so the lines appended
// next start clean; torn says whether that happened.
func RecoverResults(dir string) (results []Result, torn bool, err error) {
	path := filepath.Join(dir, ResultsFile)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	// Streamed, not read whole: a line is read bounded (MaxLine).
	results, torn, err = ReadResults(f)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	keep, size, err := afterLastNewline(f)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case torn:
		if err := os.Truncate(path, keep); err != nil {
			return nil, false, fmt.Errorf("cut the torn line off %s: %w", path, err)
		}
	case size > keep:
		// A whole last line that lost only its newline is a result: keep
		// it, and end it so the next line starts clean.
		f, err := OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return nil, false, err
		}
		_, err = f.Write([]byte{'\n'})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, false, fmt.Errorf("end the last line of %s: %w", path, err)
		}
	}
	return results, torn, nil
}

// WriteResults writes a whole results file at once, atomically: a merged
// run's results.jsonl and duplicates.jsonl, which are made, not appended to.
func WriteResults(path string, rs []Result) error {
	if err := WriteFileFunc(path, func(w io.Writer) error {
		return WriteOrdered(w, len(rs), func(i int) ([]byte, error) {
			line, err := json.Marshal(rs[i])
			if err != nil {
				return nil, fmt.Errorf("encode result %s: %w", rs[i].Cell.ID, err)
			}
			return append(line, '\n'), nil
		})
	}); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}

// WriteOrdered writes piece(0) to piece(n-1) to w in order, making them on
// every CPU a window at a time: what a large run writes per cell (its
// results, report.json's cells) is encoded in parallel and never held
// whole. The first error stops it.
func WriteOrdered(w io.Writer, n int, piece func(i int) ([]byte, error)) error {
	window := make([][]byte, 16*runtime.GOMAXPROCS(0))
	errs := make([]error, len(window))
	for start := 0; start < n; start += len(window) {
		m := min(len(window), n-start)
		var wg sync.WaitGroup
		for i := range m {
			wg.Go(func() { window[i], errs[i] = piece(start + i) })
		}
		wg.Wait()
		for i := range m {
			if errs[i] != nil {
				return errs[i]
			}
			if _, err := w.Write(window[i]); err != nil {
				return err
			}
			window[i] = nil
		}
	}
	return nil
}
