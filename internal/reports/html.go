package reports

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/record"
)

//go:embed templates/report.html.tmpl
var htmlTemplate string

// reportHTML is the parsed template, parsed on first use: every bmx process
// links this package (a server's supervisor too), and parsing it took 1.7
// ms of each one's start.
var reportHTML = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"verdictClass": verdictClass,
		"add":          func(a, b int) int { return a + b },
		"wbr":          wbr,
	}).Parse(htmlTemplate))
})

// verdictClass is the CSS class of a verdict as shown: correct* is styled
// as correct, a predicted cell, "(crash)", as predicted (hatched).
func verdictClass(v string) string {
	if isPredictedShown(v) {
		return string(classify.Predicted)
	}
	return strings.TrimSuffix(v, record.ShapeOnlyMark)
}

// verdictGlyphs mark each verdict with a sign besides its colour, so the
// grid reads in greyscale and to colour-blind readers: nan and crash, both
// reddish, are ∞ and ↯. All are in DejaVu Sans and the usual system fonts.
// The style sheet puts them before the verdict's word (.v-nan::before), so
// every verdict badge has one.
var verdictGlyphs = map[string]string{
	string(classify.Correct):      "✓",
	string(classify.Degraded):     "≈",
	string(classify.Inconclusive): "?",
	string(classify.Flaky):        "±",
	string(classify.Wrong):        "✗",
	string(classify.Garbage):      "‽",
	string(classify.NaN):          "∞",
	string(classify.Hang):         "◷",
	string(classify.Crash):        "↯",
	string(classify.Skipped):      "↷",
	string(classify.Excluded):     "⊘",
	string(classify.Predicted):    "◌",
	"none":                        "·",
}

// verdictMeanings are the legend's words for each verdict.
var verdictMeanings = map[classify.Verdict]string{
	classify.Correct:      "every probe answered as expected",
	classify.Degraded:     "answers pass, numerics diverge from the reference",
	classify.Inconclusive: "the harness could not judge the cell",
	classify.Flaky:        "failed, then passed on a retry",
	classify.Wrong:        "answers that are wrong",
	classify.Garbage:      "answers that are not language",
	classify.NaN:          "NaN/inf in the logits",
	classify.Hang:         "alive but not answering",
	classify.Crash:        "the server died",
	classify.Skipped:      "not run",
	classify.Excluded:     "excluded by the config",
	classify.Predicted:    "not started (--prune), verdict in parentheses",
}

// wbr escapes s and lets a line break after each , = _ / in it, so a cell
// ID or an axis value breaks between its parts rather than anywhere.
func wbr(s string) template.HTML {
	return template.HTML(wbrRe.ReplaceAllString(template.HTMLEscapeString(s), "$1<wbr>"))
}

var wbrRe = regexp.MustCompile(`([,=_/])`)

// htmlLogLines is how much of a cell's log the HTML report shows.
const htmlLogLines = 40

type htmlData struct {
	Name, Summary, ProbeSet, Started, Ended, ReferenceProblem, Judged, Version, DegradedLegend, ShapeOnlyLegend, PredictedLegend, News string
	Blame                                                                                                                              []string
	Simulated                                                                                                                          bool
	Host                                                                                                                               record.Host
	Versions                                                                                                                           []htmlKV
	Grid                                                                                                                               *htmlGrid
	Legend, Glyphs                                                                                                                     []htmlLegend
	HasKnown                                                                                                                           bool
	Known                                                                                                                              []htmlKnown
	Causes                                                                                                                             []htmlCause
	Cells                                                                                                                              []htmlCell
	Perf                                                                                                                               *htmlPerf
	Cost                                                                                                                               htmlCost
	Config                                                                                                                             htmlConfig
}

// htmlCost is the run's wall time and GPU time, and how they were counted.
type htmlCost struct {
	Wall, GPUHours, How string
}

