package server

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"
)

// Ports hands out free ports to the servers of a sweep, one each: a port
// the kernel offers is skipped while another running server of the sweep
// holds it (it may not listen yet, so the kernel does not know it is taken).
// The zero Ports is ready to use.
type Ports struct {
	taken sync.Map
}

// Take finds a free port on host that no other server of the sweep holds.
func (p *Ports) Take(host string) (int, error) {
	for range portTries {
		port, err := freePort(host)
		if err != nil {
			return 0, err
		}
		if _, taken := p.taken.LoadOrStore(port, true); !taken {
			return port, nil
		}
	}
	return 0, errors.New("find a free port: the kernel kept offering ports in use")
}

// Release hands a port back once its server is down.
func (p *Ports) Release(port int) { p.taken.Delete(port) }

// waitPortFree waits until host:port can be bound again, so the next cell
// (or a rerun) does not meet the last server's socket.
func waitPortFree(host string, port int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	for {
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			return ln.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("port %d still in use %s after the server stopped: %w", port, limit, err)
		}
		time.Sleep(portFreePoll)
	}
}

// freePort asks the kernel for a free port on host.
func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		return 0, errors.New("find a free port: not a TCP address")
	}
	return addr.Port, nil
}
