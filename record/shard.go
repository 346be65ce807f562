package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/bmx-dev/bmx/matrix"
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
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return WriteFile(filepath.Join(dir, ShardFile), append(data, '\n'))
}

// ReadShard reads shard.json; a run that is not a shard has none (nil, nil).
func ReadShard(dir string) (*ShardRecord, error) {
	data, err := os.ReadFile(filepath.Join(dir, ShardFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec ShardRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ShardFile), err)
	}
	return &rec, nil
}
