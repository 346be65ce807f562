// Package record owns the record of a run: what a sweep leaves on disk and
// every type that says it. A run directory holds run.json (Run: what was
// swept, with what, on which Host), results.jsonl (one Result per finished
// cell, appended and synced as each cell ends by a Store, recovered after a
// crash by RecoverResults), logs/ (one file per attempt, named by LogName),
// for a shard, shard.json (ShardRecord), and, once a view across runs has
// read it, summary.jsonl (Summary: its cells' verdicts in bytes each). ReadRunDir is the one rule
// for whether a directory is a run; Load reads one back as a Report.
//
// It is a package of its own so that what writes a run (the launcher, the
// Slurm driver) and what shows one (reports, the terminal status) share the
// record without sharing each other's code: it renders nothing and imports
// neither the launcher nor reports.
package record

import (
	"fmt"
	"strings"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/matrix"
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
	// Classifier is the fingerprint of the classifier that judged the
	// cell (classify.Fingerprint; "" before bmx recorded it): a result
	// judged by another than the reading bmx's is shown as such.
	Classifier string `json:"classifier,omitempty"`
	// Numerics compares the cell's greedy top-k logprobs with the
	// reference cell's (nil without a reference or without logprobs).
	Numerics *classify.Numerics `json:"numerics,omitempty"`
	// ShapeOnly marks a correct verdict that rests, for some probe, on the
	// text's shape alone (no expectation, no reference): shown as correct*.
	ShapeOnly bool `json:"shape_only,omitempty"`
	// VouchedBy names cells whose greedy answers agree with this one's, in
	// the group the cells are judged by (the first few; see
	// classify.Agreements): the evidence, beyond expectations, that its
	// answers are right.
	VouchedBy []string `json:"vouched_by,omitempty"`
	// Alone is the verdict the cell's evidence gets without any yardstick,
	// where the yardstick of a baseline run judged it and gave another
	// (the run's own agreement left it none; see Report.UseBaseline).
	Alone classify.Verdict `json:"alone,omitempty"`
	// Apart says why the cell's evidence is not comparable with the other
	// cells' (a merge's cell from a host whose driver or packages differ):
	// it is judged against the yardstick, but does not vote in the
	// agreement among cells.
	Apart string `json:"apart,omitempty"`
	// Perf is what the performance probe measured after the correctness
	// probes (nil when it did not run: a cell that failed, or the probe
	// set turned it off). It is a measurement, not evidence: re-judging
	// keeps it as it is.
	Perf *evidence.Perf `json:"perf,omitempty"`

	Observations []evidence.Observation `json:"observations"`
	Exit         *evidence.Exit         `json:"exit"`
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
	Forensics *evidence.Forensics `json:"forensics,omitempty"`
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
func (r *Result) Judge(ref *classify.Reference) { r.JudgeBy(nil, ref) }

// JudgeBy is Judge by judge, which remembers the observations of the run's
// cells it judged before (nil: Judge).
func (r *Result) JudgeBy(judge *classify.Judge, ref *classify.Reference) {
	in := r.Input()
	if ref != nil && ref.Cell != r.Cell.ID {
		in.Reference = ref
	}
	for _, a := range r.Attempts {
		in.Earlier = append(in.Earlier, a.Verdict)
	}
	j := judge.Cell(in)
	r.Verdict, r.Signature, r.Reason, r.Evidence, r.Probes, r.Numerics = j.Verdict, j.Signature, j.Reason, j.Evidence, j.Probes, j.Numerics
	r.Classifier = classify.Fingerprint()
	r.ShapeOnly = j.ShapeOnly && j.Verdict == classify.Correct
	if r.InheritedFrom != "" {
		r.Reason = InheritedReason(r.InheritedFrom) + r.Reason
	}
}

// DropSteps drops the logprob steps of the result's observations, in place
// (their health, token count and the numerics judged from them stay): what
// only shows a run needs none, and they are most of its memory (190 of 423
// MiB for 10,000 cells). Judging the result again needs them.
func (r *Result) DropSteps() {
	for _, o := range r.Observations {
		if o.Logprobs != nil {
			o.Logprobs.Steps = nil
		}
	}
}

// Ran says whether the cell ran (or inherited a run's evidence): not
// skipped, excluded or predicted.
func (r *Result) Ran() bool {
	switch r.Verdict {
	case classify.Skipped, classify.Excluded, classify.Predicted:
		return false
	}
	return true
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

// Prediction is why --prune did not start a cell: one of its axis values
// failed with the same cause in Cells, which differ from each other in every
// other axis. Verdict is what the cell would most likely have ended as; it is
// evidence, never the cell's verdict (that is classify.Predicted), and never
// correct.
type Prediction struct {
	Axis      string           `json:"axis"`
	Value     string           `json:"value"`
	Verdict   classify.Verdict `json:"verdict"`
	Signature string           `json:"signature,omitempty"`
	Cells     []string         `json:"cells"`
}

// Text says what was predicted and on what evidence.
func (p *Prediction) Text() string {
	cause := string(p.Verdict)
	if p.Signature != "" {
		cause += " (" + p.Signature + ")"
	}
	return fmt.Sprintf("not started (--prune): %s=%s ended as %s in %d cells that differ in every other axis: %s; bmx sweep --resume RUN --confirm runs it",
		p.Axis, p.Value, cause, len(p.Cells), strings.Join(p.Cells, "; "))
}

// predictedShown is how a grid shows a predicted cell: the predicted verdict
// in parentheses, "(crash)", readable without colour.
func predictedShown(r Result) string {
	if r.Prediction != nil {
		return "(" + string(r.Prediction.Verdict) + ")"
	}
	return "(" + string(classify.Predicted) + ")"
}
