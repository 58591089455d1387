package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/outcome"
)

// uniqueTable is deadTable with a unique key column, the lease column named (so that a publish
// tells a leased holder), in the scope scope sets.
func uniqueTable(scope func(*inbox.Table)) func(name string) inbox.Table {
	return func(name string) inbox.Table {
		tbl := deadTable(name)
		tbl.LockedUntil = "locked_until"
		tbl.UniqueKey = "unique_key"
		if scope != nil {
			scope(&tbl)
		}
		return tbl
	}
}

// newUniqueTable creates the table uniqueTable(scope) describes, named for the test, with its
// unique key column and the key's unique index as inbox schema creates them.
func (b backend) newUniqueTable(t *testing.T, db *sql.DB, scope func(*inbox.Table)) inbox.Table {
	t.Helper()
	tbl := b.newTable(t, db, uniqueTable(scope))
	typ := sqltext.KeyText(b.dialect.Caps(), 191) + " NULL" // byte for byte, as inbox schema declares it
	if b.name == "sqlite" {
		typ = "TEXT"
	}
	mustExec(t, db, "ALTER TABLE "+b.q(t, tbl.Name)+" ADD "+b.q(t, tbl.UniqueKey)+" "+typ)
	mustExec(t, db, "CREATE UNIQUE INDEX "+b.q(t, tbl.UniqueIndex())+" ON "+b.q(t, tbl.Name)+" ("+b.q(t, tbl.UniqueKey)+")")
	return tbl
}

// liveKeys counts tbl's rows that hold a unique key.
func (b backend) liveKeys(t *testing.T, db *sql.DB, tbl inbox.Table) int {
	t.Helper()
	return b.countRows(t, db, tbl, b.q(t, tbl.UniqueKey)+" IS NOT NULL")
}

