package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

// gitTimeout bounds the git calls of the source-tree fallback: a version
// must never hold up a command.
const gitTimeout = 2 * time.Second

// Version is bmx's version, with the commit it was built from when that is
// known: from the build info that go build stamps, else (go run and go test
// stamp none) from git in the source tree this file was compiled from, if
// it is still there. "+dirty" marks uncommitted changes.
var Version = sync.OnceValue(func() string {
	rev, dirty := buildRevision()
	if rev == "" {
		rev, dirty = sourceRevision()
	}
	if rev == "" {
		return version
	}
	if dirty {
		rev += "+dirty"
	}
	return version + " (" + rev + ")"
})

// buildRevision is the commit go build stamped into the binary.
func buildRevision() (rev string, dirty bool) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", false
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			if len(s.Value) >= 12 {
				rev = s.Value[:12]
			}
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	return rev, dirty
}

// sourceRevision asks git for the commit of the directory this file was
// compiled in; "" when the path is not a directory here (a -trimpath build,
// another machine), git is absent or slow, or the tree is no repository.
func sourceRevision() (rev string, dirty bool) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", false
	}
	dir := filepath.Dir(file)
	ctx, cancel := context.WithTimeout(context.Background(), gitTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "", false
	}
	rev = strings.TrimSpace(string(out))
	if len(rev) < 12 {
		return "", false
	}
	status, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain").Output()
	return rev, err == nil && len(strings.TrimSpace(string(status))) > 0
}

func newVersionCmd(io iostreams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print bmx's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(io.Out, "bmx %s\n", Version())
			return err
		},
	}
}
