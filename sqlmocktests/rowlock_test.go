package sqlmocktests

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

var (
	// pgRepeatableRead and mariadbSerializable declare a level, which the claim's transaction
	// begins at.
	pgRepeatableRead    = dbCase{name: "postgres repeatable read", db: "postgres", d: dialect.Postgres[isolation.RepeatableRead]{}, level: sql.LevelRepeatableRead}
	mariadbSerializable = dbCase{name: "mariadb serializable", db: "mariadb", d: dialect.MariaDB[isolation.Serializable]{}, level: sql.LevelSerializable}

	rowlockCases = []dbCase{onPostgres, pgRepeatableRead, onMySQL, mariadbSerializable}
)

const rowlockQueue = "emails"

// rowlockRow is the row a row lock test claims: row id at attempt 2 (its delivery reads 3),
// with a payload and headers.
func rowlockRow(id int64) row {
	return row{id: id, attempt: 2, payload: []byte(`{"to":"a@example.com"}`), headers: `{"trace":"t1"}`}
}

// rowlockClaimArgs are a claim's arguments over fx's table: now for retry_after, and the queue,
// where the table has them, then the pause's key (the queue's kinds are in the claim's text).
func (fx *fixture) rowlockClaimArgs() []driver.Value {
	var args []driver.Value
	if fx.sh.table.RetryAfter != "" {
		args = append(args, fx.c.near(time.Now()))
	}
	if fx.sh.table.Queue != "" {
		args = append(args, fx.q.Name)
	}
	return append(args, fx.pauseArgs()...)
}

// expectRowlockClaim expects a claim's transaction and its SELECT, the golden file's statement
// named claim ("claim", or "claim(3)" for a batch of three), answered with rows.
func (fx *fixture) expectRowlockClaim(claim string, rows ...row) {
	fx.mock.ExpectBegin()
	fx.expectQuery(fx.sql(claim), fx.rowlockClaimArgs()...).WillReturnRows(fx.sh.claimed(fx.q.Name, rows...))
}

func rowlockClaimOne(t *testing.T, f inbox.Form) *inbox.Delivery {
	t.Helper()
	ds := claimed(t, f.Claim, 1)
	if len(ds) != 1 {
		t.Fatalf("Claim returned %d deliveries, want 1", len(ds))
	}
	return ds[0]
}

// checkLevels checks that n transactions were begun, each at the case's level.
func (fx *fixture) checkLevels(t *testing.T, n int) {
	t.Helper()
	levels := fx.Levels()
	if len(levels) != n {
		t.Fatalf("%d transactions begun, want %d", len(levels), n)
	}
	for i, l := range levels {
		if l != fx.c.level {
			t.Errorf("transaction %d begun at %v, want %v (the dialect's level)", i+1, l, fx.c.level)
		}
	}
}

// TestRowlockSettles pins the statement sequence of each outcome on each dialect, plain and
// transactional: begin at the level, claim, (savepoint, the handler's write, rollback to the
// savepoint unless Ack), the settlement, commit.
func TestRowlockSettles(t *testing.T) {
	outcomes := []struct {
		o     outcome.Outcome
		stmt  string // the settlement's name in the golden file
		args  func(c dbCase, id int64) []driver.Value
		keeps bool // the handler's writes commit
	}{
		{outcome.Ack(), "ack", func(c dbCase, id int64) []driver.Value { return []driver.Value{c.near(time.Now()), id} }, true},
		{outcome.Drop(), "ack", func(c dbCase, id int64) []driver.Value { return []driver.Value{c.near(time.Now()), id} }, false},
		{outcome.Retry(), "retry", func(_ dbCase, id int64) []driver.Value { return []driver.Value{id} }, false},
		{outcome.RetryAfter(time.Hour), "retryAfter",
			func(c dbCase, id int64) []driver.Value {
				return []driver.Value{c.near(time.Now().Add(time.Hour)), nil, id}
			}, false},
		{outcome.Outcome{}, "retry", func(_ dbCase, id int64) []driver.Value { return []driver.Value{id} }, false},
	}
	for _, c := range rowlockCases {
		for _, oc := range outcomes {
			for _, transactional := range []bool{false, true} {
				name := c.name + "/" + oc.o.String()
				if transactional {
					name += "/transactional"
				}
				t.Run(name, func(t *testing.T) {
					fx, f := openRowlock(t, c, fullShape, 0, inbox.Binding{Name: rowlockQueue, Transactional: transactional})
					fx.expectRowlockClaim("claim", rowlockRow(7))
					if transactional {
						fx.mock.ExpectExec(fx.sql("savepoint")).WillReturnResult(changed(0))
						fx.mock.ExpectExec("INSERT INTO notes (body) VALUES ('sent')").WillReturnResult(changed(1))
						if !oc.keeps {
							fx.mock.ExpectExec(fx.sql("rollbackToSavepoint")).WillReturnResult(changed(0))
						}
					}
					fx.mock.ExpectExec(fx.sql(oc.stmt)).WithArgs(oc.args(c, 7)...).WillReturnResult(changed(1))
					fx.mock.ExpectCommit()

					d := rowlockClaimOne(t, f)
					if d.ID != 7 || d.Attempt != 3 || d.Queue != rowlockQueue || d.Headers["trace"] != "t1" || string(d.Payload) != `{"to":"a@example.com"}` {
						t.Fatalf("delivery = %+v; want id 7, attempt 3 (read 2, plus this delivery), queue, headers and payload of the row", d)
					}
					if (d.Tx != nil) != transactional {
						t.Fatalf("delivery Tx = %v; want one exactly in transactional mode", d.Tx)
					}
					if transactional {
						if _, err := d.Tx.ExecContext(context.Background(), "INSERT INTO notes (body) VALUES ('sent')"); err != nil {
							t.Fatalf("handler's write: %v", err)
						}
					}
					settle(t, f, d, oc.o)
					if transactional {
						if _, err := d.Tx.ExecContext(context.Background(), "SELECT 1"); !errors.Is(err, inbox.ErrTransactionHeld) {
							t.Errorf("the handler's Tx after settlement: err = %v, want ErrTransactionHeld", err)
						}
					}
					if err := f.Close(); err != nil {
						t.Fatalf("Close: %v", err)
					}
					fx.checkLevels(t, 1)
				})
			}
		}
	}
}

