//go:build linux

package launcher

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/bmx-dev/bmx/internal/matrixtest"
)

// TestSessionErrorsRedacted: an error that quotes a secret (here the
// server executable, a path that holds a secret var's value) reaches the
// caller without it, and is still the error it was.
func TestSessionErrorsRedacted(t *testing.T) {
	t.Parallel()
	s := newTestSession(t, writeConfig(t, matrixtest.Config{Name: "secret-path",
		Vars:   map[string]string{"api_token": "pathsecret-4242"},
		Server: matrixtest.Server{Command: []string{"/no/such/{api_token}/server", "--port", "{port}"}},
		Axes:   []matrixtest.Axis{{Name: "a", Flag: "--a", Values: []string{"x"}}}}))
	_, err := s.run(context.Background())
	var ce *ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "/no/such/<redacted>/server") {
		t.Fatalf("error %v, want a *ConfigError about the executable", err)
	}
	if strings.Contains(err.Error(), "pathsecret-4242") || strings.Contains(s.log.String(), "pathsecret-4242") {
		t.Errorf("the secret is printed:\n%v\n%s", err, s.log)
	}
}
