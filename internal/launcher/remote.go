package launcher

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/bmx-dev/bmx/internal/classify"
	"github.com/bmx-dev/bmx/internal/evidence"
	"github.com/bmx-dev/bmx/internal/launcher/probe"
)

// ErrUnreachable means nothing accepts connections at a server's address.
var ErrUnreachable = errors.New("cannot reach the server")

// reachWait bounds the connection check of a server that should be up: a
// listening server accepts in milliseconds; a host that drops packets would
// otherwise cost every probe its whole timeout.
const reachWait = 10 * time.Second

// CheckURL says whether base is a server's base URL bmx can probe: http or
// https, with a host, no query or fragment.
func CheckURL(base string) error {
	u, err := url.Parse(base)
	switch {
	case err != nil:
		return err
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("%q: want an http:// or https:// URL such as http://127.0.0.1:30000", base)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%q: no host: want a URL such as http://127.0.0.1:30000", base)
	case u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("%q: a base URL has no query or fragment", base)
	}
	return nil
}

// Reachable checks that something accepts TCP connections at base (a URL
// CheckURL accepts), so that a server that is not there is told apart from a
// server that fails its probes.
func Reachable(ctx context.Context, base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	d := net.Dialer{Timeout: reachWait}
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return fmt.Errorf("%w at %s: %w", ErrUnreachable, base, err)
	}
	return conn.Close()
}

// ProbeServer sends set to a server that is already up (bmx starts and stops
// nothing) and judges the answers as a sweep judges a cell's, without log or
// exit status to go on. As in a sweep, a probe that times out makes the
// server a hang and the probes after it are not sent.
func ProbeServer(ctx context.Context, client *probe.Client, set probe.Set) (classify.Judgement, []evidence.Observation) {
	obs := runUntilTimeout(ctx, client, set, nil)
	return classify.Cell(classify.Input{Observations: obs, TimedOut: classify.TimedOut(obs)}), obs
}
