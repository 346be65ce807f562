// Package reports owns what a sweep leaves behind: the results store
// (results.jsonl, one line per finished cell, synced as each cell ends), the
// run's metadata (run.json), and the renderers that turn results into a
// terminal table, Markdown and JSON.
//
// It takes result structs and never imports the launcher, so old runs can be
// re-rendered without starting anything.
package reports

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bmx-dev/bmx/classify"
	"github.com/bmx-dev/bmx/evidence"
	"github.com/bmx-dev/bmx/matrix"
)

// Result is everything known about one finished cell. It holds all the
// classifier needs (log tail, exit, timeouts, observations), so a run can be
// judged again offline.
type Result struct {
	Cell    matrix.Cell      `json:"cell"`
	Verdict classify.Verdict `json:"verdict"`
	// Signature, Reason, Evidence and Probes are the classifier's judgement.
	Signature string                  `json:"signature,omitempty"`
	Reason    string                  `json:"reason"`
	Evidence  string                  `json:"evidence,omitempty"`
	Probes    []classify.ProbeVerdict `json:"probes"`
	// Numerics compares the cell's greedy top-k logprobs with the
	// reference cell's (nil without a reference or without logprobs).
	Numerics *classify.Numerics `json:"numerics,omitempty"`
	// ShapeOnly marks a correct verdict that rests, for some probe, on the
	// text's shape alone (no expectation, no reference): shown as correct*.
	ShapeOnly bool `json:"shape_only,omitempty"`
	// Perf is what the performance probe measured after the correctness
	// probes (nil when it did not run: a cell that failed, or the probe
	// set turned it off). It is a measurement, not evidence: re-judging
	// keeps it as it is.
	Perf *evidence.Perf `json:"perf,omitempty"`

	Observations []evidence.Observation `json:"observations"`
	Exit         *classify.Exit         `json:"exit"`
	TimedOut     bool                   `json:"timed_out"`
	// Stop says how bmx ended the server ("" when it ended by itself).
	Stop string `json:"stop,omitempty"`
	// Problems are harness-side notes: the port stayed busy, GPU memory was
	// still held after teardown, processes escaped the process group.
	Problems []string `json:"problems,omitempty"`
	// Fatal is the fatal log line on which bmx stopped a server that was
	// still alive.
	Fatal string `json:"fatal,omitempty"`
	// Orphans counts processes that carried the cell's marker after the
	// process group was killed (they had left the group) and were killed.
	Orphans int `json:"orphans,omitempty"`
	// Forensics is what was captured of a hung server before it was killed.
	Forensics *Forensics `json:"forensics,omitempty"`
	// Slot is the GPUs the cell ran on ("" = all).
	Slot string `json:"slot,omitempty"`
	// Attempts are the verdicts of earlier runs of a retried cell.
	Attempts []Attempt `json:"attempts,omitempty"`
	// Prediction is the evidence of a cell --prune did not start (verdict
	// predicted); nil for every cell that ran.
	Prediction *Prediction `json:"prediction,omitempty"`
	// InheritedFrom names the "auto" cell whose server resolved to this
	// cell's backends when dedupe is on: this cell was not started and
	// carries that cell's evidence and verdict ("" for every cell that ran).
	InheritedFrom string `json:"inherited_from,omitempty"`

	// Argv, Env and Repro are secret-redacted. Repro is the shell command
	// that starts the cell's server by hand.
	Repro    string            `json:"repro"`
	Argv     []string          `json:"argv"`
	Env      []string          `json:"env,omitempty"`
	Port     int               `json:"port"`
	LogPath  string            `json:"log_path"`
	LogTail  string            `json:"log_tail"`
	Resolved map[string]string `json:"resolved,omitempty"`
	Timings  Timings           `json:"timings"`
	Started  time.Time         `json:"started"`
	Ended    time.Time         `json:"ended"`
}

// InheritedReason starts the reason of a cell that inherited its verdict
// from the auto cell from.
func InheritedReason(from string) string {
	return "inherited from " + from + " (auto resolved to the same backends): "
}

// Forensics is the state of a hung server captured before it was killed.
type Forensics struct {
	PIDs      []int       `json:"pids"`
	PySpy     []StackDump `json:"py_spy,omitempty"`
	NvidiaSMI string      `json:"nvidia_smi,omitempty"`
	Notes     []string    `json:"notes,omitempty"`
}

// StackDump is py-spy's dump of one process.
type StackDump struct {
	PID    int    `json:"pid"`
	Output string `json:"output"`
}

// Attempt is one run of a retried cell.
type Attempt struct {
	Verdict   classify.Verdict `json:"verdict"`
	Signature string           `json:"signature,omitempty"`
	Reason    string           `json:"reason"`
	LogPath   string           `json:"log_path"`
}

