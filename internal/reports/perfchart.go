package reports

import (
	"fmt"
	"math"
	"slices"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/record"
)

// htmlChart is the performance chart's geometry: two panels of horizontal
// bars (tokens/s per request, time to first token), one bar per measured
// cell at the ranking concurrency, each with a min-max whisker and its
// figures written beside it. Degraded cells are hatched and say so in
// their label, the fastest is marked in words, so the chart reads without
// colour. The picture is as wide as its widest text.
type htmlChart struct {
	Width, Height int
	Title, Desc   string
	Panels        []htmlPanel
}

type htmlPanel struct {
	Title    string
	Y, AxisY int
	X0, X1   string
	Bars     []htmlBar
	Scale    string // the axis's right end, labelled
	ScaleX   string
	LabelX   int
}

type htmlBar struct {
	Label, Full, Value, Mark        string
	Degraded                        bool
	Y, TextY, WhiskerY              int
	W, Lo, Hi, ValueX, CapY1, CapY2 string
}

// Chart layout, in pixels.
const (
	chartRow      = 26
	chartBar      = 14
	chartPlot     = 320
	chartLabelMax = 60 // characters of a cell label before it is cut
	chartCharW    = 7
	chartTitleH   = 34
	// chartMarkW is a character of the bold mark after a value
	// ("fastest", "within noise"), and chartMargin the room kept right of
	// the widest text: widths are estimates, and fonts differ.
	chartMarkW  = 8
	chartMargin = 16
)

// textWidth estimates, in pixels, the width of a value and its mark.
func textWidth(value, mark string) float64 {
	w := float64(len([]rune(value)) * chartCharW)
	if mark != "" {
		w += float64((len([]rune(mark)) + 1) * chartMarkW)
	}
	return w
}

// perfChart lays out the chart, or nil when no cell has figures at the
// ranking concurrency.
func perfChart(p *Performance) *htmlChart {
	type row struct {
		r    PerfRow
		tps  evidence.Spread
		ttft evidence.Spread
	}
	var rows []row
	longest := 0
	for _, r := range p.Cells {
		l := r.Perf.Level(p.Concurrency)
		if l == nil || l.Requests == 0 {
			continue
		}
		rows = append(rows, row{r, l.TokensPerSecond, l.TTFTMS})
		longest = max(longest, len([]rune(chartLabel(r))))
	}
	if len(rows) == 0 {
		return nil
	}
	labelW := longest*chartCharW + 12
	x0 := labelW
	c := &htmlChart{
		Width: x0 + chartPlot + 190,
		Title: fmt.Sprintf("Serving speed of the correct and degraded cells at concurrency %d", p.Concurrency),
		Desc: fmt.Sprintf("For each cell, output tokens per second per request and time to first token in milliseconds at concurrency %d: "+
			"the bar is the median over the requests, the line across it the minimum to maximum. Degraded cells are hatched.", p.Concurrency),
	}
	y := 0
	right := float64(c.Width) // the widest text's right end
	panel := func(title, unit string, marked bool, value func(row) evidence.Spread) {
		hi := 0.0
		for _, r := range rows {
			hi = max(hi, value(r).Max)
		}
		if hi <= 0 {
			hi = 1
		}
		x := func(v float64) string { return fmt.Sprintf("%.1f", float64(x0)+v/hi*chartPlot) }
		pn := htmlPanel{Title: title, Y: y + 18, X0: fmt.Sprint(x0), X1: x(hi), Scale: num(hi) + " " + unit, ScaleX: x(hi), LabelX: x0 - 6}
		top := y + chartTitleH
		for i, r := range rows {
			s := value(r)
			by := top + i*chartRow
			b := htmlBar{
				Label: chartLabel(r.r), Full: record.Clean(r.r.Cell) + " (" + string(r.r.Verdict) + ")", Degraded: r.r.Verdict == classify.Degraded,
				Y: by, TextY: by + chartBar - 2, WhiskerY: by + chartBar/2, CapY1: fmt.Sprint(by + 2), CapY2: fmt.Sprint(by + chartBar - 2),
				W:  fmt.Sprintf("%.1f", s.Median/hi*chartPlot),
				Lo: x(s.Min), Hi: x(s.Max), ValueX: fmt.Sprintf("%.1f", float64(x0)+s.Max/hi*chartPlot+6),
				Value: fmt.Sprintf("%s %s (%s-%s)", num(s.Median), unit, num(s.Min), num(s.Max)),
			}
			switch {
			case !marked:
			case r.r.Cell == p.Fastest:
				b.Mark = "fastest"
			case slices.Contains(p.WithinNoise, r.r.Cell):
				b.Mark = "within noise"
			}
			pn.Bars = append(pn.Bars, b)
			right = max(right, float64(x0)+s.Max/hi*chartPlot+6+textWidth(b.Value, b.Mark)+chartMargin)
		}
		right = max(right, textWidth(title, "")+chartMargin)
		pn.AxisY = top + len(rows)*chartRow
		c.Panels = append(c.Panels, pn)
		y = pn.AxisY + 24
	}
	panel(fmt.Sprintf("Output tokens/s per request, TTFT included, at concurrency %d (higher is better)", p.Concurrency), "tok/s", true, func(r row) evidence.Spread { return r.tps })
	panel(fmt.Sprintf("Time to first token at concurrency %d (lower is better)", p.Concurrency), "ms", false, func(r row) evidence.Spread { return r.ttft })
	c.Height = y
	// The values are written past the longest bar: the picture is as
	// wide as the widest of them, so no mark is cut off.
	c.Width = int(math.Ceil(right))
	return c
}

// chartLabel is a bar's label: the cell (cut to chartLabelMax
// characters in its longest values, so the last still tells bars apart),
// and its verdict when it is not plain correct, so a
// degraded bar says so in words as well as by its hatching.
func chartLabel(r PerfRow) string {
	cell := record.Clean(r.Cell)
	if len([]rune(cell)) > chartLabelMax {
		cell = cutValues(cell, chartLabelMax)
	}
	if r.Verdict == classify.Correct {
		return cell
	}
	return cell + " (" + string(r.Verdict) + ")"
}
