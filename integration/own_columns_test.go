package integration

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/outcome"
)

// ownTable is fullTable with three columns of the application's own: account (text), amount
// (integer) and region (text, NULL), created on the backend; the description names amount and
// region, and the account column only when listed says so.
func ownTable(t *testing.T, b backend, db *sql.DB, listed bool) inbox.Table {
	t.Helper()
	tbl := b.newTable(t, db, fullTable)
	text := "TEXT"
	if b.name == "mysql" || b.name == "mariadb" {
		text = "VARCHAR(191)"
	}
	for _, c := range []string{"account " + text + " NOT NULL DEFAULT ''", "amount BIGINT", "region " + text} {
		mustExec(t, db, "ALTER TABLE "+b.q(t, tbl.Name)+" ADD COLUMN "+c)
	}
	tbl.Columns = []string{"amount", "region"}
	if listed {
		tbl.Columns = append(tbl.Columns, "account")
	}
	return tbl
}

// read is what a handler read of a delivery's own columns.
type read struct {
	account string
	amount  int64
	region  *string
}

// ownRow is the row type of ownTable's rows, for inbox.RowOf.
type ownRow struct {
	ID      int64   `inbox:"id"`
	Payload []byte  `inbox:"payload"`
	Account string  `inbox:"column=account"`
	Amount  int64   `inbox:"column=amount"`
	Region  *string `inbox:"column=region"`
}

func readOwn(d *inbox.Delivery) (read, error) {
	var r read
	var err error
	if r.account, err = inbox.Column[string](d, "account"); err != nil {
		return r, err
	}
	if r.amount, err = inbox.Column[int64](d, "amount"); err != nil {
		return r, err
	}
	r.region, err = inbox.Column[*string](d, "region")
	return r, err
}

// TestOwnColumns: on every database × form, single and batch, rows published with their own
// columns through Enqueue are claimed with them, and each handler reads the values its row was
// published with (a NULL as nil); EnqueueIDs returned the rows' ids in message order.
func TestOwnColumns(t *testing.T) {
	var tests []subtest
	for _, c := range cells(t) {
		for _, batch := range []int{0, 4} {
			name := c.name()
			if batch > 0 {
				name += "-batch"
			}
			tests = append(tests, subtest{name, func(t *testing.T) { ownColumnsCell(t, c, batch) }})
		}
	}
	runConcurrently(t, 4, tests)
}

func ownColumnsCell(t *testing.T, c cell, batch int) {
	db := c.b.open(t, 8)
	tbl := ownTable(t, c.b, db, true)
	eu := "eu"
	var msgs []inbox.Message
	want := map[int64]read{}
	for i := range 6 {
		m := inbox.Message{Payload: fmt.Appendf(nil, "%d", i), Columns: map[string]any{"account": fmt.Sprintf("acct-%d", i), "amount": int64(100 * i)}}
		if i%2 == 0 {
			m.Columns["region"] = eu // the odd rows leave region out: it takes its default, NULL
		}
		msgs = append(msgs, m)
	}
	ids, err := inbox.EnqueueIDs(context.Background(), db, c.b.dialect, tbl, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(msgs) {
		t.Fatalf("EnqueueIDs returned %d ids for %d messages", len(ids), len(msgs))
	}
	for i, id := range ids {
		var payload []byte
		if err := db.QueryRow("SELECT payload FROM "+c.q(t, tbl.Name)+" WHERE id = "+c.ph(1), id).Scan(&payload); err != nil {
			t.Fatalf("row %d, the id of message %d: %v", id, i, err)
		}
		if string(payload) != fmt.Sprint(i) {
			t.Fatalf("id %d of message %d holds payload %q, want %q: the ids are not in message order", id, i, payload, fmt.Sprint(i))
		}
		w := read{account: msgs[i].Columns["account"].(string), amount: int64(100 * i)}
		if i%2 == 0 {
			w.region = &eu
		}
		want[id] = w
	}

	var mu sync.Mutex
	got := map[int64]read{}
	handle := inbox.HandlerFunc(func(_ context.Context, d *inbox.Delivery) outcome.Outcome {
		r, err := readOwn(d)
		if err != nil {
			t.Errorf("row %d: %v", d.ID, err)
			return outcome.Drop()
		}
		// The typed row reads what Column reads, from the driver's own values.
		row, err := inbox.RowOf[ownRow](d)
		if err != nil {
			t.Errorf("row %d: RowOf: %v", d.ID, err)
		} else if row.ID != d.ID || string(row.Payload) != string(d.Payload) || row.Account != r.account || row.Amount != r.amount || deref(row.Region) != deref(r.region) {
			t.Errorf("row %d: RowOf reads %+v (region %v), Column %+v (region %v)", d.ID, row, deref(row.Region), r, deref(r.region))
		}
		mu.Lock()
		got[d.ID] = r
		mu.Unlock()
		return outcome.Ack()
	})
	cfg := &inbox.Config{Workers: 2, PollInterval: cellPoll, Logger: testLogger(t)}
	stop := startConsumer(t, newConsumer(t, db, c.newForm(t, tbl), batch, handle, cfg))
	waitFor(t, 20*time.Second, "every row handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(want)
	})
	stop()
	for id, w := range want {
		g := got[id]
		if g.account != w.account || g.amount != w.amount || (g.region == nil) != (w.region == nil) || (g.region != nil && *g.region != *w.region) {
			t.Errorf("row %d: the handler read %+v (region %v), want %+v (region %v)", id, g, deref(g.region), w, deref(w.region))
		}
	}
}

