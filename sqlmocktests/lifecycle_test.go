package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// lifecycleTable is the full table with the failure lifecycle's columns, dead_at and
// last_error.
var lifecycleTable = func() inbox.Table {
	t := rowlockFullTable
	t.DeadAt, t.LastError = "dead_at", "last_error"
	return t
}()

// lifecycleSQL is the statement builder of lifecycleTable on d: the tests take the text they
// expect from internal/sqltext, whose goldens pin it.
func lifecycleSQL(t *testing.T, d dialect.Dialect) sqltext.SQL {
	t.Helper()
	q, err := lifecycleTable.Quote(d)
	if err != nil {
		t.Fatal(err)
	}
	return sqltext.New(d.Caps(), sqltext.Table(q))
}

// textHas matches a bound last error holding want.
type textHas struct{ want string }

func (a textHas) Match(v driver.Value) bool {
	s, ok := v.(string)
	return ok && strings.Contains(s, a.want)
}

// refusedFK is the error a foreign key's refusal of an ack's DELETE (or UPDATE) gives.
var refusedFK = errors.New(`pq: update or delete on table "jobs" violates foreign key constraint "notes_job_fkey" on table "notes"`)

// lifecycleBackoff is the consumer's back-off as a test gives the form: a retry after an hour,
// the settlement's error its reason.
func lifecycleBackoff(d *inbox.Delivery, err error) outcome.Outcome {
	return outcome.RetryAfter(time.Hour).WithError(fmt.Errorf("settlement failed: %w", err))
}

// lifecycleRowlock is a row lock dialect for the lifecycle tests: its case, and the dialect.
type lifecycleRowlock struct {
	dc rowlockDialect
	d  rowlock.Dialect
}

var lifecycleRowlocks = []lifecycleRowlock{
	{rowlockPostgres, dialect.Postgres[isolation.Default]{}},
	{rowlockMySQL, dialect.MySQL[isolation.Default]{}},
}

// rowlockLifecycleOpen opens the row lock form over lifecycleTable, expecting its server check,
// catalog query and statements.
func rowlockLifecycleOpen(t *testing.T, m *recorder, c lifecycleRowlock, backoff bool) (inbox.Form, sqltext.RowLock) {
	t.Helper()
	r := lifecycleSQL(t, c.d).RowLock()
	m.mock.ExpectQuery(c.dc.version).WillReturnRows(sqlmock.NewRows([]string{"v"}).AddRow(c.dc.versionAnswer))
	if db := c.dc.db(); db == "mysql" || db == "mariadb" {
		expectNotGalera(m.mock, db)
	}
	expectColumns(m.mock, c.dc.db(), lifecycleTable, "")
	for _, k := range []outcome.Kind{outcome.KindAck, outcome.KindRetry, outcome.KindRetryAfter, outcome.KindFail} {
		if k == outcome.KindAck {
			m.mock.ExpectPrepare(r.Claim(1)).WillBeClosed()
		}
		m.mock.ExpectPrepare(r.Settle(k, sqltext.ByID())).WillBeClosed()
	}
	f := rowlock.New(c.d, lifecycleTable)
	q := inbox.Queue{Name: rowlockQueue}
	if backoff {
		q.Backoff = lifecycleBackoff
	}
	if _, err := f.Open(context.Background(), m.db, q); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return f, r
}

// rowlockLifecycleClaim expects a claim (of n rows, ids from 5) whose statement passes over dead
// rows, answering attempt 2 (the deliveries read 3).
func rowlockLifecycleClaim(m *recorder, r sqltext.RowLock, n int) {
	rows := sqlmock.NewRows([]string{"id", "payload", "attempt", "grp", "headers"})
	for i := range n {
		rows.AddRow(int64(5+i), []byte("{}"), int64(2), rowlockQueue, nil)
	}
	m.mock.ExpectBegin()
	m.mock.ExpectQuery(r.Claim(n)).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).WillReturnRows(rows)
}