// TestRowlockMinimalTable pins what changes without the optional columns: Ack deletes, Retry
// rolls back (there is no attempt to count), RetryAfter rolls back and warns, naming the table.
func TestRowlockMinimalTable(t *testing.T) {
	for _, c := range []dbCase{onPostgres, onMySQL} {
		t.Run(c.name+"/ack deletes", func(t *testing.T) {
			fx, f := openRowlock(t, c, minimalShape, 0, inbox.Binding{Name: rowlockQueue})
			fx.expectRowlockClaim("claim", rowlockRow(11))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(int64(11)).WillReturnResult(changed(1))
			fx.mock.ExpectCommit()

			d := rowlockClaimOne(t, f)
			if d.ID != 11 || d.Attempt != 0 || d.Queue != "" || string(d.Payload) != `{"to":"a@example.com"}` {
				t.Fatalf("delivery = %+v; want id 11, attempt 0 (no column), no queue, the row's payload", d)
			}
			settle(t, f, d, outcome.Ack())
			fx.closed(t, f)
		})
		for _, o := range []outcome.Outcome{outcome.Retry(), outcome.RetryAfter(time.Minute)} {
			t.Run(c.name+"/"+o.String()+" rolls back", func(t *testing.T) {
				fx, f := openRowlock(t, c, minimalShape, 0, inbox.Binding{Name: rowlockQueue})
				fx.expectRowlockClaim("claim", rowlockRow(12))
				fx.mock.ExpectRollback()

				d := rowlockClaimOne(t, f)
				settle(t, f, d, o)
				fx.closed(t, f)
				if warned, want := fx.warned("table=jobs"), o.Kind() == outcome.KindRetryAfter; warned != want {
					t.Errorf("warning naming the table logged: %v, want %v; log:\n%s", warned, want, fx.logs.String())
				}
			})
		}
	}
}

// TestRowlockRetryAfterWithoutRetryAfterColumn: with an attempt column but no retry_after
// column, RetryAfter counts the attempt like Retry and warns. No golden shape has an attempt
// column without retry_after: the statements are written out here.
func TestRowlockRetryAfterWithoutRetryAfterColumn(t *testing.T) {
	tbl := inbox.Table{Name: "jobs", ID: "id", Attempt: "attempt"}
	m := newRecorder(t, 0)
	expectVersion(m, "postgres", "")
	expectColumns(m, "postgres", tbl, "")
	claim := `SELECT "id", "attempt" FROM "jobs" WHERE 1 = 1 ORDER BY "id" LIMIT 1 FOR UPDATE SKIP LOCKED`
	retry := `UPDATE "jobs" SET "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" = $1`
	m.mock.ExpectPrepare(claim).WillBeClosed()
	m.mock.ExpectPrepare(`DELETE FROM "jobs" WHERE "id" = $1`).WillBeClosed()
	m.mock.ExpectPrepare(retry).WillBeClosed()
	m.mock.ExpectBegin()
	m.mock.ExpectQuery(claim).WithoutArgs().WillReturnRows(m.mock.NewRows([]string{"id", "attempt"}).AddRow(int64(5), int64(0)))
	m.mock.ExpectExec(retry).WithArgs(int64(5)).WillReturnResult(changed(1))
	m.mock.ExpectCommit()

	var logs inboxtest.Log
	f := onPostgres.rowlockForm(tbl)
	plan, err := f.Open(context.Background(), m.db, inbox.Binding{Logger: logs.Logger(slog.LevelWarn)})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	checkRowlockPlan(t, plan)
	d := rowlockClaimOne(t, f)
	if d.Attempt != 1 {
		t.Errorf("first delivery reads attempt %d, want 1", d.Attempt)
	}
	settle(t, f, d, outcome.RetryAfter(time.Minute))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if !logs.Contains("level=WARN") || !logs.Contains("table=jobs") {
		t.Errorf("no warning naming the table; log:\n%s", logs.String())
	}
}

