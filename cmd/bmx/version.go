package main

import (
	"bytes"
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
// stamp none, nor does -buildvcs=false) from git in the source tree this
// file was compiled from, if it is still there. "+dirty" marks uncommitted
// changes. A binary go install built from a module version (no commit
// stamped, the module's version in the build info) says that version.
var Version = sync.OnceValue(func() string {
	info, _ := debug.ReadBuildInfo()
	return versionFrom(version, info, sourceRevision)
})

// versionFrom is the version of a build of base with this build info (nil:
// none), asking git (the source tree's revision) only when the build info
// has neither a commit nor a module version.
func versionFrom(base string, info *debug.BuildInfo, git func() (rev string, dirty bool)) string {
	var rev string
	var dirty bool
	if info != nil {
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
		// A build with VCS stamping has a pseudo-version here too; its
		// commit reads better.
		if v := info.Main.Version; rev == "" && base == "dev" && v != "" && v != "(devel)" {
			return v
		}
	}
	if rev == "" {
		rev, dirty = git()
	}
	if rev == "" {
		return base
	}
	if dirty {
		rev += "+dirty"
	}
	return base + " (" + rev + ")"
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
	// One after the other: a sweep asks in the background, beside its
	// first server's start, where two more processes at once would slow it.
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--short=12", "HEAD").Output()
	rev = strings.TrimSpace(string(out))
	if err != nil || len(rev) < 12 {
		return "", false
	}
	status, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain").Output()
	if err != nil {
		status = nil
	}
	return rev, len(bytes.TrimSpace(status)) > 0
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
