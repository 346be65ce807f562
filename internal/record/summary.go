package record

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"time"
	"unique"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// SummaryFile holds, in a run directory, what the views across runs
// (history, publish) read of it: each cell's verdict as a full read judges
// it (the agreement among cells applied, an older classifier's verdicts
// judged again), its speed at concurrency 1, and where its line lies in
// results.jsonl; about 1 KB a cell where results.jsonl holds about 57 KB.
// It is made from a full read of the run (LoadSummary) and is current while
// results.jsonl, run.json, baseline.json, the classifier and bmx are those
// it was made from; otherwise it is made again.
const SummaryFile = "summary.jsonl"

// summaryVersion is the summary's format; a summary of another is made again.
const summaryVersion = 1

// LentSummaryFile holds, in a run directory whose own cells chose no
// yardstick, its summary as judged against the yardstick an earlier run
// lent it (JudgeAcross): judging 1,000 cells again is seconds, and the
// same yardstick is lent at every reading.
const LentSummaryFile = "summary-lent.jsonl"

// Summary is a run as the views across runs see it: Load's report and
// JudgeCurrent's verdicts, less the evidence, which Result reads back for
// one cell at a time.
type Summary struct {
	Dir string
	Run *Run
	// Judged is what JudgeCurrent found when the run was read in full (the
	// note readers print), JudgedNote the sentence it left on the report.
	Judged     Judged
	JudgedNote string
	// Agreed says the cells had an agreement (Report.Agreement not nil),
	// Baseline the other run's yardstick that judges them ("" for none)
	// and OwnLost why their own cells chose none (Report.OwnYardstickLost).
	Agreed   bool
	Baseline string
	OwnLost  string
	// Cells are the run's cells in the report's order.
	Cells []CellSummary

	byID map[string]int
	// rep is the full report the summary was made from, while it is kept
	// (a summary of a report in memory); details the cells' judged fields
	// when neither rep nor the summary file holds them.
	rep       *Report
	details   []cellDetail
	yardstick *Yardstick
	// file is the summary file the cells' details and the yardstick are
	// read back from (SummaryFile or LentSummaryFile); yardAt is the
	// yardstick's line in it (0: none, or held in yardstick).
	file   string
	yardAt lineRef
	// key is what the summary was made under (its run directory's files).
	key summaryKey
}

// CellSummary is one cell of a Summary.
type CellSummary struct {
	Cell      matrix.Cell      `json:"cell"`
	Verdict   classify.Verdict `json:"verdict"`
	Signature string           `json:"signature,omitempty"`
	// Alone and AloneCorrect are Result.Alone and Result.AloneCorrect
	// (worked out for degraded and wrong cells: a history asks no other).
	Alone        classify.Verdict `json:"alone,omitempty"`
	AloneCorrect bool             `json:"alone_correct,omitempty"`
	// Counts is Run.Counts of the result: a verdict on its backend.
	Counts bool `json:"counts"`
	// Perf says the performance probe ran; Speed is its level at
	// concurrency 1 (nil: none), without the requests it was made of.
	Perf  bool                `json:"perf,omitempty"`
	Speed *evidence.PerfLevel `json:"speed,omitempty"`
	// line is where the cell's result lies in results.jsonl, detail where
	// its judged fields lie in the summary file.
	line   lineRef
	detail lineRef
}

// cellDetail is what judging a cell decides and the views show of it: the
// fields a full read may change from the line as recorded.
type cellDetail struct {
	Verdict    classify.Verdict        `json:"verdict"`
	Signature  string                  `json:"signature,omitempty"`
	Reason     string                  `json:"reason"`
	Evidence   string                  `json:"evidence,omitempty"`
	Probes     []classify.ProbeVerdict `json:"probes"`
	Classifier string                  `json:"classifier,omitempty"`
	Numerics   *classify.Numerics      `json:"numerics,omitempty"`
	ShapeOnly  bool                    `json:"shape_only,omitempty"`
	VouchedBy  []string                `json:"vouched_by,omitempty"`
	Alone      classify.Verdict        `json:"alone,omitempty"`
}

