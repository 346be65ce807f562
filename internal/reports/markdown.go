package reports

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/bmx-dev/bmx/internal/record"
)

// mdCell escapes text for a GitHub-flavoured Markdown table cell: no
// newlines, pipes, backticks or HTML can break out of it.
func mdCell(s string) string {
	return mdEscaper.Replace(record.Clean(s))
}

// mdEscaper is made once: a report of 10,000 cells escapes hundreds of
// thousands of texts.
var mdEscaper = strings.NewReplacer("|", `\|`, "`", "\\`", "<", "&lt;", ">", "&gt;", "&", "&amp;", "*", `\*`, "_", `\_`, "[", `\[`, "]", `\]`)

// Markdown renders the report as GitHub-flavoured Markdown: summary, grid,
// a table of cells, the causes, then each cell's probes and command.
func Markdown(w io.Writer, rep *record.Report) error { return markdown(w, rep, nil, true) }

// MarkdownWith is Markdown of a run swept against a baseline run (nil:
// none): its news says what is new since then, as the gate does.
func MarkdownWith(w io.Writer, rep, baseline *record.Report) error {
	return markdown(w, rep, baseline, true)
}

// MarkdownSummary is Markdown without the per-cell sections, for a CI job
// summary.
func MarkdownSummary(w io.Writer, rep *record.Report) error { return markdown(w, rep, nil, false) }

// MarkdownSummaryWith is MarkdownSummary of a run swept against a baseline
// run (nil: none), its news as MarkdownWith's.
func MarkdownSummaryWith(w io.Writer, rep, baseline *record.Report) error {
	return markdown(w, rep, baseline, false)
}

func markdown(w io.Writer, rep, baseline *record.Report, details bool) error {
	// The sections are written as they are made: the report of a large
	// run is never held whole in memory.
	b := bufio.NewWriter(w)
	mdHeader(b, rep, baseline)
	perf := PerformanceOf(rep)
	if g, ok := gridOf(rep); ok {
		mdGrid(b, rep, g, perf)
	}
	b.WriteString("| cell | verdict | reason | signature | ready | known |\n|---|---|---|---|---|---|\n")
	for _, r := range rep.Results {
		fmt.Fprintf(b, "| %s | **%s** | %s | %s | %s | %s |\n", mdCell(r.Cell.ID), mdCell(r.Shown()), mdCell(clip(r.Reason, 200)),
			mdCell(clip(r.Signature, 200)), readyText(r), mdCell(statusText(rep, r)))
	}
	if perf != nil {
		mdPerformance(b, rep, perf)
	}
	if clusters := Clusters(rep); len(clusters) > 0 {
		b.WriteString("\n## Causes\n\n| verdict | signature | cells |\n|---|---|---|\n")
		for _, c := range clusters {
			fmt.Fprintf(b, "| %s | %s | %s |\n", c.Verdict, mdCell(c.Signature), mdCell(strings.Join(c.Cells, "; ")))
		}
	}
	if details {
		b.WriteString("\n## Cells\n")
		same := SameAs(rep)
		for _, r := range rep.Results {
			mdCellDetails(b, r, same[r.Cell.ID])
		}
	}
	return b.Flush()
}

// mdHeader is the title, the news of a nightly job, the summary, the host
// and a warning about the reference cell.
func mdHeader(b *bufio.Writer, rep, baseline *record.Report) {
	fmt.Fprintf(b, "# bmx compatibility report: %s\n\n", mdCell(rep.Run.Name))
	if rep.Run.Simulated {
		b.WriteString("> **Simulated host.** This run used bmx's built-in simulation; no real GPU or inference server was involved.\n\n")
	}
	if news := NewsLineWith(rep, baseline); news != "" {
		// A nightly job's summary leads with what is new.
		fmt.Fprintf(b, "**%s**\n\n", mdCell(news))
	}
	fmt.Fprintf(b, "%s. Probe set: %s.\n\nHost: %s.\n\n", mdCell(SummaryLine(rep)), mdCell(rep.Run.ProbeSet), mdCell(rep.Run.Host.Summary()))
	if p := ReferenceProblem(rep); p != "" {
		fmt.Fprintf(b, "> **Warning.** %s\n\n", mdCell(p))
	}
	if n := rep.JudgedNote; n != "" {
		fmt.Fprintf(b, "> **Classifier.** %s.\n\n", mdCell(n))
	}
	if c := AgreementChanges(rep); c != "" {
		fmt.Fprintf(b, "%s.\n\n", mdCell(c))
	}
}

