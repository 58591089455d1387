package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// The admin calls of the operator's page (admin.Rows, Row, Count, Act) against each database.

// pageTable opens the backend's database with a createdTable (every role, the publishing
// time and the lease column among them) made by admin.Schema, and its admin.Admin.
func pageTable(t *testing.T, b backend) (*sql.DB, inbox.Table, *admin.Admin) {
	t.Helper()
	db := b.open(t, 8)
	tbl := createdTable(tableName(t))
	return db, tbl, createAdminTable(t, b, db, tbl)
}

// publishIDs publishes msgs to tbl and returns their ids, in order.
func publishIDs(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, msgs ...inbox.Message) []int64 {
	t.Helper()
	ids, err := inbox.EnqueueIDs(context.Background(), db, b.dialect, tbl, msgs...)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// setColumns sets columns of row id, each to its value (a time.Time is bound as the dialect
// binds times).
func setColumns(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, id int64, cols map[string]any) {
	t.Helper()
	var sets []string
	var args []any
	for _, c := range slices.Sorted(mapKeys(cols)) {
		v := cols[c]
		if at, ok := v.(time.Time); ok {
			v = b.dialect.Time(at)
		}
		args = append(args, v)
		sets = append(sets, b.q(t, c)+" = "+b.dialect.Placeholder(len(args)))
	}
	args = append(args, id)
	mustExec(t, db, "UPDATE "+b.q(t, tbl.Name)+" SET "+strings.Join(sets, ", ")+" WHERE "+b.q(t, tbl.ID)+" = "+b.dialect.Placeholder(len(args)), args...)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func rowIDs(rows []admin.Row) []int64 {
	ids := make([]int64, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

// listed lists every row f matches (up to 100), failing the test on an error.
func listed(t *testing.T, a *admin.Admin, f admin.Filter) []int64 {
	t.Helper()
	rows, err := a.Rows(context.Background(), f, 100)
	if err != nil {
		t.Fatalf("Rows(%+v): %v", f, err)
	}
	return rowIDs(rows)
}

func TestPageRowsByStateAndFilter(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl, a := pageTable(t, b)
		now := time.Now()
		ids := publishIDs(t, b, db, tbl,
			inbox.Message{Queue: "emails", Payload: []byte(`{"customer":{"id":42,"name":"Ada"},"items":[{"sku":"a-1"}],"vip":true}`)}, // 0 due
			inbox.Message{Queue: "emails", Payload: []byte(`{"customer":{"id":7}}`), Delay: time.Hour},                                // 1 delayed
			inbox.Message{Queue: "emails", Payload: []byte("not json at all")},                                                        // 2 in work
			inbox.Message{Queue: `it's "quoted"`, Payload: []byte{0xff, 0x00, 0x7b}},                                                  // 3 dead
			inbox.Message{Queue: `it's "quoted"`, Payload: []byte(`{"customer":{"id":42}}`)},                                          // 4 dead
			inbox.Message{Queue: "emails", Payload: []byte(`[1,2]`)},                                                                  // 5 processed
			inbox.Message{Queue: "emails"}, // 6 due, retrying, old
		)
		setColumns(t, b, db, tbl, ids[2], map[string]any{"locked_until": now.Add(time.Minute), "attempt": 1})
		setColumns(t, b, db, tbl, ids[3], map[string]any{"dead_at": now.Add(-2 * time.Hour), "last_error": "SMTP 550: mailbox 100%_full", "attempt": 5})
		setColumns(t, b, db, tbl, ids[4], map[string]any{"dead_at": now.Add(-time.Minute), "last_error": "timeout", "attempt": 5})
		setColumns(t, b, db, tbl, ids[5], map[string]any{"processed_at": now.Add(-time.Minute)})
		setColumns(t, b, db, tbl, ids[6], map[string]any{"attempt": 2, "created_at": now.Add(-3 * time.Hour)})

		for _, c := range []struct {
			name string
			f    admin.Filter
			want []int64
		}{
			{"every row, newest first", admin.Filter{}, []int64{ids[6], ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}},
			{"due", admin.Filter{State: admin.Due}, []int64{ids[6], ids[0]}},
			{"delayed", admin.Filter{State: admin.Delayed}, []int64{ids[1]}},
			{"in work", admin.Filter{State: admin.InWork}, []int64{ids[2]}},
			{"retrying", admin.Filter{State: admin.Retrying}, []int64{ids[6]}},
			{"dead", admin.Filter{State: admin.Dead}, []int64{ids[4], ids[3]}},
			{"processed", admin.Filter{State: admin.Processed}, []int64{ids[5]}},
			{"a queue named with quotes", admin.Filter{Queues: []string{`it's "quoted"`}}, []int64{ids[4], ids[3]}},
			{"an id range", admin.Filter{FromID: ids[1], ToID: ids[3]}, []int64{ids[3], ids[2], ids[1]}},
			{"due, published over an hour ago", admin.Filter{State: admin.Due, OlderThan: time.Hour}, []int64{ids[6]}},
			{"dead over an hour ago", admin.Filter{State: admin.Dead, OlderThan: time.Hour}, []int64{ids[3]}},
			{"last error, in any case, wildcards taken literally", admin.Filter{ErrorContains: "100%_FULL"}, []int64{ids[3]}},
			{"a wildcard matches only itself", admin.Filter{ErrorContains: "%"}, []int64{ids[3]}},
			{"a number in the payload", admin.Filter{Path: "customer.id", Value: "42"}, []int64{ids[4], ids[0]}},
			{"$. and a string", admin.Filter{Path: "$.customer.name", Value: "Ada"}, []int64{ids[0]}},
			{"an array index", admin.Filter{Path: "items[0].sku", Value: "a-1"}, []int64{ids[0]}},
			{"a boolean", admin.Filter{Path: "vip", Value: "true"}, []int64{ids[0]}},
			{"payload and state", admin.Filter{State: admin.Dead, Path: "customer.id", Value: "42"}, []int64{ids[4]}},
		} {
			if got := listed(t, a, c.f); !slices.Equal(got, c.want) {
				t.Errorf("%s: rows %v, want %v", c.name, got, c.want)
			}
		}

		// Pages follow the ids: the next page starts below the last row.
		page, err := a.Rows(context.Background(), admin.Filter{}, 3)
		if err != nil {
			t.Fatal(err)
		}
		next, err := a.Rows(context.Background(), admin.Filter{ToID: page[2].ID - 1}, 3)
		if err != nil {
			t.Fatal(err)
		}
		if got := append(rowIDs(page), rowIDs(next)...); !slices.Equal(got, []int64{ids[6], ids[5], ids[4], ids[3], ids[2], ids[1]}) {
			t.Errorf("two pages of 3: %v", got)
		}
		rows, err := a.Rows(context.Background(), admin.Filter{FromID: ids[3], ToID: ids[3]}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r := rows[0]; r.State != admin.Dead || r.Attempt != 5 || r.Queue != `it's "quoted"` || r.LastError != "SMTP 550: mailbox 100%_full" || string(r.Payload) != "\xff\x00{" {
			t.Errorf("the dead row listed as %+v", r)
		}
		lo, hi, err := a.Bounds(context.Background())
		if err != nil || lo != ids[0] || hi != ids[6] {
			t.Errorf("Bounds = %d, %d, %v; want %d, %d", lo, hi, err, ids[0], ids[6])
		}
	})
}

func TestPageRowReadsEveryColumn(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl, a := pageTable(t, b)
		payload := []byte(`{"html":"<script>alert(1)</script>"}`)
		ids := publishIDs(t, b, db, tbl, inbox.Message{Queue: "q", Payload: payload, Priority: 3, Headers: map[string]string{"traceparent": "00-x"}, Delay: time.Hour})
		r, err := a.Row(context.Background(), ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if r.ID != ids[0] || r.Queue != "q" || r.Priority != 3 || string(r.Payload) != string(payload) || r.Headers != `{"traceparent":"00-x"}` ||
			r.State != admin.Delayed || r.RetryAfter.IsZero() || r.CreatedAt.IsZero() || !r.DeadAt.IsZero() || !r.LockedUntil.IsZero() {
			t.Errorf("Row = %+v", r)
		}
		if _, err := a.Row(context.Background(), ids[0]+1000); !errors.Is(err, admin.ErrNoRow) {
			t.Errorf("Row of no row: %v, want ErrNoRow", err)
		}
	})
}

// TestPageActionsChangeTheRowsTheyTake: requeue takes dead rows, retry now delayed ones, delete
// any row not in work; each counts what it left and why, and the count before an action is
// what it then changes.
func TestPageActionsChangeTheRowsTheyTake(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db, tbl, a := pageTable(t, b)
		now := time.Now()
		ids := publishIDs(t, b, db, tbl, messages("q", 6)...)
		setColumns(t, b, db, tbl, ids[0], map[string]any{"dead_at": now, "attempt": 5, "last_error": "boom"})
		setColumns(t, b, db, tbl, ids[1], map[string]any{"retry_after": now.Add(time.Hour), "attempt": 1})
		setColumns(t, b, db, tbl, ids[2], map[string]any{"locked_until": now.Add(time.Minute)})
		setColumns(t, b, db, tbl, ids[3], map[string]any{"processed_at": now.Add(-time.Hour)})

		check := func(what string, got admin.Result, err error, want admin.Result) {
			t.Helper()
			if err != nil || got != want {
				t.Errorf("%s: %+v, %v; want %+v", what, got, err, want)
			}
		}
		n, err := a.Count(ctx, admin.Requeue, admin.IDs(ids...), 100)
		if err != nil || n != 1 {
			t.Errorf("Count of the ids to requeue: %d, %v; want 1", n, err)
		}
		r, err := a.Act(ctx, admin.Requeue, admin.IDs(ids...))
		check("requeue of every id", r, err, admin.Result{Changed: 1, Skipped: 5})
		if got := listed(t, a, admin.Filter{State: admin.Dead}); len(got) != 0 {
			t.Errorf("dead rows after the requeue: %v", got)
		}
		row, err := a.Row(ctx, ids[0])
		if err != nil || row.Attempt != 0 || row.LastError != "boom" || row.State != admin.Due {
			t.Errorf("the requeued row: %+v, %v; want due, attempt 0, its last error kept", row, err)
		}

		r, err = a.Act(ctx, admin.RetryNow, admin.Matching(admin.Filter{State: admin.Retrying}))
		check("retry now of the retrying rows", r, err, admin.Result{Changed: 1})
		if row, err := a.Row(ctx, ids[1]); err != nil || row.State != admin.Due || row.Attempt != 1 || row.RetryAfter.After(time.Now()) {
			t.Errorf("the row retried now: %+v, %v; want due now, attempt 1", row, err)
		}

		n, err = a.Count(ctx, admin.Delete, admin.Matching(admin.Filter{State: admin.Processed, OlderThan: time.Minute}), 100)
		if err != nil || n != 1 {
			t.Errorf("Count of the processed rows to delete: %d, %v; want 1", n, err)
		}
		r, err = a.Act(ctx, admin.Delete, admin.Matching(admin.Filter{State: admin.Processed, OlderThan: time.Minute}))
		check("delete of the rows processed over a minute ago", r, err, admin.Result{Changed: 1})

		r, err = a.Act(ctx, admin.Delete, admin.IDs(ids[2], ids[4], ids[3]))
		check("delete of a leased row, a due one and a gone one", r, err, admin.Result{Changed: 1, InWork: 1, Skipped: 1})
		if got := listed(t, a, admin.Filter{}); !slices.Equal(got, []int64{ids[5], ids[2], ids[1], ids[0]}) {
			t.Errorf("rows left: %v, want %v", got, []int64{ids[5], ids[2], ids[1], ids[0]})
		}
	})
}