func detailOf(r *Result) cellDetail {
	return cellDetail{Verdict: r.Verdict, Signature: r.Signature, Reason: r.Reason, Evidence: r.Evidence, Probes: r.Probes,
		Classifier: r.Classifier, Numerics: r.Numerics, ShapeOnly: r.ShapeOnly, VouchedBy: r.VouchedBy, Alone: r.Alone}
}

func (d cellDetail) apply(r *Result) {
	r.Verdict, r.Signature, r.Reason, r.Evidence, r.Probes = d.Verdict, d.Signature, d.Reason, d.Evidence, d.Probes
	r.Classifier, r.Numerics, r.ShapeOnly, r.VouchedBy, r.Alone = d.Classifier, d.Numerics, d.ShapeOnly, d.VouchedBy, d.Alone
}

// summaryCellLine is a cell's line in the summary file.
type summaryCellLine struct {
	CellSummary
	Line   [2]int64   `json:"line"`
	Detail cellDetail `json:"detail"`
}

// summaryHeader is the summary file's first line.
type summaryHeader struct {
	Version    int        `json:"version"`
	Key        summaryKey `json:"key"`
	Judged     Judged     `json:"judged"`
	JudgedNote string     `json:"judged_note,omitempty"`
	Agreed     bool       `json:"agreed,omitempty"`
	Baseline   string     `json:"baseline,omitempty"`
	OwnLost    string     `json:"own_lost,omitempty"`
	Cells      int        `json:"cells"`
	Yardstick  bool       `json:"yardstick,omitempty"`
	// Unused says, in LentSummaryFile, that the lent yardstick could
	// not judge the cells (Report.UseBaseline said no): the file holds no
	// cells.
	Unused bool `json:"unused,omitempty"`
}

// summaryKey is what a summary was made from: while each is the same, it
// says what a full read says.
type summaryKey struct {
	Results    fileStamp `json:"results"`
	RunFile    fileStamp `json:"run"`
	Baseline   fileStamp `json:"baseline"`
	Classifier string    `json:"classifier"`
	BMX        string    `json:"bmx"`
	// Lent is, in LentSummaryFile, the hash of the other run's yardstick
	// the cells were judged against (yardstickHash).
	Lent string `json:"lent,omitempty"`
	// CRC is results.jsonl's checksum, taken when the file had changed
	// too recently for its time to tell a later change from it (a change
	// within the file system's clock tick keeps the time); 0 otherwise.
	CRC uint32 `json:"crc,omitempty"`
}

// fileStamp is a file's size and modification time (Size -1: no file).
type fileStamp struct {
	Size  int64 `json:"size"`
	MTime int64 `json:"mtime_ns"`
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fileStamp{Size: -1}, nil
	}
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{Size: fi.Size(), MTime: fi.ModTime().UnixNano()}, nil
}

// racyWindow is how recent a change of results.jsonl may be for its
// time alone not to tell it from a later one.
const racyWindow = 3 * time.Second

// bmxBuild names the bmx that made a summary: its module version and, in
// a build from a checkout, its commit (and, where the checkout had
// changes, the executable's size and time). Another bmx may judge or agree
// otherwise, so its summary is made again.
var bmxBuild = sync.OnceValue(func() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	s := info.Main.Version
	vcs, modified := false, false
	for _, kv := range info.Settings {
		if kv.Key == "vcs.revision" || kv.Key == "vcs.modified" {
			s, vcs = s+" "+kv.Value, true
		}
		modified = modified || kv.Key == "vcs.modified" && kv.Value == "true"
	}
	// A build that names no commit, or one of a checkout with changes
	// (two such builds name the same commit): the executable names itself.
	if !vcs || modified {
		if exe, err := os.Executable(); err == nil {
			if fi, err := os.Stat(exe); err == nil {
				s += fmt.Sprintf(" %d@%d", fi.Size(), fi.ModTime().UnixNano())
			}
		}
	}
	return s
})

