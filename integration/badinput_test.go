package integration

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// TestBadInput feeds every cell what a queue meets in production and should survive.
func TestBadInput(t *testing.T) {
	runSuite(t, func(cell) []cellTest {
		return []cellTest{
			{"undecodable", badUndecodable},
			{"null-and-empty", badNullAndEmpty},
			{"16MiB", badLargePayload},
			{"id-limits", badIDLimits},
			{"odd-names", badOddNames},
			{"missing-schema", badMissingSchema},
			{"stopped-server", badStoppedServer},
		}
	})
}

type job struct {
	N int `json:"n"`
}

// badUndecodable: payloads that do not decode into the handler's type are settled by the
// decode policy (Drop by default, or what Config.UndecodablePayload says), logged, and the
// consumer goes on with the rows after them.
func badUndecodable(t *testing.T, c cell) {
	for _, policy := range []outcome.Outcome{{}, outcome.RetryAfter(time.Hour)} {
		name := "default"
		if policy.Kind() != outcome.KindNone {
			name = "retry-after"
		}
		t.Run(name, func(t *testing.T) {
			db, tbl := c.b.openTable(t, 8, fullTable)
			payloads := []string{`{"n":1}`, `{not json`, `{"n":"two"}`, `[]`, `{"n":5}`}
			ids := c.publishEach(t, db, tbl, "q", payloads...)
			var (
				mu   sync.Mutex
				seen []int
			)
			h := inbox.JSON(func(ctx context.Context, d *inbox.Delivery, j job) outcome.Outcome {
				mu.Lock()
				seen = append(seen, j.N)
				mu.Unlock()
				return outcome.Ack()
			})
			logs := &faultLog{t: t}
			stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{
				Queue: "q", UndecodablePayload: policy,
				Logger: logs.Logger(slog.LevelInfo),
			})
			settled := c.q(t, tbl.ProcessedAt) + " IS NOT NULL"
			retried := c.q(t, tbl.RetryAfter) + " IS NOT NULL"
			waitFor(t, 20*time.Second, "every row to be settled or put off", func() bool {
				return len(c.ids(t, db, tbl, settled+" OR "+retried)) == len(payloads)
			})
			stop()
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, []int{1, 5}) {
				t.Errorf("the handler saw %v, want the two payloads that decode, [1 5]", seen)
			}
			if !logs.Contains("does not decode") {
				t.Error("the consumer did not log the undecodable payloads")
			}
			bad := []int64{ids[1], ids[2], ids[3]}
			if policy.Kind() == outcome.KindNone {
				if got := c.ids(t, db, tbl, settled); !slices.Equal(got, ids) {
					t.Errorf("rows settled %v, want every row %v (the undecodable ones dropped)", got, ids)
				}
			} else if got := c.ids(t, db, tbl, retried+" AND "+c.q(t, tbl.ProcessedAt)+" IS NULL"); !slices.Equal(got, bad) {
				t.Errorf("rows put off by the policy %v, want the undecodable ones %v", got, bad)
			}
		})
	}
}

// badNullAndEmpty: a NULL payload reaches the handler as nil, an empty one as empty; the JSON
// adapter takes neither for a value and leaves them to the decode policy.
func badNullAndEmpty(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 8, fullTable)
	mustExec(t, db, "INSERT INTO "+c.q(t, tbl.Name)+" ("+c.q(t, tbl.Payload)+", "+c.q(t, tbl.Queue)+") VALUES (NULL, 'q')")
	c.publish(t, db, tbl, inbox.Message{Queue: "q", Payload: []byte{}})
	c.publish(t, db, tbl, inbox.Message{Queue: "q"}) // no payload given
	ids := c.ids(t, db, tbl, "")
	var (
		mu  sync.Mutex
		got = map[int64][]byte{}
	)
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		mu.Lock()
		got[d.ID] = d.Payload
		mu.Unlock()
		return outcome.Ack()
	})
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q"})
	waitFor(t, 20*time.Second, "the rows to be handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 3
	})
	stop()
	if p := got[ids[0]]; p != nil {
		t.Errorf("a NULL payload reached the handler as %q, want nil", p)
	}
	if p := got[ids[1]]; len(p) != 0 {
		t.Errorf("an empty payload reached the handler as %q, want empty", p)
	} else if p == nil {
		t.Logf("an empty payload reached the handler as nil, like NULL: the driver returns no bytes for an empty value")
	}
	if p := got[ids[2]]; len(p) != 0 {
		t.Errorf("a message published without a payload reached the handler as %q, want nothing", p)
	}
}

