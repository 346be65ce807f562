//go:build !linux

package server

// notifyWrites has no file notification here: the watcher polls.
func notifyWrites(path string) (wake <-chan struct{}, stop func()) {
	return nil, func() {}
}
