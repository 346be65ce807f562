package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/internal/reports/across"
)

type publishOptions struct {
	Out   string
	Force bool
}

func newPublishCmd(io iostreams) *cobra.Command {
	opts := &publishOptions{}
	cmd := &cobra.Command{
		Use:   "publish RUN... --out SITE",
		Short: "Write a static site of the support matrix: one grid per host, evidence per cell, history per cell",
		Long: `Publish run directories (several hosts, several versions, merged shards) as
one standalone static site in SITE: index.html has one grid per host (its GPU
model and fingerprint) of the latest run of each config on it; each cell
links to its evidence page (verdict, reason, probes, the end of the server's
log, the command to run it again) and to its history over every run of that
config on that host. Links are relative and nothing is fetched: the site
opens offline from any folder, and needs no GPU to build (runs copied from
GPU hosts to a laptop will do). A bisect's grid is the latest of its runs
that found something, with its finding (a perf bisect's slower steps drawn
so); paths that are not runs are skipped with a note; cells an older
classifier judged are judged again, and the grid says so.

SITE must be empty, missing, or a site bmx published (it holds the
.bmx-site marker bmx writes): a folder of other files is refused, so
someone's index.html is never overwritten, unless --force. A page whose
file already holds it is not written again: publishing one more night
writes its run's pages, its history and the index, and says how many.
Each run is read through its summary (summary.jsonl, made beside the run
from a full read when missing or out of date), so a year of nightly runs
reads bytes per cell; an evidence page reads its own cell's line.`,
		Example: `  bmx publish runs/* --out site
  bmx publish gpu1-runs/* gpu2-runs/* --out docs/support`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Out == "" {
				return usageErrorf("--out: required, the folder to write the site into")
			}
			return runPublish(args, opts, io)
		},
	}
	outFlag(cmd, &opts.Out, "", "the folder to write the site into (made if missing; its pages are overwritten)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "write into --out even when it is not empty and not a site bmx publish wrote")
	return cmd
}

func runPublish(paths []string, opts *publishOptions, io iostreams) error {
	if ok, err := across.IsSite(opts.Out); err == nil && !ok && !opts.Force {
		return usageErrorf("--out %s: not empty and not a site bmx publish wrote (no %s); --force writes into it anyway", opts.Out, across.SiteMarker)
	}
	sums, err := loadRuns(paths, io)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return withCode(ExitInfra, fmt.Errorf("--out: %w", err))
	}
	site, err := across.PublishOf(opts.Out, sums)
	if err != nil {
		return withCode(ExitInfra, err)
	}
	for _, h := range site.Hosts {
		fmt.Fprintf(io.Out, "%s:\n", h.Title)
		for _, g := range h.Grids {
			fmt.Fprintf(io.Out, "  %s: %s %s: %s\n", g.Config, shownWhich(g.Runs, g.Finding), g.Run, g.Summary)
			for _, n := range []string{g.Finding, g.Later, g.Aborted, g.Judged} {
				if n != "" {
					fmt.Fprintf(io.Out, "    %s\n", n)
				}
			}
		}
	}
	fmt.Fprintf(io.Out, "wrote %d pages (%d unchanged); open %s\n", len(site.Pages), site.Unchanged, filepath.Join(opts.Out, "index.html"))
	return nil
}

// shownWhich says which of a grid's runs is drawn: the latest, or of
// bisects the latest with a finding.
func shownWhich(runs int, finding string) string {
	if finding != "" {
		return fmt.Sprintf("of %d run(s), the latest with a finding", runs)
	}
	return fmt.Sprintf("latest of %d run(s)", runs)
}
