package across

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

// TestHistories: runs of two configs and of one config on two hosts are
// three histories, each titled; a run stopped on a broken setup counts its
// setup cell's crash as no verdict (no flake, no change), and an
// interrupted run's missing cell is absent; a run an older classifier
// judged is re-judged and says so in every format.
func TestHistories(t *testing.T) {
	c, x := classify.Correct, classify.Crash
	var dirs []string
	var reps []*record.Report
	add := func(name, host string, day int, a, b classify.Verdict) *record.Report {
		rep := runOf(day, a, b)
		rep.Run.Name, rep.Run.Host.Hostname = name, host
		dirs, reps = append(dirs, filepath.Join("runs", name+host+string(rune('a'+day)))), append(reps, rep)
		return rep
	}
	add("h", "gpu", 0, c, c)
	add("h", "gpu", 1, c, c)
	// Its first cells all crashed alike at start: the setup's failure,
	// none a verdict.
	stopped := add("h", "gpu", 2, x, x)
	stopped.Run.SetupStop = "a"
	cut := add("h", "gpu", 3, c, c)
	cut.Run.Interrupted = true
	cut.Results = cut.Results[1:]
	add("h", "gpu", 4, c, c)
	add("other", "gpu", 1, c, x)
	old := add("h", "gpu2", 1, c, c)
	for i := range old.Results {
		old.Results[i].Classifier = "" // as an older bmx recorded it
	}
	hs := Histories(dirs, reps)
	var titles []string
	for _, h := range hs {
		titles = append(titles, h.Title)
	}
	if got, want := strings.Join(titles, "; "), "h on no GPU on gpu; h on no GPU on gpu2; other on no GPU on gpu"; got != want {
		t.Fatalf("titles %q, want %q", got, want)
	}
	h := hs[0]
	if len(h.Runs) != 5 {
		t.Fatalf("%d runs, want 5", len(h.Runs))
	}
	a, b := h.Cells[0], h.Cells[1]
	if a.Strip != "✓✓··✓" || a.Flaky || a.Changes != 0 || !a.Points[2].Unfinished || b.Strip != "✓✓·✓✓" || b.Changes != 0 {
		t.Errorf("a %s (flaky %v, %d changes), b %s: the aborted runs' cells counted", a.Strip, a.Flaky, a.Changes, b.Strip)
	}
	if h.Runs[2].Aborted != "stopped on a broken setup after a" || h.Runs[3].Aborted != "interrupted" {
		t.Errorf("aborted: %q, %q", h.Runs[2].Aborted, h.Runs[3].Aborted)
	}
	judged := "judged by an older classifier (unrecorded); re-judged with this bmx's (" + classify.Fingerprint() + ")"
	if hs[1].Runs[0].Judged != judged || h.Runs[0].Judged != "" {
		t.Errorf("judged: %q, %q; want %q and none", hs[1].Runs[0].Judged, h.Runs[0].Judged, judged)
	}
	for _, f := range HistoryFormats {
		var buf bytes.Buffer
		if err := RenderHistories(&buf, hs, f); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		if f == "html" {
			out = strings.ReplaceAll(out, "&#39;", "'")
		}
		for _, want := range append(titles, judged, "stopped on a broken setup after a", "interrupted") {
			if !strings.Contains(out, want) {
				t.Errorf("%s lacks %q", f, want)
			}
		}
		if f == "html" {
			// Three groups share cell names: every section's id is
			// its own, the first group's the ones other pages link to.
			ids := regexp.MustCompile(`id="([^"]*)"`).FindAllStringSubmatch(out, -1)
			seen := map[string]bool{}
			for _, m := range ids {
				if seen[m[1]] {
					t.Errorf("html: id %q repeated", m[1])
				}
				seen[m[1]] = true
			}
			if a := CellAnchor(h.Cells[0].Cell); !seen[a] || len(ids) != 6 {
				t.Errorf("html: %d ids, first group's %q there: %v", len(ids), a, seen[a])
			}
		}
		if f == "json" {
			var back []History
			if err := json.Unmarshal(buf.Bytes(), &back); err != nil || len(back) != 3 {
				t.Errorf("json: %d histories, %v", len(back), err)
			}
		}
	}
}