// mdGrid is the verdict grid with its legends, the recommendation (perf:
// nil when nothing was measured) and the blame by axis.
func mdGrid(b *bufio.Writer, rep *record.Report, g *grid, perf *Performance) {
	fmt.Fprintf(b, "| %s \\\\ %s |", mdCell(g.rowAxis), mdCell(g.colAxis))
	for _, c := range g.cols {
		fmt.Fprintf(b, " %s |", mdCell(c))
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(g.cols)) + "\n")
	for _, row := range g.rows {
		fmt.Fprintf(b, "| %s |", mdCell(row))
		for _, col := range g.cols {
			fmt.Fprintf(b, " %s |", mdCell(g.at(row, col)))
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	for _, l := range []string{degradedLegend(rep), ShapeOnlyLegend(rep), PredictedLegend(rep)} {
		if l != "" {
			fmt.Fprintf(b, "%s.\n\n", mdCell(l))
		}
	}
	if perf != nil {
		b.WriteString(mdRecommendation(perf))
	}
	if lines := BlameOf(rep).Lines(); len(lines) > 0 {
		b.WriteString("Blame by axis:\n\n")
		for _, l := range lines {
			fmt.Fprintf(b, "- %s\n", mdCell(l))
		}
		b.WriteString("\n")
	}
}

// mdPerformance is the performance section: the table, its problems, and
// the recommendation when there is no grid to lead with it.
func mdPerformance(b *bufio.Writer, rep *record.Report, perf *Performance) {
	b.WriteString("\n## Performance\n\n")
	fmt.Fprintf(b, "%s.\n\n", mdCell(perf.caption()))
	b.WriteString("| " + strings.Join(perfHeader, " | ") + " |\n|" + strings.Repeat("---|", len(perfHeader)) + "\n")
	for _, l := range perf.lines() {
		cell, verdict := "", ""
		if l.First {
			cell, verdict = mdCell(l.Cell), "**"+l.Verdict+"**"
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", cell, verdict, l.Concurrency, l.Req, l.TTFT, l.TTFTP90, l.TPOT, l.Decode, l.PerRequest, l.Total)
	}
	if pl := perf.problemLines(); len(pl) > 0 {
		b.WriteString("\nProblems:\n\n")
		for _, l := range pl {
			fmt.Fprintf(b, "- %s\n", mdCell(clip(l, 300)))
		}
	}
	if _, ok := gridOf(rep); !ok {
		b.WriteString("\n" + mdRecommendation(perf))
	}
}

// mdCellDetails is one cell's section: its reason and evidence, numerics,
// probes, harness notes, the command that starts its server and the
// earlier cell that resolved to the same backends (sameAs, "" for none).
func mdCellDetails(b *bufio.Writer, r record.Result, sameAs string) {
	fmt.Fprintf(b, "\n### %s: %s\n\n", mdCell(r.Cell.ID), r.Verdict)
	fmt.Fprintf(b, "%s\n\n", mdCell(r.Reason))
	if r.Evidence != "" {
		fmt.Fprintf(b, "Evidence: %s\n\n", mdCell(clip(r.Evidence, 400)))
	}
	if n := r.Numerics; n != nil {
		fmt.Fprintf(b, "Numerics against the reference cell %s: %s.\n\n", mdCell(n.Reference), mdCell(numericsSummary(n)))
		b.WriteString("| probe | tokens compared | first differing token | KL (nats/token) |\n|---|---|---|---|\n")
		for _, p := range n.Probes {
			fmt.Fprintf(b, "| %s | %d | %s | %s |\n", mdCell(probeLabel(p)), p.Compared, firstDiffText(p.FirstDiff), formatKL(p.KL))
		}
		b.WriteString("\n")
	}
	if len(r.Probes) > 0 {
		b.WriteString("| probe | verdict | reason |\n|---|---|---|\n")
		for _, p := range r.Probes {
			fmt.Fprintf(b, "| %s | %s | %s |\n", mdCell(p.Name), p.Verdict, mdCell(clip(p.Reason, 200)))
		}
		b.WriteString("\n")
	}
	if len(r.Problems) > 0 {
		b.WriteString("Harness notes (teardown, GPU memory, ports):\n\n")
		for _, p := range r.Problems {
			fmt.Fprintf(b, "- %s\n", mdCell(clip(p, 400)))
		}
		b.WriteString("\n")
	}
	if r.Repro != "" {
		b.WriteString("Command:\n\n")
		b.WriteString(codeBlock(r.Repro))
	}
	if sameAs != "" {
		fmt.Fprintf(b, "Resolved to the same backends as %s.\n\n", mdCell(sameAs))
	}
}

// mdRecommendation renders the recommendation: its sentences, and the
// flags to paste in code blocks.
func mdRecommendation(p *Performance) string {
	var b strings.Builder
	for _, l := range p.rec {
		if l.Flags == "" {
			fmt.Fprintf(&b, "**%s.**\n\n", mdCell(capitalize(l.Text)))
			continue
		}
		fmt.Fprintf(&b, "%s:\n\n", mdCell(capitalize(l.Text)))
		b.WriteString(codeBlock(l.Flags))
		b.WriteString("\n")
	}
	return b.String()
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// codeBlock fences text with more backticks than it contains.
func codeBlock(s string) string {
	fence := "```"
	for strings.Contains(s, fence) {
		fence += "`"
	}
	return fence + "sh\n" + record.Clean(s) + "\n" + fence + "\n"
}