// badLargePayload: a 16 MiB payload goes through publish, claim and handler intact. On MySQL and
// MariaDB the server's max_allowed_packet must hold it: where it does not, publishing it must
// fail with the server's error (no row half written), and the largest payload it does hold
// goes through instead.
func badLargePayload(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 4, fullTable)
	size := 16 << 20
	if c.b.name == "mysql" || c.b.name == "mariadb" {
		var limit int
		if err := db.QueryRow("SELECT @@global.max_allowed_packet").Scan(&limit); err != nil {
			t.Fatal(err)
		}
		// The INSERT carries the payload and a little more; 64 KiB of room is plenty.
		if limit < size+64<<10 {
			err := inbox.Enqueue(context.Background(), db, c.b.dialect, tbl, inbox.Message{Queue: "q", Payload: make([]byte, size)})
			if err == nil {
				t.Fatalf("a 16 MiB payload was published past max_allowed_packet = %d", limit)
			}
			t.Logf("max_allowed_packet is %d bytes (left as it is): a 16 MiB payload is refused (%v); raise it on the server (SET GLOBAL max_allowed_packet = 67108864) to queue payloads this large. Checking %d bytes instead.", limit, err, limit-64<<10)
			if n := c.b.countRows(t, db, tbl, ""); n != 0 {
				t.Fatalf("%d rows in the table after the refused publish, want 0", n)
			}
			size = limit - 64<<10
		}
	}
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = byte(i*7 + i>>13)
	}
	c.publish(t, db, tbl, inbox.Message{Queue: "q", Payload: payload})
	want := sha256.Sum256(payload)
	var (
		mu  sync.Mutex
		got [][32]byte
	)
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		mu.Lock()
		got = append(got, sha256.Sum256(d.Payload))
		mu.Unlock()
		return outcome.Ack()
	})
	// Reading 16 MiB under the race detector on a loaded machine took longer than the cells'
	// short lease, which then ran out before the Ack (the row went to the handler twice, as a
	// lease's promise allows): this test is about the payload, so its lease is long.
	stop := runConsumer(t, db, c.newFormLease(t, tbl, 30*time.Second), h, &inbox.Config{Queue: "q"})
	waitFor(t, 60*time.Second, "the large row to settle", func() bool {
		return len(c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) == 1
	})
	stop()
	if len(got) != 1 || got[0] != want {
		t.Errorf("the %d-byte payload reached the handler %d times, intact: %v", size, len(got), len(got) == 1 && got[0] == want)
	}
}

// badIDLimits: ids at and near the ends of int64 (and past int32 and float64's exact range) are
// claimed, delivered and settled as themselves.
func badIDLimits(t *testing.T, c cell) {
	db, tbl := c.b.openTable(t, 8, givenIDs(fullTable))
	ids := []int64{math.MinInt64, math.MinInt64 + 1, -1, 1, math.MaxInt32 + 1, 1<<53 + 1, math.MaxInt64 - 1, math.MaxInt64}
	var msgs []inbox.Message
	for _, id := range ids {
		msgs = append(msgs, inbox.Message{ID: id, Queue: "q", Payload: []byte(fmt.Sprint(id))})
	}
	c.publish(t, db, tbl, msgs...)
	var got collector[int64]
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		got.add(d.ID)
		if string(d.Payload) != fmt.Sprint(d.ID) {
			t.Errorf("row %d carries the payload of row %s", d.ID, d.Payload)
		}
		return outcome.Ack()
	})
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q"})
	waitFor(t, 20*time.Second, "every row to settle", func() bool {
		return len(c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NULL")) == 0
	})
	stop()
	if got := got.all(); !slices.Equal(got, ids) {
		t.Errorf("delivered %v, want %v in id order", got, ids)
	}
}

// oddTable describes a table whose name and every column are quoted identifiers that would
// break a statement built without quoting: quotes of both kinds, spaces, reserved words and a
// statement separator.
func oddTable(t *testing.T) inbox.Table {
	return inbox.Table{
		Name:        tableName(t) + ` "order" ` + "`by`" + ` 'select'`,
		ID:          `"id" of ` + "`row`",
		IDGenerated: true,
		Payload:     "select",
		Attempt:     "group by",
		ProcessedAt: "it's done",
		Queue:       "group",
		Priority:    "order",
		RetryAfter:  `retry "after"`,
		Headers:     "h; DROP TABLE x; --",
	}
}

