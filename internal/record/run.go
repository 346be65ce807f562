package record

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
)

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
	// SetupStop is the (first) cell whose crash showed the setup broken
	// (the model missing, the command refused, the first cells all
	// crashing alike at start), after which the sweep stopped ("" when it
	// did not).
	SetupStop string `json:"setup_stop,omitempty"`
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
	// ExcludedCount is the number of cells the excludes removed when they
	// are too many to list (more than MaxListedExcluded): Excluded is then
	// empty, and the [[exclude]] entries of the config snapshot name them.
	ExcludedCount int `json:"excluded_count,omitempty"`
}

// Aborted says why the run stopped before its cells had all run ("" when
// it ran to its end): interrupted, or stopped on a broken setup. Readers
// across runs count neither what did not run (those cells are absent) nor
// the setup cell's crash (its setup's failure, not its backend's) as a
// verdict.
func (r *Run) Aborted() string {
	switch {
	case r.SetupStop != "":
		return "stopped on a broken setup after " + r.SetupStop
	case r.Interrupted:
		return "interrupted"
	}
	return ""
}

// Counts says whether the result res of the run is a verdict on its
// backend: in a run stopped on a broken setup (Aborted), no cell that
// crashed before its server was ready, the setup's failure (one cell, or
// the first cells all alike), is.
func (r *Run) Counts(res *Result) bool {
	if res == nil {
		return false
	}
	if r.SetupStop == "" {
		return true
	}
	return res.Verdict != classify.Crash || res.Timings.ReadyMS > 0 || len(res.Observations) > 0
}

// MaxListedExcluded is the most excluded cells run.json lists, each in
// full: past it, a run records their count alone (ExcludedCount), so that a
// sweep of a large matrix does not hold its excluded cells built.
const MaxListedExcluded = 10000

// ExcludedCells is the number of cells the excludes removed, listed or
// counted.
func (r *Run) ExcludedCells() int { return max(len(r.Excluded), r.ExcludedCount) }

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
	return WriteFile(filepath.Join(dir, RunFile), append(data, '\n'))
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

// WriteFile writes a file of a run directory atomically (see
// WriteFileFunc).
func WriteFile(path string, data []byte) error {
	return WriteFileFunc(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// WriteFileFunc writes the file at path atomically: write fills a temporary
// file beside it, which is synced and renamed over path, so a reader never
// sees the file half written and a crash leaves the old file or the new
// one. write may stream what it writes: a log rewritten this way is never
// held in memory. What it writes is buffered (a template writes a 10,000-cell
// HTML report in millions of small pieces: 4 s of system calls unbuffered).
func WriteFileFunc(path string, write func(w io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	bw := bufio.NewWriterSize(tmp, 64<<10)
	if err := write(bw); err != nil {
		tmp.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
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

// AxisValues are an axis and its values in config order.
type AxisValues struct {
	Name   string   `json:"name"`
	Values []string `json:"values"`
}