// htmlConfig is the run's config snapshot (secrets redacted when the run
// was recorded) and the run-level settings.
type htmlConfig struct {
	Path, Text string
	Lines      int
	Settings   []htmlKV
	Vars       []htmlKV
	Notes      []string
}

type htmlLegend struct {
	Verdict, Meaning string
}

// htmlKnown is one [[known]] issue of the config and the cells it matched.
type htmlKnown struct {
	Match, Verdict string
	Note, Issue    []htmlText
	Cells          []htmlLink
}

// htmlText is a piece of text; a piece with a URL is a link to it.
type htmlText struct {
	Text, URL string
}

// htmlLink is a cell named by its ID, linking to its section.
type htmlLink struct {
	ID, Anchor string
}

type htmlCause struct {
	Verdict   classify.Verdict
	Signature string
	Cells     []htmlLink
}

// htmlPerf is the performance section.
type htmlPerf struct {
	Caption        string
	Header         []string
	Lines          []htmlPerfLine
	Problems       []string
	Recommendation []recLine
	Chart          *htmlChart
}

type htmlPerfLine struct {
	perfLine
	Anchor string
}

type htmlKV struct{ Name, Value string }

type htmlGrid struct {
	Corner string
	Cols   []string
	Rows   []htmlRow
}

type htmlRow struct {
	Name  string
	Cells []htmlGridCell
}

// htmlGridCell is one grid cell: the verdict as shown, the cell's section,
// and its known-issue mark.
type htmlGridCell struct {
	Text, Anchor, Title string
	Mark                htmlMark
}

// htmlMark is a cell's known-issue status as a short word: known (XFAIL),
// unexpected, or xpass.
type htmlMark struct {
	Text, Class string
}

type htmlCell struct {
	ID, Anchor, Verdict, Reason, Signature, Evidence, SameAs, Repro, Log, LogPath, Slot, Exit, Timings, Ran string
	Status                                                                                                  string
	Mark                                                                                                    htmlMark
	Known                                                                                                   *htmlKnownNote
	Problems                                                                                                []string
	Teardown                                                                                                []htmlKV
	Forensics                                                                                               *htmlForensics
	Attempts                                                                                                []string
	Prediction                                                                                              string
	Resolved                                                                                                []htmlKV
	Probes                                                                                                  []htmlProbe
	Numerics                                                                                                *htmlNumerics
}

// htmlKnownNote is the known issue that matched a cell.
type htmlKnownNote struct {
	Status, Expected, Match, Verdict string
	Note, Issue                      []htmlText
}

// htmlForensics is what was captured of a hung server before it was killed.
type htmlForensics struct {
	PIDs      string
	Notes     []string
	PySpy     []htmlKV
	NvidiaSMI string
}

type htmlNumerics struct {
	Reference, Summary string
	Probes             []htmlNumericsProbe
}

type htmlNumericsProbe struct {
	Name, FirstDiff, KL string
	Compared            int
}

type htmlProbe struct {
	Name, Verdict, Reason, Text string
}

// HTML renders one standalone page: inline CSS, no scripts or fetches. The
// header has the run's wall time, GPU-hours and config snapshot; the grid
// shows each cell's verdict by colour and glyph, with its known-issue mark,
// and links to the cell's section, which has the evidence (answers,
// numerics, teardown, hang forensics, log tail, command). html/template
// escapes every string from a server; ANSI escapes and control characters
// are removed first. Only http(s) URLs in a known issue become links.
func HTML(w io.Writer, rep *record.Report) error { return HTMLWith(w, rep, nil) }

