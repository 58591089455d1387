package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// adminOpen opens the backend's database for the test and creates (anew) a deadTable from
// admin.Schema's statements, dropped when the test ends, with the admin.Admin over it.
func adminOpen(t *testing.T, b backend) (*sql.DB, inbox.Table, *admin.Admin) {
	t.Helper()
	db := b.open(t, 4)
	tbl := deadTable(tableName(t))
	tbl.LockedUntil = "locked_until"
	stmts, err := admin.Schema(b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	drop := "DROP TABLE IF EXISTS " + b.q(t, tbl.Name)
	mustExec(t, db, drop)
	t.Cleanup(func() { db.Exec(drop) })
	for _, s := range stmts {
		mustExec(t, db, s)
	}
	a, err := admin.New(db, b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	return db, tbl, a
}

// adminRow is a row a test writes with plain SQL, in the state its columns say (zero: NULL).
type adminRow struct {
	queue                                    string
	attempt                                  int
	retryAfter, lockedUntil, dead, processed time.Duration // from now; 0 for NULL
	lastError                                string
}

// insertRows writes rows into tbl, every time relative to now, and returns their ids in order.
func insertRows(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, now time.Time, rows ...adminRow) []int64 {
	t.Helper()
	q := func(ident string) string { return b.q(t, ident) }
	at := func(d time.Duration) any {
		if d == 0 {
			return nil
		}
		return b.dialect.Time(now.Add(d))
	}
	insert := fmt.Sprintf("INSERT INTO %s (%s, %s, %s, %s, %s, %s, %s) VALUES (%s)", q(tbl.Name), q(tbl.Queue), q(tbl.Attempt),
		q(tbl.RetryAfter), q("locked_until"), q(tbl.DeadAt), q(tbl.ProcessedAt), q(tbl.LastError), b.placeholders(7))
	var ids []int64
	for _, r := range rows {
		var lastError any
		if r.lastError != "" {
			lastError = r.lastError
		}
		mustExec(t, db, insert, r.queue, r.attempt, at(r.retryAfter), at(r.lockedUntil), at(r.dead), at(r.processed), lastError)
		ids = append(ids, int64(count(t, db, "SELECT MAX("+q(tbl.ID)+") FROM "+q(tbl.Name))))
	}
	return ids
}

func TestAdminStatsCountsEachState(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl, a := adminOpen(t, b)
		now := time.Now()
		insertRows(t, b, db, tbl, now,
			adminRow{queue: "a", retryAfter: -10 * time.Minute},                                     // due, waiting 10 min
			adminRow{queue: "a", attempt: 1, retryAfter: -time.Minute},                              // due, retrying
			adminRow{queue: "a", attempt: 2, retryAfter: time.Hour},                                 // delayed, retrying
			adminRow{queue: "a", attempt: 1, lockedUntil: time.Hour},                                // in work
			adminRow{queue: "a", attempt: 1, lockedUntil: -time.Hour, retryAfter: -5 * time.Minute}, // lease ran out: due, retrying
			adminRow{queue: "a", attempt: 3, dead: -time.Minute, lastError: "boom"},                 // dead
			adminRow{queue: "a", attempt: 3, dead: -time.Minute},                                    // dead
			adminRow{queue: "a", attempt: 1, processed: -time.Minute},                               // processed
			adminRow{queue: "a", attempt: 1, processed: -time.Minute},
			adminRow{queue: "a", attempt: 1, processed: -time.Minute},
			adminRow{queue: "b"}, // due, never delayed: its age is unknown
		)
		stats, err := a.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) != 2 {
			t.Fatalf("stats of %d queues, want 2: %+v", len(stats), stats)
		}
		sa, sb := stats[0], stats[1]
		if sa.OldestDue < 10*time.Minute || sa.OldestDue > 11*time.Minute {
			t.Errorf("queue a: oldest due %v, want 10 minutes", sa.OldestDue)
		}
		sa.OldestDue = 0
		if want := (admin.Stats{Queue: "a", Due: 3, Delayed: 1, InWork: 1, Retrying: 3, Dead: 2, Processed: 3}); !reflect.DeepEqual(sa, want) {
			t.Errorf("queue a:\n got %+v\nwant %+v", sa, want)
		}
		if want := (admin.Stats{Queue: "b", Due: 1, OldestDue: admin.Unknown}); !reflect.DeepEqual(sb, want) {
			t.Errorf("queue b:\n got %+v\nwant %+v", sb, want)
		}

		// Without a lease column the rows in work cannot be told.
		unleased := tbl
		unleased.LockedUntil = ""
		noLease, err := admin.New(db, b.dialect, unleased)
		if err != nil {
			t.Fatal(err)
		}
		stats, err = noLease.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if stats[0].InWork != admin.Unknown || stats[0].Due != 4 {
			t.Errorf("without the lease column: in work %d (want Unknown), due %d (want 4, the held row among them)", stats[0].InWork, stats[0].Due)
		}
	})
}

