package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"

	"github.com/bmx-dev/bmx/internal/launcher/sim"
)

// endlessServer names the environment variable that makes this test binary
// a server whose streams never end: it answers every request as the
// simulated host's correct cell does, except a streaming chat completion,
// which it writes for as long as the client reads. "text" sends a word a
// chunk (a server that ignores max_tokens), "empty" chunks with no text (a
// chatty one that never says anything).
const endlessServer = "BMX_TEST_ENDLESS_SERVER"

// serveEndless runs the endless server with sim-server's arguments and
// returns its exit status.
func serveEndless(mode string, args []string) int {
	opts, err := sim.ParseArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s := sim.New(opts, sim.DefaultProfile(), os.Stderr)
	s.SetReady()
	healthy := s.Handler()
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/chat/completions" {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"stream":true`)) {
				streamEndlessly(w, mode)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		healthy.ServeHTTP(w, r)
	})
	fmt.Fprintf(os.Stderr, "endless test server (%s streams); %s\n", mode, sim.ReadyLine)
	err = http.ListenAndServe(net.JoinHostPort(opts.Host, strconv.Itoa(opts.Port)), handler)
	fmt.Fprintln(os.Stderr, err)
	return 1
}

// streamEndlessly writes chat.completion.chunk events until the client
// goes away, flushing each one: as many chunks as the client takes.
func streamEndlessly(w http.ResponseWriter, mode string) {
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	event := []byte(`data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":" on"},"finish_reason":null}]}` + "\n\n")
	if mode == "empty" {
		event = []byte(`data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":""},"finish_reason":null}]}` + "\n\n")
	}
	for {
		if _, err := w.Write(event); err != nil || rc.Flush() != nil {
			return
		}
	}
}