// TestUniqueConcurrentProducers: 8 producers publish 1,000 messages each over 50 keys at once,
// each in its own transaction, on every database: exactly 50 rows land, one per key, each
// publish that did not insert is told the id of the row that holds its key, and every key
// inserted once.
func TestUniqueConcurrentProducers(t *testing.T) {
	const producers, each, keys = 8, 1000, 50
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, producers+2)
		tbl := b.newUniqueTable(t, db, nil)
		client, err := inbox.NewClient(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		var (
			mu       sync.Mutex
			inserted = map[string]int64{}
			holders  = map[string][]int64{}
			wg       sync.WaitGroup
			errs     collector[error]
		)
		for p := range producers {
			wg.Go(func() {
				for i := range each {
					key := fmt.Sprintf("key-%d", (p*7+i)%keys)
					res, err := client.EnqueueResults(ctx, inbox.Message{Queue: "q", Payload: []byte(key), UniqueKey: key})
					if err != nil {
						errs.add(fmt.Errorf("producer %d, publish %d: %w", p, i, err))
						return
					}
					mu.Lock()
					if res[0].Duplicate {
						holders[key] = append(holders[key], res[0].ID)
					} else if old, ok := inserted[key]; ok {
						errs.add(fmt.Errorf("key %s inserted twice: rows %d and %d", key, old, res[0].ID))
					} else {
						inserted[key] = res[0].ID
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		for _, err := range errs.all() {
			t.Error(err)
		}
		if n := b.countRows(t, db, tbl, ""); n != keys {
			t.Errorf("%d rows after %d publishes over %d keys, want %d", n, producers*each, keys, keys)
		}
		if n := b.liveKeys(t, db, tbl); n != keys {
			t.Errorf("%d rows hold a key, want %d", n, keys)
		}
		for key, ids := range holders {
			for _, id := range ids {
				if id != inserted[key] {
					t.Errorf("a duplicate of %s was told row %d, but row %d holds the key", key, id, inserted[key])
					break
				}
			}
		}
	})
}

// TestUniqueInWork: while a handler holds the row of key "k", a publish of "k" returns at once
// (well before the handler is let go) under every OnConflict, as a duplicate of that row, and
// changes it only where the form's hold does not show in the table (the advisory form, whose
// row looks queued: a replace writes it); once the row settles, a publish of "k" inserts. On
// every cell: on MySQL and MariaDB under the row lock form the holder's row is locked FOR UPDATE
// by the consumer's transaction while the publish reads it.
func TestUniqueInWork(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		db := c.b.open(t, 8)
		tbl := c.b.newUniqueTable(t, db, nil)
		client := c.kindClient(t, db, tbl)
		ctx := context.Background()
		first, err := client.EnqueueResults(ctx, inbox.Message{Queue: "q", Payload: []byte("first"), UniqueKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		started, release := make(chan struct{}), make(chan struct{})
		var once sync.Once
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			if string(d.Payload) == "first" {
				once.Do(func() { close(started) })
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return outcome.Ack()
		})
		stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q"})
		defer stop()
		var released sync.Once
		let := func() { released.Do(func() { close(release) }) }
		defer let() // before stop, where the test fails with the handler blocked
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("the handler was not handed the row")
		}
		for _, oc := range []inbox.OnConflict{inbox.OnConflictSkip, inbox.OnConflictReplace, inbox.OnConflictThrottle} {
			bounded, cancel := context.WithTimeout(ctx, 5*time.Second)
			began := time.Now()
			res, err := client.EnqueueResults(bounded, inbox.Message{Queue: "q", Payload: []byte("first"), UniqueKey: "k", OnConflict: oc, Delay: time.Minute})
			took := time.Since(began)
			cancel()
			select {
			case <-release:
				t.Fatal("released early")
			default: // the handler still holds the row
			}
			if err != nil {
				t.Fatalf("OnConflict %d while the key's row is in work: %v (after %v)", oc, err, took)
			}
			if took > time.Second {
				t.Errorf("OnConflict %d: the publish took %v: it waited for the row in work", oc, took)
			}
			wantChanged := c.form == "advisory" && oc == inbox.OnConflictReplace
			if got := res[0]; !got.Duplicate || got.ID != first[0].ID || got.Changed != wantChanged {
				t.Errorf("OnConflict %d while the key's row is in work: %+v, want a duplicate of row %d, changed %v", oc, got, first[0].ID, wantChanged)
			}
		}
		let()
		waitFor(t, 10*time.Second, "the row settled", func() bool { return c.b.liveKeys(t, db, tbl) == 0 })
		res, err := client.EnqueueResults(ctx, inbox.Message{Queue: "other", Payload: []byte("second"), UniqueKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		if res[0].Duplicate || res[0].ID == first[0].ID {
			t.Errorf("a publish after the key's row settled: %+v, want a new row", res[0])
		}
	})
}

// TestUniqueInTransaction: on every database, a key published in the caller's transaction
// that rolls back leaves no row and no key, and the next publish inserts; a batch with a key
// twice and keys already held is resolved message by message; a replace and a throttle change a
// queued holder; a key too long is refused with nothing published.
func TestUniqueInTransaction(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 4)
		tbl := b.newUniqueTable(t, db, nil)
		client, err := inbox.NewClient(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := client.EnqueueTxResults(ctx, tx, inbox.Message{Queue: "q", UniqueKey: "r"})
		if err != nil || res[0].Duplicate {
			t.Fatalf("in a transaction: %+v, %v", res, err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if n := b.countRows(t, db, tbl, ""); n != 0 {
			t.Errorf("%d rows after a rollback, want 0", n)
		}
		if res, err = client.EnqueueResults(ctx, inbox.Message{Queue: "q", UniqueKey: "r"}); err != nil || res[0].Duplicate {
			t.Fatalf("after the rollback: %+v, %v, want a row inserted", res, err)
		}
		checkUniqueBatch(t, b, db, tbl, client, res[0].ID)
	})
}

// checkUniqueBatch is the rest of TestUniqueInTransaction, on a table where row r holds key "r".
func checkUniqueBatch(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, client *inbox.Client[dialect.Dialect], r int64) {
	ctx := context.Background()
	later := time.Now().Add(time.Hour)
	res, err := client.EnqueueResults(ctx,
		inbox.Message{Queue: "q", UniqueKey: "a", Payload: []byte("a1"), RunAt: later},
		inbox.Message{Queue: "q", Payload: []byte("no key")},
		inbox.Message{Queue: "q", UniqueKey: "a", Payload: []byte("a2")},
		inbox.Message{Queue: "q", UniqueKey: "r", Payload: []byte("r2"), OnConflict: inbox.OnConflictReplace})
	if err != nil {
		t.Fatal(err)
	}
	a := res[0].ID
	want := []inbox.Enqueued{{ID: a}, {ID: res[1].ID}, {ID: a, Duplicate: true}, {ID: r, Duplicate: true, Changed: true}}
	if !slices.Equal(res, want) {
		t.Errorf("a batch: %+v, want %+v", res, want)
	}
	if got := column[[]byte](t, db, "SELECT "+b.q(t, "payload")+" FROM "+b.q(t, tbl.Name)+" WHERE "+b.q(t, "id")+" = "+b.dialect.Placeholder(1), r); len(got) != 1 || string(got[0]) != "r2" {
		t.Errorf("the replaced row's payload: %q, want r2", got)
	}

	// The operator sees the key a row holds.
	op, err := admin.New(db, b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	if row, err := op.Row(ctx, a); err != nil || row.UniqueKey != "a" {
		t.Errorf("admin's row %d: unique key %q, %v; want a", a, row.UniqueKey, err)
	}

	// A throttle keeps the earlier run time: a later one changes nothing, an earlier one moves it.
	res, err = client.EnqueueResults(ctx, inbox.Message{Queue: "q", UniqueKey: "a", OnConflict: inbox.OnConflictThrottle, RunAt: later.Add(time.Hour)})
	if err != nil || res[0] != (inbox.Enqueued{ID: a, Duplicate: true}) {
		t.Errorf("a throttle to a later time: %+v, %v, want a duplicate unchanged", res, err)
	}
	res, err = client.EnqueueResults(ctx, inbox.Message{Queue: "q", UniqueKey: "a", OnConflict: inbox.OnConflictThrottle})
	if err != nil || res[0] != (inbox.Enqueued{ID: a, Duplicate: true, Changed: true}) {
		t.Errorf("a throttle to now: %+v, %v, want a duplicate changed", res, err)
	}
	if n := b.countRows(t, db, tbl, b.q(t, "id")+" = "+b.dialect.Placeholder(1)+" AND "+b.q(t, "retry_after")+" IS NULL", a); n != 1 {
		t.Errorf("the throttled row is not due at once")
	}

	long := string(make([]byte, inbox.MaxUniqueKey+1))
	if _, err := client.EnqueueResults(ctx, inbox.Message{Queue: "q", UniqueKey: "z"}, inbox.Message{Queue: "q", UniqueKey: long}); !errors.Is(err, inbox.ErrUniqueKeyTooLong) {
		t.Errorf("a key of %d characters: %v, want ErrUniqueKeyTooLong", len(long), err)
	}
	if n := b.countRows(t, db, tbl, ""); n != 3 {
		t.Errorf("%d rows, want 3 (r, a, no key): the refused publish landed a row", n)
	}
}

// TestUniqueScopes: under UniqueWhileQueued a publish while the key's row is in work inserts a
// new row on the lease form, whose claim cleared the key, and the row lock and advisory forms
// refuse the scope at Open; under UniqueWindow a settled row keeps its key until the window has
// passed (read on the publisher's clock, here one running two hours ahead), and a publish after
// it clears the old row's key and inserts; a unique key column without its index is refused at
// Open. On every cell.
func TestUniqueScopes(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		t.Run("while queued", func(t *testing.T) { uniqueWhileQueued(t, c) })
		t.Run("window", func(t *testing.T) { uniqueWindow(t, c) })
		t.Run("no index", func(t *testing.T) { uniqueNoIndex(t, c) })
	})
}

// uniqueNoIndex: a form over a table whose unique key column has no unique index refuses to
// open, naming the statement that creates the index.
func uniqueNoIndex(t *testing.T, c cell) {
	db := c.b.open(t, 4)
	tbl := c.b.newTable(t, db, uniqueTable(nil))
	mustExec(t, db, "ALTER TABLE "+c.q(t, tbl.Name)+" ADD "+c.q(t, tbl.UniqueKey)+" VARCHAR(191)")
	_, err := c.newForm(t, tbl).Open(context.Background(), db, inbox.Binding{Name: "q"})
	if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), "UNIQUE") || !strings.Contains(err.Error(), tbl.UniqueIndex()) {
		t.Errorf("a unique key column without its index: Open = %v, want ErrSchema naming the index's statement", err)
	}
}