// TestPublishAborted: a host whose latest run stopped on a broken setup
// draws its setup cell's crash as no verdict, says why, and does not count it.
func TestPublishAborted(t *testing.T) {
	c, x := classify.Correct, classify.Crash
	ok, stopped := runOf(0, c, c), runOf(1, x, x)
	stopped.Run.SetupStop = "a"
	for _, rep := range []*record.Report{ok, stopped} {
		rep.Run.Axes = []record.AxisValues{{Name: "k", Values: []string{"a", "b"}}}
		for i := range rep.Results {
			rep.Results[i].Cell.Values = []matrix.AxisValue{{Axis: "k", Value: rep.Results[i].Cell.ID}}
		}
	}
	site, err := Publish(t.TempDir(), []string{"runs/ok", "runs/stopped"}, []*record.Report{ok, stopped})
	if err != nil {
		t.Fatal(err)
	}
	g := site.Hosts[0].Grids[0]
	if g.Summary != "2 crashed on the broken setup (not counted)" || g.Aborted != "stopped on a broken setup after a" {
		t.Errorf("summary %q, aborted %q", g.Summary, g.Aborted)
	}
	for _, cell := range g.Rows[0].Cells {
		if cell.Verdict != "none" || !strings.Contains(cell.Shown, "not counted") {
			t.Errorf("a setup crash drawn as %s (%s)", cell.Verdict, cell.Shown)
		}
	}
}

// TestPublishBisect: of a verdict bisect done twice, the site draws the
// one that found the change, not the later one that was interrupted; a
// perf bisect, whose steps are all correct, draws its bad side as slower
// and says its finding.
func TestPublishBisect(t *testing.T) {
	root := t.TempDir()
	c, x := classify.Correct, classify.Crash
	var dirs []string
	var reps []*record.Report
	bisect := func(name, mode string, day int, verdicts []classify.Verdict, sides []string, found bool) {
		dir := filepath.Join(root, "runs", name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		run := &record.Run{Name: "b", Started: time.Date(2026, 3, 1+day, 0, 0, 0, 0, time.UTC), Host: record.Host{Hostname: "gpu"},
			Axes: []record.AxisValues{{Name: "v", Values: []string{"1", "2", "3"}}}, Interrupted: !found}
		b := &record.Bisect{Cell: "m=x", Along: "v", Values: []string{"1", "2", "3"}, Mode: mode, Done: found}
		var results []record.Result
		for i, v := range verdicts {
			val := b.Values[i]
			id := "m=x,v=" + val
			results = append(results, record.Result{Cell: matrix.Cell{ID: id, Values: []matrix.AxisValue{{Axis: "v", Value: val}}}, Verdict: v, Classifier: classify.Fingerprint()})
			b.Steps = append(b.Steps, record.BisectStep{Value: val, Index: i, Cell: id, Verdict: v, Side: sides[i], Why: "tok/s 100 -> 50"})
		}
		if found {
			b.Finding = &record.BisectFinding{LastGood: "1", FirstBad: "2", Text: "the change " + name + " found"}
		}
		if err := record.WriteBisect(dir, b); err != nil {
			t.Fatal(err)
		}
		dirs, reps = append(dirs, dir), append(reps, &record.Report{Run: run, Results: results})
	}
	bisect("found", record.BisectVerdict, 0, []classify.Verdict{c, x, x}, []string{"good", "bad", "bad"}, true)
	bisect("cut", record.BisectVerdict, 1, []classify.Verdict{c}, []string{"good"}, false)
	bisect("perf", record.BisectPerf, 2, []classify.Verdict{c, c, c}, []string{"good", "bad", "bad"}, true)
	site, err := Publish(filepath.Join(root, "site"), dirs, reps)
	if err != nil {
		t.Fatal(err)
	}
	grids := map[string]siteGrid{}
	for _, h := range site.Hosts {
		for _, g := range h.Grids {
			grids[g.Config] = g
		}
	}
	v, p := grids["b: m=x by verdict"], grids["b: m=x by perf"]
	if v.Run != "found" || !strings.Contains(v.Finding, "first bad v=2 (last good: 1): the change found found") || !strings.Contains(v.Later, "a later bisect (cut) found nothing: interrupted") {
		t.Errorf("verdict bisect drawn from %s: finding %q, later %q", v.Run, v.Finding, v.Later)
	}
	if !strings.Contains(p.Finding, "bisect on a performance drop: first bad v=2") {
		t.Errorf("perf bisect's finding: %q", p.Finding)
	}
	var marks []string
	for _, c := range p.Rows[0].Cells {
		marks = append(marks, c.Verdict)
	}
	if got := strings.Join(marks, ","); got != "correct,perf-bad,perf-bad" {
		t.Errorf("perf bisect's cells %s, want its bad side drawn slower", got)
	}
	index, err := os.ReadFile(filepath.Join(root, "site", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"the change found found", "the change perf found", "a later bisect (cut) found nothing", "slower: bad side of the bisect"} {
		if !strings.Contains(string(index), want) {
			t.Errorf("index.html lacks %q", want)
		}
	}
}
