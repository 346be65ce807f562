package server

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
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

// freePort finds a port on host that can be bound now: a random one below
// the kernel's ephemeral range (serverPorts), or, where there is no room
// below it, one the kernel offers. The ephemeral range is where every
// outgoing connection takes its source port: bmx's own readiness polls and
// probes, hundreds a second with several slots, and every other client on
// the host. A port picked from it may be taken by one of those between
// bmx's check and the server's bind (seen in CI: "address already in use").
func freePort(host string) (int, error) {
	if lo, hi := serverPorts(); hi > lo {
		for range portTries {
			port := lo + rand.IntN(hi-lo)
			if ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port))); err == nil {
				ln.Close()
				return port, nil
			}
		}
	}
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

// serverPorts is the range servers' ports are picked from, [lo, hi): the
// serverPortSpan ports below the kernel's ephemeral range (Linux:
// ip_local_port_range, 32768 by default; elsewhere IANA's 49152), above the
// privileged ports. Empty when the ephemeral range starts too low.
func serverPorts() (lo, hi int) {
	hi = 49152
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				hi = n
			}
		}
	}
	return max(1024, hi-serverPortSpan), hi
}

// serverPortSpan is how many ports below the ephemeral range servers use.
const serverPortSpan = 10000
