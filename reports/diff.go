package reports

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/bmx-dev/bmx/classify"
)

// Kinds of flip between two runs.
const (
	Regression = "regression" // correct before, failing now
	Fix        = "fix"        // failing before, correct now
	Changed    = "changed"    // a different verdict, neither of the above
	Added      = "new"        // a cell only the new run has
	Removed    = "removed"    // a cell only the base run has
	// PerfRegression is a cell served slower than before, beyond noise
	// (see PerfChange); PerfImprovement faster.
	PerfRegression  = "perf-regression"
	PerfImprovement = "perf-improvement"
)

// FlipKinds are the kinds --fail-on may name: verdict flips, and the
// performance changes, which Count counts alike.
var FlipKinds = []string{Regression, Fix, Changed, Added, Removed, PerfRegression, PerfImprovement}

// Flip is one cell whose verdict differs between two runs.
type Flip struct {
	Cell      string           `json:"cell"`
	Kind      string           `json:"kind"`
	Base      classify.Verdict `json:"base,omitempty"`
	New       classify.Verdict `json:"new,omitempty"`
	Signature string           `json:"signature,omitempty"` // the new run's
}

// HostChange is one difference between the runs' host fingerprints.
type HostChange struct {
	Field string `json:"field"`
	Base  string `json:"base"`
	New   string `json:"new"`
}

// Diff compares two runs of a matrix: a nightly upgrade, say.
type Diff struct {
	Base  string       `json:"base"`
	New   string       `json:"new"`
	Flips []Flip       `json:"flips"`
	Host  []HostChange `json:"host"`
	// Perf are the cells whose serving speed changed beyond noise.
	Perf      []PerfChange `json:"perf"`
	Unchanged int          `json:"unchanged"`
	// Predicted counts cells --prune did not start in one run or the other:
	// not compared, so never a regression nor a fix.
	Predicted int `json:"predicted,omitempty"`
}

// Compare lists the flips from base to new, in the new run's order (removed
// cells last), and the host fingerprint changes.
func Compare(base, new *Report) *Diff {
	d := &Diff{Base: base.Run.Name, New: new.Run.Name, Flips: []Flip{}, Host: []HostChange{}, Perf: []PerfChange{}}
	before := map[string]Result{}
	for _, r := range base.Results {
		before[r.Cell.ID] = r
	}
	seen := map[string]bool{}
	for _, r := range new.Results {
		seen[r.Cell.ID] = true
		b, ok := before[r.Cell.ID]
		switch {
		case r.Verdict == classify.Predicted || ok && b.Verdict == classify.Predicted:
			d.Predicted++
		case !ok:
			d.Flips = append(d.Flips, Flip{Cell: r.Cell.ID, Kind: Added, New: r.Verdict, Signature: r.Signature})
		case b.Verdict == r.Verdict:
			d.Unchanged++
		default:
			kind := Changed
			switch {
			case b.Verdict == classify.Correct && failed(r.Verdict):
				kind = Regression
			case failed(b.Verdict) && r.Verdict == classify.Correct:
				kind = Fix
			}
			d.Flips = append(d.Flips, Flip{Cell: r.Cell.ID, Kind: kind, Base: b.Verdict, New: r.Verdict, Signature: r.Signature})
		}
	}
	for _, r := range base.Results {
		if !seen[r.Cell.ID] && r.Verdict != classify.Predicted {
			d.Flips = append(d.Flips, Flip{Cell: r.Cell.ID, Kind: Removed, Base: r.Verdict})
		}
	}
	d.Host = hostChanges(base.Run, new.Run)
	d.Perf = perfChanges(base, new)
	return d
}