// TestRowlockLifecycle pins, per dialect, the claim that passes over dead rows, a Fail that
// stamps dead_at and last_error, a RetryAfter that keeps its last error, and a failed ack's
// back-off: the transaction rolls back, a new one locks the row again (SKIP LOCKED, guarded by
// the attempt the claim read) and retries it after the policy's delay, the settlement's error
// as its last; for a single row and for a batch.
func TestRowlockLifecycle(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range lifecycleRowlocks {
		t.Run(c.dc.name+"/fail", func(t *testing.T) {
			m := newRecorder(t, 1)
			f, r := rowlockLifecycleOpen(t, m, c, true)
			if !strings.Contains(r.Claim(1), "dead_at") {
				t.Fatalf("the claim does not pass over dead rows: %s", r.Claim(1))
			}
			rowlockLifecycleClaim(m, r, 1)
			m.mock.ExpectExec(r.Settle(outcome.KindFail, sqltext.ByID())).
				WithArgs(rowlockTimeNear{time.Now()}, "boom", int64(5)).WillReturnResult(sqlmock.NewResult(0, 1))
			m.mock.ExpectCommit()
			rowlockLifecycleClaim(m, r, 1)
			m.mock.ExpectExec(r.Settle(outcome.KindRetryAfter, sqltext.ByID())).
				WithArgs(rowlockTimeNear{time.Now().Add(time.Minute)}, "boom", int64(5)).WillReturnResult(sqlmock.NewResult(0, 1))
			m.mock.ExpectCommit()
			ctx := context.Background()
			if err := f.Settle(ctx, rowlockClaimOne(t, f), outcome.Fail(boom)); err != nil {
				t.Fatalf("Settle(Fail): %v", err)
			}
			if err := f.Settle(ctx, rowlockClaimOne(t, f), outcome.RetryAfter(time.Minute).WithError(boom)); err != nil {
				t.Fatalf("Settle(RetryAfter): %v", err)
			}
			f.Close()
		})
		t.Run(c.dc.name+"/failed ack backs off", func(t *testing.T) {
			m := newRecorder(t, 1)
			f, r := rowlockLifecycleOpen(t, m, c, true)
			rowlockLifecycleClaim(m, r, 1)
			m.mock.ExpectExec(r.Settle(outcome.KindAck, sqltext.ByID())).
				WithArgs(rowlockTimeNear{time.Now()}, int64(5)).WillReturnError(refusedFK)
			m.mock.ExpectRollback()
			m.mock.ExpectBegin()
			m.mock.ExpectQuery(r.Relock()).WithArgs(int64(5), int64(2)).WillReturnRows(sqlmock.NewRows([]string{"id"}).AddRow(int64(5)))
			m.mock.ExpectExec(r.Settle(outcome.KindRetryAfter, sqltext.ByID())).
				WithArgs(rowlockTimeNear{time.Now().Add(time.Hour)}, textHas{"foreign key"}, int64(5)).WillReturnResult(sqlmock.NewResult(0, 1))
			m.mock.ExpectCommit()
			err := f.Settle(context.Background(), rowlockClaimOne(t, f), outcome.Ack())
			if !errors.Is(err, refusedFK) {
				t.Fatalf("Settle = %v, want the ack's error", err)
			}
			f.Close()
		})
		t.Run(c.dc.name+"/batch", func(t *testing.T) {
			// On Postgres a batch's settlements over id lists are prepared at their first run,
			// while the batch's transaction holds a connection: on a second connection, then
			// again on the transaction's (see rowlockExpectBatchGroups).
			inLists := c.dc.db() == "postgres"
			pool := 1
			if inLists {
				pool = 0
			}
			m := newRecorder(t, pool)
			f, r := rowlockLifecycleOpen(t, m, c, true)
			bf := f.(inbox.BatchForm)
			m.mock.ExpectPrepare(r.Claim(2)).WillBeClosed()
			rowlockLifecycleClaim(m, r, 2)
			if inLists {
				m.mock.ExpectPrepare(r.Settle(outcome.KindAck, sqltext.ByIDs(2))).WillBeClosed()
				m.mock.ExpectPrepare(r.Settle(outcome.KindFail, sqltext.ByIDs(2))).WillBeClosed()
				m.mock.ExpectPrepare(r.Settle(outcome.KindAck, sqltext.ByIDs(2))).WillBeClosed()
				m.mock.ExpectExec(r.Settle(outcome.KindAck, sqltext.ByIDs(2))).
					WithArgs(rowlockTimeNear{time.Now()}, int64(6), int64(6)).WillReturnResult(sqlmock.NewResult(0, 1))
				m.mock.ExpectPrepare(r.Settle(outcome.KindFail, sqltext.ByIDs(2))).WillBeClosed()
				m.mock.ExpectExec(r.Settle(outcome.KindFail, sqltext.ByIDs(2))).
					WithArgs(rowlockTimeNear{time.Now()}, "boom", int64(5), int64(5)).WillReturnResult(sqlmock.NewResult(0, 1))
			} else {
				m.mock.ExpectExec(r.Settle(outcome.KindAck, sqltext.ByID())).
					WithArgs(rowlockTimeNear{time.Now()}, int64(6)).WillReturnResult(sqlmock.NewResult(0, 1))
				m.mock.ExpectExec(r.Settle(outcome.KindFail, sqltext.ByID())).
					WithArgs(rowlockTimeNear{time.Now()}, "boom", int64(5)).WillReturnResult(sqlmock.NewResult(0, 1))
			}
			m.mock.ExpectCommit()
			// The second batch's ack is refused: both rows back off in one transaction.
			rowlockLifecycleClaim(m, r, 2)
			ack := r.Settle(outcome.KindAck, sqltext.ByID())
			args := []driver.Value{rowlockTimeNear{time.Now()}, int64(5)}
			if inLists {
				ack, args = r.Settle(outcome.KindAck, sqltext.ByIDs(2)), []driver.Value{rowlockTimeNear{time.Now()}, int64(5), int64(6)}
			}
			m.mock.ExpectExec(ack).WithArgs(args...).WillReturnError(refusedFK)
			m.mock.ExpectRollback()
			m.mock.ExpectBegin()
			for _, id := range []int64{5, 6} {
				m.mock.ExpectQuery(r.Relock()).WithArgs(id, int64(2)).WillReturnRows(sqlmock.NewRows([]string{"id"}).AddRow(id))
				m.mock.ExpectExec(r.Settle(outcome.KindRetryAfter, sqltext.ByID())).
					WithArgs(rowlockTimeNear{time.Now().Add(time.Hour)}, textHas{"foreign key"}, id).WillReturnResult(sqlmock.NewResult(0, 1))
			}
			m.mock.ExpectCommit()

			ctx := context.Background()
			ds, err := bf.ClaimBatch(ctx, 2)
			if err != nil || len(ds) != 2 {
				t.Fatalf("ClaimBatch = %d rows, %v", len(ds), err)
			}
			if err := bf.SettleBatch(ctx, ds, []outcome.Outcome{outcome.Fail(boom), outcome.Ack()}); err != nil {
				t.Fatalf("SettleBatch: %v", err)
			}
			if ds, err = bf.ClaimBatch(ctx, 2); err != nil || len(ds) != 2 {
				t.Fatalf("ClaimBatch = %d rows, %v", len(ds), err)
			}
			if err := bf.SettleBatch(ctx, ds, []outcome.Outcome{outcome.Ack(), outcome.Ack()}); !errors.Is(err, refusedFK) {
				t.Fatalf("SettleBatch = %v, want the ack's error", err)
			}
			f.Close()
		})
	}
}