// keyOf is the run directory's key now.
func keyOf(dir string) (summaryKey, error) {
	k := summaryKey{Classifier: classify.Fingerprint(), BMX: bmxBuild()}
	var err error
	if k.Results, err = stampOf(filepath.Join(dir, ResultsFile)); err != nil {
		return k, err
	}
	if k.RunFile, err = stampOf(filepath.Join(dir, RunFile)); err != nil {
		return k, err
	}
	k.Baseline, err = stampOf(filepath.Join(dir, BaselineFile))
	return k, err
}

// crcOf is the checksum of the file at path.
func crcOf(path string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	if _, err := io.Copy(h, f); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

// SummaryOf is the summary of a report read in full (Load), after
// JudgeCurrent found j; it keeps the report, whose results Result returns.
func SummaryOf(rep *Report, j Judged) *Summary {
	s := &Summary{Dir: rep.Dir, Run: rep.Run, Judged: j, JudgedNote: rep.JudgedNote, Agreed: rep.Agreement != nil,
		OwnLost: rep.OwnYardstickLost(), rep: rep, yardstick: rep.Yardstick()}
	if rep.Agreement != nil {
		s.Baseline = rep.Agreement.Baseline
	}
	s.Cells = make([]CellSummary, len(rep.Results))
	for i := range rep.Results {
		r := &rep.Results[i]
		c := CellSummary{Cell: matrix.Cell{ID: r.Cell.ID, Values: r.Cell.Values}, Verdict: r.Verdict, Signature: r.Signature,
			Alone: r.Alone, Counts: rep.Run.Counts(r), Perf: r.Perf != nil,
			line: rep.lines[r.Cell.ID]}
		if r.Verdict == classify.Degraded || r.Verdict == classify.Wrong {
			c.AloneCorrect = r.AloneCorrect() // what a history asks of them only
		}
		if r.Perf != nil {
			if l := r.Perf.Level(1); l != nil {
				sp := *l
				sp.Runs = nil
				c.Speed = &sp
			}
		}
		s.Cells[i] = c
	}
	return s
}

// Index is the place of the cell id among Cells, -1 when the run has none.
func (s *Summary) Index(id string) int {
	if s.byID == nil {
		s.byID = make(map[string]int, len(s.Cells))
		for i := range s.Cells {
			if _, ok := s.byID[s.Cells[i].Cell.ID]; !ok {
				s.byID[s.Cells[i].Cell.ID] = i
			}
		}
	}
	if i, ok := s.byID[id]; ok {
		return i
	}
	return -1
}

// Yardstick is the run's verified yardstick (Report.Yardstick).
func (s *Summary) Yardstick() (*Yardstick, error) {
	if s.yardstick != nil || s.yardAt.Len == 0 {
		return s.yardstick, nil
	}
	var y struct {
		Yardstick *Yardstick `json:"yardstick"`
	}
	if err := s.readSummaryLine(s.yardAt, &y); err != nil {
		return nil, err
	}
	return y.Yardstick, nil
}

// Result is the cell i's result as a full read of the run shows it, its
// evidence read from its own line of results.jsonl only.
func (s *Summary) Result(i int) (Result, error) {
	if s.rep != nil {
		return s.rep.Results[i], nil
	}
	c := &s.Cells[i]
	f, err := os.Open(filepath.Join(s.Dir, ResultsFile))
	if err != nil {
		return Result{}, err
	}
	defer f.Close()
	line := make([]byte, c.line.Len)
	if _, err := f.ReadAt(line, c.line.Off); err != nil {
		return Result{}, fmt.Errorf("%s: cell %s: %w", filepath.Join(s.Dir, ResultsFile), c.Cell.ID, err)
	}
	r, err := decodeResult(line)
	if err != nil || r.Cell.ID != c.Cell.ID {
		return Result{}, fmt.Errorf("%s: cell %s: changed since it was summarised", filepath.Join(s.Dir, ResultsFile), c.Cell.ID)
	}
	if s.details != nil {
		s.details[i].apply(&r)
		return r, nil
	}
	var l summaryCellLine
	if err := s.readSummaryLine(c.detail, &l); err != nil {
		return Result{}, err
	}
	if l.Cell.ID != c.Cell.ID {
		// Rewritten by another reader since it was read here.
		return Result{}, fmt.Errorf("%s: cell %s: changed since it was read", filepath.Join(s.Dir, s.file), c.Cell.ID)
	}
	l.Detail.apply(&r)
	return r, nil
}

func (s *Summary) readSummaryLine(at lineRef, v any) error {
	path := filepath.Join(s.Dir, s.file)
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, at.Len)
	if _, err := f.ReadAt(b, at.Off); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// LoadSummary reads the run directory dir as the views across runs see
// it: its summary when current, else a full read (Load, then JudgeCurrent
// with rejudging), summarised and written beside the run for the next
// reader (a directory that cannot be written to is read in full each
// time). What it returns is what Load and JudgeCurrent(true) give, less
// the evidence.
func LoadSummary(dir string) (*Summary, error) {
	run, err := ReadRun(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not a bmx run directory: %w", dir, err)
	}
	key, err := keyOf(dir)
	if err != nil {
		return nil, err
	}
	if s, _, ok := readSummary(dir, SummaryFile, run, key); ok {
		return s, nil
	}
	rep, err := loadWithLines(dir)
	if err != nil {
		return nil, err
	}
	j := rep.JudgeCurrent(true)
	s := SummaryOf(rep, j)
	s.Run = run
	s.key = key
	if err := s.write(SummaryFile, key, false); err == nil {
		s.rep, s.yardstick = nil, nil // read back from the file when asked
		return s, nil
	}
	s.keepDetails()
	return s, nil
}

// keepDetails keeps of the report only the cells' judged fields and drops
// the rest (Result reads each cell's evidence from its line again).
func (s *Summary) keepDetails() {
	if s.rep == nil {
		return
	}
	s.details = make([]cellDetail, len(s.rep.Results))
	for i := range s.rep.Results {
		s.details[i] = detailOf(&s.rep.Results[i])
	}
	if s.yardstick != nil {
		y := *s.yardstick
		s.yardstick = &y
	}
	s.rep = nil
}

// loadWithLines is Load that also keeps where each cell's line lies.
func loadWithLines(dir string) (*Report, error) {
	rep, err := loadRecorded(dir, true)
	if err != nil {
		return nil, err
	}
	rep.agree()
	return rep, nil
}

// lineRef is where a result's line lies in its results file: its offset
// and length, newline included.
type lineRef struct{ Off, Len int64 }

// lineRefs are where the first n results of a results file lie: its
// first n lines that are not blank, as ReadResults takes them.
func lineRefs(r io.Reader, n int) ([]lineRef, error) {
	at := make([]lineRef, 0, n)
	br := bufio.NewReaderSize(r, 1<<20)
	var off int64
	for len(at) < n {
		line, err := br.ReadSlice('\n')
		size := int64(len(line))
		blank := len(bytes.TrimSpace(line)) == 0
		for errors.Is(err, bufio.ErrBufferFull) { // a line longer than the buffer
			line, err = br.ReadSlice('\n')
			size += int64(len(line))
			blank = blank && len(bytes.TrimSpace(line)) == 0
		}
		if !blank {
			at = append(at, lineRef{Off: off, Len: size})
		}
		off += size
		if err != nil {
			if errors.Is(err, io.EOF) && len(at) == n {
				break
			}
			return nil, fmt.Errorf("results changed while read: %w", err)
		}
	}
	return at, nil
}

// write writes the summary into the file name of its run directory, made
// under key, and notes where each cell's line and the yardstick's lie in
// it. With unused, it writes only the header, which says so.
func (s *Summary) write(name string, key summaryKey, unused bool) error {
	if s.Dir == "" || s.rep == nil {
		return errors.New("no run directory")
	}
	if time.Since(time.Unix(0, key.Results.MTime)) < racyWindow {
		crc, err := crcOf(filepath.Join(s.Dir, ResultsFile))
		if err != nil {
			return err
		}
		key.CRC = crc
	}
	h := summaryHeader{Version: summaryVersion, Key: key, Judged: s.Judged, JudgedNote: s.JudgedNote, Agreed: s.Agreed,
		Baseline: s.Baseline, OwnLost: s.OwnLost, Cells: len(s.Cells), Yardstick: s.yardstick != nil, Unused: unused}
	if unused {
		h.Cells, h.Yardstick = 0, false
	}
	at := make([]lineRef, len(s.Cells)+1)
	err := WriteFileFunc(filepath.Join(s.Dir, name), func(w io.Writer) error {
		var off int64
		put := func(v any) (lineRef, error) {
			b, err := json.Marshal(v)
			if err != nil {
				return lineRef{}, err
			}
			b = append(b, '\n')
			if _, err := w.Write(b); err != nil {
				return lineRef{}, err
			}
			off += int64(len(b))
			return lineRef{Off: off - int64(len(b)), Len: int64(len(b))}, nil
		}
		if _, err := put(h); err != nil || unused {
			return err
		}
		for i := range s.Cells {
			c := s.Cells[i]
			var err error
			if at[i], err = put(summaryCellLine{CellSummary: c, Line: [2]int64{c.line.Off, c.line.Len}, Detail: detailOf(&s.rep.Results[i])}); err != nil {
				return err
			}
		}
		if s.yardstick != nil {
			var err error
			at[len(s.Cells)], err = put(struct {
				Yardstick *Yardstick `json:"yardstick"`
			}{s.yardstick})
			return err
		}
		return nil
	})
	if err != nil || unused {
		return err
	}
	s.file = name
	for i := range s.Cells {
		s.Cells[i].detail = at[i]
	}
	s.yardAt = at[len(s.Cells)]
	return nil
}

// readSummary reads the summary file name of dir if it is current under
// key; unused is its header's Unused.
func readSummary(dir, name string, run *Run, key summaryKey) (*Summary, bool, bool) {
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, false, false
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 256<<10)
	head, err := br.ReadBytes('\n')
	if err != nil {
		return nil, false, false
	}
	var h summaryHeader
	if json.Unmarshal(head, &h) != nil || h.Version != summaryVersion {
		return nil, false, false
	}
	crc := h.Key.CRC
	h.Key.CRC = 0
	if h.Key != key {
		return nil, false, false
	}
	if crc != 0 {
		if now, err := crcOf(filepath.Join(dir, ResultsFile)); err != nil || now != crc {
			return nil, false, false
		}
	}
	if h.Unused {
		return nil, true, true
	}
	s := &Summary{Dir: dir, Run: run, file: name, key: key, Judged: h.Judged, JudgedNote: h.JudgedNote, Agreed: h.Agreed, Baseline: h.Baseline,
		OwnLost: h.OwnLost, Cells: make([]CellSummary, 0, h.Cells)}
	off := int64(len(head))
	for range h.Cells {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			b, err = readLong(br, b)
		}
		if err != nil {
			return nil, false, false
		}
		var l struct {
			CellSummary
			Line [2]int64 `json:"line"`
		}
		if json.Unmarshal(b, &l) != nil {
			return nil, false, false
		}
		c := l.CellSummary
		c.line, c.detail = lineRef{Off: l.Line[0], Len: l.Line[1]}, lineRef{Off: off, Len: int64(len(b))}
		c.intern()
		off += int64(len(b))
		s.Cells = append(s.Cells, c)
	}
	if h.Yardstick {
		b, err := br.ReadBytes('\n')
		if err != nil {
			return nil, false, false
		}
		s.yardAt = lineRef{Off: off, Len: int64(len(b))}
	}
	return s, false, true
}