// badOddNames: such a table is created, published to and consumed from, with every role in
// use, and nothing of the names leaks into the statements.
func badOddNames(t *testing.T, c cell) {
	db := c.b.open(t, 8)
	tbl := oddTable(t)
	c.b.createTable(t, db, tbl)
	c.publish(t, db, tbl,
		inbox.Message{Queue: "q", Payload: []byte("a"), Priority: 2, Headers: map[string]string{"k": "v'\"`"}},
		inbox.Message{Queue: "q", Payload: []byte("b"), Priority: 1},
		inbox.Message{Queue: "q", Payload: []byte("c"), Priority: 3},
		inbox.Message{Queue: "other", Payload: []byte("x")},
	)
	var got collector[string]
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		got.add(string(d.Payload) + d.Headers["k"])
		if string(d.Payload) == "b" && d.Attempt == 1 {
			return outcome.RetryAfter(0) // writes the quoted retry_after column, due at once
		}
		return outcome.Ack()
	})
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q"})
	waitFor(t, 20*time.Second, "queue q to be drained", func() bool {
		return len(c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) == 3
	})
	stop()
	// b goes first (priority 1) and is retried due at once, so it comes back before a
	// (priority 2).
	if got := got.all(); !slices.Equal(got, []string{"b", "b", "av'\"`", "c"}) {
		t.Errorf("delivered %q, want b, b, a (with its headers), c in priority order", got)
	}
	if n := len(c.ids(t, db, tbl, c.q(t, tbl.Queue)+" = 'other' AND "+c.q(t, tbl.ProcessedAt)+" IS NULL")); n != 1 {
		t.Errorf("the other queue's row: %d left unprocessed, want 1", n)
	}
}

// badMissingSchema: a description naming a table, or a column, that the database lacks fails
// Run at once with ErrSchema, naming what is missing.
func badMissingSchema(t *testing.T, c cell) {
	db := c.b.open(t, 8)
	real := fullTable(tableName(t))
	c.b.createTable(t, db, real)
	cases := map[string]inbox.Table{}
	noTable := fullTable(tableName(t) + "_nosuch")
	cases["inbox_nosuch"] = noTable
	for role, set := range map[string]func(*inbox.Table){
		"payload":      func(t *inbox.Table) { t.Payload = "no_such_payload" },
		"attempt":      func(t *inbox.Table) { t.Attempt = "no_such_attempt" },
		"processed_at": func(t *inbox.Table) { t.ProcessedAt = "no_such_processed_at" },
		"group":        func(t *inbox.Table) { t.Queue = "no_such_group" },
		"priority":     func(t *inbox.Table) { t.Priority = "no_such_priority" },
		"retry_after":  func(t *inbox.Table) { t.RetryAfter = "no_such_retry_after" },
		"headers":      func(t *inbox.Table) { t.Headers = "no_such_headers" },
	} {
		tbl := real
		set(&tbl)
		cases["no_such_"+role] = tbl
	}
	for missing, tbl := range cases {
		t.Run(missing, func(t *testing.T) {
			name := missing
			if missing == "inbox_nosuch" {
				name = tbl.Name
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
			err := inbox.NewConsumer(db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q", PollInterval: cellPoll}).Run(ctx)
			switch {
			case ctx.Err() != nil:
				t.Fatalf("Run kept going for 20 s on a description naming %s, which does not exist (returned %v)", name, err)
			case !errors.Is(err, inbox.ErrSchema):
				t.Fatalf("Run: %v, want an error wrapping ErrSchema", err)
			case !strings.Contains(err.Error(), name):
				t.Errorf("Run: %v: does not name %q", err, name)
			}
		})
	}
}

// badStoppedServer: a DSN to a port nothing listens on. Run logs that it cannot open the
// consumer, tries again every poll interval until its context ends, and returns without
// panicking.
func badStoppedServer(t *testing.T, c cell) {
	dsn := "file:/nonexistent-dir/inbox.db"
	if c.b.name != "sqlite" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if c.b.name == "postgres" {
			dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable&connect_timeout=2", port)
		} else {
			dsn = fmt.Sprintf("root@tcp(127.0.0.1:%d)/test?timeout=2s", port)
		}
	}
	db, err := sql.Open(c.b.driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	logs := &faultLog{t: t}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
	done := make(chan error, 1)
	go func() {
		done <- inbox.NewConsumer(db, c.newForm(t, fullTable(tableName(t))), h, &inbox.Config{
			Queue: "q", PollInterval: 200 * time.Millisecond, Logger: logs.Logger(slog.LevelInfo),
		}).Run(ctx)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v, want nil once its context ends (an unreachable database is retried)", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30 s of its context's end")
	}
	tries := strings.Count(logs.String(), "trying again")
	if tries < 2 {
		t.Errorf("Run logged %d failed attempts to open the consumer in 1.5 s at a 200 ms poll interval, want several", tries)
	}
	if c.b.name != "sqlite" && !logs.Contains("refused") {
		t.Error("the log does not say the connection was refused")
	}
}