// leaseLifecycleTable is the lease tests' jobs table with dead_at and last_error.
var leaseLifecycleTable = func() inbox.Table {
	t := leaseJobs
	t.DeadAt, t.LastError = "dead_at", "last_error"
	return t
}()

// leaseLifecycleSQL is the lease form's statement builder over leaseLifecycleTable on c's
// database, the table quoted, and the statements Open prepares first.
func leaseLifecycleSQL(t *testing.T, c leaseCase) (sqltext.Lease, inbox.Table, leaseStatements) {
	t.Helper()
	q, err := leaseLifecycleTable.Quote(c.d)
	if err != nil {
		t.Fatal(err)
	}
	col, _ := c.d.Quote("locked_until")
	l := sqltext.New(c.d.Caps(), sqltext.Table(q)).Lease(col)
	st := leaseStatements{claim: l.Claim(), stamp: l.Stamp(1), extend: l.Extend(sqltext.ByIDAndToken()),
		ack: l.Settle(outcome.KindAck, sqltext.ByIDAndToken()), retry: l.Settle(outcome.KindRetry, sqltext.ByIDAndToken()),
		retryAfter: l.Settle(outcome.KindRetryAfter, sqltext.ByIDAndToken())}
	return l, q, st
}

// TestLeaseLifecycle pins, on MySQL, the lease form's Fail (dead_at and last_error under the
// token) and a refused ack's back-off, run under the same token: the row is still leased, so
// the retry after needs no other guard.
func TestLeaseLifecycle(t *testing.T) {
	c := leaseCases[1]
	tbl := leaseLifecycleTable
	l, _, st := leaseLifecycleSQL(t, c)
	fail := l.Settle(outcome.KindFail, sqltext.ByIDAndToken())
	if !strings.Contains(st.claim, "`dead_at` IS NULL") {
		t.Fatalf("the claim does not pass over dead rows: %s", st.claim)
	}

	m := newRecorder(t, 1)
	m.mock.ExpectQuery(c.version).WillReturnRows(sqlmock.NewRows([]string{"version"}).AddRow(c.answer))
	expectColumns(m.mock, c.name, tbl, "locked_until")
	for _, s := range []string{st.claim, st.stamp, st.extend, st.ack, st.retry, st.retryAfter, fail} {
		m.mock.ExpectPrepare(s).WillBeClosed()
	}
	f := lease.New(c.d, tbl, nil)
	if _, err := f.Open(context.Background(), m.db, inbox.Queue{Backoff: lifecycleBackoff}); err != nil {
		t.Fatalf("Open: %v", err)
	}
	var token driver.Value
	expectClaim(m, c, st, true, &token, leaseClaimed{7, 3})
	m.mock.ExpectExec(st.ack).WithArgs(int64(7), leaseSame{&token}).WillReturnError(refusedFK)
	m.mock.ExpectExec(st.retryAfter).WithArgs(leaseTime{want: time.Now().Add(time.Hour)}, textHas{"foreign key"}, int64(7), leaseSame{&token}).
		WillReturnResult(leaseResult(1))
	var token2 driver.Value
	expectClaim(m, c, st, true, &token2, leaseClaimed{8, 1})
	m.mock.ExpectExec(fail).WithArgs(leaseTime{want: time.Now()}, "boom", int64(8), leaseSame{&token2}).WillReturnResult(leaseResult(1))

	ctx := context.Background()
	if err := f.Settle(ctx, claimOne(t, f, 7, 3), outcome.Ack()); !errors.Is(err, refusedFK) {
		t.Fatalf("Settle = %v, want the ack's error", err)
	}
	if err := f.Settle(ctx, claimOne(t, f, 8, 1), outcome.Fail(errors.New("boom"))); err != nil {
		t.Fatalf("Settle(Fail): %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// advisoryLifecycleOpen opens dialect d's advisory form over the full table with dead_at and
// last_error, the consumer's back-off given, on a mock expecting its checks and statements (taken
// from internal/sqltext); it checks the expectations when the test ends.
func advisoryLifecycleOpen(t *testing.T, d advisoryDialect) (*advisoryMock, sqltext.Advisory) {
	t.Helper()
	tbl := advisoryFull
	tbl.DeadAt, tbl.LastError = "dead_at", "last_error"
	f := d.form(tbl)
	dl := dialect.Dialect(dialect.Postgres[isolation.Default]{})
	if d.name != "postgres" {
		dl = dialect.MySQL[isolation.Default]{}
	}
	q, err := tbl.Quote(dl)
	if err != nil {
		t.Fatal(err)
	}
	a := sqltext.New(dl.Caps(), sqltext.Table(q)).Advisory([]sqltext.KeyPart{{Text: "jobs-"}, {Column: q.ID}})
	if !strings.Contains(a.Candidates(), "dead_at") || !strings.Contains(a.Take(), "dead_at") {
		t.Fatalf("the candidates or the take do not pass over dead rows:\n%s\n%s", a.Candidates(), a.Take())
	}
	sql := advisorySQL{keyCheck: a.KeyCheck(), candidates: a.Candidates(), lock: a.Lock(), unlock: a.Unlock(), take: a.Take(),
		read: a.Read(), ack: a.Settle(outcome.KindAck, sqltext.ByID()), retryAfter: a.Settle(outcome.KindRetryAfter, sqltext.ByID()),
		takeIsQuery: a.Read() == ""}
	db, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(2)
	m := &advisoryMock{mock: mock, d: d, sql: sql, form: f}
	d.server(mock)
	expectColumns(mock, d.name, tbl, "")
	mock.ExpectPrepare(sql.keyCheck).WillBeClosed()
	mock.ExpectPrepare(sql.candidates)
	for _, s := range []string{sql.lock, sql.unlock, sql.take, sql.read, sql.ack, sql.retryAfter, a.Settle(outcome.KindFail, sqltext.ByID())} {
		if s != "" {
			mock.ExpectPrepare(s).WillBeClosed()
		}
	}
	if _, err := f.Open(context.Background(), db, inbox.Queue{Name: "q", Backoff: lifecycleBackoff}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		f.Close()
		db.Close()
		if err := mock.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
	})
	return m, a
}

// TestAdvisoryLifecycle pins, per dialect, the advisory form's claim past dead rows, its Fail
// (dead_at and last_error on the locked connection) and a refused ack's back-off, run on the
// same connection while the lock still holds the row, before the unlock; for a single row and
// for a batch.
func TestAdvisoryLifecycle(t *testing.T) {
	for _, d := range advisoryDialects() {
		t.Run(d.name, func(t *testing.T) {
			m, a := advisoryLifecycleOpen(t, d)
			// A refused ack backs the row off on its connection, then the key is released.
			m.expectCandidates("q", 1+4, 7)
			m.expectLock(7, true)
			m.expectTake("q", 7, 3, true)
			m.mock.ExpectExec(m.sql.ack).WithArgs(sqlmock.AnyArg(), int64(7)).WillReturnError(refusedFK)
			m.mock.ExpectExec(m.sql.retryAfter).WithArgs(advisoryTimeNear(time.Now().Add(time.Hour)), textHas{"foreign key"}, int64(7)).
				WillReturnResult(sqlmock.NewResult(0, 1))
			m.expectUnlock(7).WillReturnRows(m.unlockAnswers(true))
			ds := m.claim(t, 1)
			if err := m.form.Settle(context.Background(), ds[0], outcome.Ack()); !errors.Is(err, refusedFK) {
				t.Fatalf("Settle = %v, want the ack's error", err)
			}

			// Fail stamps dead_at with its reason.
			m.expectCandidates("q", 1+4, 8)
			m.expectLock(8, true)
			m.expectTake("q", 8, 1, true)
			m.mock.ExpectExec(a.Settle(outcome.KindFail, sqltext.ByID())).WithArgs(advisoryTimeNear(time.Now()), "boom", int64(8)).WillReturnResult(sqlmock.NewResult(0, 1))
			m.expectUnlock(8).WillReturnRows(m.unlockAnswers(true))
			ds = m.claim(t, 1)
			if err := m.form.Settle(context.Background(), ds[0], outcome.Fail(errors.New("boom"))); err != nil {
				t.Fatalf("Settle(Fail): %v", err)
			}
		})
		t.Run(d.name+"/batch", func(t *testing.T) {
			m, a := advisoryLifecycleOpen(t, d)
			m.expectCandidates("q", 2+4, 7, 8)
			for _, id := range []int64{7, 8} {
				m.expectLock(id, true)
				m.expectTake("q", id, 2, true)
			}
			ds := m.claimBatch(t, 2)
			// The acks' statement is refused: its row backs off on the batch's connection; the
			// fail's statement still runs; then the keys are released.
			m.mock.ExpectExec(a.Settle(outcome.KindAck, sqltext.ByIDs(1))).WithArgs(sqlmock.AnyArg(), int64(8)).WillReturnError(refusedFK)
			m.mock.ExpectExec(m.sql.retryAfter).WithArgs(advisoryTimeNear(time.Now().Add(time.Hour)), textHas{"foreign key"}, int64(8)).
				WillReturnResult(sqlmock.NewResult(0, 1))
			m.mock.ExpectExec(a.Settle(outcome.KindFail, sqltext.ByIDs(1))).WithArgs(advisoryTimeNear(time.Now()), "boom", int64(7)).
				WillReturnResult(sqlmock.NewResult(0, 1))
			m.expectUnlockMany(2, 7, 8)
			err := m.batchForm(t).SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Fail(errors.New("boom")), outcome.Ack()})
			if !errors.Is(err, refusedFK) {
				t.Fatalf("SettleBatch = %v, want the ack's error", err)
			}
		})
	}
}