func deref(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

// TestAdvisoryKeyOfOwnColumn: on every database with session locks, rows published through
// Enqueue with an account column the description does not list run one account at a time by
// the key template accounts-{account}, while two accounts run side by side.
func TestAdvisoryKeyOfOwnColumn(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db := b.open(t, 8)
		tbl := ownTable(t, b, db, false)
		var msgs []inbox.Message
		for i := range 6 {
			msgs = append(msgs, inbox.Message{Columns: map[string]any{"account": []string{"a", "b"}[i%2]}})
		}
		b.enqueue(t, db, tbl, msgs...)
		f := advisory.New(b.dialect.(advisory.Dialect), tbl, &advisory.Config{Key: tbl.Name + "-{account}"})
		accounts := map[int64]string{}
		var id int64
		var account string
		forRows(t, db, "SELECT id, account FROM "+b.q(t, tbl.Name), nil, func() { accounts[id] = account }, &id, &account)
		if len(accounts) != len(msgs) {
			t.Fatalf("%d rows, want %d", len(accounts), len(msgs))
		}
		var mu sync.Mutex
		running, most, done := map[string]int{}, 0, 0
		h := inbox.HandlerFunc(func(_ context.Context, d *inbox.Delivery) outcome.Outcome {
			a := accounts[d.ID]
			mu.Lock()
			running[a]++
			most = max(most, running[a])
			mu.Unlock()
			time.Sleep(30 * time.Millisecond) // long enough for a second worker to try the key
			mu.Lock()
			running[a]--
			done++
			mu.Unlock()
			return outcome.Ack()
		})
		stop := startConsumer(t, inbox.NewConsumer(db, f, h, &inbox.Config{Workers: 4, PollInterval: 10 * time.Millisecond, Logger: testLogger(t)}))
		waitFor(t, 20*time.Second, "every row handled", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return done == len(msgs)
		})
		stop()
		if most != 1 {
			t.Errorf("up to %d rows of one account ran at once, want 1", most)
		}
	})
}

// TestEnqueueIDsIsAllOrNothing: on every database, EnqueueIDs whose third message names a
// column the table lacks fails, and the rows of the first two, written by statements before
// it, are rolled back with it.
func TestEnqueueIDsIsAllOrNothing(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 0)
		tbl := ownTable(t, b, db, true)
		msgs := []inbox.Message{
			{Columns: map[string]any{"account": "a"}},
			{Columns: map[string]any{"account": "b"}},
			{Columns: map[string]any{"no_such_column": "c"}},
		}
		ids, err := inbox.EnqueueIDs(context.Background(), db, b.dialect, tbl, msgs...)
		if err == nil {
			t.Fatalf("EnqueueIDs = %v, nil; want an error naming the failed statement", ids)
		}
		if got := b.countRows(t, db, tbl, ""); got != 0 {
			t.Fatalf("%d rows after a failed EnqueueIDs, want 0 (%v)", got, err)
		}
	})
}
