//go:build !linux

package server

import "net"

// listening says whether something takes connections on host:port.
func listening(host string, port int) bool {
	c, err := net.DialTimeout("tcp", hostPort(host, port), healthTimeout)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
