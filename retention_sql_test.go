package inbox

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/isolation"
)

// step is one statement a scripted database expects, and its answer: the rows it changed, or
// the ids a query returns, or an error.
type step struct {
	sql  string
	args []any
	rows int64
	ids  []int64
	err  error
	wait time.Duration // how long the statement takes
}

// script is a database/sql driver that answers each statement by the next step, and records
// any statement out of sequence. BEGIN, COMMIT and ROLLBACK are steps too.
type script struct {
	mu    sync.Mutex
	steps []step
	bad   []string
}

func (s *script) next(query string, args []driver.NamedValue) (step, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.steps) == 0 {
		s.bad = append(s.bad, "unexpected: "+query)
		return step{}, errors.New("unexpected statement")
	}
	st := s.steps[0]
	s.steps = s.steps[1:]
	time.Sleep(st.wait)
	var got []any
	for _, a := range args {
		got = append(got, a.Value)
	}
	if st.sql != query || (st.args != nil && !reflect.DeepEqual(normalize(st.args), got)) {
		s.bad = append(s.bad, fmt.Sprintf("got %s %v, want %s %v", query, got, st.sql, st.args))
		return step{}, errors.New("wrong statement")
	}
	return st, st.err
}

// normalize turns the values a test expects into the driver's forms.
func normalize(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		if v, err := driver.DefaultParameterConverter.ConvertValue(a); err == nil {
			out[i] = v
		} else {
			out[i] = a
		}
	}
	return out
}

func (s *script) Connect(context.Context) (driver.Conn, error) { return &scriptConn{s}, nil }
func (s *script) Driver() driver.Driver                        { return nil }

type scriptConn struct{ s *script }

func (c *scriptConn) Prepare(query string) (driver.Stmt, error) { return &scriptStmt{c.s, query}, nil }
func (c *scriptConn) Close() error                              { return nil }
func (c *scriptConn) Begin() (driver.Tx, error)                 { return nil, errors.New("BeginTx only") }
func (c *scriptConn) BeginTx(_ context.Context, o driver.TxOptions) (driver.Tx, error) {
	_, err := c.s.next(fmt.Sprintf("BEGIN %v", sql.IsolationLevel(o.Isolation)), nil)
	return &scriptTx{c.s}, err
}
func (c *scriptConn) ExecContext(_ context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	st, err := c.s.next(query, args)
	return driver.RowsAffected(st.rows), err
}
func (c *scriptConn) QueryContext(_ context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	st, err := c.s.next(query, args)
	if err != nil {
		return nil, err
	}
	return &scriptRows{ids: st.ids}, nil
}

type scriptStmt struct {
	s     *script
	query string
}

func (s *scriptStmt) Close() error  { return nil }
func (s *scriptStmt) NumInput() int { return -1 }
func (s *scriptStmt) Exec(args []driver.Value) (driver.Result, error) {
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	st, err := s.s.next(s.query, named)
	return driver.RowsAffected(st.rows), err
}
func (s *scriptStmt) Query([]driver.Value) (driver.Rows, error) { return nil, errors.New("no") }

type scriptTx struct{ s *script }

func (t *scriptTx) Commit() error   { _, err := t.s.next("COMMIT", nil); return err }
func (t *scriptTx) Rollback() error { _, err := t.s.next("ROLLBACK", nil); return err }

type scriptRows struct{ ids []int64 }

func (r *scriptRows) Columns() []string { return []string{"id"} }
func (r *scriptRows) Close() error      { return nil }
func (r *scriptRows) Next(dest []driver.Value) error {
	if len(r.ids) == 0 {
		return io.EOF
	}
	dest[0], r.ids = r.ids[0], r.ids[1:]
	return nil
}

type sweepRecorder struct{ got []Sweep }

func (r *sweepRecorder) Swept(_ context.Context, s Sweep) { r.got = append(r.got, s) }

// scriptedSweeper is a sweeper of table jobs (processed_at, dead_at) on d over a scripted
// database: batches of 2 rows, a minute's interval, a budget of an hour unless budget is set.
func scriptedSweeper(t *testing.T, d dialect.Dialect, steps []step, budget time.Duration) (*sweeper, *script, *sweepRecorder) {
	t.Helper()
	s := &script{steps: steps}
	db := sql.OpenDB(s)
	t.Cleanup(func() { db.Close() })
	tbl := Table{Name: "jobs", ID: "id", ProcessedAt: "processed_at", DeadAt: "dead_at"}
	q, err := tbl.Quote(d)
	if err != nil {
		t.Fatal(err)
	}
	if budget == 0 {
		budget = time.Hour
	}
	rec := &sweepRecorder{}
	caps := d.Caps()
	return &sweeper{
		db: db, caps: caps, time: d.Time, clock: fixedClock{}, table: "jobs", holder: "me", log: slog.New(slog.DiscardHandler), obs: rec,
		cfg: Retention{ProcessedAge: time.Hour, DeadAge: 2 * time.Hour, BatchSize: 2, Interval: time.Minute, Budget: budget},
		w:   sqltext.SweepLease(caps), s: sqltext.New(caps, sqltext.Table(q)), expiry: sqltext.Expiry{Processed: true, Dead: true},
	}, s, rec
}