// TestRowlockNoRow: a claim that finds nothing rolls its transaction back and returns none.
func TestRowlockNoRow(t *testing.T) {
	for _, c := range rowlockCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openRowlock(t, c, fullShape, 0, inbox.Binding{Name: rowlockQueue})
			fx.expectRowlockClaim("claim")
			fx.mock.ExpectRollback()

			ds, err := f.Claim(context.Background(), 4)
			if err != nil || len(ds) != 0 {
				t.Fatalf("Claim = %v, %v; want none, no error", ds, err)
			}
			fx.closed(t, f)
			fx.checkLevels(t, 1)
		})
	}
}

// TestRowlockClaimSeveral: Claim(max) opens one transaction per row, in turn, and stops at the
// first that finds none. Each transaction holds its own connection, so the claim statement is
// prepared again on each new one.
func TestRowlockClaimSeveral(t *testing.T) {
	fx, f := openRowlock(t, onPostgres, fullShape, 0, inbox.Binding{Name: rowlockQueue})
	claim := fx.sql("claim")
	fx.expectRowlockClaim("claim", rowlockRow(1))
	fx.mock.ExpectBegin()
	fx.mock.ExpectPrepare(claim)
	fx.expectQuery(claim, fx.rowlockClaimArgs()...).WillReturnRows(fullShape.claimed(rowlockQueue, row{id: 2}))
	fx.mock.ExpectBegin()
	fx.mock.ExpectPrepare(claim)
	fx.expectQuery(claim, fx.rowlockClaimArgs()...).WillReturnRows(fullShape.claimed(rowlockQueue))
	fx.mock.ExpectRollback()
	// Settling the second delivery prepares the ack statement on its connection.
	fx.mock.ExpectPrepare(fx.sql("ack"))
	fx.mock.ExpectExec(fx.sql("ack")).WithArgs(onPostgres.near(time.Now()), int64(2)).WillReturnResult(changed(1))
	fx.mock.ExpectCommit()
	fx.mock.ExpectRollback() // Release of the first

	ds, err := f.Claim(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].ID != 1 || ds[1].ID != 2 {
		t.Fatalf("Claim(3) = %v; want rows 1 and 2", ds)
	}
	if ds[1].Attempt != 1 || ds[1].Payload != nil || ds[1].Headers != nil {
		t.Errorf("second delivery = %+v; want attempt 1, nil payload and headers", ds[1])
	}
	settle(t, f, ds[1], outcome.Ack())
	if err := f.Release(context.Background(), ds[0]); err != nil {
		t.Fatal(err)
	}
	fx.closed(t, f)
	fx.checkLevels(t, 3)
}

// TestRowlockRelease: Release rolls back (no attempt counted); the delivery is then no longer
// held, and the handler's Tx refuses further statements.
func TestRowlockRelease(t *testing.T) {
	for _, c := range rowlockCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openRowlock(t, c, fullShape, 0, inbox.Binding{Name: rowlockQueue, Transactional: true})
			fx.expectRowlockClaim("claim", rowlockRow(3))
			fx.mock.ExpectExec(fx.sql("savepoint")).WillReturnResult(changed(0))
			fx.mock.ExpectRollback()

			d := rowlockClaimOne(t, f)
			if err := f.Release(context.Background(), d); err != nil {
				t.Fatalf("Release: %v", err)
			}
			if _, err := d.Tx.ExecContext(context.Background(), "SELECT 1"); !errors.Is(err, inbox.ErrTransactionHeld) {
				t.Errorf("the handler's Tx after Release: err = %v, want ErrTransactionHeld", err)
			}
			if err := f.Settle(context.Background(), d, outcome.Ack()); !errors.Is(err, inbox.ErrClosed) {
				t.Errorf("Settle after Release: err = %v, want ErrClosed", err)
			}
			if err := f.Release(context.Background(), d); !errors.Is(err, inbox.ErrClosed) {
				t.Errorf("second Release: err = %v, want ErrClosed", err)
			}
			fx.closed(t, f)
		})
	}
}

// TestRowlockFailedCommit: a COMMIT that fails is returned to the caller and its connection is
// discarded (closed, not returned to the pool), whatever the failure. When the connection broke
// the error says the outcome is unknown (inbox.ErrCommitUnknown); when the server refused the
// COMMIT (a deadlock, a serialization failure) it says the row is unchanged and back.
func TestRowlockFailedCommit(t *testing.T) {
	for _, c := range rowlockCases {
		refused := error(sqlState{"40001"})
		if c.mysqlFamily() {
			refused = errDeadlock
		}
		for _, tc := range []struct {
			name    string
			err     error
			unknown bool
		}{
			{"broken", errors.New("connection reset by peer"), true},
			{"refused", refused, false},
		} {
			t.Run(c.name+"/"+tc.name, func(t *testing.T) {
				fx, f := openRowlock(t, c, fullShape, 0, inbox.Binding{Name: rowlockQueue})
				fx.expectRowlockClaim("claim", rowlockRow(4))
				fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(4)).WillReturnResult(changed(1))
				fx.mock.ExpectCommit().WillReturnError(tc.err)
				fx.mock.ExpectClose()

				d := rowlockClaimOne(t, f)
				err := f.Settle(context.Background(), d, outcome.Ack())
				if !errors.Is(err, tc.err) || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), "row 4") {
					t.Fatalf("Settle = %v; want the commit's error, naming the table and the row", err)
				}
				if errors.Is(err, inbox.ErrCommitUnknown) != tc.unknown {
					t.Errorf("Settle = %v: wraps ErrCommitUnknown %v, want %v", err, !tc.unknown, tc.unknown)
				}
				if want := map[bool]string{true: "either settled or back in the queue", false: "unchanged and back in the queue"}[tc.unknown]; !strings.Contains(err.Error(), want) {
					t.Errorf("Settle = %v; want it to say %q", err, want)
				}
				fx.checkDiscarded(t, "the failed COMMIT")
				fx.closed(t, f)
			})
		}
	}
}

