package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/reports"
)

type classifyOptions struct {
	Cases string
	Score bool
}

func newClassifyCmd(io iostreams) *cobra.Command {
	opts := &classifyOptions{}
	cmd := &cobra.Command{
		Use:   "classify --cases FILE.jsonl",
		Short: "Judge recorded cases offline, with the same classifier a sweep uses",
		Long: `Read cases in the evidence-corpus format (one JSON object a line: log, exit,
timed_out, probes, and optionally a label) and print one JSON line per case:
{"id", "verdict", "signature", "reason"}, with "shape_only": true on a correct
verdict that some probe reached by its text's shape alone (no expectation to
meet): what reports mark correct*.

With --score, labelled cases are scored: accuracy and a confusion matrix go to
stderr (stdout stays JSON lines), and the exit status is 1 if any case
labelled crash, hang, nan or garbage was judged correct.`,
		Example: `  bmx classify --cases ../shared/corpus/dev.jsonl --score`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Cases == "" {
				return usageErrorf("--cases is required")
			}
			return runClassify(opts, io)
		},
	}
	cmd.Flags().StringVar(&opts.Cases, "cases", "", "JSONL file of cases (- for stdin)")
	cmd.Flags().BoolVar(&opts.Score, "score", false, "score the verdicts against the cases' labels")
	return cmd
}

func runClassify(opts *classifyOptions, ios iostreams) error {
	var in io.Reader = os.Stdin
	name := "stdin"
	if opts.Cases != "-" {
		f, err := os.Open(opts.Cases)
		if err != nil {
			return withCode(ExitUsage, fmt.Errorf("--cases: %w", err))
		}
		defer f.Close()
		in, name = f, opts.Cases
	}
	score := reports.NewScore()
	enc := json.NewEncoder(ios.Out)
	enc.SetEscapeHTML(false)
	// An empty file and ids given twice are said: scores would count a
	// case twice, and a corpus that judged nothing is not a passing one.
	cases, seen, dups := 0, map[string]int{}, []string(nil)
	judged := func(c *classify.Case, j classify.Judgement) error {
		cases++
		if seen[c.ID]++; seen[c.ID] == 2 && c.ID != "" {
			dups = append(dups, c.ID)
		}
		if c.Label != "" {
			score.Add(c.ID, c.Label, j.Verdict)
		}
		return enc.Encode(classify.VerdictOf(c, j))
	}
	bad, err := classify.JudgeCases(in, name, judged, func(msg string) { fmt.Fprintf(ios.Err, "bmx: %s\n", msg) })
	if err != nil {
		return withCode(ExitUsage, err)
	}
	if opts.Score {
		if score.Total() == 0 {
			fmt.Fprintln(ios.Err, "bmx: --score: no labelled cases")
		} else if err := score.Render(ios.Err); err != nil {
			return err
		}
	}
	switch {
	case cases == 0 && bad == 0:
		return withCode(ExitUsage, fmt.Errorf("no cases in %s: it is empty", name))
	case len(dups) > 0:
		return withCode(ExitUsage, fmt.Errorf("case ids given more than once in %s (each case was judged): %s", name, strings.Join(dups, ", ")))
	case bad > 0:
		return withCode(ExitUsage, fmt.Errorf("%d bad lines in %s (the other cases were judged)", bad, name))
	case opts.Score && len(score.FalseCorrect()) > 0:
		return withCode(ExitFailed, fmt.Errorf("judged correct although labelled as failures: %s", strings.Join(score.FalseCorrect(), ", ")))
	}
	return nil
}