// drainQueue runs a lease consumer of queue until want rows were handled, and returns the ids
// it handled.
func drainQueue(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, queue string, want int) []int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var handled []int64
	c := inbox.NewConsumer(db, lease.New(b.dialect, tbl, nil), inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		mu.Lock()
		defer mu.Unlock()
		handled = append(handled, d.ID)
		if len(handled) == want {
			cancel()
		}
		return outcome.Ack()
	}), &inbox.Config{Queue: queue, Workers: 2, PollInterval: 50 * time.Millisecond})
	if err := c.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(handled) < want {
		t.Fatalf("queue %q: %d rows handled in 30 s, want %d", queue, len(handled), want)
	}
	slices.Sort(handled)
	return handled
}

func TestAdminSchemaAppliedIsDrainedByAConsumer(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl, a := adminOpen(t, b)
		check, err := a.Check(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if !check.OK() {
			t.Fatalf("the table admin.Schema created does not pass its check: %+v", check)
		}
		b.enqueue(t, db, tbl, messages("q", 20)...)
		if got := drainQueue(t, b, db, tbl, "q", 20); len(got) != 20 {
			t.Fatalf("handled %d rows, want 20", len(got))
		}
		stats, err := a.Stats(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(stats) != 1 || stats[0].Processed != 20 || stats[0].Due != 0 {
			t.Errorf("after the drain: %+v, want 20 processed and none due", stats)
		}
	})
}

func TestAdminDeadRowsListedRequeuedAndPurged(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db, tbl, a := adminOpen(t, b)
		now := time.Now()
		var rows []adminRow
		for i := range 7 {
			queue := "a"
			if i >= 5 {
				queue = "b"
			}
			rows = append(rows, adminRow{queue: queue, attempt: 5, dead: -time.Duration(10-i) * time.Minute, retryAfter: time.Hour, lastError: fmt.Sprint("error ", i)})
		}
		ids := insertRows(t, b, db, tbl, now, rows...) // ids[6] is the newest

		page1, err := a.Dead(ctx, admin.All(), admin.Cursor{}, 3)
		if err != nil {
			t.Fatal(err)
		}
		if got := deadIDs(page1); !slices.Equal(got, []int64{ids[6], ids[5], ids[4]}) {
			t.Fatalf("first page %v, want %v", got, []int64{ids[6], ids[5], ids[4]})
		}
		if r := page1[0]; r.Queue != "b" || r.Attempt != 5 || r.LastError != "error 6" || r.DeadAt.Sub(now.Add(-4*time.Minute)).Abs() > time.Millisecond {
			t.Errorf("first row %+v: want queue b, attempt 5, error 6, dead 4 minutes ago", r)
		}
		// A row that dies while the pages are read shows on no later page.
		newest := insertRows(t, b, db, tbl, now, adminRow{queue: "a", dead: -time.Second})[0]
		var rest []int64
		for after := page1[len(page1)-1].Cursor(); ; {
			page, err := a.Dead(ctx, admin.All(), after, 3)
			if err != nil {
				t.Fatal(err)
			}
			rest = append(rest, deadIDs(page)...)
			if len(page) < 3 {
				break
			}
			after = page[len(page)-1].Cursor()
		}
		if want := []int64{ids[3], ids[2], ids[1], ids[0]}; !slices.Equal(rest, want) {
			t.Fatalf("later pages %v, want %v", rest, want)
		}
		if got, _ := a.Dead(ctx, admin.Queue("b"), admin.Cursor{}, 10); !slices.Equal(deadIDs(got), []int64{ids[6], ids[5]}) {
			t.Errorf("queue b lists %v, want %v", deadIDs(got), []int64{ids[6], ids[5]})
		}

		// Requeued rows are claimed and handled again, from their first attempt.
		if n, err := a.Requeue(ctx, admin.Queue("b")); err != nil || n != 2 {
			t.Fatalf("requeue of queue b: %d, %v; want 2", n, err)
		}
		if n, err := a.Requeue(ctx, admin.IDs(ids[0], ids[5])); err != nil || n != 1 {
			t.Fatalf("requeue of one dead id and one requeued: %d, %v; want 1", n, err)
		}
		if got := drainQueue(t, b, db, tbl, "b", 2); !slices.Equal(got, []int64{ids[5], ids[6]}) {
			t.Errorf("queue b handled %v, want %v", got, []int64{ids[5], ids[6]})
		}
		q := func(ident string) string { return b.q(t, ident) }
		if n := count(t, db, "SELECT "+q(tbl.Attempt)+" FROM "+q(tbl.Name)+" WHERE "+q(tbl.ID)+" = "+b.dialect.Placeholder(1), ids[0]); n != 0 {
			t.Errorf("requeued row %d: attempt %d, want 0", ids[0], n)
		}

		if got, err := a.Dead(ctx, admin.All(), admin.Cursor{}, 1); err != nil || len(got) != 1 || got[0].ID != newest {
			t.Errorf("a listing from the start: %v, %v; want the row that died last, %d", deadIDs(got), err, newest)
		}
		// Purged: every dead row left (ids[1..4] and the newest), and nothing else.
		if n, err := a.PurgeDead(ctx, admin.All()); err != nil || n != 5 {
			t.Fatalf("purge of the dead rows: %d, %v; want 5", n, err)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+q(tbl.Name)); n != 3 {
			t.Errorf("%d rows left after the purge, want 3 (the requeued ones)", n)
		}
	})
}