// TestRowlockFailedRollback: a ROLLBACK that fails discards its connection, which ends the
// session and the transaction with it, rather than returning it to the pool with the claim's
// row locks still held: after a claim that found no row, and at Release.
func TestRowlockFailedRollback(t *testing.T) {
	broken := errors.New("write: broken pipe")
	for _, c := range rowlockCases {
		t.Run(c.name+"/claim", func(t *testing.T) {
			fx, f := openRowlock(t, c, fullShape, 0, inbox.Binding{Name: rowlockQueue})
			fx.expectRowlockClaim("claim")
			fx.mock.ExpectRollback().WillReturnError(broken)
			fx.mock.ExpectClose()

			if ds, err := f.Claim(context.Background(), 1); err != nil || len(ds) != 0 {
				t.Fatalf("Claim = %v, %v; want none, no error", ds, err)
			}
			fx.checkDiscarded(t, "the failed ROLLBACK")
			fx.closed(t, f)
		})
		t.Run(c.name+"/release", func(t *testing.T) {
			fx, f := openRowlock(t, c, fullShape, 0, inbox.Binding{Name: rowlockQueue})
			fx.expectRowlockClaim("claim", rowlockRow(5))
			fx.mock.ExpectRollback().WillReturnError(broken)
			fx.mock.ExpectClose()

			d := rowlockClaimOne(t, f)
			if err := f.Release(context.Background(), d); !errors.Is(err, broken) || !strings.Contains(err.Error(), "row 5") {
				t.Fatalf("Release = %v; want the rollback's error, naming the row", err)
			}
			fx.checkDiscarded(t, "the failed ROLLBACK")
			fx.closed(t, f)
		})
	}
}

// TestRowlockFailedSettlement: a settlement statement that fails rolls the transaction back
// and is returned; nothing is committed.
func TestRowlockFailedSettlement(t *testing.T) {
	fx, f := openRowlock(t, onMySQL, fullShape, 0, inbox.Binding{Name: rowlockQueue})
	fx.expectRowlockClaim("claim", rowlockRow(4))
	broken := errors.New("Error 1146 (42S02): Table 'test.jobs' doesn't exist")
	fx.mock.ExpectExec(fx.sql("retry")).WithArgs(int64(4)).WillReturnError(broken)
	fx.mock.ExpectRollback()

	d := rowlockClaimOne(t, f)
	if err := f.Settle(context.Background(), d, outcome.Retry()); !errors.Is(err, broken) {
		t.Fatalf("Settle = %v; want the statement's error", err)
	}
	fx.closed(t, f)
}

// rowlockConflicts are transient conflicts a claim's transaction meets, each on a database at the
// level that meets it: a serialization failure (Postgres 40001), a deadlock (1213), a lock wait
// timeout (1205).
var rowlockConflicts = []struct {
	c        dbCase
	conflict error
}{
	{pgRepeatableRead, sqlState{"40001"}},
	{onMySQL, errDeadlock},
	{mariadbSerializable, errors.New("Error 1205 (HY000): Lock wait timeout exceeded; try restarting transaction")},
}

// TestRowlockClaimRetriesConflicts: a claim that fails with a serialization failure (Postgres
// 40001), a deadlock (1213) or a lock wait timeout (1205) is rolled back and run again inside
// Claim; the caller sees the row, not the failure.
func TestRowlockClaimRetriesConflicts(t *testing.T) {
	for _, tc := range rowlockConflicts {
		t.Run(tc.c.name, func(t *testing.T) {
			fx, f := openRowlock(t, tc.c, fullShape, 0, inbox.Binding{Name: rowlockQueue})
			for range 2 {
				fx.mock.ExpectBegin()
				fx.expectQuery(fx.sql("claim"), fx.rowlockClaimArgs()...).WillReturnError(tc.conflict)
				fx.mock.ExpectRollback()
			}
			fx.expectRowlockClaim("claim", rowlockRow(9))
			fx.mock.ExpectRollback()

			d := rowlockClaimOne(t, f)
			if d.ID != 9 {
				t.Fatalf("claimed row %d, want 9", d.ID)
			}
			if err := f.Release(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			fx.closed(t, f)
			fx.checkLevels(t, 3)
		})
	}
}

// TestRowlockClaimReportsPersistentConflicts: the retries are bounded, and an error that is
// not a transient conflict is reported at once.
func TestRowlockClaimReportsPersistentConflicts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		err   error
		tries int
	}{
		{"conflicts", sqlState{"40001"}, 10},
		{"other error", sqlState{"42703"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx, f := openRowlock(t, pgRepeatableRead, fullShape, 0, inbox.Binding{Name: rowlockQueue})
			for range tc.tries {
				fx.mock.ExpectBegin()
				fx.expectQuery(fx.sql("claim"), fx.rowlockClaimArgs()...).WillReturnError(tc.err)
				fx.mock.ExpectRollback()
			}
			ds, err := f.Claim(context.Background(), 1)
			if !errors.Is(err, tc.err) || len(ds) != 0 || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), rowlockQueue) {
				t.Fatalf("Claim = %v, %v; want the error, naming table and queue, after %d tries", ds, err, tc.tries)
			}
			fx.closed(t, f)
		})
	}
}

