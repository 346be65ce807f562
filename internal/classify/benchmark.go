package classify

import (
	"fmt"
	"strconv"
	"strings"
)

var (
	// SGLang's and vLLM's benchmark scripts print "Accuracy: 0.018" and
	// "Invalid: 0.934" (the share of answers with no parseable number).
	accuracyRe = lazyRE(`(?i)^(?:accuracy|acc|exact[_ ]match|score)\s*[:=]\s*([0-9.]+)\s*(%?)`)
	invalidRe  = lazyRE(`(?i)^invalid\s*[:=]\s*([0-9.]+)\s*(%?)`)
	// lm_eval's table: |gsm8k|3|flexible-extract|5|exact_match|↑|0.8779|±|0.0090|
	metricCells = map[string]bool{"exact_match": true, "acc": true, "acc_norm": true, "accuracy": true}
)

// Benchmark thresholds: a model that answers under a tenth of GSM8K-like
// questions, or whose answers mostly do not parse, is not producing
// language, whatever the server's own log says.
const (
	brokenAccuracy = 0.1
	brokenInvalid  = 0.5
)

func share(num, pct string) (float64, bool) {
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, false
	}
	if pct == "%" || f > 1 {
		f /= 100
	}
	return f, f >= 0 && f <= 1
}

// benchmarkInLog reads a benchmark summary from the log (lm_eval's table,
// SGLang's "Accuracy:/Invalid:" lines) and returns a verdict when it shows
// a broken model: garbage when most answers do not parse or nearly none is
// right, wrong when they parse but are wrong. Healthy scores return ok with
// no verdict: positive evidence for a case without probes.
func benchmarkInLog(ls []string) (v Verdict, reason, line string, found bool) {
	acc, inv := -1.0, -1.0
	for _, l := range ls {
		if m := accuracyRe.FindStringSubmatch(l); m != nil {
			if f, ok := share(m[1], m[2]); ok {
				acc, line = f, l
			}
		}
		if m := invalidRe.FindStringSubmatch(l); m != nil {
			if f, ok := share(m[1], m[2]); ok {
				inv = f
			}
		}
		if strings.Count(l, "|") >= 4 {
			cells := strings.Split(l, "|")
			for i, c := range cells {
				if !metricCells[strings.TrimSpace(c)] {
					continue
				}
				for _, next := range cells[i+1:] {
					if f, err := strconv.ParseFloat(strings.TrimSpace(next), 64); err == nil {
						if acc < 0 || f < acc {
							acc, line = f, l
						}
						break
					}
				}
			}
		}
	}
	switch {
	case acc < 0 && inv < 0:
		return "", "", "", false
	case inv >= brokenInvalid:
		return Garbage, fmt.Sprintf("a benchmark in the log found %.0f%% of the answers unparseable (accuracy %.3f)", inv*100, max(acc, 0)), line, true
	case acc >= 0 && acc < brokenAccuracy && inv < 0:
		return Garbage, fmt.Sprintf("a benchmark in the log scored accuracy %.3f: the model is not producing answers", acc), line, true
	case acc >= 0 && acc < brokenAccuracy:
		return Wrong, fmt.Sprintf("a benchmark in the log scored accuracy %.3f with parseable answers", acc), line, true
	}
	return "", fmt.Sprintf("a benchmark in the log scored accuracy %.3f", acc), line, true
}
