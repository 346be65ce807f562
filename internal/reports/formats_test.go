package reports

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"

	"github.com/bmx-dev/bmx/internal/browsertest"
	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/matrix"
	"github.com/bmx-dev/bmx/internal/record"
)

func TestHTML(t *testing.T) {
	out := render(t, func(b *bytes.Buffer, r *record.Report) error { return HTML(b, r) })
	golden(t, out)
	s := string(out)
	for _, bad := range []string{"<script>", "\x1b", "\xff", "http://", "https://", "<link", "@import"} {
		if strings.Contains(s, bad) && !(bad == "https://" && strings.Contains(s, "https://example.org/issues/1")) {
			t.Errorf("HTML contains %q", bad)
		}
	}
	if !strings.Contains(s, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("hostile text not escaped")
	}
	if strings.Count(s, "<details") != 5 || !strings.Contains(s, `class="v v-crash"`) {
		t.Error("cells or verdict colours missing")
	}
}

func TestCSV(t *testing.T) {
	out := render(t, func(b *bytes.Buffer, r *record.Report) error { return CSV(b, r) })
	golden(t, out)
	rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 || rows[0][0] != "moe" || rows[0][1] != "fp4" || rows[0][3] != "verdict" {
		t.Fatalf("rows %q", rows[0])
	}
	for _, r := range rows[1:] {
		if len(r) != len(rows[0]) {
			t.Errorf("row %q has %d columns", r, len(r))
		}
		for _, f := range r {
			if strings.ContainsAny(f, "\x1b\n") {
				t.Errorf("unclean field %q", f)
			}
		}
	}
	if got := csvSafe("=HYPERLINK(\"x\")"); got != "'=HYPERLINK(\"x\")" {
		t.Errorf("formula not defused: %q", got)
	}
}

func TestJUnit(t *testing.T) {
	out := render(t, func(b *bytes.Buffer, r *record.Report) error { return JUnit(b, r) })
	golden(t, out)
	var back junitSuites
	if err := xml.Unmarshal(out, &back); err != nil {
		t.Fatalf("JUnit does not parse: %v", err)
	}
	s := back.Suites[0]
	// The fixture's known issues: the correct cell is an XPASS (a failure:
	// the workaround can go), the known hang is skipped with the issue as
	// message, the two unexpected failures fail, and so does the known
	// crash that answers garbage now (changed).
	if s.Tests != 5 || s.Failures != 4 || s.Skipped != 1 || len(s.Cases) != 5 {
		t.Errorf("suite %+v", s)
	}
	for _, c := range s.Cases {
		known := c.Name == "moe=trtllm,fp4=cutlass"
		if (c.Skipped != nil) != known || c.Skipped != nil && !strings.Contains(c.Skipped.Message, "known issue") {
			t.Errorf("%s: skipped %v", c.Name, c.Skipped)
		}
		if (c.Failure == nil) != known {
			t.Errorf("%s: failure %v", c.Name, c.Failure)
		}
		if c.Name == "moe=trtllm,fp4=cudnn" && (c.Failure == nil || c.Failure.Type != "changed" ||
			!strings.HasPrefix(c.Failure.Message, "changed: a [[known]] entry expects crash, garbage now")) {
			t.Errorf("the known crash that answers garbage: %v", c.Failure)
		}
		if c.Name == "moe=cutlass,fp4=cudnn" && (c.Failure == nil || c.Failure.Type != "xpass") {
			t.Errorf("the XPASS cell: %v", c.Failure)
		}
		if c.Failure != nil && c.Failure.Type == "crash" && c.Failure.Message != "CUDA error: no kernel image is available for execution on the device" {
			t.Errorf("crash message %q", c.Failure.Message)
		}
	}
}

