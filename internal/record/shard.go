package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/bmx-dev/bmx/internal/matrix"
)

// ShardFile is the name of a shard's record in its run directory: which
// part of the sweep the run is, and how the whole plan was dealt.
const ShardFile = "shard.json"

// ShardRecord is shard.json.
type ShardRecord struct {
	Shard matrix.Shard `json:"shard"`
	// Assignment is the whole plan's: the merge finds from it which cells
	// are missing and which shard should have run them.
	Assignment matrix.Assignment `json:"assignment"`
}

// WriteShard writes shard.json into a run directory.
func WriteShard(dir string, rec ShardRecord) error {
	return writeJSON(dir, ShardFile, rec)
}

// ReadShard reads shard.json; a run that is not a shard has none (nil, nil).
func ReadShard(dir string) (*ShardRecord, error) {
	return readOptionalJSON[ShardRecord](dir, ShardFile)
}

// writeJSON writes v, indented, as the file name of a run directory,
// atomically.
func writeJSON(dir, name string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(filepath.Join(dir, name), append(data, '\n'))
}

// readOptionalJSON reads the file name of a run directory that a run may
// not have: nil, nil when it has none; an error naming the file when it
// does not decode.
func readOptionalJSON[T any](dir, name string) (*T, error) {
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &v, nil
}
