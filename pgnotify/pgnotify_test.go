package pgnotify_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/pgnotify"
)

// idleForm is a form whose queue is always empty: the consumer runs, and its Waker with it.
type idleForm struct{}

func (idleForm) Open(context.Context, *sql.DB, inbox.Binding) (inbox.Plan, error) {
	return inbox.Plan{Table: "jobs", Form: "idle"}, nil
}
func (idleForm) Claim(context.Context, int) ([]*inbox.Delivery, error)          { return nil, nil }
func (idleForm) Extend(context.Context, *inbox.Delivery) error                  { return nil }
func (idleForm) Settle(context.Context, *inbox.Delivery, outcome.Outcome) error { return nil }
func (idleForm) Release(context.Context, *inbox.Delivery) error                 { return nil }
func (idleForm) Close() error                                                   { return nil }

type noConnector struct{}

func (noConnector) Connect(context.Context) (driver.Conn, error) {
	return nil, errors.New("no database in this test")
}
func (noConnector) Driver() driver.Driver { return nil }

// syncBuffer is a log sink safe for the consumer's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// duplicateKeys returns the keys that occur more than once in one JSON object of record, or of
// an object nested in it (a slog group).
func duplicateKeys(record []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(record))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object: %q", record)
	}
	seen := map[string]bool{}
	var dups []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := tok.(string)
		if seen[key] {
			dups = append(dups, key)
		}
		seen[key] = true
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		if len(v) > 0 && v[0] == '{' {
			nested, err := duplicateKeys(v)
			if err != nil {
				return nil, err
			}
			dups = append(dups, nested...)
		}
	}
	return dups, nil
}

// TestListenerWarningHasEachKeyOnce: the listener's warning, logged through the consumer's
// logger (which already names the queue and the table), carries each attribute once, so that
// a JSON log has no duplicate keys.
func TestListenerWarningHasEachKeyOnce(t *testing.T) {
	// A port no server listens on: each connection is refused, and the listener warns.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	logs := &syncBuffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	c := inbox.NewConsumer(sql.OpenDB(noConnector{}), idleForm{}, inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() }),
		&inbox.Config{Queue: "q", Logger: log, Retry: inbox.RetryAtOnce, Wakeups: &pgnotify.Listener{ConnString: "postgres://postgres@" + addr + "/test?connect_timeout=5"}})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(logs.String(), "listening for notifications failed"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no warning from the listener after a minute; the log:\n%s", logs.String())
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	warned := 0
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		if !strings.Contains(sc.Text(), "listening for notifications failed") {
			continue
		}
		warned++
		dups, err := duplicateKeys(sc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if len(dups) > 0 {
			t.Errorf("keys %q appear twice in %s", dups, sc.Text())
		}
	}
	if warned == 0 {
		t.Fatal("no warning read back")
	}
}
