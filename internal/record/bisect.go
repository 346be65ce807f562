package record

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/bmx-dev/bmx/internal/classify"
)

// BisectFile is the bisect's own record in its run directory, beside
// run.json and results.jsonl (which hold every visited result).
const BisectFile = "bisect.json"

// Bisect modes: what a step is judged by.
const (
	BisectVerdict = "verdict" // a verdict (or crash signature) other than the good end's
	BisectPerf    = "perf"    // a performance drop from the good end's, by the perf gate's rule
)

// Sides a bisect step is judged to be on.
const (
	SideGood = "good"
	SideBad  = "bad"
	// SideSkip is a step that could not be judged twice (inconclusive,
	// flaky, an environment that does not start): skipped, as git bisect
	// skip does.
	SideSkip = "skip"
	// SideRetry is the first of two undecidable attempts of a step.
	SideRetry = "retry"
)

// Bisect is bisect.json: what is bisected (one cell along the ordered
// values of a var), each step taken, and, once done, the finding. A resume
// reads it for the options; the steps are taken again from the recorded
// results, so it can never disagree with results.jsonl.
type Bisect struct {
	// Cell is the bisected cell's ID (without the var).
	Cell string `json:"cell"`
	// CellValues are --cell's axis=value pairs as given.
	CellValues []string `json:"cell_values"`
	Along      string   `json:"along"`
	// Values are the var's values, or, when Secret, stand-ins for them
	// ("<secret #2>", by place): a resume is given them again.
	Values []string `json:"values"`
	Secret bool     `json:"secret,omitempty"`
	Mode   string   `json:"mode"`
	// ConfigPath and Vars are the config and the other vars the steps
	// load the matrix with ("" = the built-in simulated host).
	ConfigPath string            `json:"config_path"`
	Vars       map[string]string `json:"vars,omitempty"`
	Steps      []BisectStep      `json:"steps"`
	// Runs counts the cell runs the bisect took (retries included).
	Runs    int            `json:"runs"`
	Done    bool           `json:"done"`
	Finding *BisectFinding `json:"finding,omitempty"`
}

// BisectStep is one run of the cell at one value.
type BisectStep struct {
	Value   string `json:"value"`
	Index   int    `json:"index"`
	Attempt int    `json:"attempt"`
	// Cell is the result's cell ID in results.jsonl: the cell's ID and
	// the var's value.
	Cell      string           `json:"cell"`
	Verdict   classify.Verdict `json:"verdict"`
	Signature string           `json:"signature,omitempty"`
	Side      string           `json:"side"`
	// Why says what decided the side (a verdict change, a perf change,
	// what made the step undecidable).
	Why string `json:"why"`
	// TokensPerS is the median output rate per request at concurrency 1
	// (0: not measured).
	TokensPerS float64 `json:"tokens_per_s,omitempty"`
}

// BisectFinding is where the bisect ended: the last good and the first bad
// value (adjacent, unless skipped values lie between: then Candidates
// lists the values the first bad one is among).
type BisectFinding struct {
	LastGood   string   `json:"last_good"`
	FirstBad   string   `json:"first_bad"`
	Candidates []string `json:"candidates,omitempty"`
	Skipped    []string `json:"skipped,omitempty"`
	// Text is the one-line finding: "crash: CUDA error: ... from 6 on; 5 correct".
	Text string `json:"text"`
}

// WriteBisect writes bisect.json atomically.
func WriteBisect(dir string, b *Bisect) error {
	data, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(filepath.Join(dir, BisectFile), append(data, '\n'))
}

// ReadBisect reads bisect.json; the error wraps os.ErrNotExist in a run
// directory that is not a bisect's.
func ReadBisect(dir string) (*Bisect, error) {
	data, err := os.ReadFile(filepath.Join(dir, BisectFile))
	if err != nil {
		return nil, err
	}
	var b Bisect
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, BisectFile), err)
	}
	if b.Steps == nil {
		b.Steps = []BisectStep{}
	}
	return &b, nil
}