// uniqueWhileQueued is TestUniqueScopes' UniqueWhileQueued on cell c.
func uniqueWhileQueued(t *testing.T, c cell) {
	ctx := context.Background()
	db := c.b.open(t, 8)
	tbl := c.b.newUniqueTable(t, db, func(t *inbox.Table) { t.UniqueWhileQueued = true })
	if c.form != "lease" {
		_, err := c.newForm(t, tbl).Open(ctx, db, inbox.Binding{Name: "q"})
		if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), "UniqueWhileQueued") {
			t.Errorf("the %s form opened under UniqueWhileQueued: %v, want ErrSchema naming it", c.form, err)
		}
		return
	}
	client := c.kindClient(t, db, tbl)
	first, err := client.EnqueueResults(ctx, inbox.Message{Queue: "q", Payload: []byte("first"), UniqueKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := client.EnqueueResults(ctx, inbox.Message{Queue: "q", Payload: []byte("again"), UniqueKey: "k"})
	if err != nil || again[0] != (inbox.Enqueued{ID: first[0].ID, Duplicate: true}) {
		t.Fatalf("a publish while the key's row is queued: %+v, %v, want a duplicate", again, err)
	}
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		once.Do(func() { close(started) })
		select {
		case <-release:
		case <-ctx.Done():
		}
		return outcome.Ack()
	})
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q"})
	defer stop()
	defer close(release)
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler was not handed the row")
	}
	res, err := client.EnqueueResults(ctx, inbox.Message{Queue: "other", Payload: []byte("second"), UniqueKey: "k"})
	if err != nil || res[0].Duplicate {
		t.Errorf("a publish while the key's row is in work: %+v, %v, want a new row", res, err)
	}
}

