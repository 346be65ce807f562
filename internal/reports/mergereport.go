package reports

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/bmx-dev/bmx/internal/record"
)

// MergeMarkdown renders the merge: the hosts with their fingerprints, the
// notes, and which host ran which cell.
func MergeMarkdown(w io.Writer, m *Merged) error {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Hosts\n\nMerged from %s on %s.\n\n", plural(len(m.Runs), "run"), plural(len(m.Hosts), "host"))
	b.WriteString("| host | runs | cells | fingerprint | differs from the others |\n|---|---|---|---|---|\n")
	for _, h := range m.Hosts {
		var runs []string
		for _, i := range h.Runs {
			runs = append(runs, m.Runs[i].label())
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s |\n", mdCell(h.Name), mdCell(strings.Join(runs, ", ")), h.Cells,
			mdCell(h.Host.Summary()+", bmx "+h.BMXVersion), mdCell(strings.Join(h.Differs, ", ")))
	}
	if line := m.referenceLine(); line != "" {
		fmt.Fprintf(&b, "\n%s.\n", mdCell(line))
	}
	if len(m.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range m.Notes {
			fmt.Fprintf(&b, "- %s\n", mdCell(n))
		}
	}
	b.WriteString("\n## Which host ran which cell\n\n| cell | verdict | host | run |\n|---|---|---|---|\n")
	for _, r := range m.Report.Results {
		i := m.RanOn[r.Cell.ID]
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", mdCell(r.Cell.ID), mdCell(r.Shown()), mdCell(m.HostOf(r.Cell.ID)), mdCell(m.Runs[i].label()))
	}
	for _, c := range m.Missing {
		fmt.Fprintf(&b, "| %s | missing | - | shard %d |\n", mdCell(c.Cell), c.Shard)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// MergeSummary is the merge in a few lines for a terminal: the hosts and
// the notes.
func MergeSummary(w io.Writer, m *Merged) error {
	var b strings.Builder
	fmt.Fprintf(&b, "merged %s (%d of %d cells) from %s:\n", plural(len(m.Runs), "run"), len(m.Report.Results), m.Report.Run.Cells, plural(len(m.Hosts), "host"))
	for _, h := range m.Hosts {
		var runs []string
		for _, i := range h.Runs {
			runs = append(runs, m.Runs[i].label())
		}
		fmt.Fprintf(&b, "  %s: %d cells (%s): %s\n", record.Clean(h.Name), h.Cells, record.Clean(strings.Join(runs, ", ")), record.Clean(h.Host.Summary()))
		if len(h.Differs) > 0 {
			fmt.Fprintf(&b, "    DIFFERS: %s: its cells are not comparable with the others'\n", record.Clean(strings.Join(h.Differs, ", ")))
		}
	}
	if line := m.referenceLine(); line != "" {
		fmt.Fprintf(&b, "%s\n", record.Clean(line))
	}
	for _, n := range m.Notes {
		fmt.Fprintf(&b, "note: %s\n", record.Clean(n))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// referenceLine says how the reference cell went in each shard that ran it.
func (m *Merged) referenceLine() string {
	if len(m.Reference) == 0 {
		return ""
	}
	var each []string
	for _, r := range m.Reference {
		each = append(each, fmt.Sprintf("%s in %s", r.Verdict, m.Runs[r.Run].label()))
	}
	return fmt.Sprintf("the reference cell ran in %s, each judging its own cells against it: %s", plural(len(m.Reference), "shard"), strings.Join(each, ", "))
}

// label names a run in a merge: its shard, or its directory.
func (r MergedRun) label() string {
	if r.Shard != "" {
		return "shard " + r.Shard
	}
	return filepath.Base(filepath.Clean(r.Dir))
}
