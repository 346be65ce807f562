package reports

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/olekukonko/tablewriter/pkg/twwidth"

	"github.com/bmx-dev/bmx/internal/record"
)

// detailTable finds the per-cell table in a terminal report: its header
// has a verdict and a reason column (or, folded, "why": the failure or the reason). It
// returns the table's lines and
// the index of each column named in the header.
func findDetailTable(t *testing.T, out string) (lines []string, cols map[string]int) {
	t.Helper()
	all := strings.Split(out, "\n")
	for i, l := range all {
		if !strings.HasPrefix(l, "| ") || !strings.Contains(l, "| verdict ") || (!strings.Contains(l, "| reason ") && !strings.Contains(l, "| why ")) {
			continue
		}
		cols = map[string]int{}
		for j, h := range strings.Split(l, "|") {
			cols[strings.TrimSpace(h)] = j
		}
		start, end := i-1, i+1
		for end < len(all) && (strings.HasPrefix(all[end], "|") || strings.HasPrefix(all[end], "+")) {
			end++
		}
		return all[start:end], cols
	}
	t.Fatalf("no per-cell table in:\n%s", out)
	return nil, nil
}

// columnWidths reads each column's content width off a table's border,
// by header name.
func columnWidths(lines []string) map[string]int {
	out := map[string]int{}
	names := strings.Split(lines[1], "|")
	for i, seg := range strings.Split(lines[0], "+") {
		if i > 0 && i < len(names)-1 {
			out[strings.TrimSpace(names[i])] = len(seg) - 2
		}
	}
	return out
}

// checkFits asserts what a report rendered at width promises: the per-cell
// table fits, every cell's verdict is there whole and in order, and a
// column is shortened only when the table could not show it whole (a table
// that shortened one is exactly width wide). whole is the table's lines
// with nothing cut. It returns the table's column widths by name.
func checkFits(t *testing.T, rep *record.Report, out string, width int, whole []string) map[string]int {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("width %d: invalid UTF-8 (a rune was cut)", width)
	}
	lines, cols := findDetailTable(t, out)
	tableWide := 0
	for _, l := range lines {
		n := twwidth.Width(l)
		tableWide = max(tableWide, n)
		if n > width {
			t.Errorf("width %d: a line of %d columns: %s", width, n, l)
		}
	}
	natural, got := columnWidths(whole), columnWidths(lines)
	for name, w := range got {
		if n, ok := natural[name]; ok && w < n && tableWide != width {
			t.Errorf("width %d: %s cut to %d of %d, but the table is %d wide", width, name, w, n, tableWide)
		}
	}
	rows := lines[3 : len(lines)-1]
	if len(rows) != len(rep.Results) {
		t.Fatalf("width %d: %d rows for %d cells", width, len(rows), len(rep.Results))
	}
	for i, row := range rows {
		if got := strings.TrimSpace(strings.Split(row, "|")[cols["verdict"]]); got != rep.Results[i].Shown() {
			t.Errorf("width %d: row %d verdict %q, want %q", width, i, got, rep.Results[i].Shown())
		}
	}
	// The grid is never cut: it fits, or the report says it does not.
	gw := 0
	for _, l := range strings.Split(strings.Split(out, "\n\n")[1], "\n") {
		if strings.HasPrefix(l, "+") || strings.HasPrefix(l, "|") {
			gw = max(gw, twwidth.Width(l))
		}
	}
	if gw > width && !strings.Contains(out, "(the grid is ") {
		t.Errorf("width %d: a grid %d wide and no word of it", width, gw)
	}
	return got
}