// TestPageActionsNeverWaitForARowLock: a row lock consumer holds rows in a transaction; a
// delete of every row passes over them (SKIP LOCKED), counts them in work, and returns while
// the lock is still held, rather than waiting for it.
func TestPageActionsNeverWaitForARowLock(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db, tbl, a := pageTable(t, b)
		publishIDs(t, b, db, tbl, messages("q", 5)...)
		f := openForm(t, rowlock.New(b.dialect.(rowlock.Dialect), tbl), db, inbox.Binding{Name: "q"})
		held := claim(t, f, 2)
		if len(held) != 2 {
			t.Fatalf("claimed %d rows, want 2", len(held))
		}
		// A delete that waited for the held rows would wait until the context ends: the claim's
		// transaction stays open until after the delete returns.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		r, err := a.Act(ctx, admin.Delete, admin.Matching(admin.Filter{}))
		if err != nil || r != (admin.Result{Changed: 3, InWork: 2}) {
			t.Errorf("delete of every row while 2 are held: %+v, %v; want 3 changed, 2 in work", r, err)
		}
		release(t, f, held[0])
		release(t, f, held[1])
		if got := listed(t, a, admin.Filter{}); !slices.Equal(got, []int64{held[1].ID, held[0].ID}) && !slices.Equal(got, []int64{held[0].ID, held[1].ID}) {
			t.Errorf("rows left: %v, want the two held", got)
		}
	})
}