// HTMLWith is HTML of a run swept against a baseline run (nil: none): its
// news says what is new since then, as the gate does.
func HTMLWith(w io.Writer, rep, baseline *record.Report) error {
	d := htmlData{
		Name: record.Clean(rep.Run.Name), Summary: SummaryLine(rep), ProbeSet: record.Clean(rep.Run.ProbeSet), Simulated: rep.Run.Simulated,
		Started: rep.Run.Started.UTC().Format("2006-01-02 15:04 UTC"), ReferenceProblem: record.Clean(ReferenceProblem(rep)), Judged: rep.JudgedNote,
		Version: record.Clean(rep.Run.BMXVersion), Host: cleanHost(rep.Run.Host),
		DegradedLegend:  degradedLegend(rep),
		ShapeOnlyLegend: ShapeOnlyLegend(rep),
		PredictedLegend: PredictedLegend(rep),
		News:            record.Clean(NewsLineWith(rep, baseline)),
		Blame:           cleanAll(BlameOf(rep).Lines()),
		HasKnown:        len(rep.Run.Known) > 0,
		Cost:            runCost(rep),
		Config:          configSnapshot(rep.Run),
	}
	if !rep.Run.Ended.IsZero() {
		d.Ended = rep.Run.Ended.UTC().Format("2006-01-02 15:04 UTC")
	}
	for _, k := range slices.Sorted(maps.Keys(rep.Run.Host.Versions)) {
		d.Versions = append(d.Versions, htmlKV{record.Clean(k), record.Clean(rep.Run.Host.Versions[k])})
	}
	anchors := cellAnchors(rep.Results)
	link := func(id string) htmlLink { return htmlLink{ID: record.Clean(id), Anchor: anchors[id]} }
	if g, ok := gridOf(rep); ok {
		d.Grid = htmlGridOf(rep, g, anchors)
	}
	for _, v := range append(slices.Clone(classify.Verdicts), classify.Skipped, classify.Excluded, classify.Predicted) {
		d.Legend = append(d.Legend, htmlLegend{Verdict: string(v), Meaning: verdictMeanings[v]})
	}
	// The glyphs go in the style sheet, before each verdict's word.
	for _, v := range slices.Sorted(maps.Keys(verdictGlyphs)) {
		d.Glyphs = append(d.Glyphs, htmlLegend{Verdict: v, Meaning: verdictGlyphs[v]})
	}
	for i, k := range rep.Run.Known {
		hk := htmlKnown{Match: record.Clean(mapText(k.Match)), Verdict: record.Clean(k.Verdict), Note: linkify(k.Note), Issue: linkify(k.Issue)}
		for _, r := range rep.Results {
			if _, m := Status(rep, r); m == &rep.Run.Known[i] {
				hk.Cells = append(hk.Cells, link(r.Cell.ID))
			}
		}
		d.Known = append(d.Known, hk)
	}
	for _, c := range Clusters(rep) {
		hc := htmlCause{Verdict: c.Verdict, Signature: record.Clean(c.Signature)}
		for _, id := range c.Cells {
			hc.Cells = append(hc.Cells, link(id))
		}
		d.Causes = append(d.Causes, hc)
	}
	if perf := PerformanceOf(rep); perf != nil {
		hp := &htmlPerf{Caption: capitalize(perf.caption()), Header: perfHeader, Chart: perfChart(perf)}
		for _, l := range perf.lines() {
			hl := htmlPerfLine{perfLine: l, Anchor: anchors[l.Cell]}
			hl.Cell = record.Clean(l.Cell)
			hp.Lines = append(hp.Lines, hl)
		}
		hp.Problems = cleanAll(perf.problemLines())
		for _, l := range perf.rec {
			hp.Recommendation = append(hp.Recommendation, recLine{Text: record.Clean(capitalize(l.Text)), Flags: record.Clean(l.Flags)})
		}
		d.Perf = hp
	}
	same := SameAs(rep)
	for _, r := range rep.Results {
		d.Cells = append(d.Cells, htmlCellOf(rep, r, anchors[r.Cell.ID], same[r.Cell.ID]))
	}
	return reportHTML().Execute(w, d)
}

