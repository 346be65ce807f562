package reports

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/bmx-dev/bmx/record"
)

// Report files written at the end of a sweep.
const (
	MarkdownFile = "report.md"
	HTMLFile     = "report.html"
	JSONFile     = "report.json"
)

// WriteFiles writes report.md, report.html and report.json into the run
// directory.
func WriteFiles(dir string, rep *record.Report) error {
	for _, f := range []struct {
		name   string
		render func(io.Writer, *record.Report) error
	}{{MarkdownFile, Markdown}, {HTMLFile, HTML}, {JSONFile, JSON}} {
		// Each file is streamed to its temporary file as it renders (and
		// renamed into place once whole), never held in memory.
		if err := record.WriteFileFunc(filepath.Join(dir, f.name), func(w io.Writer) error { return f.render(w, rep) }); err != nil {
			return fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	return nil
}