// Timings are the phases of a cell in milliseconds; Ready is 0 when the
// server never became ready.
type Timings struct {
	ReadyMS  int64 `json:"ready_ms"`
	ProbesMS int64 `json:"probes_ms"`
	// PerfMS is the performance probe's time (0 when it did not run).
	PerfMS int64 `json:"perf_ms,omitempty"`
	StopMS int64 `json:"stop_ms"`
	// GPUWaitMS is the part of StopMS spent waiting for the slot's GPU
	// memory to be released after the processes died.
	GPUWaitMS int64 `json:"gpu_wait_ms,omitempty"`
	TotalMS   int64 `json:"total_ms"`
}

// Input returns what the classifier judges of a recorded result.
func (r *Result) Input() classify.Input {
	return classify.Input{Log: r.LogTail, Exit: r.Exit, TimedOut: r.TimedOut, Fatal: r.Fatal, Observations: r.Observations}
}

// Judge fills the verdict fields from the classifier, comparing with the
// reference cell's answers when there is one.
func (r *Result) Judge(ref *classify.Reference) {
	in := r.Input()
	if ref != nil && ref.Cell != r.Cell.ID {
		in.Reference = ref
	}
	for _, a := range r.Attempts {
		in.Earlier = append(in.Earlier, a.Verdict)
	}
	j := classify.Cell(in)
	r.Verdict, r.Signature, r.Reason, r.Evidence, r.Probes, r.Numerics = j.Verdict, j.Signature, j.Reason, j.Evidence, j.Probes, j.Numerics
	r.ShapeOnly = j.ShapeOnly && j.Verdict == classify.Correct
	if r.InheritedFrom != "" {
		r.Reason = InheritedReason(r.InheritedFrom) + r.Reason
	}
}

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
	f, err := os.OpenFile(filepath.Join(dir, ResultsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open results: %w", err)
	}
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
func ReadResults(r io.Reader) (results []Result, torn bool, err error) {
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, readErr := br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var res Result
			if err := json.Unmarshal(line, &res); err != nil {
				if readErr == io.EOF { // the last line, without its newline
					return results, true, nil
				}
				return results, false, fmt.Errorf("line %d: %w", n, err)
			}
			results = append(results, res)
		}
		if errors.Is(readErr, io.EOF) {
			return results, false, nil
		}
		if readErr != nil {
			return results, false, readErr
		}
	}
}