// TestRowlockTransactionHeld: a statement of the handler's still running on the delivery's
// transaction when Settle is called makes the settlement fail with ErrTransactionHeld at once,
// without waiting for that statement; the transaction is rolled back after that statement
// ends, and no settlement statement runs.
func TestRowlockTransactionHeld(t *testing.T) {
	for _, c := range []dbCase{onPostgres, onMySQL} {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openRowlock(t, c, fullShape, 0, inbox.Binding{Name: rowlockQueue, Transactional: true})
			fx.expectRowlockClaim("claim", rowlockRow(6))
			fx.mock.ExpectExec(fx.sql("savepoint")).WillReturnResult(changed(0))
			d := rowlockClaimOne(t, f)
			fx.checkSettleWhileHeld(t, d.Tx, func() error { return f.Settle(context.Background(), d, outcome.Ack()) })
			// Not fx.closed: the transaction rolled back in the background returns its
			// connection, closing its statements, a moment later; the recorder reads the
			// expectations when the test ends.
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRowlockCloseRollsBackHolds: Close rolls back the transactions still held and frees the
// statements; later calls fail with ErrClosed.
func TestRowlockCloseRollsBackHolds(t *testing.T) {
	fx, f := openRowlock(t, mariadbSerializable, fullShape, 0, inbox.Binding{Name: rowlockQueue})
	fx.expectRowlockClaim("claim", rowlockRow(8))
	fx.mock.ExpectRollback()

	checkClosed(t, f, rowlockClaimOne(t, f))
}

// TestRowlockOpenSchemaError: a statement that does not prepare fails Open with ErrSchema
// naming the table and the statement, and the statements prepared before it are closed.
func TestRowlockOpenSchemaError(t *testing.T) {
	fx := newFixture(t, "rowlock", onPostgres, fullShape, 0, inbox.Binding{Name: rowlockQueue})
	expectVersion(fx.recorder, "postgres", "")
	withoutAttempt := fullShape.table
	withoutAttempt.Attempt = ""
	expectColumns(fx.recorder, "postgres", withoutAttempt, "") // a missing column is the statements' to name
	fx.mock.ExpectPrepare(fx.sql("claim")).WillBeClosed()
	fx.mock.ExpectPrepare(fx.sql("ack")).WillBeClosed()
	for range 2 { // a refused statement is refused again: it is the schema, not the connection
		fx.mock.ExpectPrepare(fx.sql("retry")).WillReturnError(errors.New(`ERROR: column "attempt" does not exist (SQLSTATE 42703)`))
	}

	f := onPostgres.rowlockForm(fullShape.table)
	_, err := f.Open(context.Background(), fx.db, fx.q)
	if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), "retry statement") {
		t.Fatalf("Open = %v; want ErrSchema naming the table and the retry statement", err)
	}
	if _, err := f.Claim(context.Background(), 1); !errors.Is(err, inbox.ErrClosed) {
		t.Errorf("Claim after a failed Open: %v, want ErrClosed", err)
	}
}

// TestRowlockOpenRefusesServer: a server older than SKIP LOCKED fails Open with
// ErrServerTooOld before anything is prepared.
func TestRowlockOpenRefusesServer(t *testing.T) {
	m := newRecorder(t, 0)
	expectVersion(m, "mysql", "5.7.44")
	f := onMySQL.rowlockForm(fullShape.table)
	if _, err := f.Open(context.Background(), m.db, inbox.Binding{Name: rowlockQueue}); !errors.Is(err, inbox.ErrServerTooOld) {
		t.Fatalf("Open = %v; want ErrServerTooOld", err)
	}
}

// TestRowlockOpenRefusesRuntimeSQLite: a dialect chosen at run time that turns out to be
// SQLite is refused at Open with ErrDialect.
func TestRowlockOpenRefusesRuntimeSQLite(t *testing.T) {
	d, err := dialect.Parse("sqlite", "")
	if err != nil {
		t.Fatal(err)
	}
	m := newRecorder(t, 0)
	f := rowlock.New(d, fullShape.table)
	if _, err := f.Open(context.Background(), m.db, inbox.Binding{Name: rowlockQueue}); !errors.Is(err, inbox.ErrDialect) {
		t.Fatalf("Open = %v; want ErrDialect", err)
	}
}