func hostChanges(a, b *Run) []HostChange {
	out := []HostChange{}
	add := func(field, x, y string) {
		if x != y {
			out = append(out, HostChange{Field: field, Base: orNone(x), New: orNone(y)})
		}
	}
	add("gpu", a.Host.GPU, b.Host.GPU)
	add("gpus", fmt.Sprint(len(a.Host.GPUs)), fmt.Sprint(len(b.Host.GPUs)))
	add("driver", a.Host.Driver, b.Host.Driver)
	add("cuda", a.Host.CUDA, b.Host.CUDA)
	keys := slices.Sorted(maps.Keys(a.Host.Versions))
	for k := range b.Host.Versions {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		add(k, a.Host.Versions[k], b.Host.Versions[k])
	}
	add("bmx", a.BMXVersion, b.BMXVersion)
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// Count counts the flips and performance changes of the given kinds:
// Count(PerfRegression) > 0 is what --fail-on perf-regression fails on.
func (d *Diff) Count(kinds ...string) int {
	n := 0
	for _, f := range d.Flips {
		if slices.Contains(kinds, f.Kind) {
			n++
		}
	}
	for _, p := range d.Perf {
		if slices.Contains(kinds, p.Kind) {
			n++
		}
	}
	return n
}

func (d *Diff) summary() string {
	var parts []string
	for _, k := range FlipKinds {
		if n := d.Count(k); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "no flips")
	}
	s := fmt.Sprintf("%s -> %s: %s; %d cells unchanged", d.Base, d.New, strings.Join(parts, ", "), d.Unchanged)
	if d.Predicted > 0 {
		s += fmt.Sprintf("; %d predicted (not started, not compared)", d.Predicted)
	}
	return s
}

// DiffTable renders a diff for the terminal.
func DiffTable(w io.Writer, d *Diff) error {
	fmt.Fprintln(w, Clean(d.summary()))
	if len(d.Flips) > 0 {
		fmt.Fprintln(w)
		t := newTable(w, []string{"cell", "flip", "base", "new", "signature"})
		for _, f := range d.Flips {
			if err := t.Append([]string{Clean(f.Cell), f.Kind, orNone(string(f.Base)), orNone(string(f.New)), clip(Clean(f.Signature), 60)}); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	if len(d.Perf) > 0 {
		fmt.Fprintln(w, "\nperformance (beyond 10% and outside both runs' spread):")
		t := newTable(w, perfChangeHeader)
		for _, p := range d.Perf {
			if err := t.Append(p.row(Clean)); err != nil {
				return err
			}
		}
		if err := t.Render(); err != nil {
			return err
		}
	}
	if len(d.Host) > 0 {
		fmt.Fprintln(w, "\nhost:")
		t := newTable(w, []string{"what", "base", "new"})
		for _, h := range d.Host {
			if err := t.Append([]string{Clean(h.Field), Clean(h.Base), Clean(h.New)}); err != nil {
				return err
			}
		}
		return t.Render()
	}
	return nil
}

// DiffMarkdown renders a diff as GitHub-flavoured Markdown.
func DiffMarkdown(w io.Writer, d *Diff) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# bmx diff\n\n%s\n\n", mdCell(d.summary()))
	if len(d.Flips) > 0 {
		b.WriteString("| cell | flip | base | new | signature |\n|---|---|---|---|---|\n")
		for _, f := range d.Flips {
			fmt.Fprintf(&b, "| %s | **%s** | %s | %s | %s |\n", mdCell(f.Cell), f.Kind, orNone(string(f.Base)), orNone(string(f.New)), mdCell(clip(f.Signature, 200)))
		}
		b.WriteString("\n")
	}
	if len(d.Perf) > 0 {
		b.WriteString("Performance changes beyond 10% and outside both runs' spread:\n\n")
		b.WriteString("| " + strings.Join(perfChangeHeader, " | ") + " |\n|" + strings.Repeat("---|", len(perfChangeHeader)) + "\n")
		for _, p := range d.Perf {
			b.WriteString("| " + strings.Join(p.row(mdCell), " | ") + " |\n")
		}
		b.WriteString("\n")
	}
	if len(d.Host) > 0 {
		b.WriteString("| host | base | new |\n|---|---|---|\n")
		for _, h := range d.Host {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", mdCell(h.Field), mdCell(h.Base), mdCell(h.New))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// DiffJSON renders a diff as JSON.
func DiffJSON(w io.Writer, d *Diff) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}