// TestLeaseBatchLifecycle pins, per dialect, a lease batch's Fail (dead_at and last_error over
// the batch's id list, under its token) and the back-off of a row whose ack the database
// refuses, run under the same token with the single row's retry after.
func TestLeaseBatchLifecycle(t *testing.T) {
	tbl := leaseLifecycleTable
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			l, q, st := leaseLifecycleSQL(t, c)
			m := newRecorder(t, 1)
			prepare := func(query string) {
				m.mock.ExpectPrepare(query).WillBeClosed()
				if c.name == "sqlite" {
					m.mock.ExpectQuery("EXPLAIN " + query).WithArgs(make([]driver.Value, strings.Count(query, "?"))...).
						WillReturnRows(m.mock.NewRows([]string{"addr", "opcode"}))
				}
			}
			m.mock.ExpectQuery(c.version).WillReturnRows(sqlmock.NewRows([]string{"version"}).AddRow(c.answer))
			expectColumns(m.mock, c.name, tbl, "locked_until")
			for _, s := range []string{st.claim, st.stamp, st.extend, st.ack, st.retry, st.retryAfter, l.Settle(outcome.KindFail, sqltext.ByIDAndToken())} {
				if s != "" {
					prepare(s)
				}
			}
			f := lease.New(c.d, tbl, nil)
			if _, err := f.Open(context.Background(), m.db, inbox.Queue{Backoff: lifecycleBackoff}); err != nil {
				t.Fatalf("Open: %v", err)
			}
			batch := st
			if c.mysqlFamily() {
				batch.stamp = l.Stamp(4)
				m.mock.ExpectPrepare(batch.stamp).WillBeClosed()
			}
			var token driver.Value
			expectClaimOf(m, c, batch, 4, true, &token, leaseClaimed{7, 1}, leaseClaimed{8, 2})

			ackIn := l.Settle(outcome.KindAck, sqltext.ByIDsAndToken(4))
			ackArgs := []driver.Value{int64(8), int64(8), int64(8), int64(8), leaseSame{&token}}
			if c.mysqlFamily() {
				prepare(ackIn)
				m.mock.ExpectBegin()
				m.mock.ExpectExec(ackIn).WithArgs(ackArgs...).WillReturnError(refusedFK)
				m.mock.ExpectRollback()
			} else {
				returning := ackIn + " RETURNING " + q.ID
				prepare(returning)
				m.mock.ExpectQuery(returning).WithArgs(ackArgs...).WillReturnError(refusedFK)
			}
			m.mock.ExpectExec(st.retryAfter).WithArgs(leaseTime{want: time.Now().Add(time.Hour)}, textHas{"foreign key"}, int64(8), leaseSame{&token}).
				WillReturnResult(leaseResult(1))
			leaseBatchSettle(m, c, prepare)(l.Settle(outcome.KindFail, sqltext.ByIDsAndToken(4)),
				[]driver.Value{leaseTime{want: time.Now()}, "boom", int64(7), int64(7), int64(7), int64(7), leaseSame{&token}}, 7)

			ctx := context.Background()
			ds, err := f.ClaimBatch(ctx, 4)
			if err != nil || len(ds) != 2 {
				t.Fatalf("ClaimBatch = %d rows, %v", len(ds), err)
			}
			if err := f.SettleBatch(ctx, ds, []outcome.Outcome{outcome.Fail(errors.New("boom")), outcome.Ack()}); !errors.Is(err, refusedFK) {
				t.Fatalf("SettleBatch = %v, want the ack's error", err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
