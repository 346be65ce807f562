//go:build !linux

package server

// listening says whether something takes connections on host:port.
func listening(host string, port int) bool { return dialable(host, port) }