// intern makes the cell's strings, which every run of a config repeats,
// one copy each across all the runs read (unique.Make): a year of nightly
// runs of 1,000 cells holds 1,000 cell names, not 365,000.
func (c *CellSummary) intern() {
	c.Cell.ID = unique.Make(c.Cell.ID).Value()
	for i := range c.Cell.Values {
		c.Cell.Values[i].Axis, c.Cell.Values[i].Value = unique.Make(c.Cell.Values[i].Axis).Value(), unique.Make(c.Cell.Values[i].Value).Value()
	}
	c.Signature = unique.Make(c.Signature).Value()
	c.Verdict, c.Alone = classify.Verdict(unique.Make(string(c.Verdict)).Value()), classify.Verdict(unique.Make(string(c.Alone)).Value())
}

// readLong reads the rest of a line longer than the reader's buffer.
func readLong(br *bufio.Reader, first []byte) ([]byte, error) {
	b := bytes.Clone(first)
	rest, err := br.ReadBytes('\n')
	return append(b, rest...), err
}

// JudgeAcross judges each run, oldest first, whose own cells chose no
// yardstick against the verified yardstick of the latest earlier run that
// has one and fits it (the same model and probe set; Report.UseBaseline),
// so a yardstick lent to one run is lent on to the next, and replaces its
// summary in sums. Judging a run against another's yardstick
// reads it in full and judges its cells again; what that gave is kept
// beside the run (LentSummaryFile), for the same yardstick, so the next
// reading reads bytes per cell again.
func JudgeAcross(sums []*Summary) error {
	for i, s := range sums {
		if !s.Agreed || s.Baseline != "" || s.OwnLost == "" {
			continue
		}
		lent, err := s.judgeLent(sums[:i])
		if err != nil {
			return err
		}
		if lent != nil {
			sums[i] = lent
		}
	}
	return nil
}

