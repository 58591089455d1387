package inbox

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// keysTwice returns the keys that occur more than once at the top of the JSON object record.
func keysTwice(t *testing.T, record string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(record))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %q", record)
	}
	seen := map[string]bool{}
	var twice []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		if seen[tok.(string)] {
			twice = append(twice, tok.(string))
		}
		seen[tok.(string)] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
	}
	return twice
}

// TestDataVersionWakerLogsEachKeyOnce: the SQLite waker's error, logged through the consumer's
// logger (which names the queue and the table already), carries each key once.
func TestDataVersionWakerLogsEachKeyOnce(t *testing.T) {
	logs := &logBuffer{}
	h := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	// The waker's pool never connects: it logs that it cannot read the version.
	c := NewConsumer(noDB(0), newFakeForm("jobs"), h, &Config{Queue: "q", PollInterval: time.Hour,
		Logger: slog.New(slog.NewJSONHandler(logs, nil)), Wakeups: &DataVersionWaker{DB: noDB(0)}})
	if err := runUntil(t, c, func() bool { return strings.Contains(logs.String(), "data version failed") }); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, "data version") {
			if twice := keysTwice(t, line); len(twice) > 0 {
				t.Errorf("keys %q twice in %s", twice, line)
			}
		}
	}
}