// fixedClock reads noon, 2 January 2026, UTC.
type fixedClock struct{}

func (fixedClock) Now() time.Time { return time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC) }

// TestSweepSequence: the exact statements of retention passes, in order, with their arguments:
// the lease row written once, the lease taken by compare and set, a batch, the lease renewed
// before each further batch, and let go for an interval once a batch comes short; a take that
// finds the lease held runs nothing more; a renewal that finds it lost, or a failed batch, ends
// the pass without letting the lease go; a budget spent ends it with the lease freed at once.
func TestSweepSequence(t *testing.T) {
	pg := dialect.Postgres[isolation.Default]{}
	w, s := sqltext.SweepLease(pg.Caps()), sqltext.New(pg.Caps(), sqltext.Table{Name: `"jobs"`, ID: `"id"`, ProcessedAt: `"processed_at"`, DeadAt: `"dead_at"`})
	purge := s.Purge(sqltext.Expiry{Processed: true, Dead: true}, 2).SQL
	noon := fixedClock{}.Now()
	cut := []any{noon.Add(-time.Hour), noon.Add(-2 * time.Hour)}
	ensure := step{sql: w.Ensure().SQL, args: []any{"jobs"}}
	// The lease runs for twice the budget (an hour, or 20 ms).
	take := func(n int64, hold int64) step {
		return step{sql: w.Take().SQL, args: []any{"me", hold, "jobs"}, rows: n}
	}
	renew := func(n int64) step {
		return step{sql: w.Renew().SQL, args: []any{(2 * time.Hour).Microseconds(), "jobs", "me"}, rows: n}
	}
	leave := func(d time.Duration) step {
		return step{sql: w.Leave().SQL, args: []any{d.Microseconds(), "jobs", "me"}, rows: 1}
	}
	hour := (2 * time.Hour).Microseconds()
	failed := errors.New("disk full")
	for _, tc := range []struct {
		name   string
		budget time.Duration
		steps  []step
		held   bool
		want   Sweep // Deleted, Batches, More
		errIs  error
	}{
		{"two batches", 0, []step{ensure, take(1, hour), {sql: purge, args: cut, rows: 2}, renew(1), {sql: purge, args: cut, rows: 1}, leave(time.Minute)},
			true, Sweep{Deleted: 3, Batches: 2}, nil},
		{"lease held elsewhere", 0, []step{ensure, take(0, hour)}, false, Sweep{}, nil},
		{"lease lost", 0, []step{ensure, take(1, hour), {sql: purge, args: cut, rows: 2}, renew(0)},
			true, Sweep{Deleted: 2, Batches: 1}, errSweepLeaseLost},
		{"batch fails", 0, []step{ensure, take(1, hour), {sql: purge, args: cut, err: failed}},
			true, Sweep{Batches: 1}, failed},
		{"budget spent", 20 * time.Millisecond, []step{ensure, take(1, 40000), {sql: purge, args: cut, rows: 2, wait: 30 * time.Millisecond}, leave(0)},
			true, Sweep{Deleted: 2, Batches: 1, More: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sw, sc, rec := scriptedSweeper(t, pg, tc.steps, tc.budget)
			held := sw.pass(context.Background())
			if len(sc.bad) > 0 || len(sc.steps) > 0 {
				t.Fatalf("out of sequence: %v; left unrun: %d", sc.bad, len(sc.steps))
			}
			if held != tc.held || len(rec.got) != map[bool]int{true: 1}[tc.held] {
				t.Fatalf("held %v, reported %+v", held, rec.got)
			}
			if !held {
				return
			}
			got := rec.got[0]
			if got.Deleted != tc.want.Deleted || got.Batches != tc.want.Batches || got.More != tc.want.More || !errors.Is(got.Err, tc.errIs) || (tc.errIs == nil) != (got.Err == nil) {
				t.Errorf("reported %+v, want %+v with error %v", got, tc.want, tc.errIs)
			}
			if got.Holder != "me" || got.Table != "jobs" || got.Ended.Before(got.Began) {
				t.Errorf("reported %+v", got)
			}
		})
	}
}