// judgeLent judges the run against the yardstick of the latest of earlier
// that lends one (Report.UseBaseline): its summary so judged, nil when none
// could judge it.
func (s *Summary) judgeLent(earlier []*Summary) (*Summary, error) {
	rep := s.rep
	for j := len(earlier) - 1; j >= 0; j-- {
		y, err := earlier[j].Yardstick()
		if err != nil {
			return nil, err
		}
		if y == nil {
			continue // UseBaseline(nil) changes nothing
		}
		key := s.key
		if s.rep == nil {
			if key.Lent, err = yardstickHash(y); err != nil {
				return nil, err
			}
			if lent, unused, ok := readSummary(s.Dir, LentSummaryFile, s.Run, key); ok {
				if unused {
					continue
				}
				return lent, nil
			}
			if rep == nil {
				if rep, err = loadWithLines(s.Dir); err != nil {
					return nil, err
				}
				rep.JudgeCurrent(true)
			}
		}
		used, _ := rep.UseBaseline(y)
		if s.rep != nil {
			if used {
				return s.again(rep), nil
			}
			continue
		}
		lent := s.again(rep)
		lent.key = key
		if err := lent.write(LentSummaryFile, key, !used); err != nil || !used {
			if used {
				lent.keepDetails()
				return lent, nil
			}
			continue
		}
		lent.rep, lent.yardstick = nil, nil
		return lent, nil
	}
	return nil, nil
}

// again is the summary of the run's report rep judged again.
func (s *Summary) again(rep *Report) *Summary {
	a := SummaryOf(rep, s.Judged)
	a.Dir, a.Run = s.Dir, s.Run
	return a
}

// yardstickHash names a yardstick by what it holds.
func yardstickHash(y *Yardstick) (string, error) {
	b, err := json.Marshal(y)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:12]), nil
}