// uniqueWindow is TestUniqueScopes' UniqueWindow on cell c.
func uniqueWindow(t *testing.T, c cell) {
	ctx := context.Background()
	db := c.b.open(t, 8)
	tbl := c.b.newUniqueTable(t, db, func(t *inbox.Table) { t.UniqueWindow = time.Hour })
	client := c.kindClient(t, db, tbl)
	first, err := client.EnqueueResults(ctx, inbox.Message{Queue: "q", Payload: []byte("first"), UniqueKey: "k"})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, db, c.newForm(t, tbl), inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() }), &inbox.Config{Queue: "q"})
	waitFor(t, 10*time.Second, "the row processed", func() bool {
		return c.b.countRows(t, db, tbl, c.q(t, "processed_at")+" IS NOT NULL") == 1
	})
	stop()
	res, err := client.EnqueueResults(ctx, inbox.Message{Queue: "q", UniqueKey: "k"})
	if err != nil || res[0] != (inbox.Enqueued{ID: first[0].ID, Duplicate: true}) {
		t.Errorf("a publish within the window: %+v, %v, want a duplicate of row %d", res, err, first[0].ID)
	}
	res, err = client.WithClock(skewedClock(2*time.Hour)).EnqueueResults(ctx, inbox.Message{Queue: "q", UniqueKey: "k"})
	if err != nil || res[0].Duplicate || res[0].ID == first[0].ID {
		t.Errorf("a publish after the window: %+v, %v, want a new row", res, err)
	}
	if n := c.b.liveKeys(t, db, tbl); n != 1 {
		t.Errorf("%d rows hold the key, want 1", n)
	}
}

// TestUniqueRepeatableRead: on MySQL and MariaDB, a caller's REPEATABLE READ transaction whose
// snapshot predates the holder's commit is still told the holder: the holder's read is a
// locking read (LOCK IN SHARE MODE), which reads the latest committed row, where a plain read
// of the snapshot would find no holder at all.
func TestUniqueRepeatableRead(t *testing.T) {
	forEachBackend(t, onlyBackends(t, "mysql", "mariadb"), func(t *testing.T, b backend) {
		db := b.open(t, 4)
		tbl := b.newUniqueTable(t, db, nil)
		client, err := inbox.NewClient(db, b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		tx, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead})
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var n int
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+b.q(t, tbl.Name)).Scan(&n); err != nil || n != 0 {
			t.Fatalf("the snapshot's read: %d rows, %v", n, err)
		}
		held, err := client.EnqueueResults(ctx, inbox.Message{Queue: "q", UniqueKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		res, err := client.EnqueueTxResults(ctx, tx, inbox.Message{Queue: "q", UniqueKey: "k"})
		if err != nil || res[0] != (inbox.Enqueued{ID: held[0].ID, Duplicate: true}) {
			t.Errorf("in a REPEATABLE READ transaction older than the holder: %+v, %v, want a duplicate of row %d", res, err, held[0].ID)
		}
	})
}

