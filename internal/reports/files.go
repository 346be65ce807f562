package reports

import (
	"fmt"
	"io"
	"path/filepath"

	"golang.org/x/sync/errgroup"

	"github.com/bmx-dev/bmx/internal/record"
)

// Report files written at the end of a sweep.
const (
	MarkdownFile = "report.md"
	HTMLFile     = "report.html"
	JSONFile     = "report.json"
)

// WriteFiles writes report.md, report.html and report.json into the run
// directory, all three at once (renderers only read the report): a sweep or
// a merge of 10,000 cells waits for the slowest, not for the sum.
func WriteFiles(dir string, rep *record.Report) error { return WriteFilesWith(dir, rep, nil) }

// WriteFilesWith is WriteFiles for a run swept against a baseline run
// (nil: none): report.md's and report.html's news say what is new since
// then, as the gate's summary does.
func WriteFilesWith(dir string, rep, baseline *record.Report) error {
	var g errgroup.Group
	for _, f := range []struct {
		name   string
		render func(io.Writer, *record.Report) error
	}{
		{MarkdownFile, func(w io.Writer, rep *record.Report) error { return MarkdownWith(w, rep, baseline) }},
		{HTMLFile, func(w io.Writer, rep *record.Report) error { return HTMLWith(w, rep, baseline) }},
		{JSONFile, JSON},
	} {
		// Each file is streamed to its temporary file as it renders (and
		// renamed into place once whole), never held in memory.
		g.Go(func() error {
			if err := record.WriteFileFunc(filepath.Join(dir, f.name), func(w io.Writer) error { return f.render(w, rep) }); err != nil {
				return fmt.Errorf("write %s: %w", f.name, err)
			}
			return nil
		})
	}
	return g.Wait()
}