// TestRowlockWarnsPostgresSerializable: Open warns that Postgres at serializable redelivers
// rows whose settlements fail, and names the table; read committed opens without a warning.
func TestRowlockWarnsPostgresSerializable(t *testing.T) {
	for _, tc := range []struct {
		c    dbCase
		warn bool
	}{
		{dbCase{name: "serializable", db: "postgres", d: dialect.Postgres[isolation.Serializable]{}}, true},
		{dbCase{name: "read committed", db: "postgres", d: dialect.Postgres[isolation.ReadCommitted]{}}, false},
	} {
		t.Run(tc.c.name, func(t *testing.T) {
			fx, f := openRowlock(t, tc.c, minimalShape, 0, inbox.Binding{})
			fx.closed(t, f)
			if warned := fx.warned("table=jobs"); warned != tc.warn {
				t.Errorf("warning logged: %v, want %v; log:\n%s", warned, tc.warn, fx.logs.String())
			}
		})
	}
}

// TestRowlockConsumerPanic drives the form through a consumer whose handler panics after
// writing through its transaction: the consumer settles Retry, so the handler's write is
// rolled back to the savepoint and the attempt counted; without an attempt column the claim's
// transaction is simply rolled back.
func TestRowlockConsumerPanic(t *testing.T) {
	for _, c := range rowlockCases {
		for _, sh := range []shape{fullShape, minimalShape} {
			t.Run(c.name+"/"+sh.name, func(t *testing.T) {
				full := sh.table.Attempt != ""
				// The consumer's attempt limit, the default, is in its claims.
				fx := newFixture(t, "rowlock", c, sh, 0, inbox.Binding{Name: rowlockQueue, MaxAttempts: inbox.DefaultMaxAttempts})
				fx.expectOpen()
				fx.expectRowlockClaim("claim", rowlockRow(5))
				fx.mock.ExpectExec(fx.sql("savepoint")).WillReturnResult(changed(0))
				fx.mock.ExpectExec("INSERT INTO notes (body) VALUES ('half done')").WillReturnResult(changed(1))
				if full {
					fx.mock.ExpectExec(fx.sql("rollbackToSavepoint")).WillReturnResult(changed(0))
					// The panic retries by the policy: after a delay, where the table has
					// retry_after, the panic its last error.
					fx.mock.ExpectExec(fx.sql("retryAfter")).WithArgs(c.near(time.Now()), textHas{"handler bug"}, int64(5)).WillReturnResult(changed(1))
					fx.mock.ExpectCommit()
				} else {
					fx.mock.ExpectRollback()
				}
				fx.expectRowlockClaim("claim")
				fx.mock.ExpectRollback()
				if full {
					// After the claim that found nothing: when the next delayed row falls due, on
					// MySQL and MariaDB in a READ COMMITTED transaction of its own.
					nextDue := goldenSQL(t, "wakeup", c.db, sh).of("next-due")
					if c.d.Caps().DefaultReadCommitted {
						fx.mock.ExpectBegin()
					}
					fx.mock.ExpectQuery(nextDue).WithArgs(c.near(time.Now()), rowlockQueue).WillReturnRows(fx.mock.NewRows([]string{"min"}).AddRow(nil))
					if c.d.Caps().DefaultReadCommitted {
						fx.mock.ExpectCommit()
					}
				}
				rollbacks := 1 // the claim that finds nothing
				if !full {
					rollbacks = 2 // and the retry, with no attempt to count
				}
				settled := fx.whenRollbacks(rollbacks)

				h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
					if _, err := d.Tx.ExecContext(ctx, "INSERT INTO notes (body) VALUES ('half done')"); err != nil {
						t.Errorf("the handler's write: %v", err)
					}
					panic("handler bug")
				})
				form := withoutSearch{c.rowlockForm(sh.table)}
				cfg := &inbox.Config{Queue: rowlockQueue, Transactional: true, PollInterval: time.Hour, ShutdownTimeout: time.Second}
				if !full {
					cfg.Retry = inbox.RetryAtOnce // the minimal table has no retry_after column
				}
				// The consumer runs until it has claimed again after the panic's settlement, or
				// for 10 s.
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				go func() {
					select {
					case <-settled:
						cancel()
					case <-ctx.Done():
					}
				}()
				if err := inbox.NewConsumer(fx.db, form, h, cfg).Run(ctx); err != nil {
					t.Fatalf("Run: %v", err)
				}
				select {
				case <-settled:
				default:
					t.Error("the consumer did not claim again after the panic's settlement")
				}
			})
		}
	}
}