// htmlGridOf is the grid with each cell's link and known-issue mark.
func htmlGridOf(rep *record.Report, g *grid, anchors map[string]string) *htmlGrid {
	// The grid holds verdict texts by position; the results are found
	// again by the same position to link them.
	at := map[[2]string]record.Result{}
	for _, r := range rep.Results {
		at[gridPos(rep, r.Cell)] = r
	}
	hg := &htmlGrid{Corner: record.Clean(g.rowAxis + ` \ ` + g.colAxis)}
	for _, c := range g.cols {
		hg.Cols = append(hg.Cols, record.Clean(c))
	}
	for _, row := range g.rows {
		hr := htmlRow{Name: record.Clean(row)}
		for _, col := range g.cols {
			c := htmlGridCell{Text: g.at(row, col)}
			if c.Text == "-" {
				c.Text = "none"
			}
			if r, ok := at[[2]string{row, col}]; ok && c.Text == r.Shown() {
				c.Anchor = anchors[r.Cell.ID]
				c.Mark = statusMark(rep, r)
				c.Title = record.Clean(r.Cell.ID + ": " + r.Shown())
				if st := statusText(rep, r); st != "" {
					c.Title += " (" + record.Clean(st) + ")"
				}
			}
			hr.Cells = append(hr.Cells, c)
		}
		hg.Rows = append(hg.Rows, hr)
	}
	return hg
}

// statusMark is a cell's known-issue status as the grid marks it.
func statusMark(rep *record.Report, r record.Result) htmlMark {
	switch st, _ := Status(rep, r); st {
	case XFail:
		return htmlMark{Text: "known", Class: "xfail"}
	case Unexpected:
		return htmlMark{Text: "unexpected", Class: "unexpected"}
	case KnownChanged:
		// Known to fail otherwise: as much news as an unexpected failure.
		return htmlMark{Text: "changed", Class: "unexpected"}
	case XPass:
		return htmlMark{Text: "xpass", Class: "xpass"}
	}
	return htmlMark{}
}

// htmlCellOf is a cell's section of the page, every text cleaned.
func htmlCellOf(rep *record.Report, r record.Result, anchor, sameAs string) htmlCell {
	c := htmlCell{
		ID: record.Clean(r.Cell.ID), Anchor: anchor, Verdict: r.Shown(),
		Reason: record.Clean(r.Reason), Signature: record.Clean(r.Signature), Evidence: cleanLines(r.Evidence),
		SameAs: record.Clean(sameAs), Repro: record.Clean(r.Repro), Log: cleanLines(lastLines(r.LogTail, htmlLogLines)),
		LogPath: record.Clean(r.LogPath), Mark: statusMark(rep, r), Timings: timingsText(r),
	}
	if r.Verdict != classify.Predicted && r.Verdict != classify.Skipped {
		c.Slot = "all GPUs"
		if n := slotGPUs(r.Slot, record.Host{}); n == 1 {
			c.Slot = "GPU " + record.Clean(r.Slot)
		} else if n > 1 {
			c.Slot = "GPUs " + record.Clean(r.Slot)
		}
	}
	if !r.Started.IsZero() && !r.Ended.IsZero() {
		c.Ran = fmt.Sprintf("%s to %s", r.Started.UTC().Format("15:04:05"), r.Ended.UTC().Format("15:04:05 UTC"))
	}
	st, k := Status(rep, r)
	c.Status = st
	if k != nil {
		c.Known = &htmlKnownNote{Status: st, Match: record.Clean(mapText(k.Match)), Verdict: record.Clean(k.Verdict), Note: linkify(k.Note), Issue: linkify(k.Issue)}
		if st == KnownChanged {
			c.Known.Expected = record.Clean(k.Verdict)
		}
	}
	if r.Exit != nil {
		c.Exit = record.Clean(r.Exit.String())
	}
	c.Teardown = htmlTeardown(r)
	for _, p := range r.Problems {
		c.Problems = append(c.Problems, record.Clean(p))
	}
	if f := r.Forensics; f != nil {
		c.Forensics = htmlForensicsOf(f)
	}
	for i, a := range r.Attempts {
		s := fmt.Sprintf("attempt %d: %s: %s", i+1, a.Verdict, a.Reason)
		if a.Signature != "" {
			s += " (" + a.Signature + ")"
		}
		c.Attempts = append(c.Attempts, record.Clean(s))
	}
	if p := r.Prediction; p != nil {
		c.Prediction = record.Clean(p.Text())
	}
	for _, k := range slices.Sorted(maps.Keys(r.Resolved)) {
		c.Resolved = append(c.Resolved, htmlKV{record.Clean(k), record.Clean(r.Resolved[k])})
	}
	if n := r.Numerics; n != nil {
		c.Numerics = &htmlNumerics{Reference: record.Clean(n.Reference), Summary: numericsSummary(n)}
		for _, p := range n.Probes {
			c.Numerics.Probes = append(c.Numerics.Probes, htmlNumericsProbe{Name: record.Clean(probeLabel(p)), FirstDiff: firstDiffText(p.FirstDiff), KL: formatKL(p.KL), Compared: p.Compared})
		}
	}
	c.Probes = htmlProbesOf(r)
	return c
}