// TestPageActionsPassOverLeasedRows: a lease consumer holds rows by their lease; a retry now
// and a delete leave those rows, in work, as they are.
func TestPageActionsPassOverLeasedRows(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db, tbl, a := pageTable(t, b)
		ids := publishIDs(t, b, db, tbl, messages("q", 4)...)
		f := openForm(t, lease.New(b.dialect, tbl, nil), db, inbox.Binding{Name: "q"})
		held := claim(t, f, 2)
		r, err := a.Act(ctx, admin.Delete, admin.IDs(ids...))
		if err != nil || r != (admin.Result{Changed: 2, InWork: 2}) {
			t.Errorf("delete of 4 rows, 2 leased: %+v, %v; want 2 changed, 2 in work", r, err)
		}
		for _, d := range held {
			settle(t, f, d, outcome.RetryAfter(time.Hour))
		}
		setColumns(t, b, db, tbl, held[0].ID, map[string]any{"locked_until": time.Now().Add(time.Minute)})
		r, err = a.Act(ctx, admin.RetryNow, admin.IDs(held[0].ID, held[1].ID))
		if err != nil || r != (admin.Result{Changed: 1, InWork: 1}) {
			t.Errorf("retry now of 2 delayed rows, 1 leased: %+v, %v; want 1 changed, 1 in work", r, err)
		}
	})
}

