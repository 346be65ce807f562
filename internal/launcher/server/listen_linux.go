package server

import (
	"net/netip"
	"syscall"
)

// listening says whether something takes connections on host:port. On
// this host's own addresses, by a bare connect: a socket, a connect and a
// close, no goroutine or poller (a local connect is answered at once,
// taken or refused). Any other host is dialled with a timeout.
func listening(host string, port int) bool {
	ip, err := netip.ParseAddr(host)
	if err != nil || !(ip.IsLoopback() || ip.IsUnspecified()) {
		return dialable(host, port)
	}
	var sa syscall.Sockaddr
	family := syscall.AF_INET
	if ip.Is4() || ip.Is4In6() {
		sa = &syscall.SockaddrInet4{Port: port, Addr: ip.Unmap().As4()}
	} else {
		family = syscall.AF_INET6
		sa = &syscall.SockaddrInet6{Port: port, Addr: ip.As16()}
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return dialable(host, port)
	}
	defer syscall.Close(fd)
	return syscall.Connect(fd, sa) == nil
}