// TestRowlockTransactionEnded: once the database has ended the delivery's transaction (MySQL's
// deadlock rolls all of it back), the handler's later statements are refused without reaching
// the server, and Settle fails with ErrTransactionEnded after a ROLLBACK alone: no settlement
// statement and no COMMIT, which would run in autocommit. The MySQL dialect judges by the error
// number; the MariaDB dialect asks the server, and goes on when the transaction still stands.
func TestRowlockTransactionEnded(t *testing.T) {
	duplicate := errors.New("Error 1062 (23000): Duplicate entry '1' for key 'PRIMARY'")
	for _, tc := range []struct {
		name  string
		c     dbCase
		fails error
		probe int // MariaDB's answer to @@in_transaction; -1: not asked
		ended bool
	}{
		{"mysql deadlock", onMySQL, errDeadlock, -1, true},
		{"mysql duplicate key", onMySQL, duplicate, -1, false},
		{"mariadb deadlock", mariadbSerializable, errDeadlock, 0, true},
		{"mariadb duplicate key", mariadbSerializable, duplicate, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx, f := openRowlock(t, tc.c, fullShape, 0, inbox.Binding{Name: rowlockQueue, Transactional: true})
			fx.expectRowlockClaim("claim", rowlockRow(6))
			fx.mock.ExpectExec(fx.sql("savepoint")).WillReturnResult(changed(0))
			fx.mock.ExpectExec("UPDATE accounts SET balance = 0").WillReturnError(tc.fails)
			if tc.probe >= 0 {
				expectInTransaction(fx.recorder, tc.probe)
			}
			if tc.ended {
				fx.mock.ExpectRollback()
			} else {
				fx.mock.ExpectExec("INSERT INTO audit VALUES (6)").WillReturnResult(changed(1))
				fx.mock.ExpectExec(fx.sql("ack")).WithArgs(tc.c.near(time.Now()), int64(6)).WillReturnResult(changed(1))
				fx.mock.ExpectCommit()
			}

			d := rowlockClaimOne(t, f)
			ctx := context.Background()
			if _, err := d.Tx.ExecContext(ctx, "UPDATE accounts SET balance = 0"); !errors.Is(err, tc.fails) {
				t.Fatalf("the failing statement: %v, want its own error", err)
			}
			_, err := d.Tx.ExecContext(ctx, "INSERT INTO audit VALUES (6)")
			settled := f.Settle(ctx, d, outcome.Ack())
			if !tc.ended {
				if err != nil || settled != nil {
					t.Fatalf("after an error that leaves the transaction open: the next statement %v, Settle %v; want both to succeed", err, settled)
				}
				fx.closed(t, f)
				return
			}
			if !errors.Is(err, inbox.ErrTransactionEnded) || !errors.Is(err, errDeadlock) || !strings.Contains(err.Error(), `"jobs", row 6`) {
				t.Errorf("the statement after the deadlock: %v; want ErrTransactionEnded wrapping the deadlock, naming table and row", err)
			}
			var n int
			if err := d.Tx.QueryRowContext(ctx, "SELECT 1").Scan(&n); err == nil {
				t.Error("a QueryRow after the deadlock succeeded; want it refused")
			}
			if !errors.Is(settled, inbox.ErrTransactionEnded) {
				t.Errorf("Settle = %v; want ErrTransactionEnded", settled)
			}
			fx.closed(t, f)
		})
	}
}

// TestRowlockTransactionEndedWhileRowsWereRead: an error a locking read meets while its rows
// are read (InnoDB reports a deadlock there) reaches only the reader; on MariaDB the
// delivery's transaction asks the server before the next statement, refuses it once the
// transaction is over, and the settlement fails having run only a ROLLBACK.
func TestRowlockTransactionEndedWhileRowsWereRead(t *testing.T) {
	fx, f := openRowlock(t, mariadbSerializable, fullShape, 0, inbox.Binding{Name: rowlockQueue, Transactional: true})
	fx.expectRowlockClaim("claim", rowlockRow(6))
	fx.mock.ExpectExec(fx.sql("savepoint")).WillReturnResult(changed(0))
	fx.mock.ExpectQuery("SELECT balance FROM accounts WHERE id = 1 FOR UPDATE").
		WillReturnRows(fx.mock.NewRows([]string{"balance"}).AddRow(1).RowError(0, errDeadlock))
	expectInTransaction(fx.recorder, 0)
	fx.mock.ExpectRollback()

	d := rowlockClaimOne(t, f)
	ctx := context.Background()
	var balance int
	if err := d.Tx.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = 1 FOR UPDATE").Scan(&balance); !errors.Is(err, errDeadlock) {
		t.Fatalf("the locking read: %v, want the deadlock", err)
	}
	if _, err := d.Tx.ExecContext(ctx, "UPDATE accounts SET balance = 2 WHERE id = 1"); !errors.Is(err, inbox.ErrTransactionEnded) {
		t.Errorf("the write after the failed read: %v; want ErrTransactionEnded", err)
	}
	if err := f.Settle(ctx, d, outcome.Ack()); !errors.Is(err, inbox.ErrTransactionEnded) {
		t.Errorf("Settle = %v; want ErrTransactionEnded", err)
	}
	fx.closed(t, f)
}