// TestPageActionsRunInChunks: an action over more rows than a statement takes changes them
// all, a chunk at a time, and Count stops at its limit.
func TestPageActionsRunInChunks(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db, tbl, a := pageTable(t, b)
		b.enqueue(t, db, tbl, messages("q", 2500)...)
		mustExec(t, db, fmt.Sprintf("UPDATE %s SET %s = %s, %s = 'boom'", b.q(t, tbl.Name), b.q(t, "dead_at"), b.dialect.Placeholder(1), b.q(t, "last_error")), b.dialect.Time(time.Now()))
		if n, err := a.Count(ctx, admin.Requeue, admin.Matching(admin.Filter{State: admin.Dead}), 2000); err != nil || n != 2000 {
			t.Errorf("Count up to 2000 of 2500 dead rows: %d, %v", n, err)
		}
		r, err := a.Act(ctx, admin.Requeue, admin.Matching(admin.Filter{State: admin.Dead, ErrorContains: "BOOM"}))
		if err != nil || r != (admin.Result{Changed: 2500}) {
			t.Errorf("requeue of 2500 dead rows: %+v, %v", r, err)
		}
		if n, err := a.Count(ctx, admin.Requeue, admin.All(), 10000); err != nil || n != 0 {
			t.Errorf("dead rows left: %d, %v", n, err)
		}
	})
}

