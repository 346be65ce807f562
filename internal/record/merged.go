package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Files a merged run directory holds besides a run's own.
const (
	// MergeFile says where every cell of a merged run came from.
	MergeFile = "merge.json"
	// DuplicatesFile holds the results of cells that ran more than once
	// and are not the one the report shows.
	DuplicatesFile = "duplicates.jsonl"
)

// ErrMergeInterrupted means ctx ended while a merged run was written:
// nothing of it is left, and the directory it was written to is as it was.
var ErrMergeInterrupted = errors.New("merge interrupted")

// MergedDir is what a merged run directory holds, as WriteMergedDir writes
// it: the runs of one sweep (its shards, or runs with --only on several
// hosts) made one run.
type MergedDir struct {
	// Report is the merged run: its run.json and its results, one a cell
	// (and the agreement among them, which the report files show).
	Report *Report
	// Parts are the run directories merged; each one's logs are kept in
	// logs/<its directory's name>/.
	Parts []string
	// RanOn is the part (an index into Parts) each cell's result comes
	// from, by cell ID.
	RanOn map[string]int
	// Duplicates are the results of cells that ran more than once and are
	// not the one the report shows, with the part each comes from.
	Duplicates []PartResult
	// Baseline is the yardstick the parts were swept against, written as
	// BaselineFile so that reading the merged run again judges it alike
	// (nil: none).
	Baseline *Yardstick
	// Merge is what MergeFile holds, written as indented JSON.
	Merge any
	// Reports writes the report files into the merged run's directory,
	// from the results as they are there (nil: none).
	Reports func(dir string, rep *Report) error
	// StepsDropped says the results lost their logprob steps on the way
	// (DropSteps): WriteMergedDir sets it once results.jsonl, which keeps
	// them, is written. Another write would lose them from it.
	StepsDropped bool
}

// PartResult is a result and the part of a merge (an index into
// MergedDir.Parts) it comes from.
type PartResult struct {
	Part   int
	Result Result
}

// WriteMergedDir writes the merged run m into out: results.jsonl,
// duplicates.jsonl, run.json, baseline.json, merge.json, every part's logs
// (hard-linked, or copied where a link cannot be made) and, through
// m.Reports, the report files. out must not exist or must hold an earlier
// merge (a MergeFile), which is replaced once the new one is complete; an
// earlier merge is locked while it is replaced (a *LockedError when
// another bmx holds it). It stops when ctx ends (the user's Ctrl-C) with
// ErrMergeInterrupted, removing what it staged. The merge is staged in a
// hidden directory beside out, locked while it is written; one left by a
// merge that was killed (its lock gone with it) is removed first.
//
// On the way m's results lose their logprob steps, which only
// results.jsonl keeps (m.StepsDropped says so): what is left to write needs
// none, and they are most of a large merge's memory.
func WriteMergedDir(ctx context.Context, out string, m *MergedDir) error {
	if ctx.Err() != nil {
		return ErrMergeInterrupted
	}
	if _, err := os.Stat(out); err == nil {
		if _, err := os.Stat(filepath.Join(out, MergeFile)); err != nil {
			return fmt.Errorf("%s exists and is not an earlier merge: name a new directory", out)
		}
		lock, err := LockRunDir(out)
		if err != nil {
			return err
		}
		defer lock.Unlock()
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(out)), 0o755); err != nil {
		return fmt.Errorf("create output directory: %w", err)
	}
	removeStaging(out)
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(out)), stagingPrefix(out))
	if err != nil {
		return fmt.Errorf("create merged run: %w", err)
	}
	defer os.RemoveAll(tmp)
	// Locked while staged: a merge beside this one takes a staging
	// directory it cannot lock for a live merge's, and leaves it.
	staged, err := LockRunDir(tmp)
	if err != nil {
		return fmt.Errorf("create merged run: %w", err)
	}
	defer staged.Unlock()
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := m.write(ctx, tmp, out); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ErrMergeInterrupted
	}
	if err := os.RemoveAll(out); err != nil {
		return fmt.Errorf("replace the earlier merge: %w", err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("create merged run: %w", err)
	}
	return nil
}

// stagingPrefix begins the name of the hidden directory a merge into out
// is staged in.
func stagingPrefix(out string) string { return "." + filepath.Base(filepath.Clean(out)) + ".merging-" }

// stagingUnlocked is how long a staging directory without a lock file is
// left alone: a merge locks its own at once, so one older than that was
// left by a bmx that locked none (before it did) and was killed.
const stagingUnlocked = 10 * time.Second