// htmlTeardown is how a cell's server ended: how bmx stopped it, the fatal
// log line, a timeout, escaped processes and how long the stop took.
func htmlTeardown(r record.Result) []htmlKV {
	var td []htmlKV
	if r.Stop != "" {
		td = append(td, htmlKV{"stopped with", record.Clean(r.Stop)})
	}
	if r.Fatal != "" {
		td = append(td, htmlKV{"fatal log line", record.Clean(r.Fatal)})
	}
	if r.TimedOut {
		td = append(td, htmlKV{"timed out", "yes: bmx stopped waiting"})
	}
	if r.Orphans > 0 {
		td = append(td, htmlKV{"escaped processes", fmt.Sprintf("%d, killed after the process group", r.Orphans)})
	}
	if t := r.Timings; t.StopMS > 0 || t.GPUWaitMS > 0 {
		s := fmtMS(t.StopMS)
		if t.GPUWaitMS > 0 {
			s += fmt.Sprintf(", of which %s waiting for the GPU memory to be free", fmtMS(t.GPUWaitMS))
		}
		td = append(td, htmlKV{"stop took", s})
	}
	return td
}

// htmlForensicsOf is what was captured of a hung server, cleaned for the page.
func htmlForensicsOf(f *evidence.Forensics) *htmlForensics {
	hf := &htmlForensics{NvidiaSMI: cleanLines(f.NvidiaSMI), Notes: cleanAll(f.Notes)}
	var pids []string
	for _, p := range f.PIDs {
		pids = append(pids, fmt.Sprint(p))
	}
	hf.PIDs = strings.Join(pids, ", ")
	for _, d := range f.PySpy {
		hf.PySpy = append(hf.PySpy, htmlKV{fmt.Sprint(d.PID), cleanLines(d.Output)})
	}
	return hf
}

// htmlProbesOf is each probe's verdict and reason with the text the server
// answered it.
func htmlProbesOf(r record.Result) []htmlProbe {
	var out []htmlProbe
	for _, p := range r.Probes {
		hp := htmlProbe{Name: record.Clean(p.Name), Verdict: string(p.Verdict), Reason: record.Clean(p.Reason)}
		for _, o := range r.Observations {
			if o.Probe == p.Name {
				hp.Text = cleanLines(clip(o.Text, 1000))
				break
			}
		}
		out = append(out, hp)
	}
	return out
}

// timingsText is a cell's phases: "ready 10.8 s, probes 1.61 s, stop
// 204 ms, total 16.2 s".
func timingsText(r record.Result) string {
	t := r.Timings
	if t.TotalMS == 0 {
		return ""
	}
	var parts []string
	if t.ReadyMS > 0 {
		parts = append(parts, "ready "+fmtMS(t.ReadyMS))
	} else {
		parts = append(parts, "never ready")
	}
	if t.ProbesMS > 0 {
		parts = append(parts, "probes "+fmtMS(t.ProbesMS))
	}
	if t.PerfMS > 0 {
		parts = append(parts, "performance "+fmtMS(t.PerfMS))
	}
	parts = append(parts, "stop "+fmtMS(t.StopMS), "total "+fmtMS(t.TotalMS))
	return strings.Join(parts, ", ")
}

