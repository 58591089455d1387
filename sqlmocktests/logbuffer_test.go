package sqlmocktests

import (
	"bytes"
	"log/slog"
	"sync"
)

// logBuffer is a log a test can read, safe for the concurrent writes of a logger.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Logger returns a text logger, at Info and above, that writes to l.
func (l *logBuffer) Logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }
