package inboxtest

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
)

// Log is a log a test can read while a consumer writes to it: an io.Writer safe for concurrent
// writes, and the loggers that write to it. Its zero value is ready to use.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Logger returns a text logger of the records at level and above, written to l; hand it to
// inbox.Config.Logger.
func (l *Log) Logger(level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: level}))
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns everything written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Contains reports whether what was written so far holds s.
func (l *Log) Contains(s string) bool { return strings.Contains(l.String(), s) }

// Lines counts the lines written so far.
func (l *Log) Lines() int { return strings.Count(l.String(), "\n") }