func fmtMS(ms int64) string {
	switch {
	case ms < 1000:
		return fmt.Sprintf("%d ms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.3g s", float64(ms)/1000)
	}
	return (time.Duration(ms) * time.Millisecond).Round(time.Second).String()
}

// runCost is the run's wall time and its GPU-hours: each cell's wall time
// (start to end, loading the server to the GPUs being free again) times the
// number of GPUs of its slot, summed.
func runCost(rep *record.Report) htmlCost {
	var c htmlCost
	run := rep.Run
	switch {
	case run.Started.IsZero():
	case run.Ended.IsZero():
		c.Wall = "no end recorded (the run was interrupted or is still going)"
	default:
		c.Wall = run.Ended.Sub(run.Started).Round(time.Second).String() + " from start to end"
		if run.Resumed > 0 {
			c.Wall += fmt.Sprintf(" (resumed %s: the time between the runs counts)", plural(run.Resumed, "time"))
		}
	}
	var gpuTime, cellTime time.Duration
	cells := 0
	slots := map[string]int{}
	for _, r := range rep.Results {
		var d time.Duration
		switch {
		case !r.Started.IsZero() && r.Ended.After(r.Started):
			d = r.Ended.Sub(r.Started)
		default:
			d = time.Duration(r.Timings.TotalMS) * time.Millisecond
		}
		if d <= 0 {
			continue
		}
		n := slotGPUs(r.Slot, run.Host)
		slots[r.Slot] = n
		cells++
		cellTime += d
		gpuTime += d * time.Duration(n)
	}
	if cells == 0 {
		return c
	}
	c.GPUHours = gpuHoursText(gpuTime)
	var per []string
	for _, s := range slices.Sorted(maps.Keys(slots)) {
		name := "slot " + record.Clean(s)
		if s == "" {
			name = "all GPUs"
		}
		per = append(per, fmt.Sprintf("%s = %s", name, plural(slots[s], "GPU")))
	}
	c.How = fmt.Sprintf("each cell's wall time, from starting its server to its GPUs being free again, times the GPUs of its slot (%s), summed over the %d cells that ran for %s in all",
		strings.Join(per, "; "), cells, cellTime.Round(time.Second))
	if len(run.Host.GPUs) == 0 {
		c.How += "; the host reported no GPUs"
		if run.Simulated {
			c.How += " (simulated)"
		}
	}
	return c
}

// gpuHoursText is "0.20 GPU-hours", with the GPU time itself when that is
// under an hour ("0.0014 GPU-hours (5s)").
func gpuHoursText(d time.Duration) string {
	h := d.Hours()
	switch {
	case d == 0:
		return "0 GPU-hours"
	case h >= 1:
		return fmt.Sprintf("%.2f GPU-hours", h)
	}
	return fmt.Sprintf("%.2g GPU-hours (%s)", h, d.Round(time.Second))
}

// slotGPUs counts a slot's GPUs: "0,1" is two, "" is all the host's.
func slotGPUs(slot string, h record.Host) int {
	if strings.TrimSpace(slot) == "" {
		return len(h.GPUs)
	}
	n := 0
	for _, g := range strings.Split(slot, ",") {
		if strings.TrimSpace(g) != "" {
			n++
		}
	}
	return n
}