// TestRowlockOpenStatementLost: a prepare refused for the connection's own prepared statement
// (42P05, as PgBouncer in transaction pooling causes) is not ErrSchema but ErrDialect, which a
// consumer does not try again: the pooler does the same on every try. The error names the
// statement, the pooler and the settings that avoid it.
func TestRowlockOpenStatementLost(t *testing.T) {
	fx := newFixture(t, "rowlock", onPostgres, fullShape, 0, inbox.Binding{Name: rowlockQueue})
	fx.expectServer()
	for range 2 {
		fx.mock.ExpectPrepare(fx.sql("claim")).WillReturnError(sqlState{"42P05"})
	}

	_, err := onPostgres.rowlockForm(fullShape.table).Open(context.Background(), fx.db, fx.q)
	if !errors.Is(err, inbox.ErrDialect) || errors.Is(err, inbox.ErrSchema) {
		t.Fatalf("Open = %v; want ErrDialect, not ErrSchema", err)
	}
	for _, want := range []string{"claim statement", "PgBouncer", "inbox.Config.UnpreparedStatements", "default_query_exec_mode=exec"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open = %v; want it to name %q", err, want)
		}
	}
}

// TestOpenRefusesGalera: on a node of a Galera cluster the row lock and advisory forms are
// refused at Open with ErrDialect naming the lease form, before anything is prepared.
func TestOpenRefusesGalera(t *testing.T) {
	forms := map[string]inbox.Form{
		"rowlock":  onMariaDB.rowlockForm(fullShape.table),
		"advisory": onMariaDB.advisoryForm(fullShape.table, fullShape.key),
	}
	for name, f := range forms {
		t.Run(name, func(t *testing.T) {
			m := newRecorder(t, 0)
			expectVersion(m, "mariadb", "")
			m.mock.ExpectQuery("SHOW GLOBAL VARIABLES LIKE 'wsrep_on'").WillReturnRows(m.mock.NewRows([]string{"Variable_name", "Value"}).AddRow("wsrep_on", "ON"))
			m.mock.ExpectQuery("SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'").WillReturnRows(m.mock.NewRows([]string{"Variable_name", "Value"}).AddRow("wsrep_cluster_size", "3"))
			_, err := f.Open(context.Background(), m.db, inbox.Binding{Name: rowlockQueue})
			if !errors.Is(err, inbox.ErrDialect) || !strings.Contains(err.Error(), "Galera") || !strings.Contains(err.Error(), "lease form") || !strings.Contains(err.Error(), `"jobs"`) {
				t.Fatalf("Open = %v; want ErrDialect naming Galera, the lease form and the table", err)
			}
		})
	}
}

// withoutSearch is a form whose plan offers no search for unclaimable rows, whose reads run
// beside the claims in no fixed order (TestUnclaimableSearchesAreBoundedReads pins them).
type withoutSearch struct{ inbox.Form }

func (f withoutSearch) Open(ctx context.Context, db *sql.DB, q inbox.Binding) (inbox.Plan, error) {
	plan, err := f.Form.Open(ctx, db, q)
	plan.FindUnclaimable = nil
	return plan, err
}

// TestRowlockAckConflictSettlesAgain: an ack that meets a transient conflict (a deadlock: on
// MySQL and MariaDB an ack that frees a unique key deadlocks with publishes of that key), which
// rolls the claim's transaction back, is settled again in a transaction of its own that locks
// the row again: the handler's success stands, and is not retried. Where the row was taken
// meanwhile (the relock finds none), the failure goes to the back-off, and Settle says so.
func TestRowlockAckConflictSettlesAgain(t *testing.T) {
	for _, tc := range rowlockConflicts {
		t.Run(tc.c.name, func(t *testing.T) {
			fx, f := openRowlock(t, tc.c, fullShape, 0, inbox.Binding{Name: rowlockQueue})
			fx.expectRowlockClaim("claim", rowlockRow(4))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(tc.c.near(time.Now()), int64(4)).WillReturnError(tc.conflict)
			fx.mock.ExpectRollback()
			fx.mock.ExpectBegin()
			fx.mock.ExpectQuery(fx.sql("relock")).WithArgs(int64(4), int64(2)).WillReturnRows(fx.mock.NewRows([]string{"id"}).AddRow(int64(4)))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(tc.c.near(time.Now()), int64(4)).WillReturnResult(changed(1))
			fx.mock.ExpectCommit()
			if err := f.Settle(context.Background(), rowlockClaimOne(t, f), outcome.Ack()); err != nil {
				t.Fatalf("Settle = %v, want the ack settled again", err)
			}

			fx.expectRowlockClaim("claim", rowlockRow(5))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(tc.c.near(time.Now()), int64(5)).WillReturnError(tc.conflict)
			fx.mock.ExpectRollback()
			fx.mock.ExpectBegin()
			fx.mock.ExpectQuery(fx.sql("relock")).WithArgs(int64(5), int64(2)).WillReturnRows(fx.mock.NewRows([]string{"id"}))
			fx.mock.ExpectCommit()
			if err := f.Settle(context.Background(), rowlockClaimOne(t, f), outcome.Ack()); !errors.Is(err, tc.conflict) {
				t.Fatalf("Settle of a row taken meanwhile = %v, want the conflict", err)
			}
			fx.closed(t, f)
		})
	}
}