// TestJUnitBaseline: against a baseline, a cell correct there and failing
// now is a failure of type regression that says so, even when a known
// issue covers it; the other failures name the baseline's verdict.
func TestJUnitBaseline(t *testing.T) {
	rep, base := fixture(), fixture()
	base.Run.Name = "last-night"
	for i, r := range base.Results {
		switch r.Cell.ID {
		case "moe=cutlass,fp4=trtllm", "moe=trtllm,fp4=cutlass": // an unexpected crash, a known hang
			base.Results[i].Verdict = classify.Correct
		}
	}
	var b bytes.Buffer
	if err := JUnitWith(&b, rep, base); err != nil {
		t.Fatal(err)
	}
	var back junitSuites
	if err := xml.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("JUnit does not parse: %v\n%s", err, b.String())
	}
	s := back.Suites[0]
	if s.Failures != 5 || s.Skipped != 0 {
		t.Errorf("suite: %d failures, %d skipped; want 5 (the known hang regressed, the known crash answers garbage) and 0", s.Failures, s.Skipped)
	}
	for _, c := range s.Cases {
		switch c.Name {
		case "moe=cutlass,fp4=trtllm", "moe=trtllm,fp4=cutlass":
			if c.Failure == nil || c.Failure.Type != "regression" || !strings.HasPrefix(c.Failure.Message, "regression: correct in the baseline last-night, ") ||
				!strings.Contains(c.Failure.Text, "baseline last-night: correct") {
				t.Errorf("%s: %+v", c.Name, c.Failure)
			}
		case "moe=cutlass,fp4=cutlass":
			if c.Failure == nil || c.Failure.Type != "nan" || !strings.Contains(c.Failure.Text, "baseline last-night: nan") {
				t.Errorf("%s, nan in both runs: %+v", c.Name, c.Failure)
			}
		}
	}
}

// TestKnownTOML: the [[known]] entries for the failures no entry covers
// decode as the config's known issues, one per cell here (no axis value is
// to blame), and the known issue that passes now is named to remove.
func TestKnownTOML(t *testing.T) {
	out := render(t, func(b *bytes.Buffer, r *record.Report) error { return KnownTOML(b, r) })
	golden(t, out)
	var cfg struct{ Known []matrix.Known }
	if _, err := toml.Decode(string(out), &cfg); err != nil {
		t.Fatalf("not TOML: %v\n%s", err, out)
	}
	want := []matrix.Known{
		{Match: map[string]string{"moe": "cutlass", "fp4": "cutlass"}, Verdict: "nan", Note: "probability tensor contains either `inf`, `nan` or element < 0"},
		{Match: map[string]string{"moe": "cutlass", "fp4": "trtllm"}, Verdict: "crash", Note: "CUDA error: no kernel image is available for execution on the device"},
	}
	if d := cmp.Diff(want, cfg.Known); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	if !strings.Contains(string(out), "# XPASS: moe=cutlass,fp4=cudnn passes now") {
		t.Errorf("the XPASS is not named:\n%s", out)
	}
}

func TestColorAndFit(t *testing.T) {
	rep := fixture()
	var plain, color bytes.Buffer
	TableWith(&plain, rep, TableOptions{})
	TableWith(&color, rep, TableOptions{Color: true})
	if strings.Contains(plain.String(), "\x1b[") || !strings.Contains(color.String(), "\x1b[31;1mcrash\x1b[0m") {
		t.Error("colour only when asked")
	}
	long := fixture()
	long.Run.Axes[0].Values = []string{"flashinfer_cutlass_very_long_backend_name", "flashinfer_trtllm_very_long_backend_name"}
	long.Run.Axes[1].Values = []string{"flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_cutedsl", "flashinfer_trtllm", "flashinfer_marlin_fallback"}
	long.Results = nil
	long.Run.Excluded = nil
	for _, moe := range long.Run.Axes[0].Values {
		for _, fp4 := range long.Run.Axes[1].Values {
			long.Results = append(long.Results, record.Result{Cell: cell(moe, fp4), Verdict: classify.Inconclusive})
		}
	}
	var b bytes.Buffer
	TableWith(&b, long, TableOptions{})
	grid := strings.Split(b.String(), "\n\n")[1]
	for _, line := range strings.Split(grid, "\n") {
		if strings.HasPrefix(line, "|") || strings.HasPrefix(line, "+") {
			if n := len([]rune(line)); n > 100 {
				t.Errorf("grid line of %d columns: %s", n, line)
			}
		}
	}
	if !strings.Contains(grid, " = flashinfer_marlin_fallback") {
		t.Errorf("no legend for abbreviations:\n%s", grid)
	}
}