// configSnapshot is the run's config text as run.json holds it: redacted
// when the run was recorded, shown as it is (never un-redacted).
func configSnapshot(run *record.Run) htmlConfig {
	c := htmlConfig{Path: record.Clean(run.ConfigPath), Text: cleanLines(run.Config), Notes: cleanAll(run.Notes)}
	if run.Config != "" {
		c.Lines = strings.Count(strings.TrimRight(run.Config, "\n"), "\n") + 1
	}
	for _, k := range slices.Sorted(maps.Keys(run.Vars)) {
		c.Vars = append(c.Vars, htmlKV{record.Clean(k), record.Clean(run.Vars[k])})
	}
	add := func(name, value string) {
		if value != "" {
			c.Settings = append(c.Settings, htmlKV{name, record.Clean(value)})
		}
	}
	add("reference", run.Reference)
	if len(run.Only) > 0 {
		add("only", strings.Join(run.Only, "; "))
	}
	if len(run.Slots) > 0 {
		add("slots", strings.Join(run.Slots, "; "))
	}
	add("order", run.Order)
	if run.Prune > 0 {
		add("prune after", fmt.Sprint(run.Prune))
	}
	if run.Resumed > 0 {
		add("resumed", plural(run.Resumed, "time"))
	}
	if run.Interrupted {
		add("interrupted", "yes")
	}
	return c
}

// urlRe finds http(s) URLs in known-issue text.
var urlRe = regexp.MustCompile(`https?://[^\s<>"'` + "`" + `]+`)

// linkify cuts text into plain pieces and URL pieces; the template makes a
// link of each URL piece. Trailing punctuation stays out of the URL.
func linkify(s string) []htmlText {
	s = record.Clean(s)
	var out []htmlText
	for s != "" {
		loc := urlRe.FindStringIndex(s)
		if loc == nil {
			out = append(out, htmlText{Text: s})
			break
		}
		u := strings.TrimRight(s[loc[0]:loc[1]], ".,;:!?)]}")
		if loc[0] > 0 {
			out = append(out, htmlText{Text: s[:loc[0]]})
		}
		if len(u) > len("https://") {
			out = append(out, htmlText{Text: u, URL: u})
		} else {
			out = append(out, htmlText{Text: u})
		}
		s = s[loc[0]+len(u):]
	}
	return out
}

// cellAnchors gives each cell an id for its section: "cell-" and the cell
// ID made safe (runs of other characters become "-"), then a hash of the
// exact ID, so IDs that differ only in punctuation get different anchors.
// An anchor depends only on its cell's ID.
func cellAnchors(results []record.Result) map[string]string {
	out := map[string]string{}
	used := map[string]bool{}
	for _, r := range results {
		id := r.Cell.ID
		if _, ok := out[id]; ok {
			continue
		}
		a := cellAnchor(id)
		for i := 2; used[a]; i++ { // a hash collision: never seen, but ids must be unique
			a = fmt.Sprintf("%s-%d", cellAnchor(id), i)
		}
		used[a] = true
		out[id] = a
	}
	return out
}

func cellAnchor(id string) string {
	slug := strings.Trim(anchorRe.ReplaceAllString(id, "-"), "-")
	if r := []rune(slug); len(r) > 80 {
		slug = strings.TrimRight(string(r[:80]), "-")
	}
	sum := sha256.Sum256([]byte(id))
	if slug == "" {
		return "cell-" + hex.EncodeToString(sum[:4])
	}
	return "cell-" + slug + "-" + hex.EncodeToString(sum[:4])
}

var anchorRe = regexp.MustCompile(`[^A-Za-z0-9_]+`)

// cleanLines is Clean that keeps line breaks, for text shown in <pre>.
func cleanLines(s string) string {
	s = ansiRe.ReplaceAllString(strings.ToValidUTF8(s, "\uFFFD"), "")
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func cleanHost(h record.Host) record.Host {
	h.Hostname, h.OS, h.Arch, h.Driver, h.CUDA = record.Clean(h.Hostname), record.Clean(h.OS), record.Clean(h.Arch), record.Clean(h.Driver), record.Clean(h.CUDA)
	h.GPUs = slices.Clone(h.GPUs)
	for i := range h.GPUs {
		h.GPUs[i].Name, h.GPUs[i].ComputeCap = record.Clean(h.GPUs[i].Name), record.Clean(h.GPUs[i].ComputeCap)
	}
	var notes []string
	for _, n := range h.Notes {
		notes = append(notes, record.Clean(n))
	}
	h.Notes = notes
	return h
}
