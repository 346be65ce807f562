package across

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/record"
)

// views renders what history and publish show of the runs in dirs: each
// history format and every file of the published site, by path.
type views map[string][]byte

func (v views) history(t *testing.T, hs []*History) {
	t.Helper()
	for _, format := range HistoryFormats {
		var b bytes.Buffer
		if err := RenderHistories(&b, hs, format); err != nil {
			t.Fatal(err)
		}
		v["history."+format] = b.Bytes()
	}
}

func (v views) site(t *testing.T, out string) {
	t.Helper()
	err := filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		rel, _ := filepath.Rel(out, path)
		v["site/"+filepath.ToSlash(rel)] = data
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// fullViews are the views of the runs read in full (record.Load), as
// bmx read them before summaries: one read serves history and publish (the
// views are byte for byte those of a read each; the judging is the cost).
func fullViews(t *testing.T, dirs []string) views {
	t.Helper()
	load := func() []*record.Report {
		var reps []*record.Report
		for _, d := range dirs {
			rep, err := record.Load(d)
			if err != nil {
				t.Fatal(err)
			}
			reps = append(reps, rep)
		}
		return reps
	}
	v := views{}
	reps := load()
	v.history(t, Histories(dirs, reps))
	out := t.TempDir()
	if _, err := Publish(out, dirs, reps); err != nil {
		t.Fatal(err)
	}
	v.site(t, out)
	return v
}

// summaryViews are the views of the runs' summaries (record.LoadSummary).
func summaryViews(t *testing.T, dirs []string) views {
	t.Helper()
	load := func() []*record.Summary {
		var sums []*record.Summary
		for _, d := range dirs {
			s, err := record.LoadSummary(d)
			if err != nil {
				t.Fatal(err)
			}
			sums = append(sums, s)
		}
		return sums
	}
	v := views{}
	hs, err := HistoriesOf(load())
	if err != nil {
		t.Fatal(err)
	}
	v.history(t, hs)
	out := t.TempDir()
	if _, err := PublishOf(out, load()); err != nil {
		t.Fatal(err)
	}
	v.site(t, out)
	return v
}

// sameViews fails the test where got differs from want.
func sameViews(t *testing.T, what string, want, got views) {
	t.Helper()
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	}) {
		if !bytes.Equal(want[k], got[k]) {
			a, b := string(want[k]), string(got[k])
			i := 0
			for i < len(a) && i < len(b) && a[i] == b[i] {
				i++
			}
			t.Errorf("%s: %s differs at byte %d:\nfull:    %q\nsummary: %q", what, k, i, clip(a, i), clip(b, i))
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d views, the full read %d", what, len(got), len(want))
	}
}

func clip(s string, i int) string {
	return s[max(0, i-80):min(len(s), i+160)]
}

// TestSummaryViewsSame: history (every format) and the published site read
// from the runs' summaries are, byte for byte, what reading the runs in
// full gives: nightly runs of real sim lines with flips and a slowdown, a
// second config, an interrupted night, a night judged by an older
// classifier (re-judged), and runs that lost their reference and are
// judged against an earlier run's yardstick. The summaries are made by the
// first read (cold) and read back by the second (warm); a night appended to
// after its summary was made is read afresh.
func TestSummaryViewsSame(t *testing.T) {
	root := t.TempDir()
	// Four nights have each kind of night once (the weekly run, the
	// interrupted night 2, the slowdown on night 3), as seven did: what
	// is checked is that the two reads agree, not how many nights there are.
	dirs := writeNights(t, root, nights{Rows: 2, Cols: 13, Nights: 4, Aborted: 2, SlowFrom: 3})
	stale := dirs[3]
	f, err := os.Open(filepath.Join(stale, record.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	rs, _, err := record.ReadResults(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	for i := range rs {
		rs[i].Classifier = "0123456789ab"
	}
	if err := record.WriteResults(filepath.Join(stale, record.ResultsFile), rs); err != nil {
		t.Fatal(err)
	}
	for i, day := range []int{1, 2, 3} {
		ref := riverA
		if i > 0 {
			ref = "" // lost its reference: judged against day 1's yardstick
		}
		rep := riverRun(day, "/ci/probes.toml", ref, riverB)
		dir := filepath.Join(root, rep.Label())
		os.MkdirAll(dir, 0o755)
		if err := record.WriteRun(dir, rep.Run); err != nil {
			t.Fatal(err)
		}
		if err := record.WriteResults(filepath.Join(dir, record.ResultsFile), rep.Results); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}

	want := fullViews(t, dirs)
	if !strings.Contains(string(want["history.md"]), "re-judged with this bmx's") || !strings.Contains(string(want["history.md"]), "interrupted") {
		t.Fatalf("the runs lack a re-judged or an interrupted night:\n%.2000s", want["history.md"])
	}
	if !strings.Contains(string(want["history.json"]), `"yardstick": "baseline `) || !strings.Contains(string(want["history.json"]), `"perf_shift"`) {
		t.Fatalf("the runs lack a lent yardstick or a perf shift:\n%.3000s", want["history.json"])
	}
	sameViews(t, "cold", want, summaryViews(t, dirs))
	made := map[string][]byte{}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, record.SummaryFile))
		if err != nil {
			t.Fatalf("no summary was written beside %s: %v", d, err)
		}
		made[d] = b
	}
	sameViews(t, "warm", want, summaryViews(t, dirs))
	for _, d := range dirs {
		if b, _ := os.ReadFile(filepath.Join(d, record.SummaryFile)); !bytes.Equal(b, made[d]) {
			t.Errorf("%s: its current summary was made again", d)
		}
	}

	// One more cell in the last night: its summary is out of date.
	last := dirs[len(dirs)-4]
	store, err := record.OpenStore(last)
	if err != nil {
		t.Fatal(err)
	}
	extra := rs[3]
	extra.Classifier = ""
	extra.Cell.ID = "row=r009,col=c000"
	extra.Cell.Values[0].Value = "r009"
	if err := store.Append(extra); err != nil {
		t.Fatal(err)
	}
	store.Close()
	sameViews(t, "appended", fullViews(t, dirs), summaryViews(t, dirs))
}
