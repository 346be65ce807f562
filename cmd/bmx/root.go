package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/launcher/server"
	"github.com/bmx-dev/bmx/internal/matrix"
)

// iostreams are where a command writes: data to Out, everything else to Err.
type iostreams struct {
	Out io.Writer
	Err io.Writer
}

// Main runs bmx with args and returns the exit status; it is the one way out
// of bmx. SIGINT and SIGTERM cancel the root context: commands stop starting
// work, tear down what runs and return (a sweep exits 130); a second signal
// kills the running servers at once (server.OnSignals).
//
// bmx re-executed as a server's supervisor (server.SuperviseArg) is not a
// command: it takes its own signals, so it runs before any of that.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == server.SuperviseArg {
		return server.Supervise(args[1:])
	}
	if err := checkAddressSpace(); err != nil {
		fmt.Fprintf(stderr, "bmx: %v\n", err)
		return ExitInfra
	}
	// The signal watcher speaks on stderr from its own goroutine while a
	// command writes there too; a file takes concurrent writes (and must
	// stay a file, to be seen as a terminal), anything else is locked.
	if _, ok := stderr.(*os.File); !ok {
		stderr = &lockedWriter{w: stderr}
	}
	ctx, stop := server.OnSignals(context.Background(), func(sig os.Signal, n int) {
		if n == 1 {
			fmt.Fprintf(stderr, "\nbmx: %s: %s\n", sig, interruptNote(args, n))
		} else {
			fmt.Fprintln(stderr, "bmx: "+interruptNote(args, n))
		}
	})
	defer stop()
	io := iostreams{Out: stdout, Err: stderr}
	root := newRootCmd(io)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	code := ExitUsage // cobra's own errors: unknown command or flag
	var ee *exitError
	switch {
	case errors.As(err, &ee):
		code = ee.code
	case errors.Is(err, matrix.ErrInvalid):
		code = ExitUsage
	}
	if !errors.Is(err, errSilent) {
		// One problem a line, each saying who speaks.
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "bmx: %s\n", escapeControls(line))
		}
	}
	return code
}

// escapeControls writes the control characters of a line bmx prints as Go
// escapes: a path or value quoted into an error must not move the cursor,
// retitle or recolour the user's terminal.
func escapeControls(line string) string {
	if !strings.ContainsFunc(line, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }) {
		return line
	}
	var b strings.Builder
	for _, r := range line {
		if r != '\t' && unicode.IsControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func newRootCmd(io iostreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "bmx",
		Short: "Find which backend-flag combinations of an LLM inference server work on this host",
		Long: `bmx starts an inference server once per combination of backend flags, sends a
probe set through its OpenAI-compatible API, classifies each combination with
the evidence that decided it, and writes a compatibility table.

Verdicts, best first:
  ` + verdictHelp() + `.

With no config, 'bmx sweep' runs the built-in simulated SM120 host.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// The exit status block is on the root's help and on the commands
	// whose exits say more than done or bad usage (withExitCodes); on the
	// others it would repeat nothing.
	root.SetUsageTemplate(root.UsageTemplate() + "{{if or (not .HasParent) (index .Annotations \"exitcodes\")}}\n" + exitCodesHelp + "\n{{end}}")
	// bmx --version says what bmx version says. Version asks git when the
	// build stamped no commit, so it runs only when the template is shown.
	root.Version = version
	root.Flags().BoolP("version", "v", false, "print bmx's version (as bmx version does)")
	cobra.AddTemplateFunc("bmxVersion", Version)
	root.SetVersionTemplate("bmx {{bmxVersion}}\n")
	root.AddCommand(
		newSweepCmd(io, nil),
		newPlanCmd(io),
		newProbeCmd(io),
		newClassifyCmd(io),
		newInitCmd(io),
		newAxesCmd(io),
		newReportCmd(io),
		newDiffCmd(io),
		newBisectCmd(io),
		newHistoryCmd(io),
		newPublishCmd(io),
		newMergeCmd(io),
		newSlurmCmd(io),
		newSimServerCmd(io),
		newVersionCmd(io),
	)
	for _, c := range root.Commands() {
		if withExitCodes[c.Name()] {
			c.Annotations = map[string]string{"exitcodes": "yes"}
		}
	}
	registerCompletions(root)
	return root
}

// withExitCodes are the commands that exit 1 (the condition they were asked
// to check failed) or 130 (interrupted while servers ran): their help lists
// the exit statuses.
var withExitCodes = map[string]bool{"sweep": true, "probe": true, "diff": true, "bisect": true, "slurm": true, "axes": true, "classify": true}

// verdictHelp lists the verdicts a cell can get, and those of cells that
// did not run, from the classifier's own list.
func verdictHelp() string {
	var ran []string
	for _, v := range classify.Verdicts {
		ran = append(ran, string(v))
	}
	return fmt.Sprintf("%s;\n  %s, %s and %s mark cells that did not run", strings.Join(ran, ", "), classify.Skipped, classify.Excluded, classify.Predicted)
}

// lockedWriter serializes writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
