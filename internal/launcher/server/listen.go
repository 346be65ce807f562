package server

import "net"

// dialable says whether host:port takes a connection, dialled through
// the net package with a timeout.
func dialable(host string, port int) bool {
	c, err := net.DialTimeout("tcp", hostPort(host, port), healthTimeout)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