// RecoverResults reads a run directory's results.jsonl for a resume. A torn
// last line (bmx killed mid-write) is cut off the file, so the lines appended
// next start clean; torn says whether that happened.
func RecoverResults(dir string) (results []Result, torn bool, err error) {
	path := filepath.Join(dir, ResultsFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	results, torn, err = ReadResults(bytes.NewReader(data))
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", path, err)
	}
	switch {
	case torn:
		keep := bytes.LastIndexByte(data, '\n') + 1
		if err := os.Truncate(path, int64(keep)); err != nil {
			return nil, false, fmt.Errorf("cut the torn line off %s: %w", path, err)
		}
	case len(data) > 0 && data[len(data)-1] != '\n':
		// A whole last line that lost only its newline is a result: keep
		// it, and end it so the next line starts clean.
		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
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

// Run is run.json: what was swept, with what, where.
type Run struct {
	Name       string            `json:"name"`
	Simulated  bool              `json:"simulated"`
	BMXVersion string            `json:"bmx_version"`
	ConfigPath string            `json:"config_path"`
	Config     string            `json:"config"` // the config file's text
	Vars       map[string]string `json:"vars,omitempty"`
	ProbeSet   string            `json:"probe_set"`
	// Reference is the reference cell's ID ("" = none).
	Reference string `json:"reference,omitempty"`
	// Known are the config's known issues.
	Known       []matrix.Known `json:"known,omitempty"`
	Axes        []AxisValues   `json:"axes"`
	Cells       int            `json:"cells"`
	Excluded    []matrix.Cell  `json:"excluded"`
	Host        Host           `json:"host"`
	Started     time.Time      `json:"started"`
	Ended       time.Time      `json:"ended,omitzero"`
	Interrupted bool           `json:"interrupted,omitempty"`
	// Only is the --only filter the run was started with; a resume keeps it.
	Only []string `json:"only,omitempty"`
	// Resumed counts the times the run was resumed.
	Resumed int `json:"resumed,omitempty"`
	// Slots are the GPU groups cells ran on.
	Slots []string `json:"slots,omitempty"`
	// Order is the order cells were started in: "informative" or "file".
	Order string `json:"order,omitempty"`
	// Prune is --prune's K (0: off): a value that failed alike in K cells
	// differing in every other axis has its other cells predicted, not run.
	// A resume keeps it (unless --confirm).
	Prune int `json:"prune,omitempty"`
	// Marker is what the environment marker of every server of the run
	// (the latest attempt's) begins with: a resume kills what is left of
	// the attempt before it by it.
	Marker string `json:"marker,omitempty"`
	// Dedupe is whether cells an "auto" cell resolved to inherited its
	// verdict rather than run (their results say from which cell). A
	// resume keeps it.
	Dedupe bool `json:"dedupe,omitempty"`
	// Notes are run-level remarks (no nvidia-smi, a resume that found leftovers).
	Notes []string `json:"notes,omitempty"`
}

// Host is the machine a run ran on: its fingerprint, so two runs can be
// compared (a nightly upgrade shows up as changed versions).
type Host struct {
	Hostname string `json:"hostname"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	CPUs     int    `json:"cpus"`
	// GPU is the first GPU's name; GPUs lists them all.
	GPU    string `json:"gpu,omitempty"`
	GPUs   []GPU  `json:"gpus,omitempty"`
	Driver string `json:"driver,omitempty"`
	CUDA   string `json:"cuda,omitempty"`
	// Versions are the engine's package versions (torch, sglang, ...).
	Versions map[string]string `json:"versions,omitempty"`
	// Notes say what could not be found out.
	Notes []string `json:"notes,omitempty"`
}

// GPU is one GPU as nvidia-smi reports it.
type GPU struct {
	Index      int    `json:"index"`
	Name       string `json:"name"`
	ComputeCap string `json:"compute_cap"`
	Driver     string `json:"driver"`
	MemoryMiB  int    `json:"memory_mib"`
}

// Summary is a one-line description of the host for report headers.
func (h Host) Summary() string {
	s := fmt.Sprintf("%s (%s/%s, %d CPUs)", h.Hostname, h.OS, h.Arch, h.CPUs)
	if len(h.GPUs) > 0 {
		s += fmt.Sprintf(", %dx %s (compute %s), driver %s, CUDA %s", len(h.GPUs), h.GPUs[0].Name, h.GPUs[0].ComputeCap, h.Driver, h.CUDA)
	}
	if len(h.Versions) > 0 {
		var vs []string
		for _, k := range slices.Sorted(maps.Keys(h.Versions)) {
			vs = append(vs, k+" "+h.Versions[k])
		}
		s += "; " + strings.Join(vs, ", ")
	}
	return s
}

// RunFile is the name of the run metadata file.
const RunFile = "run.json"

// WriteRun writes run.json atomically (write, sync, rename).
func WriteRun(dir string, run *Run) error {
	data, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, RunFile), append(data, '\n'))
}

// ReadRun reads run.json.
func ReadRun(dir string) (*Run, error) {
	data, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil {
		return nil, err
	}
	var run Run
	if err := json.Unmarshal(data, &run); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, RunFile), err)
	}
	return &run, nil
}

// writeFileAtomic writes data to path atomically (see WriteFileAtomic).
func writeFileAtomic(path string, data []byte) error {
	return WriteFileAtomic(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFileAtomic writes the file at path atomically: write fills a
// temporary file beside it, which is synced and renamed over path, so a
// reader never sees the file half written and a crash leaves the old file
// or the new one. write may stream what it writes: a log rewritten this way
// is never held in memory.
func WriteFileAtomic(path string, write func(w io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

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
	return string(out)
}

// Report files written at the end of a sweep.
const (
	MarkdownFile = "report.md"
	HTMLFile     = "report.html"
	JSONFile     = "report.json"
)

// WriteFiles writes report.md, report.html and report.json into the run
// directory.
func WriteFiles(dir string, rep *Report) error {
	for _, f := range []struct {
		name   string
		render func(io.Writer, *Report) error
	}{{MarkdownFile, Markdown}, {HTMLFile, HTML}, {JSONFile, JSON}} {
		var buf bytes.Buffer
		if err := f.render(&buf, rep); err != nil {
			return fmt.Errorf("render %s: %w", f.name, err)
		}
		if err := writeFileAtomic(filepath.Join(dir, f.name), buf.Bytes()); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return nil
}

// AsReference makes a result the reference for judging other cells.
func (r *Result) AsReference() *classify.Reference {
	return &classify.Reference{Cell: r.Cell.ID, Observations: r.Observations}
}

// ShapeOnlyMark is appended to a correct verdict that has no positive
// evidence for some probe.
const ShapeOnlyMark = "*"

// Shown is the verdict as reports show it: correct* when judged by shape
// only, "(crash)" for a cell --prune predicted to crash and did not start.
func (r Result) Shown() string {
	if r.Verdict == classify.Predicted {
		return predictedShown(r)
	}
	if r.ShapeOnly && r.Verdict == classify.Correct {
		return string(r.Verdict) + ShapeOnlyMark
	}
	return string(r.Verdict)
}

// ShapeOnlyLegend explains correct*, or is "" when no cell has it.
func (rep *Report) ShapeOnlyLegend() string {
	for _, r := range rep.Results {
		if r.ShapeOnly && r.Verdict == classify.Correct {
			return "correct* = judged by shape only: some probe had no expectation to meet and no reference answer to agree with, so nothing shows the answers are right"
		}
	}
	return ""
}