// removeStaging removes the staging directories of merges into out that
// were killed (SIGKILL, a power cut) before they could remove their own:
// those whose lock no live bmx holds. Otherwise each killed merge left a
// hidden copy of the merged run (its logs too, where they were copied)
// for ever.
func removeStaging(out string) {
	dirs, _ := filepath.Glob(filepath.Join(filepath.Dir(filepath.Clean(out)), stagingPrefix(out)+"*"))
	for _, d := range dirs {
		if st, err := os.Lstat(d); err != nil || !st.IsDir() {
			continue
		}
		if _, err := os.Lstat(filepath.Join(d, LockFile)); err != nil {
			if st, err := os.Lstat(d); err == nil && time.Since(st.ModTime()) > stagingUnlocked {
				_ = os.RemoveAll(d)
			}
			continue
		}
		lock, err := LockRunDir(d)
		if err != nil {
			continue // a live merge's, or one bmx cannot judge: left alone
		}
		_ = lock.Unlock()
		_ = os.RemoveAll(d)
	}
}

// write fills dir, a merge that will be renamed to final. Once the results
// are written, m's results lose their logprob steps (DropSteps). It stops
// with ErrMergeInterrupted when ctx ends.
func (m *MergedDir) write(ctx context.Context, dir, final string) error {
	kept, err := m.keepLogs(ctx, dir, final)
	if err != nil {
		return err
	}
	// relog points a result of part i at its logs in the merge.
	relog := func(i int, r Result) Result {
		if p := kept[i][filepath.Base(r.LogPath)]; p != "" && r.LogPath != "" {
			r.LogPath = p
		}
		r.Attempts = slices.Clone(r.Attempts)
		for j, a := range r.Attempts {
			if p := kept[i][filepath.Base(a.LogPath)]; p != "" && a.LogPath != "" {
				r.Attempts[j].LogPath = p
			}
		}
		return r
	}
	rep := &Report{Run: m.Report.Run, Agreement: m.Report.Agreement}
	for _, r := range m.Report.Results {
		rep.Results = append(rep.Results, relog(m.RanOn[r.Cell.ID], r))
	}
	var dups []Result
	for _, d := range m.Duplicates {
		dups = append(dups, relog(d.Part, d.Result))
	}
	if err := WriteResults(filepath.Join(dir, ResultsFile), rep.Results); err != nil {
		return err
	}
	if len(dups) > 0 {
		if err := WriteResults(filepath.Join(dir, DuplicatesFile), dups); err != nil {
			return err
		}
	}
	// What is left to write needs no logprob steps (the numerics they gave
	// are in each result): dropped, they free most of a large merge's
	// memory before three reports render at once.
	m.StepsDropped = true
	m.Report.DropSteps()
	for _, d := range m.Duplicates {
		d.Result.DropSteps()
	}
	if ctx.Err() != nil {
		return ErrMergeInterrupted
	}
	if err := WriteRun(dir, rep.Run); err != nil {
		return fmt.Errorf("write run.json: %w", err)
	}
	if m.Baseline != nil {
		// Read again, the merged run is judged as it is now.
		if err := WriteYardstick(dir, m.Baseline); err != nil {
			return fmt.Errorf("write %s: %w", BaselineFile, err)
		}
	}
	data, err := json.MarshalIndent(m.Merge, "", "  ")
	if err != nil {
		return err
	}
	if err := WriteFile(filepath.Join(dir, MergeFile), append(data, '\n')); err != nil {
		return fmt.Errorf("write %s: %w", MergeFile, err)
	}
	if m.Reports == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ErrMergeInterrupted
	}
	return m.Reports(dir, rep)
}

// keepLogs links (or copies) each part's logs into dir/logs/<the part's
// directory's name>/ and returns, per part, each log's name and its path
// once dir is renamed to final.
func (m *MergedDir) keepLogs(ctx context.Context, dir, final string) ([]map[string]string, error) {
	kept := make([]map[string]string, len(m.Parts)) // per part: log name -> its path in the merge
	used := map[string]bool{}
	for i, part := range m.Parts {
		kept[i] = map[string]string{}
		label := filepath.Base(filepath.Clean(part))
		for n := 2; used[label]; n++ {
			label = fmt.Sprintf("%s-%d", filepath.Base(filepath.Clean(part)), n)
		}
		used[label] = true
		src, dst := filepath.Join(part, "logs"), filepath.Join(dir, "logs", label)
		entries, err := os.ReadDir(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read logs of %s: %w", part, err)
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return nil, err
		}
		for _, e := range entries {
			if ctx.Err() != nil {
				return nil, ErrMergeInterrupted
			}
			if !e.Type().IsRegular() {
				continue
			}
			if err := linkOrCopy(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return nil, fmt.Errorf("keep log %s: %w", e.Name(), err)
			}
			kept[i][e.Name()] = filepath.Join(final, "logs", label, e.Name())
		}
	}
	return kept, nil
}

// linkOrCopy hard-links src to dst, or copies it where a link cannot be
// made (another file system).
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