func TestTableFitsWidth(t *testing.T) {
	h200, err := record.Load("../../examples/torch-gpu/h200/run")
	if err != nil {
		t.Fatal(err)
	}
	wide := fixture()
	wide.Results[2].Reason = "漢字のエラー " + strings.Repeat("全角文字 ", 30)
	for name, rep := range map[string]*record.Report{"h200": h200, "fixture with wide runes": wide} {
		t.Run(name, func(t *testing.T) {
			var whole bytes.Buffer
			if err := TableWith(&whole, rep, TableOptions{Width: 10000}); err != nil {
				t.Fatal(err)
			}
			lines, _ := findDetailTable(t, whole.String())
			natural := twwidth.Width(lines[0])
			for _, width := range []int{60, 100, 160} {
				var b bytes.Buffer
				if err := TableWith(&b, rep, TableOptions{Width: width, Color: width == 100}); err != nil {
					t.Fatal(err)
				}
				out := b.String()
				if width == 100 {
					out = ansiRe.ReplaceAllString(out, "")
				}
				cols := checkFits(t, rep, out, width, lines)
				if width >= natural {
					if got, _ := findDetailTable(t, out); strings.Join(got, "\n") != strings.Join(lines, "\n") {
						t.Errorf("width %d fits the whole table (%d) but it changed:\n%s", width, natural, strings.Join(got, "\n"))
					}
				}
				if width == 160 {
					// At 160 columns shortening the text is enough: every
					// column stays.
					for _, c := range []string{"cell", "verdict", "reason", "signature", "ready", "known"} {
						if _, ok := cols[c]; !ok {
							t.Errorf("width 160 left out %s", c)
						}
					}
				}
			}
		})
	}
}

// TestPerfTableFitsWidth renders the H200 run's performance table (20
// measured cells, long cell names) at several widths: it fits 100 columns
// and more, narrower it leaves out all it can, it keeps every cell's verdict
// and tokens/s, and with room enough it shows every column.
func TestPerfTableFitsWidth(t *testing.T) {
	rep, err := record.Load("../../examples/torch-gpu/h200/run")
	if err != nil {
		t.Fatal(err)
	}
	perf := PerformanceOf(rep)
	if perf == nil || len(perf.Cells) < 10 {
		t.Fatalf("the H200 run has %v measured cells", perf)
	}
	for _, width := range []int{60, 100, 140, 10000} {
		var b bytes.Buffer
		if err := TableWith(&b, rep, TableOptions{Width: width}); err != nil {
			t.Fatal(err)
		}
		at := strings.Index(b.String(), "\nperformance: ")
		if at < 0 {
			t.Fatalf("width %d: no performance section", width)
		}
		section := b.String()[at:]
		var table []string
		for _, l := range strings.Split(section, "\n")[2:] {
			if !strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "|") {
				break
			}
			table = append(table, l)
		}
		header := strings.Split(table[1], "|")
		cols := map[string]int{}
		for i, h := range header {
			cols[strings.TrimSpace(h)] = i
		}
		for _, l := range table {
			if n := twwidth.Width(l); n > width && width > 60 {
				t.Errorf("width %d: a line of %d columns: %s", width, n, l)
			}
		}
		caption := strings.SplitN(section, "\n", 3)[1]
		if _, shown := cols["TPOT ms"]; shown != strings.Contains(caption, "TPOT = ") {
			t.Errorf("width %d: the caption explains TPOT when and only when it is shown: %q", width, caption)
		}
		if _, shown := cols["decode"]; shown != strings.Contains(caption, "decode = ") {
			t.Errorf("width %d: the caption explains the decode rate when and only when it is shown: %q", width, caption)
		}
		if !strings.Contains(caption, "TTFT included") {
			t.Errorf("width %d: the caption does not say tok/s per request includes TTFT: %q", width, caption)
		}
		if width == 60 {
			// Narrower than the uncut columns: everything that can go has.
			for _, c := range []string{"reqs", "TTFT p90", "TPOT ms", "decode"} {
				if _, ok := cols[c]; ok {
					t.Errorf("width 60 kept %s", c)
				}
			}
		}
		for _, c := range []string{"verdict", "conc", "TTFT ms", "tok/s/req incl TTFT", "tok/s total"} {
			if _, ok := cols[c]; !ok {
				t.Errorf("width %d: no %s column in %q", width, c, table[1])
			}
		}
		if width == 10000 {
			for _, c := range perfTermHeader {
				if _, ok := cols[c]; !ok {
					t.Errorf("width 10000 left out %s", c)
				}
			}
		}
		// Rows come in the performance ranking's order, each cell's verdict
		// on its first row.
		i := 0
		for _, l := range table[3 : len(table)-1] {
			f := strings.Split(l, "|")
			if v := strings.TrimSpace(f[cols["verdict"]]); v != "" {
				if i >= len(perf.Cells) || v != string(perf.Cells[i].Verdict) {
					t.Errorf("width %d: row verdict %q out of order", width, v)
				}
				i++
			}
		}
		if i != len(perf.Cells) {
			t.Errorf("width %d: %d cells in the table, %d measured", width, i, len(perf.Cells))
		}
	}
}
