package across

import (
	"fmt"
	"html/template"
	"strings"
)

// chart is a cell's small speed chart: tok/s per request at concurrency 1
// per run, the median as a line and the min-max spread as a bar, drawn as
// inline SVG (no scripts, as the report's chart).
type chart struct {
	SVG template.HTML
}

// Chart geometry, in SVG units; the SVG scales to its box's width.
const (
	chartW, chartH = 600.0, 120.0
	chartPad       = 24.0
)

// perfSVG draws the chart; nil when no run measured the cell.
func perfSVG(c CellHistory) *chart {
	top := 0.0
	for _, p := range c.Points {
		if p.TokensPerS != nil {
			top = max(top, p.TokensPerS.Max)
		}
	}
	if top == 0 {
		return nil
	}
	n := len(c.Points)
	x := func(i int) float64 {
		if n == 1 {
			return chartW / 2
		}
		return chartPad + float64(i)*(chartW-2*chartPad)/float64(n-1)
	}
	y := func(v float64) float64 { return chartH - chartPad/2 - v/top*(chartH-chartPad*1.5) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %.0f %.0f" preserveAspectRatio="none" role="img" aria-label="tok/s per request per run">`, chartW, chartH)
	fmt.Fprintf(&b, `<line x1="0" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#d0d7de"/>`, y(0), chartW, y(0))
	var line []string
	for i, p := range c.Points {
		if p.TokensPerS == nil {
			continue
		}
		s := p.TokensPerS
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#8c959f" stroke-width="3"><title>run %d: %s-%s tok/s</title></line>`,
			x(i), y(s.Min), x(i), y(s.Max), i+1, num(s.Min), num(s.Max))
		line = append(line, fmt.Sprintf("%.1f,%.1f", x(i), y(s.Median)))
		fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="#0969da"><title>run %d: median %s tok/s</title></circle>`, x(i), y(s.Median), i+1, num(s.Median))
	}
	fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#0969da" stroke-width="1.5"/>`, strings.Join(line, " "))
	fmt.Fprintf(&b, `<text x="2" y="11" font-size="10" fill="#57606a">%s tok/s</text></svg>`, num(top))
	return &chart{SVG: template.HTML(b.String())}
}
