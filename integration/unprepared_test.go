package integration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/outcome"
)

// TestUnpreparedStatements runs the row lock and lease forms with Config.UnpreparedStatements
// on every database, through pools whose connections refuse to prepare anything: Open checks
// every statement by EXPLAIN (each shape: the claims, with Postgres's WITH … UPDATE …
// RETURNING and FOR UPDATE SKIP LOCKED; the settlements, UPDATE and DELETE, single, over id
// lists and merged; the extensions), and consumers of single rows and of batches, transactional
// and not, settle rows by every outcome with no statement prepared. A column the table lacks
// still fails Open with ErrSchema naming the table and the statement, and the advisory form
// refuses the setting.
func TestUnpreparedStatements(t *testing.T) {
	var tests []subtest
	for _, b := range backends(t, true) {
		c := cell{b: b}
		for _, form := range []string{"rowlock", "lease"} {
			if form == "rowlock" && b.name == "sqlite" {
				continue
			}
			c := cell{b: b, form: form}
			for _, batch := range []int{0, 4} {
				for _, tx := range []bool{false, true} {
					w := clusterWay{form: form, batch: batch, transactional: tx, unprepared: true}
					tests = append(tests, subtest{b.name + "/" + w.String(), func(t *testing.T) { unpreparedDrain(t, c, w) }})
				}
			}
			tests = append(tests, subtest{b.name + "/" + form + "-missing-column", func(t *testing.T) { unpreparedMissingColumn(t, c) }})
		}
		if b.name != "sqlite" {
			tests = append(tests, subtest{b.name + "/advisory-refused", func(t *testing.T) {
				db := unpreparedPool(t, c, c.dsn(t), 4)
				f := advisory.New(b.dialect.(advisory.Dialect), fullTable(tableName(t)), nil)
				_, err := f.Open(context.Background(), db, inbox.Binding{Name: "q", UnpreparedStatements: true})
				if !errors.Is(err, inbox.ErrDialect) || !strings.Contains(err.Error(), "UnpreparedStatements") || !strings.Contains(err.Error(), "docs/errors.md#dialect") {
					t.Fatalf("advisory Open with UnpreparedStatements: %v; want ErrDialect naming the setting and pointing to docs/errors.md for why", err)
				}
			}})
		}
	}
	runConcurrently(t, 4, tests)
}

// unpreparedDrain drains rows settled by every outcome (two each: ack, drop, retry once, retry
// after a delay once, fail, and a slow ack whose lease is extended) through the setting, and
// checks each row's end and deliveries.
func unpreparedDrain(t *testing.T, c cell, w clusterWay) {
	dsn := c.dsn(t)
	admin := c.openDSN(t, dsn, 4)
	tbl := fullTable(tableName(t))
	tbl.DeadAt, tbl.LastError = "dead_at", "last_error"
	c.b.createTable(t, admin, tbl)
	kinds := []string{"ack", "drop", "retry", "later", "fail", "slow"}
	var msgs []inbox.Message
	for range 2 {
		for _, k := range kinds {
			msgs = append(msgs, inbox.Message{Queue: "q", Payload: []byte(k)})
		}
	}
	c.publish(t, admin, tbl, msgs...)

	var mu sync.Mutex
	attempts := map[int64][]int{}
	first := map[int64]time.Time{} // when each row was first handed to the handler
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		mu.Lock()
		attempts[d.ID] = append(attempts[d.ID], d.Attempt)
		if _, ok := first[d.ID]; !ok {
			first[d.ID] = time.Now()
		}
		mu.Unlock()
		switch k := string(d.Payload); {
		case k == "drop":
			return outcome.Drop()
		case k == "retry" && d.Attempt == 1:
			return outcome.Retry()
		case k == "later" && d.Attempt == 1:
			return outcome.RetryAfter(100 * time.Millisecond)
		case k == "fail":
			return outcome.Fail(errors.New("unprepared test failure"))
		case k == "slow":
			time.Sleep(1200 * time.Millisecond) // past half the lease: the lease form extends it
		}
		return outcome.Ack()
	})
	// A 2 s lease, extended every second: a 1 s lease lost its extensions to SQLite's writer
	// at load 20, and the slow rows went round until the test's fixed wait ran out.
	log := &faultLog{t: t}
	const lease = 2 * time.Second
	cons := clusterConsumer(t, c.b, unpreparedPool(t, c, dsn, 6), w, tbl, lease, h,
		&inbox.Config{Queue: "q", Workers: 3, Retry: inbox.RetryAtOnce, Logger: log.Logger(slog.LevelWarn)})
	stop := runCluster(t, cons)
	settled := c.q(t, tbl.ProcessedAt) + " IS NOT NULL OR " + c.q(t, tbl.DeadAt) + " IS NOT NULL"
	waitProgress(t, 30*time.Second, "rows to settle", func() int { return len(msgs) - len(c.ids(t, admin, tbl, settled)) })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	dead := c.ids(t, admin, tbl, c.q(t, tbl.DeadAt)+" IS NOT NULL")
	for i, id := range c.ids(t, admin, tbl, "") {
		k := kinds[i%len(kinds)]
		want := 1
		if k == "retry" || k == "later" {
			want = 2
		}
		got := attempts[id]
		ok := len(got) == want
		if w.batch > 0 && w.transactional {
			// A batch whose outcomes are not all Ack rolls the handler's writes back and
			// retries its Acks: an ack may come again.
			ok = len(got) >= want
		}
		for j, a := range got {
			ok = ok && a == j+1
		}
		if !ok && k == "slow" && slices.Equal(got, []int{1, 2}) && extensionLate(log, id, first[id].Add(lease)) {
			// The machine stalled past the lease (seen once under -race at the end of a CI run:
			// 14 s in which no extension of the SQLite cells ran): the extension ran, after the
			// lease, found it run out and said so, and the row came again, as a lease promises
			// where its holder falls behind. An extension that fails by itself (a wrong guard)
			// says so within the lease, and fails the test.
			t.Logf("row %d (slow): its lease ran out before its extension, which the consumer reported; delivered again", id)
			ok = true
		}
		if !ok {
			t.Errorf("row %d (%s) delivered at attempts %v, want 1 to %d", id, k, got, want)
		}
		if isDead := slices.Contains(dead, id); isDead != (k == "fail") {
			t.Errorf("row %d (%s): dead %v, want %v", id, k, isDead, k == "fail")
		}
	}
}

