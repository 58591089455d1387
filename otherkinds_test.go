package inbox

import (
	"bytes"
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOtherKindsAreLoggedOncePerKind: the watch logs each kind its searches find once, passes
// it to every later search as reported, and logs a kind found later when it is found.
func TestOtherKindsAreLoggedOncePerKind(t *testing.T) {
	var mu sync.Mutex
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logged}, nil))
	var calls [][]string
	find := func(_ context.Context, reported []string) ([]otherKind, error) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, slices.Clone(reported))
		present := []otherKind{{kind: "b", rows: 3, oldest: time.Minute}}
		if len(calls) >= 3 {
			present = append(present, otherKind{kind: "", rows: 1, oldest: -1})
		}
		var out []otherKind
		for _, k := range present {
			if !slices.Contains(reported, k.kind) {
				out = append(out, k)
			}
		}
		return out, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); watchOtherKinds(ctx, find, log, time.Millisecond) }()
	for {
		mu.Lock()
		n := len(calls)
		mu.Unlock()
		if n >= 6 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	out := logged.String()
	if n := strings.Count(out, "kind=b "); n != 1 {
		t.Errorf("kind b logged %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, `kind="" `); n != 1 || !strings.Contains(out, "oldest_due=unknown") {
		t.Errorf("rows of no kind logged %d times, want once with their age unknown:\n%s", n, out)
	}
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "rows=3") || !strings.Contains(out, "oldest_due=1m0s") {
		t.Errorf("want a warning with the rows and the oldest's wait:\n%s", out)
	}
	if len(calls[0]) != 0 || !slices.Equal(calls[len(calls)-1], []string{"b", ""}) {
		t.Errorf("searches passed over %v first and %v last; want none, then the kinds reported", calls[0], calls[len(calls)-1])
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