// TestUniqueUnderConsumption: 4 producers publish 300 messages each over 10 keys while a
// consumer of 4 workers handles and acks the rows, on every cell: no publish fails, no key ever
// has two rows that hold it (each handled row counted once, and every row a publish inserted is
// handled once), and once the table is drained no row holds a key. Claims and settlements
// change only their own rows, so none conflicts with itself, and a settlement that clears a key
// does not make a publish of that key fail.
func TestUniqueUnderConsumption(t *testing.T) {
	const producers, each, keys = 4, 300, 10
	forEachCell(t, func(t *testing.T, c cell) {
		db := c.b.open(t, producers+8)
		tbl := c.b.newUniqueTable(t, db, nil)
		client := c.kindClient(t, db, tbl)
		ctx := context.Background()
		var handled rowCounts
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			handled.add(d)
			return outcome.Ack()
		})
		stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: 10 * time.Millisecond})
		defer stop()
		var (
			wg       sync.WaitGroup
			errs     collector[error]
			inserted collector[int64]
		)
		for p := range producers {
			wg.Go(func() {
				for i := range each {
					key := fmt.Sprintf("key-%d", (p+i)%keys)
					res, err := client.EnqueueResults(ctx, inbox.Message{Queue: "q", Payload: []byte(key), UniqueKey: key})
					if err != nil {
						errs.add(fmt.Errorf("producer %d, publish %d: %w", p, i, err))
						return
					}
					if !res[0].Duplicate {
						inserted.add(res[0].ID)
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs.all() {
			t.Error(err)
		}
		rows := len(inserted.all())
		waitFor(t, 20*time.Second, "every row handled", func() bool {
			return c.b.countRows(t, db, tbl, c.q(t, "processed_at")+" IS NULL") == 0
		})
		handled.checkOnce(t, "handled", rows)
		if n := c.b.countRows(t, db, tbl, ""); n != rows {
			t.Errorf("%d rows in the table, %d inserted by the publishes", n, rows)
		}
		if n := c.b.liveKeys(t, db, tbl); n != 0 {
			t.Errorf("%d processed rows still hold a key", n)
		}
		t.Logf("%d publishes over %d keys inserted %d rows", producers*each, keys, rows)
	})
}

// TestUniquePeriodic: a schedule whose job carries a unique key publishes one row while that row
// holds the key, its later ticks taken all the same with that row recorded as their job, on
// every database (on MySQL and MariaDB a tick's INSERT meets the duplicate key inside the tick's
// transaction, which goes on).
func TestUniquePeriodic(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 4)
		tbl := b.newUniqueTable(t, db, nil)
		create, err := inbox.TicksSchema(b.dialect, tbl)
		if err != nil {
			t.Fatal(err)
		}
		ticks := b.q(t, inbox.TicksTable(tbl.Name))
		mustExec(t, db, "DROP TABLE IF EXISTS "+ticks)
		mustExec(t, db, create)
		t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + ticks) })
		p := inbox.NewPeriodic(db, b.dialect, tbl, &inbox.PeriodicConfig{Logger: testLogger(t)})
		if err := p.Add(inbox.PeriodicJob{Name: "nightly", Schedule: inbox.Every(100 * time.Millisecond), Message: func(time.Time) inbox.Message {
			return inbox.Message{Queue: "q", UniqueKey: "nightly"}
		}}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		first := int64(0)
		waitFor(t, 5*time.Second, "the first tick's job", func() bool { return b.countRows(t, db, tbl, "") == 1 })
		if err := db.QueryRow("SELECT " + b.q(t, "id") + " FROM " + b.q(t, tbl.Name)).Scan(&first); err != nil {
			t.Fatal(err)
		}
		var lastTick int64
		if err := db.QueryRow("SELECT last_tick FROM " + ticks + " WHERE name = 'nightly'").Scan(&lastTick); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "three more ticks taken", func() bool {
			var last int64
			return db.QueryRow("SELECT last_tick FROM "+ticks+" WHERE name = 'nightly'").Scan(&last) == nil && last >= lastTick+300_000
		})
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		var job int64
		if err := db.QueryRow("SELECT job_id FROM " + ticks + " WHERE name = 'nightly'").Scan(&job); err != nil || job != first {
			t.Errorf("the last tick's job is %d (%v), want the key's holder %d", job, err, first)
		}
		if n := b.countRows(t, db, tbl, ""); n != 1 {
			t.Errorf("%d rows after the ticks, want 1 (the key's holder)", n)
		}
	})
}