// unpreparedMissingColumn opens the form with the setting over a description naming a column
// the table lacks: the EXPLAIN check fails Open with ErrSchema naming the table, the statement
// and the column, and nothing is prepared.
func unpreparedMissingColumn(t *testing.T, c cell) {
	dsn := c.dsn(t)
	admin := c.openDSN(t, dsn, 4)
	tbl := c.b.newTable(t, admin, fullTable)
	tbl.Priority = "no_such_priority"
	f := c.newForm(t, tbl)
	_, err := f.Open(context.Background(), unpreparedPool(t, c, dsn, 4), inbox.Binding{Name: "q", UnpreparedStatements: true})
	if err == nil {
		f.Close()
	}
	if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), tbl.Name) || !strings.Contains(err.Error(), "claim statement") || !strings.Contains(err.Error(), "no_such_priority") {
		t.Fatalf("Open over a missing column with UnpreparedStatements: %v; want ErrSchema naming the table, the claim statement and the column", err)
	}
}

// unpreparedPool opens a pool of pool connections on dsn, in the mode a user of the setting
// gives the driver (pgx: default_query_exec_mode=exec; go-sql-driver/mysql:
// interpolateParams=true, without which it prepares every statement with arguments), whose
// connections fail the test on any Prepare.
func unpreparedPool(t *testing.T, c cell, dsn string, pool int) *sql.DB {
	t.Helper()
	if dsn == "" {
		skipShort(t, c.b.name+"'s server")
		skipOrFail(t, c.b.name+": no server")
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	switch c.b.driver {
	case "pgx":
		dsn += sep + "default_query_exec_mode=exec"
	case "mysql":
		dsn += sep + "interpolateParams=true"
	}
	probe, err := sql.Open(c.b.driver, dsn) // connects to nothing: it hands over the driver
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(noPrepareConnector{t: t, drv: probe.Driver(), dsn: dsn})
	probe.Close()
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	t.Cleanup(func() { db.Close() })
	return db
}

// noPrepareConnector opens connections of drv on dsn that refuse to prepare.
type noPrepareConnector struct {
	t   *testing.T
	drv driver.Driver
	dsn string
}

func (c noPrepareConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return noPrepareConn{passConn{conn}, c.t}, nil
}

func (c noPrepareConnector) Driver() driver.Driver { return c.drv }

// noPrepareConn is a driver's connection whose Prepare fails the test: everything else goes to
// the driver's own connection, which must run statements with arguments by itself
// (driver.ExecerContext, driver.QueryerContext), or database/sql would prepare them.
type noPrepareConn struct {
	passConn
	t *testing.T
}

func (c noPrepareConn) refuse(query string) error {
	c.t.Errorf("a statement was prepared with UnpreparedStatements on: %s", query)
	return fmt.Errorf("noPrepareConn: refused to prepare %s", query)
}

func (c noPrepareConn) Prepare(query string) (driver.Stmt, error) { return nil, c.refuse(query) }

func (c noPrepareConn) PrepareContext(_ context.Context, query string) (driver.Stmt, error) {
	return nil, c.refuse(query)
}

func (c noPrepareConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (c noPrepareConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (c noPrepareConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

// passConn passes a wrapped driver connection's optional checks through (a ping, a session's
// reset, validity, named values), for the tests' connection wrappers to embed.
type passConn struct{ driver.Conn }

func (c passConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (c passConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (c passConn) IsValid() bool {
	v, ok := c.Conn.(driver.Validator)
	return !ok || v.IsValid()
}

func (c passConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// extensionLate reports whether log says, at after or later, that row id's lease ran out
// before its extension.
func extensionLate(log *faultLog, id int64, after time.Time) bool {
	for _, line := range strings.Split(log.String(), "\n") {
		stamp, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err == nil && !at.Before(after) && strings.Contains(line, "ids=["+strconv.FormatInt(id, 10)+"]") &&
			strings.Contains(line, "the lease ran out before the extension") {
			return true
		}
	}
	return false
}