// TestPageCancelRunsInChunks: admin.Act with admin.Cancel over every pending row of a queue
// cancels more than a chunk (1,000) of them, passes over the settled rows, which the count
// before it does not count either, and leaves the other queue's rows; over ids, it skips those
// settled. On every database.
func TestPageCancelRunsInChunks(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 8)
		createCancels(t, db, b)
		tbl := createdTable(tableName(t))
		tbl.CancelledAt = "cancelled_at"
		a := createAdminTable(t, b, db, tbl)
		b.enqueue(t, db, tbl, messages("q", 2500)...)
		settled := publishIDs(t, b, db, tbl, messages("q", 3)...)
		for _, id := range settled {
			setColumns(t, b, db, tbl, id, map[string]any{"processed_at": time.Now()})
		}
		other := publishIDs(t, b, db, tbl, messages("other", 1)...)
		q := admin.Matching(admin.Filter{Queues: []string{"q"}})
		if n, err := a.Count(ctx, admin.Cancel, q, 10000); err != nil || n != 2500 {
			t.Errorf("Count of the rows a cancel of queue q takes: %d, %v; want its 2500 pending rows", n, err)
		}
		r, err := a.Act(ctx, admin.Cancel, q)
		if err != nil || r != (admin.Result{Changed: 2500}) {
			t.Errorf("cancel of queue q's 2500 pending rows: %+v, %v", r, err)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+b.q(t, tbl.Name)+" WHERE "+b.q(t, "cancelled_at")+" IS NOT NULL"); n != 2500 {
			t.Errorf("%d rows cancelled, want 2500", n)
		}
		r, err = a.Act(ctx, admin.Cancel, admin.IDs(append(settled, other...)...))
		if err != nil || r != (admin.Result{Changed: 1, Skipped: 3}) {
			t.Errorf("cancel of 3 processed rows and a due one: %+v, %v; want 1 changed, 3 skipped", r, err)
		}
	})
}

// TestStatsReadsTheTableNotTheClaimIndex: on MySQL and MariaDB, where the claim index covers
// every row and leads with the queue, admin.Stats' GROUP BY must not walk that index in queue
// order, which reads each row through it (over a million rows, MariaDB 10.11 took 27 s that
// way and 5 s by a scan of the table).
func TestStatsReadsTheTableNotTheClaimIndex(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "mysql", "mariadb"), func(t *testing.T, b backend) {
		db, tbl, _ := pageTable(t, b)
		for _, q := range []string{"a", "b", "c"} {
			b.enqueue(t, db, tbl, messages(q, 200)...)
		}
		mustExec(t, db, "ANALYZE TABLE "+b.q(t, tbl.Name))
		q, err := tbl.Quote(b.dialect)
		if err != nil {
			t.Fatal(err)
		}
		lease, _ := b.dialect.Quote("locked_until")
		query, nows := sqltext.New(b.dialect.Caps(), sqltext.Table(q)).Admin(lease).Stats()
		args := make([]any, nows)
		for i := range args {
			args[i] = b.dialect.Time(time.Now())
		}
		claim := tbl.Name + "_claim"
		if keys := explainKeys(t, db, query, args...); slices.Contains(keys, claim) {
			t.Errorf("EXPLAIN of the stats reads the claim index %s (keys %q):\n%s", claim, keys, query)
		}
	})
}

// explainKeys returns the key column of each row EXPLAIN gives for query on MySQL or MariaDB:
// the index each table is read by, "" for none.
func explainKeys(t *testing.T, db *sql.DB, query string, args ...any) []string {
	t.Helper()
	rows, err := db.Query("EXPLAIN "+query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		for i, c := range cols {
			if c == "key" {
				keys = append(keys, vals[i].String)
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}