// TestHTMLInBrowser loads the report in headless Chromium (one iframe of
// the package's one browser start, laidOut), reads the grid and the
// performance chart as rendered, and saves a screenshot into
// $BMX_SCREENSHOTS when set (for a person to look at;
// TestHTMLLayoutInBrowser always checks that a screenshot is taken).
func TestHTMLInBrowser(t *testing.T) {
	t.Parallel()
	all, pages, _ := laidOut(t)
	// The chart as laid out, and the page as the browser parsed it.
	m := regexp.MustCompile(`data-chart="([^"]*)"`).FindStringSubmatch(all)
	if m == nil {
		t.Fatal("the measuring script did not run")
	}
	var chart struct {
		DOM                      string
		Width, Height, ViewWidth float64
		Bars                     []float64
		Hatched                  int
		Texts                    [][3]float64
	}
	if err := json.Unmarshal([]byte(html.UnescapeString(m[1])), &chart); err != nil {
		t.Fatalf("%v: %s", err, m[1])
	}
	dom := chart.DOM
	chart.DOM = "" // not in messages
	for _, want := range []string{`<table id="grid">`, "&lt;script&gt;"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
	if !regexp.MustCompile(`<th>cutlass</th><td class="v v-correct"><a href="#cell-[^"]*"[^>]*>correct.*?</td><td class="v v-nan"><a href="#cell-[^"]*"[^>]*>nan.*?</td><td class="v v-crash"><a href="#cell-[^"]*"[^>]*>crash`).MatchString(dom) {
		t.Error("the grid's first row is not correct, nan, crash, each linked")
	}
	if strings.Contains(dom, "<script>alert") {
		t.Error("a server string became markup")
	}
	for _, want := range []string{`<svg class="chart" id="perf-chart"`, "fastest</tspan>", `<table id="perf">`, "<pre>--moe fast --fp4 cudnn</pre>"} {
		if !strings.Contains(dom, want) {
			t.Errorf("rendered page lacks %q", want)
		}
	}
	// Two panels of three bars, all drawn, the degraded one hatched,
	// every label inside the picture.
	t.Logf("chart %.0fx%.0f px, bars %v", chart.Width, chart.Height, chart.Bars)
	if chart.Width < 300 || chart.Height < 100 || len(chart.Bars) != 6 || chart.Hatched != 2 {
		t.Errorf("chart %+v", chart)
	}
	for _, w := range chart.Bars {
		if w < 1 {
			t.Errorf("a bar of width %g", w)
		}
	}
	// A margin on the right: another font's wider glyphs must not push
	// the last label (the "fastest" mark) out of the picture.
	const margin = 8
	for _, tx := range chart.Texts {
		if tx[0] < 0 || tx[1] > chart.ViewWidth-margin || tx[2] == 0 {
			t.Errorf("a label outside the chart (less %d px) or not drawn: x %g to %g of %g, height %g", margin, tx[0], tx[1], chart.ViewWidth, tx[2])
		}
	}
	shots := os.Getenv("BMX_SCREENSHOTS")
	if shots == "" {
		return // a browser start: TestHTMLLayoutInBrowser checks one screenshot
	}
	page := filepath.Join(shots, "bmx-report.html")
	if err := os.WriteFile(page, []byte(pages["chart"]), 0o644); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(shots, "bmx-report-screenshot.png")
	browsertest.Run(t, browsertest.Find(t), filepath.Join(t.TempDir(), "profile"), "--screenshot="+shot, "--window-size=1200,1400", "file://"+page)
	if st, err := os.Stat(shot); err != nil || st.Size() < 1000 {
		t.Errorf("no screenshot: %v", err)
	}
	t.Logf("screenshot: %s", shot)
}
