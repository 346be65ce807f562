package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/cmd/bmx/internal/termstatus"
	"github.com/bmx-dev/bmx/internal/record"
	"github.com/bmx-dev/bmx/internal/reports"
)

type mergeOptions struct {
	Output string
}

func newMergeCmd(io iostreams) *cobra.Command {
	opts := &mergeOptions{}
	cmd := &cobra.Command{
		Use:   "merge RUN... -o RUN",
		Short: "Make the shards of a sweep (or runs of one config on several hosts) one run",
		Long: `Merge run directories of one sweep into one run directory: the shards of a
'bmx sweep --shard i/n' split, or runs of one config with different --only
filters. The result is a run like any other (results.jsonl, run.json, report
files, the logs), so 'bmx report' and 'bmx diff' read it.

Runs of different sweeps are refused, saying what differs (the config text,
a var, the probe set, the shard count), and so is one run given twice (two
names of its directory, or a copy of it). A cell that ran more than once keeps
every result: the report shows the one that ended last, the others go to
duplicates.jsonl. Every host's fingerprint is kept in merge.json; report.md
says which host ran which cell, and a host whose fingerprint differs from the
others' (another driver, another torch) is called out: its cells are not
comparable. The reference cell of a sharded sweep ran in every shard; each
shard's cells were judged against its own run of it.

-o names a new directory, or an earlier merge, which is replaced. Exit 3 when
cells are missing (a shard failed or was not given): the merged run is
written all the same and says which.`,
		Example: `  bmx merge runs/shard-*/*/ -o runs/merged
  bmx merge gpu-a/runs/20260310T120000Z-sm120-shard0of2 gpu-b/runs/20260310T120004Z-sm120-shard1of2 -o sm120`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Output == "" {
				return usageErrorf("-o RUN: name the merged run directory")
			}
			return runMerge(cmd.Context(), args, opts, io)
		},
	}
	outFlag(cmd, &opts.Output, "", "the merged run directory (new, or an earlier merge)")
	return cmd
}

func runMerge(ctx context.Context, dirs []string, opts *mergeOptions, io iostreams) error {
	if err := checkDistinctRuns(dirs); err != nil {
		return withCode(ExitUsage, err)
	}
	m, err := reports.Merge(dirs)
	if err != nil {
		return withCode(ExitUsage, err)
	}
	err = reports.WriteMergedContext(ctx, opts.Output, m, reports.WriteFiles)
	if errors.Is(err, record.ErrMergeInterrupted) {
		return withCode(ExitInterrupted, fmt.Errorf("interrupted: the merge was not written (%s is as it was, nothing staged is left)", opts.Output))
	}
	if err != nil {
		return withCode(ExitInfra, err)
	}
	if err := reports.TableWith(io.Out, m.Report, reports.TableOptions{Color: termstatus.ColorOK(io.Out), Width: termstatus.Width(io.Out)}); err != nil {
		return withCode(ExitInfra, err)
	}
	fmt.Fprintln(io.Err)
	if err := reports.MergeSummary(io.Err, m); err != nil {
		return withCode(ExitInfra, err)
	}
	fmt.Fprintf(io.Err, "bmx: merged run %s (results.jsonl, report.md, report.html, report.json, %s, logs/)\n", opts.Output, record.MergeFile)
	if !m.Complete() {
		return withCode(ExitInfra, errors.New("the merged run is incomplete: cells are missing (see the notes above)"))
	}
	return nil
}

// checkDistinctRuns refuses a run given twice, by two names of one
// directory or as a copy (the same run.json start and host): merged with
// itself every cell would read as run twice.
func checkDistinctRuns(dirs []string) error {
	type seen struct {
		dir  string
		info os.FileInfo
		run  *record.Run
	}
	var runs []seen
	for _, d := range dirs {
		info, err := os.Stat(d)
		if err != nil {
			continue // Merge says what is wrong with it
		}
		run, _ := record.ReadRun(d)
		for _, r := range runs {
			switch {
			case os.SameFile(info, r.info):
				return fmt.Errorf("%s and %s are the same run directory: give each run once", r.dir, d)
			case run != nil && r.run != nil && !run.Started.IsZero() && run.Started.Equal(r.run.Started) && run.Host.Hostname == r.run.Host.Hostname && run.Name == r.run.Name:
				return fmt.Errorf("%s and %s are the same run (%s, started %s on %s), one a copy of the other: give each run once",
					r.dir, d, run.Name, run.Started.UTC().Format(time.RFC3339), run.Host.Hostname)
			}
		}
		runs = append(runs, seen{d, info, run})
	}
	return nil
}
