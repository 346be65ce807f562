package server

import (
	"net"
	"strconv"
	"testing"
)

// TestPortsBelowEphemeral: ports are picked below the kernel's ephemeral
// range, where no outgoing connection takes its source port, each one
// bindable when handed out and none handed out twice while held; a port
// released can be handed out again.
func TestPortsBelowEphemeral(t *testing.T) {
	lo, hi := serverPorts()
	if hi <= lo {
		t.Fatalf("no room below the ephemeral range: [%d, %d)", lo, hi)
	}
	var p Ports
	seen := map[int]bool{}
	for range 200 {
		port, err := p.Take("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		if port < lo || port >= hi {
			t.Fatalf("port %d outside [%d, %d)", port, lo, hi)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice while held", port)
		}
		seen[port] = true
	}
	// A port something listens on is not handed out.
	var held []net.Listener
	for port := range seen {
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err == nil {
			held = append(held, ln)
		}
		p.Release(port)
	}
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for range 200 {
		port, err := p.Take("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		for _, ln := range held {
			if ln.Addr().(*net.TCPAddr).Port == port {
				t.Fatalf("port %d handed out while another process listens on it", port)
			}
		}
	}
}

// TestListening: the readiness check's bare connect says taken for a
// listening port and not for a closed one, on IPv4, IPv6 and a host name.
func TestListening(t *testing.T) {
	for _, host := range []string{"127.0.0.1", "::1", "localhost"} {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			t.Logf("%s: %v (no such address here)", host, err)
			continue
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if !listening(host, port) {
			t.Errorf("%s:%d listens, listening says no", host, port)
		}
		ln.Close()
		if listening(host, port) {
			t.Errorf("%s:%d is closed, listening says yes", host, port)
		}
	}
}