// TestSweepSequenceMySQL: on MySQL and MariaDB a batch is a READ COMMITTED transaction that
// picks its rows (FOR UPDATE SKIP LOCKED) and deletes them one statement per id; a batch that
// picks nothing commits and ends the pass.
func TestSweepSequenceMySQL(t *testing.T) {
	for _, d := range []dialect.Dialect{dialect.MySQL[isolation.Default]{}, dialect.MariaDB[isolation.Default]{}} {
		t.Run(d.Name(), func(t *testing.T) {
			w := sqltext.SweepLease(d.Caps())
			s := sqltext.New(d.Caps(), sqltext.Table{Name: "`jobs`", ID: "`id`", ProcessedAt: "`processed_at`", DeadAt: "`dead_at`"})
			pick, del := s.PurgePick(sqltext.Expiry{Processed: true, Dead: true}, 2).SQL, s.PurgeID().SQL
			noon := fixedClock{}.Now()
			cut := []any{d.Time(noon.Add(-time.Hour)), d.Time(noon.Add(-2 * time.Hour))}
			hold := (2 * time.Hour).Microseconds()
			steps := []step{
				{sql: w.Ensure().SQL, args: []any{"jobs"}},
				{sql: w.Take().SQL, args: []any{"me", hold, "jobs"}, rows: 1},
				{sql: "BEGIN Read Committed"}, {sql: pick, args: cut, ids: []int64{7, 9}},
				{sql: del, args: []any{int64(7)}, rows: 1}, {sql: del, args: []any{int64(9)}, rows: 1}, {sql: "COMMIT"},
				{sql: w.Renew().SQL, args: []any{hold, "jobs", "me"}, rows: 1},
				{sql: "BEGIN Read Committed"}, {sql: pick, args: cut}, {sql: "COMMIT"},
				{sql: w.Leave().SQL, args: []any{time.Minute.Microseconds(), "jobs", "me"}, rows: 1},
			}
			sw, sc, rec := scriptedSweeper(t, d, steps, 0)
			if !sw.pass(context.Background()) {
				t.Fatal("the pass did not hold the lease")
			}
			if len(sc.bad) > 0 || len(sc.steps) > 0 {
				t.Fatalf("out of sequence: %v; left unrun: %d", strings.Join(sc.bad, "; "), len(sc.steps))
			}
			if got := rec.got[0]; got.Deleted != 2 || got.Batches != 2 || got.Err != nil {
				t.Errorf("reported %+v", got)
			}
		})
	}
}

// TestSweepDiscardsAFailedBatchsConnection: on MySQL and MariaDB a batch whose COMMIT fails,
// or whose DELETE fails and then its ROLLBACK, closes its connection rather than give it back
// to the pool, where its session could keep the transaction and the locks of its pick open
// (issue 22, defect 1's hazard).
func TestSweepDiscardsAFailedBatchsConnection(t *testing.T) {
	d := dialect.MariaDB[isolation.Default]{}
	w := sqltext.SweepLease(d.Caps())
	s := sqltext.New(d.Caps(), sqltext.Table{Name: "`jobs`", ID: "`id`", ProcessedAt: "`processed_at`", DeadAt: "`dead_at`"})
	pick, del := s.PurgePick(sqltext.Expiry{Processed: true, Dead: true}, 2).SQL, s.PurgeID().SQL
	hold := (2 * time.Hour).Microseconds()
	lost := errors.New("the answer never came")
	for name, end := range map[string][]step{
		"commit fails":              {{sql: del, rows: 1}, {sql: "COMMIT", err: lost}},
		"delete and rollback fails": {{sql: del, err: lost}, {sql: "ROLLBACK", err: lost}},
	} {
		t.Run(name, func(t *testing.T) {
			steps := append([]step{
				{sql: w.Ensure().SQL, args: []any{"jobs"}},
				{sql: w.Take().SQL, args: []any{"me", hold, "jobs"}, rows: 1},
				{sql: "BEGIN Read Committed"}, {sql: pick, ids: []int64{7}},
			}, end...)
			sw, sc, rec := scriptedSweeper(t, d, steps, 0)
			sw.pass(context.Background())
			if len(sc.bad) > 0 || len(sc.steps) > 0 {
				t.Fatalf("out of sequence: %v; left unrun: %d", strings.Join(sc.bad, "; "), len(sc.steps))
			}
			if len(rec.got) != 1 || !errors.Is(rec.got[0].Err, lost) {
				t.Fatalf("reported %+v, want the batch's error", rec.got)
			}
			if open := sw.db.Stats().OpenConnections; open != 0 {
				t.Errorf("%d connection(s) kept in the pool after a failed batch, want the batch's discarded", open)
			}
		})
	}
}