func deadIDs(rows []admin.DeadRow) []int64 {
	var ids []int64
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids
}

func TestAdminPurgeProcessedTakesOnlyOldRowsInBoundedStatements(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db, tbl, a := adminOpen(t, b)
		// 2,100 old processed rows take three statements of at most 1,000.
		q := func(ident string) string { return b.q(t, ident) }
		old := b.dialect.Time(time.Now().Add(-2 * time.Hour))
		for range 21 {
			values := make([]string, 100)
			args := make([]any, 100)
			for i := range values {
				values[i] = "('a', " + b.dialect.Placeholder(i+1) + ")"
				args[i] = old
			}
			mustExec(t, db, "INSERT INTO "+q(tbl.Name)+" ("+q(tbl.Queue)+", "+q(tbl.ProcessedAt)+") VALUES "+strings.Join(values, ", "), args...)
		}
		now := time.Now()
		insertRows(t, b, db, tbl, now,
			adminRow{queue: "a", processed: -time.Minute},    // processed lately: kept
			adminRow{queue: "b", processed: -3 * time.Hour},  // another queue: kept
			adminRow{queue: "a", retryAfter: -3 * time.Hour}, // pending: kept
			adminRow{queue: "a", dead: -3 * time.Hour},       // dead: kept
		)
		n, err := a.PurgeProcessed(ctx, admin.Queue("a"), time.Hour)
		if err != nil || n != 2100 {
			t.Fatalf("purge: %d, %v; want 2100", n, err)
		}
		if n := count(t, db, "SELECT COUNT(*) FROM "+q(tbl.Name)); n != 4 {
			t.Errorf("%d rows left, want 4", n)
		}
		if n, err := a.PurgeProcessed(ctx, admin.All(), time.Hour); err != nil || n != 1 {
			t.Errorf("purge of every queue: %d, %v; want 1 (queue b's)", n, err)
		}
	})
}

func TestAdminRefusesWhatTheDescriptionLacks(t *testing.T) {
	b := backends(t, true)[3] // SQLite: the refusals are the same everywhere
	db := b.open(t, 1)
	a, err := admin.New(db, b.dialect, minimalTable("jobs"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, err := range map[string]error{
		"Dead":           func() error { _, err := a.Dead(ctx, admin.All(), admin.Cursor{}, 10); return err }(),
		"Requeue":        func() error { _, err := a.Requeue(ctx, admin.All()); return err }(),
		"PurgeDead":      func() error { _, err := a.PurgeDead(ctx, admin.All()); return err }(),
		"PurgeProcessed": func() error { _, err := a.PurgeProcessed(ctx, admin.All(), time.Hour); return err }(),
	} {
		if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), `table "jobs": `+name+" needs the ") {
			t.Errorf("%s on a table without the role: %v", name, err)
		}
	}
	full, err := admin.New(db, b.dialect, inbox.Table{Name: "jobs", ID: "id", DeadAt: "dead_at"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := full.Requeue(ctx, admin.Queue("a")); err == nil || !strings.Contains(err.Error(), "no Queue column") {
		t.Errorf("requeue by queue without a group: %v", err)
	}
	if _, err := full.Requeue(ctx, admin.Selection{}); err == nil || !strings.Contains(err.Error(), "given no rows") {
		t.Errorf("requeue of the zero selection: %v", err)
	}
}
