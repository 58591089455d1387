package sqlmocktests

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// rowlockStatements are the statements the row lock form prepares for one table and dialect;
// retry and retryAfter are empty where the table lacks the column.
type rowlockStatements struct {
	claim, ack, retry, retryAfter string
}

// rowlockDialect is one dialect at one level, with what its server answers and the statements
// expected for the full and the minimal table.
type rowlockDialect struct {
	name          string
	form          func(inbox.Table) inbox.Form
	level         sql.IsolationLevel // what the claim's transaction must be begun with
	version       string             // CheckServer's query
	versionAnswer string
	full, minimal rowlockStatements
}

var (
	rowlockPostgresFull = rowlockStatements{
		claim:      `SELECT "id", "payload", "attempt", "grp", "headers" FROM "jobs" WHERE "processed_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $1) AND "grp" = $2 ORDER BY "priority", "retry_after" NULLS FIRST, "id" LIMIT 1 FOR UPDATE SKIP LOCKED`,
		ack:        `UPDATE "jobs" SET "processed_at" = $1 WHERE "id" = $2`,
		retry:      `UPDATE "jobs" SET "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" = $1`,
		retryAfter: `UPDATE "jobs" SET "retry_after" = $1, "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" = $2`,
	}
	rowlockPostgresMinimal = rowlockStatements{
		claim: `SELECT "id", "payload" FROM "jobs" WHERE 1 = 1 ORDER BY "id" LIMIT 1 FOR UPDATE SKIP LOCKED`,
		ack:   `DELETE FROM "jobs" WHERE "id" = $1`,
	}
	rowlockMySQLFull = rowlockStatements{
		claim:      "SELECT `id`, `payload`, `attempt`, `grp`, `headers` FROM `jobs` WHERE `processed_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `grp` = ? ORDER BY `priority`, `retry_after`, `id` LIMIT 1 FOR UPDATE SKIP LOCKED",
		ack:        "UPDATE `jobs` SET `processed_at` = ? WHERE `id` = ?",
		retry:      "UPDATE `jobs` SET `attempt` = COALESCE(`attempt`, 0) + 1 WHERE `id` = ?",
		retryAfter: "UPDATE `jobs` SET `retry_after` = ?, `attempt` = COALESCE(`attempt`, 0) + 1 WHERE `id` = ?",
	}
	rowlockMySQLMinimal = rowlockStatements{
		claim: "SELECT `id`, `payload` FROM `jobs` WHERE 1 = 1 ORDER BY `id` LIMIT 1 FOR UPDATE SKIP LOCKED",
		ack:   "DELETE FROM `jobs` WHERE `id` = ?",
	}
)

// db is the database the dialect runs on: "postgres", "mysql" or "mariadb".
func (dc rowlockDialect) db() string { return strings.Fields(dc.name)[0] }

func rowlockForm[D rowlock.Dialect](d D) func(inbox.Table) inbox.Form {
	return func(t inbox.Table) inbox.Form { return rowlock.New(d, t) }
}

var (
	rowlockPostgres = rowlockDialect{
		name: "postgres", form: rowlockForm(dialect.Postgres[isolation.Default]{}), level: sql.LevelDefault,
		version: "SHOW server_version_num", versionAnswer: "150004",
		full: rowlockPostgresFull, minimal: rowlockPostgresMinimal,
	}
	rowlockPostgresRepeatableRead = rowlockDialect{
		name: "postgres repeatable read", form: rowlockForm(dialect.Postgres[isolation.RepeatableRead]{}), level: sql.LevelRepeatableRead,
		version: "SHOW server_version_num", versionAnswer: "150004",
		full: rowlockPostgresFull, minimal: rowlockPostgresMinimal,
	}
	rowlockMySQL = rowlockDialect{
		name: "mysql", form: rowlockForm(dialect.MySQL[isolation.Default]{}), level: sql.LevelReadCommitted,
		version: "SELECT VERSION()", versionAnswer: "8.0.36",
		full: rowlockMySQLFull, minimal: rowlockMySQLMinimal,
	}
	rowlockMariaDB = rowlockDialect{
		name: "mariadb serializable", form: rowlockForm(dialect.MariaDB[isolation.Serializable]{}), level: sql.LevelSerializable,
		version: "SELECT VERSION()", versionAnswer: "10.11.6-MariaDB-0+deb12u1",
		full: rowlockMySQLFull, minimal: rowlockMySQLMinimal,
	}
	rowlockDialects = []rowlockDialect{rowlockPostgres, rowlockPostgresRepeatableRead, rowlockMySQL, rowlockMariaDB}
)

var (
	rowlockFullTable = inbox.Table{
		Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
		ProcessedAt: "processed_at", Queue: "grp", Priority: "priority", RetryAfter: "retry_after",
		Headers: "headers",
	}
	rowlockMinimalTable = inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload"}
)

const rowlockQueue = "emails"

// rowlockExpectOpen expects the server check, the catalog query of the table's columns, and the
// preparation of every statement in st (the full or the minimal table's), each closed by Close.
func rowlockExpectOpen(m *recorder, dc rowlockDialect, st rowlockStatements) {
	m.mock.ExpectQuery(dc.version).WillReturnRows(sqlmock.NewRows([]string{"v"}).AddRow(dc.versionAnswer))
	if db := dc.db(); db == "mysql" || db == "mariadb" {
		expectNotGalera(m.mock, db)
	}
	tbl := rowlockFullTable
	if st == dc.minimal {
		tbl = rowlockMinimalTable
	}
	expectColumns(m.mock, dc.db(), tbl, "")
	for _, q := range []string{st.claim, st.ack, st.retry, st.retryAfter} {
		if q != "" {
			m.mock.ExpectPrepare(q).WillBeClosed()
		}
	}
}

// rowlockExpectClaimFull expects a claim's transaction and its select on the full table,
// answered by row id with attempt 2.
func rowlockExpectClaimFull(m *recorder, dc rowlockDialect, id int64) {
	m.mock.ExpectBegin()
	m.mock.ExpectQuery(dc.full.claim).
		WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).
		WillReturnRows(sqlmock.NewRows([]string{"id", "payload", "attempt", "grp", "headers"}).
			AddRow(id, []byte(`{"to":"a@example.com"}`), int64(2), rowlockQueue, `{"trace":"t1"}`))
}

func rowlockExpectClaimMinimal(m *recorder, dc rowlockDialect, id int64) {
	m.mock.ExpectBegin()
	m.mock.ExpectQuery(dc.minimal.claim).WithoutArgs().
		WillReturnRows(sqlmock.NewRows([]string{"id", "payload"}).AddRow(id, []byte("hello")))
}

func rowlockOpen(t *testing.T, m *recorder, f inbox.Form, q inbox.Queue) inbox.Plan {
	t.Helper()
	plan, err := f.Open(context.Background(), m.db, q)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if plan.Table != "jobs" || !plan.HoldsConnection || plan.ExtendEvery != 0 || plan.SerialClaims || plan.SettleAndClaim != nil || plan.FindUnclaimable == nil {
		t.Fatalf("plan = %+v; want table jobs, holding a connection, no extension, parallel claims, a search for unclaimable rows and no settle-and-claim", plan)
	}
	return plan
}

func rowlockClaimOne(t *testing.T, f inbox.Form) *inbox.Delivery {
	t.Helper()
	ds, err := f.Claim(context.Background(), 1)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	if len(ds) != 1 {
		t.Fatalf("Claim returned %d deliveries, want 1", len(ds))
	}
	return ds[0]
}

func rowlockCheckLevels(t *testing.T, m *recorder, dc rowlockDialect, n int) {
	t.Helper()
	levels := m.Levels()
	if len(levels) != n {
		t.Fatalf("%d transactions begun, want %d", len(levels), n)
	}
	for i, l := range levels {
		if l != dc.level {
			t.Errorf("transaction %d begun at %v, want %v (the dialect's level)", i+1, l, dc.level)
		}
	}
}

// TestRowlockSettles pins the statement sequence of each outcome on each dialect, plain and
// transactional: begin at the level, claim, (savepoint, the handler's write, rollback to the
// savepoint unless Ack), the settlement, commit.
func TestRowlockSettles(t *testing.T) {
	outcomes := []struct {
		o     outcome.Outcome
		stmt  func(rowlockStatements) string
		args  func(id int64) []driver.Value
		keeps bool // the handler's writes commit
	}{
		{outcome.Ack(), func(s rowlockStatements) string { return s.ack },
			func(id int64) []driver.Value { return []driver.Value{rowlockTimeNear{time.Now()}, id} }, true},
		{outcome.Drop(), func(s rowlockStatements) string { return s.ack },
			func(id int64) []driver.Value { return []driver.Value{rowlockTimeNear{time.Now()}, id} }, false},
		{outcome.Retry(), func(s rowlockStatements) string { return s.retry },
			func(id int64) []driver.Value { return []driver.Value{id} }, false},
		{outcome.RetryAfter(time.Hour), func(s rowlockStatements) string { return s.retryAfter },
			func(id int64) []driver.Value { return []driver.Value{rowlockTimeNear{time.Now().Add(time.Hour)}, id} }, false},
		{outcome.Outcome{}, func(s rowlockStatements) string { return s.retry },
			func(id int64) []driver.Value { return []driver.Value{id} }, false},
	}
	for _, dc := range rowlockDialects {
		for _, oc := range outcomes {
			for _, transactional := range []bool{false, true} {
				name := dc.name + "/" + oc.o.String()
				if transactional {
					name += "/transactional"
				}
				t.Run(name, func(t *testing.T) {
					m := newRecorder(t, 0)
					rowlockExpectOpen(m, dc, dc.full)
					rowlockExpectClaimFull(m, dc, 7)
					if transactional {
						m.mock.ExpectExec("SAVEPOINT inbox_handler").WillReturnResult(sqlmock.NewResult(0, 0))
						m.mock.ExpectExec("INSERT INTO notes (body) VALUES ('sent')").WillReturnResult(sqlmock.NewResult(1, 1))
						if !oc.keeps {
							m.mock.ExpectExec("ROLLBACK TO SAVEPOINT inbox_handler").WillReturnResult(sqlmock.NewResult(0, 0))
						}
					}
					m.mock.ExpectExec(oc.stmt(dc.full)).WithArgs(oc.args(7)...).WillReturnResult(sqlmock.NewResult(0, 1))
					m.mock.ExpectCommit()

					f := dc.form(rowlockFullTable)
					rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue, Transactional: transactional})
					d := rowlockClaimOne(t, f)
					if d.ID != 7 || d.Attempt != 3 || d.Queue != rowlockQueue || d.Headers["trace"] != "t1" || string(d.Payload) != `{"to":"a@example.com"}` {
						t.Fatalf("delivery = %+v; want id 7, attempt 3 (read 2, plus this delivery), group, headers and payload of the row", d)
					}
					if (d.Tx != nil) != transactional {
						t.Fatalf("delivery Tx = %v; want one exactly in transactional mode", d.Tx)
					}
					if transactional {
						if _, err := d.Tx.ExecContext(context.Background(), "INSERT INTO notes (body) VALUES ('sent')"); err != nil {
							t.Fatalf("handler's write: %v", err)
						}
					}
					if err := f.Settle(context.Background(), d, oc.o); err != nil {
						t.Fatalf("Settle(%s): %v", oc.o, err)
					}
					if transactional {
						if _, err := d.Tx.ExecContext(context.Background(), "SELECT 1"); !errors.Is(err, inbox.ErrTransactionHeld) {
							t.Errorf("the handler's Tx after settlement: err = %v, want ErrTransactionHeld", err)
						}
					}
					if err := f.Close(); err != nil {
						t.Fatalf("Close: %v", err)
					}
					rowlockCheckLevels(t, m, dc, 1)
				})
			}
		}
	}
}

// TestRowlockMinimalTable pins what changes without the optional columns: Ack deletes, Retry
// rolls back (there is no attempt to count), RetryAfter rolls back and warns, naming the table.
func TestRowlockMinimalTable(t *testing.T) {
	for _, dc := range []rowlockDialect{rowlockPostgres, rowlockMySQL} {
		t.Run(dc.name+"/ack deletes", func(t *testing.T) {
			m := newRecorder(t, 0)
			rowlockExpectOpen(m, dc, dc.minimal)
			rowlockExpectClaimMinimal(m, dc, 11)
			m.mock.ExpectExec(dc.minimal.ack).WithArgs(int64(11)).WillReturnResult(sqlmock.NewResult(0, 1))
			m.mock.ExpectCommit()

			f := dc.form(rowlockMinimalTable)
			rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
			d := rowlockClaimOne(t, f)
			if d.ID != 11 || d.Attempt != 0 || d.Queue != "" || string(d.Payload) != "hello" {
				t.Fatalf("delivery = %+v; want id 11, attempt 0 (no column), payload hello", d)
			}
			if err := f.Settle(context.Background(), d, outcome.Ack()); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
		for _, o := range []outcome.Outcome{outcome.Retry(), outcome.RetryAfter(time.Minute)} {
			t.Run(dc.name+"/"+o.String()+" rolls back", func(t *testing.T) {
				m := newRecorder(t, 0)
				rowlockExpectOpen(m, dc, dc.minimal)
				rowlockExpectClaimMinimal(m, dc, 12)
				m.mock.ExpectRollback()

				var logs bytes.Buffer
				f := dc.form(rowlockMinimalTable)
				rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
				d := rowlockClaimOne(t, f)
				if err := f.Settle(context.Background(), d, o); err != nil {
					t.Fatal(err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "table=jobs")
				if wantWarning := o.Kind() == outcome.KindRetryAfter; warned != wantWarning {
					t.Errorf("warning naming the table logged: %v, want %v; log:\n%s", warned, wantWarning, logs.String())
				}
			})
		}
	}
}

// TestRowlockRetryAfterWithoutRetryAfterColumn: with an attempt column but no retry_after
// column, RetryAfter counts the attempt like Retry and warns.
func TestRowlockRetryAfterWithoutRetryAfterColumn(t *testing.T) {
	dc := rowlockPostgres
	tbl := inbox.Table{Name: "jobs", ID: "id", Attempt: "attempt"}
	m := newRecorder(t, 0)
	m.mock.ExpectQuery(dc.version).WillReturnRows(sqlmock.NewRows([]string{"v"}).AddRow(dc.versionAnswer))
	expectColumns(m.mock, dc.db(), tbl, "")
	claim := `SELECT "id", "attempt" FROM "jobs" WHERE 1 = 1 ORDER BY "id" LIMIT 1 FOR UPDATE SKIP LOCKED`
	m.mock.ExpectPrepare(claim).WillBeClosed()
	m.mock.ExpectPrepare(`DELETE FROM "jobs" WHERE "id" = $1`).WillBeClosed()
	m.mock.ExpectPrepare(`UPDATE "jobs" SET "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" = $1`).WillBeClosed()
	m.mock.ExpectBegin()
	m.mock.ExpectQuery(claim).WithoutArgs().WillReturnRows(sqlmock.NewRows([]string{"id", "attempt"}).AddRow(int64(5), int64(0)))
	m.mock.ExpectExec(`UPDATE "jobs" SET "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" = $1`).WithArgs(int64(5)).WillReturnResult(sqlmock.NewResult(0, 1))
	m.mock.ExpectCommit()

	var logs bytes.Buffer
	f := dc.form(tbl)
	rowlockOpen(t, m, f, inbox.Queue{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	d := rowlockClaimOne(t, f)
	if d.Attempt != 1 {
		t.Errorf("first delivery reads attempt %d, want 1", d.Attempt)
	}
	if err := f.Settle(context.Background(), d, outcome.RetryAfter(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "table=jobs") {
		t.Errorf("no warning naming the table; log:\n%s", logs.String())
	}
}

// TestRowlockNoRow: a claim that finds nothing rolls its transaction back and returns none.
func TestRowlockNoRow(t *testing.T) {
	for _, dc := range rowlockDialects {
		t.Run(dc.name, func(t *testing.T) {
			m := newRecorder(t, 0)
			rowlockExpectOpen(m, dc, dc.full)
			m.mock.ExpectBegin()
			m.mock.ExpectQuery(dc.full.claim).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).
				WillReturnRows(sqlmock.NewRows([]string{"id", "payload", "attempt", "grp", "headers"}))
			m.mock.ExpectRollback()

			f := dc.form(rowlockFullTable)
			rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
			ds, err := f.Claim(context.Background(), 4)
			if err != nil || len(ds) != 0 {
				t.Fatalf("Claim = %v, %v; want none, no error", ds, err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			rowlockCheckLevels(t, m, dc, 1)
		})
	}
}

// TestRowlockClaimSeveral: Claim(max) opens one transaction per row, in turn, and stops at the
// first that finds none. Each transaction holds its own connection, so the claim statement is
// prepared again on each new one.
func TestRowlockClaimSeveral(t *testing.T) {
	dc := rowlockPostgres
	m := newRecorder(t, 0)
	rowlockExpectOpen(m, dc, dc.full)
	rowlockExpectClaimFull(m, dc, 1)
	m.mock.ExpectBegin()
	m.mock.ExpectPrepare(dc.full.claim)
	m.mock.ExpectQuery(dc.full.claim).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).
		WillReturnRows(sqlmock.NewRows([]string{"id", "payload", "attempt", "grp", "headers"}).AddRow(int64(2), nil, int64(0), rowlockQueue, nil))
	m.mock.ExpectBegin()
	m.mock.ExpectPrepare(dc.full.claim)
	m.mock.ExpectQuery(dc.full.claim).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).
		WillReturnRows(sqlmock.NewRows([]string{"id", "payload", "attempt", "grp", "headers"}))
	m.mock.ExpectRollback()
	// Settling the second delivery prepares the ack statement on its connection.
	m.mock.ExpectPrepare(dc.full.ack)
	m.mock.ExpectExec(dc.full.ack).WithArgs(rowlockTimeNear{time.Now()}, int64(2)).WillReturnResult(sqlmock.NewResult(0, 1))
	m.mock.ExpectCommit()
	m.mock.ExpectRollback() // Release of the first

	f := dc.form(rowlockFullTable)
	rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
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
	if err := f.Settle(context.Background(), ds[1], outcome.Ack()); err != nil {
		t.Fatal(err)
	}
	if err := f.Release(context.Background(), ds[0]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	rowlockCheckLevels(t, m, dc, 3)
}

// TestRowlockRelease: Release rolls back (no attempt counted); the delivery is then no longer
// held, and the handler's Tx refuses further statements.
func TestRowlockRelease(t *testing.T) {
	for _, dc := range rowlockDialects {
		t.Run(dc.name, func(t *testing.T) {
			m := newRecorder(t, 0)
			rowlockExpectOpen(m, dc, dc.full)
			rowlockExpectClaimFull(m, dc, 3)
			m.mock.ExpectExec("SAVEPOINT inbox_handler").WillReturnResult(sqlmock.NewResult(0, 0))
			m.mock.ExpectRollback()

			f := dc.form(rowlockFullTable)
			rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue, Transactional: true})
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
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRowlockFailedCommit: a COMMIT that fails is returned to the caller and its connection is
// discarded (closed, not returned to the pool), whatever the failure. When the connection broke
// the error says the outcome is unknown (inbox.ErrCommitUnknown); when the server refused the
// COMMIT (a deadlock, a serialization failure) it says the row is unchanged and back.
func TestRowlockFailedCommit(t *testing.T) {
	for _, dc := range rowlockDialects {
		refused := error(rowlockSQLState{"40001"})
		if !strings.HasPrefix(dc.name, "postgres") {
			refused = errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction")
		}
		for _, tc := range []struct {
			name    string
			err     error
			unknown bool
		}{
			{"broken", errors.New("connection reset by peer"), true},
			{"refused", refused, false},
		} {
			t.Run(dc.name+"/"+tc.name, func(t *testing.T) {
				m := newRecorder(t, 0)
				rowlockExpectOpen(m, dc, dc.full)
				rowlockExpectClaimFull(m, dc, 4)
				m.mock.ExpectExec(dc.full.ack).WithArgs(rowlockTimeNear{time.Now()}, int64(4)).WillReturnResult(sqlmock.NewResult(0, 1))
				m.mock.ExpectCommit().WillReturnError(tc.err)
				m.mock.ExpectClose()

				f := dc.form(rowlockFullTable)
				rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
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
				if err := m.mock.ExpectationsWereMet(); err != nil {
					t.Fatalf("the connection of the failed COMMIT was not discarded: %v", err)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// TestRowlockFailedRollback: a ROLLBACK that fails discards its connection, which ends the
// session and the transaction with it, rather than returning it to the pool with the claim's
// row locks still held: after a claim that found no row, and at Release.
func TestRowlockFailedRollback(t *testing.T) {
	broken := errors.New("write: broken pipe")
	for _, dc := range rowlockDialects {
		t.Run(dc.name+"/claim", func(t *testing.T) {
			m := newRecorder(t, 0)
			rowlockExpectOpen(m, dc, dc.full)
			m.mock.ExpectBegin()
			m.mock.ExpectQuery(dc.full.claim).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).
				WillReturnRows(sqlmock.NewRows([]string{"id", "payload", "attempt", "grp", "headers"}))
			m.mock.ExpectRollback().WillReturnError(broken)
			m.mock.ExpectClose()

			f := dc.form(rowlockFullTable)
			rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
			if ds, err := f.Claim(context.Background(), 1); err != nil || len(ds) != 0 {
				t.Fatalf("Claim = %v, %v; want none, no error", ds, err)
			}
			if err := m.mock.ExpectationsWereMet(); err != nil {
				t.Fatalf("the connection of the failed ROLLBACK was not discarded: %v", err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
		t.Run(dc.name+"/release", func(t *testing.T) {
			m := newRecorder(t, 0)
			rowlockExpectOpen(m, dc, dc.full)
			rowlockExpectClaimFull(m, dc, 5)
			m.mock.ExpectRollback().WillReturnError(broken)
			m.mock.ExpectClose()

			f := dc.form(rowlockFullTable)
			rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
			d := rowlockClaimOne(t, f)
			if err := f.Release(context.Background(), d); !errors.Is(err, broken) || !strings.Contains(err.Error(), "row 5") {
				t.Fatalf("Release = %v; want the rollback's error, naming the row", err)
			}
			if err := m.mock.ExpectationsWereMet(); err != nil {
				t.Fatalf("the connection of the failed ROLLBACK was not discarded: %v", err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRowlockFailedSettlement: a settlement statement that fails rolls the transaction back
// and is returned; nothing is committed.
func TestRowlockFailedSettlement(t *testing.T) {
	dc := rowlockMySQL
	m := newRecorder(t, 0)
	rowlockExpectOpen(m, dc, dc.full)
	rowlockExpectClaimFull(m, dc, 4)
	broken := errors.New("Error 1146 (42S02): Table 'test.jobs' doesn't exist")
	m.mock.ExpectExec(dc.full.retry).WithArgs(int64(4)).WillReturnError(broken)
	m.mock.ExpectRollback()

	f := dc.form(rowlockFullTable)
	rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
	d := rowlockClaimOne(t, f)
	if err := f.Settle(context.Background(), d, outcome.Retry()); !errors.Is(err, broken) {
		t.Fatalf("Settle = %v; want the statement's error", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRowlockClaimRetriesConflicts: a claim that fails with a serialization failure (Postgres
// 40001), a deadlock (1213) or a lock wait timeout (1205) is rolled back and run again inside
// Claim; the caller sees the row, not the failure.
func TestRowlockClaimRetriesConflicts(t *testing.T) {
	cases := []struct {
		dc       rowlockDialect
		conflict error
	}{
		{rowlockPostgresRepeatableRead, rowlockSQLState{"40001"}},
		{rowlockMySQL, errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction")},
		{rowlockMariaDB, errors.New("Error 1205 (HY000): Lock wait timeout exceeded; try restarting transaction")},
	}
	for _, c := range cases {
		t.Run(c.dc.name, func(t *testing.T) {
			m := newRecorder(t, 0)
			rowlockExpectOpen(m, c.dc, c.dc.full)
			for range 2 {
				m.mock.ExpectBegin()
				m.mock.ExpectQuery(c.dc.full.claim).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).WillReturnError(c.conflict)
				m.mock.ExpectRollback()
			}
			rowlockExpectClaimFull(m, c.dc, 9)
			m.mock.ExpectRollback()

			f := c.dc.form(rowlockFullTable)
			rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
			d := rowlockClaimOne(t, f)
			if d.ID != 9 {
				t.Fatalf("claimed row %d, want 9", d.ID)
			}
			if err := f.Release(context.Background(), d); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			rowlockCheckLevels(t, m, c.dc, 3)
		})
	}
}

// TestRowlockClaimReportsPersistentConflicts: the retries are bounded, and an error that is
// not a transient conflict is reported at once.
func TestRowlockClaimReportsPersistentConflicts(t *testing.T) {
	dc := rowlockPostgresRepeatableRead
	t.Run("conflicts", func(t *testing.T) {
		m := newRecorder(t, 0)
		rowlockExpectOpen(m, dc, dc.full)
		conflict := rowlockSQLState{"40001"}
		for range 10 {
			m.mock.ExpectBegin()
			m.mock.ExpectQuery(dc.full.claim).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).WillReturnError(conflict)
			m.mock.ExpectRollback()
		}
		f := dc.form(rowlockFullTable)
		rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
		ds, err := f.Claim(context.Background(), 1)
		if !errors.As(err, new(rowlockSQLState)) || len(ds) != 0 || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), rowlockQueue) {
			t.Fatalf("Claim = %v, %v; want the conflict, naming table and queue, after the retries", ds, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("other error", func(t *testing.T) {
		m := newRecorder(t, 0)
		rowlockExpectOpen(m, dc, dc.full)
		broken := rowlockSQLState{"42703"}
		m.mock.ExpectBegin()
		m.mock.ExpectQuery(dc.full.claim).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).WillReturnError(broken)
		m.mock.ExpectRollback()
		f := dc.form(rowlockFullTable)
		rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
		if _, err := f.Claim(context.Background(), 1); !errors.Is(err, broken) {
			t.Fatalf("Claim = %v; want the error at once", err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRowlockTransactionHeld: a statement of the handler's still running on the delivery's
// transaction when Settle is called makes the settlement fail with ErrTransactionHeld at once,
// without waiting for that statement; the transaction is rolled back after that statement
// ends, and no settlement statement runs.
func TestRowlockTransactionHeld(t *testing.T) {
	for _, dc := range []rowlockDialect{rowlockPostgres, rowlockMySQL} {
		t.Run(dc.name, func(t *testing.T) {
			m := newRecorder(t, 0)
			rowlockExpectOpen(m, dc, dc.full)
			rowlockExpectClaimFull(m, dc, 6)
			m.mock.ExpectExec("SAVEPOINT inbox_handler").WillReturnResult(sqlmock.NewResult(0, 0))
			m.mock.ExpectExec("UPDATE accounts SET balance = 0").WillDelayFor(300 * time.Millisecond).WillReturnResult(sqlmock.NewResult(0, 1))
			m.mock.ExpectRollback()

			f := dc.form(rowlockFullTable)
			rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue, Transactional: true})
			d := rowlockClaimOne(t, f)
			started := m.whenExec("UPDATE accounts SET balance = 0")
			leftBehind := make(chan error, 1)
			go func() {
				_, err := d.Tx.ExecContext(context.Background(), "UPDATE accounts SET balance = 0")
				leftBehind <- err
			}()
			<-started
			rolledBack := m.whenRollbacks(1)
			err := f.Settle(context.Background(), d, outcome.Ack())
			if !errors.Is(err, inbox.ErrTransactionHeld) {
				t.Fatalf("Settle = %v; want ErrTransactionHeld", err)
			}
			select {
			case <-leftBehind:
				t.Error("Settle returned only after the handler's statement")
			default:
			}
			if err := <-leftBehind; err != nil {
				t.Fatalf("the handler's statement: %v", err)
			}
			<-rolledBack
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRowlockCloseRollsBackHolds: Close rolls back the transactions still held and frees the
// statements; later calls fail with ErrClosed.
func TestRowlockCloseRollsBackHolds(t *testing.T) {
	dc := rowlockMariaDB
	m := newRecorder(t, 0)
	rowlockExpectOpen(m, dc, dc.full)
	rowlockExpectClaimFull(m, dc, 8)
	m.mock.ExpectRollback()

	f := dc.form(rowlockFullTable)
	rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue})
	d := rowlockClaimOne(t, f)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Settle(context.Background(), d, outcome.Ack()); !errors.Is(err, inbox.ErrClosed) {
		t.Errorf("Settle after Close: %v, want ErrClosed", err)
	}
	if _, err := f.Claim(context.Background(), 1); !errors.Is(err, inbox.ErrClosed) {
		t.Errorf("Claim after Close: %v, want ErrClosed", err)
	}
	if err := f.Release(context.Background(), d); !errors.Is(err, inbox.ErrClosed) {
		t.Errorf("Release after Close: %v, want ErrClosed", err)
	}
}

// TestRowlockOpenSchemaError: a statement that does not prepare fails Open with ErrSchema
// naming the table and the statement, and the statements prepared before it are closed.
func TestRowlockOpenSchemaError(t *testing.T) {
	dc := rowlockPostgres
	m := newRecorder(t, 0)
	m.mock.ExpectQuery(dc.version).WillReturnRows(sqlmock.NewRows([]string{"v"}).AddRow(dc.versionAnswer))
	withoutAttempt := rowlockFullTable
	withoutAttempt.Attempt = ""
	expectColumns(m.mock, dc.db(), withoutAttempt, "") // a missing column is the statements' to name
	m.mock.ExpectPrepare(dc.full.claim).WillBeClosed()
	m.mock.ExpectPrepare(dc.full.ack).WillBeClosed()
	for range 2 { // a refused statement is refused again: it is the schema, not the connection
		m.mock.ExpectPrepare(dc.full.retry).WillReturnError(errors.New(`ERROR: column "attempt" does not exist (SQLSTATE 42703)`))
	}

	f := dc.form(rowlockFullTable)
	_, err := f.Open(context.Background(), m.db, inbox.Queue{Name: rowlockQueue})
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
	dc := rowlockMySQL
	m := newRecorder(t, 0)
	m.mock.ExpectQuery(dc.version).WillReturnRows(sqlmock.NewRows([]string{"v"}).AddRow("5.7.44"))
	f := dc.form(rowlockFullTable)
	if _, err := f.Open(context.Background(), m.db, inbox.Queue{Name: rowlockQueue}); !errors.Is(err, inbox.ErrServerTooOld) {
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
	f := rowlock.New(d, rowlockFullTable)
	if _, err := f.Open(context.Background(), m.db, inbox.Queue{Name: rowlockQueue}); !errors.Is(err, inbox.ErrDialect) {
		t.Fatalf("Open = %v; want ErrDialect", err)
	}
}

// TestRowlockWarnsPostgresSerializable: Open warns that Postgres at serializable redelivers
// rows whose settlements fail, and names the table; read committed opens without a warning.
func TestRowlockWarnsPostgresSerializable(t *testing.T) {
	for _, c := range []struct {
		form func(inbox.Table) inbox.Form
		warn bool
	}{
		{rowlockForm(dialect.Postgres[isolation.Serializable]{}), true},
		{rowlockForm(dialect.Postgres[isolation.ReadCommitted]{}), false},
	} {
		m := newRecorder(t, 0)
		rowlockExpectOpen(m, rowlockPostgres, rowlockPostgres.minimal)
		var logs bytes.Buffer
		f := c.form(rowlockMinimalTable)
		rowlockOpen(t, m, f, inbox.Queue{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "table=jobs")
		if warned != c.warn {
			t.Errorf("warning logged: %v, want %v; log:\n%s", warned, c.warn, logs.String())
		}
	}
}

// TestRowlockConsumerPanic drives the form through a consumer whose handler panics after
// writing through its transaction: the consumer settles Retry, so the handler's write is
// rolled back to the savepoint and the attempt counted; without an attempt column the claim's
// transaction is simply rolled back.
func TestRowlockConsumerPanic(t *testing.T) {
	for _, dc := range rowlockDialects {
		for _, full := range []bool{true, false} {
			name := dc.name + "/minimal"
			if full {
				name = dc.name + "/full"
			}
			t.Run(name, func(t *testing.T) {
				m := newRecorder(t, 0)
				tbl, st := rowlockMinimalTable, dc.minimal
				if full {
					tbl, st = rowlockFullTable, dc.full
				}
				rowlockExpectOpen(m, dc, st)
				if full {
					rowlockExpectClaimFull(m, dc, 5)
					m.mock.ExpectExec("SAVEPOINT inbox_handler").WillReturnResult(sqlmock.NewResult(0, 0))
					m.mock.ExpectExec("INSERT INTO notes (body) VALUES ('half done')").WillReturnResult(sqlmock.NewResult(1, 1))
					m.mock.ExpectExec("ROLLBACK TO SAVEPOINT inbox_handler").WillReturnResult(sqlmock.NewResult(0, 0))
					// The panic retries by the policy: after a delay, where the table has retry_after.
					m.mock.ExpectExec(st.retryAfter).WithArgs(rowlockTimeNear{time.Now()}, int64(5)).WillReturnResult(sqlmock.NewResult(0, 1))
					m.mock.ExpectCommit()
					m.mock.ExpectBegin()
					m.mock.ExpectQuery(st.claim).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).
						WillReturnRows(sqlmock.NewRows([]string{"id", "payload", "attempt", "grp", "headers"}))
				} else {
					rowlockExpectClaimMinimal(m, dc, 5)
					m.mock.ExpectExec("SAVEPOINT inbox_handler").WillReturnResult(sqlmock.NewResult(0, 0))
					m.mock.ExpectExec("INSERT INTO notes (body) VALUES ('half done')").WillReturnResult(sqlmock.NewResult(1, 1))
					m.mock.ExpectRollback()
					m.mock.ExpectBegin()
					m.mock.ExpectQuery(st.claim).WithoutArgs().WillReturnRows(sqlmock.NewRows([]string{"id", "payload"}))
				}
				m.mock.ExpectRollback()
				if full {
					// After the claim that found nothing: when the next delayed row falls due.
					m.mock.ExpectQuery(rowlockNextDue(dc)).WithArgs(rowlockTimeNear{time.Now()}, rowlockQueue).
						WillReturnRows(sqlmock.NewRows([]string{"min"}).AddRow(nil))
				}
				rollbacks := 1 // the claim that finds nothing
				if !full {
					rollbacks = 2 // and the retry, with no attempt to count
				}
				settled := m.whenRollbacks(rollbacks)

				h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
					if _, err := d.Tx.ExecContext(ctx, "INSERT INTO notes (body) VALUES ('half done')"); err != nil {
						t.Errorf("the handler's write: %v", err)
					}
					panic("handler bug")
				})
				form := withoutSearch{dc.form(tbl)}
				cfg := &inbox.Config{Queue: rowlockQueue, Transactional: true, PollInterval: time.Hour, ShutdownTimeout: time.Second}
				if !full {
					cfg.Retry = inbox.RetryAtOnce // the minimal table has no retry_after column
				}
				cons := inbox.NewConsumer(m.db, form, h, cfg)
				ctx, cancel := context.WithCancel(context.Background())
				ran := make(chan error, 1)
				go func() { ran <- cons.Run(ctx) }()
				select {
				case <-settled:
				case <-time.After(10 * time.Second):
					t.Error("the consumer did not claim again after the panic's settlement")
				}
				cancel()
				if err := <-ran; err != nil {
					t.Fatalf("Run: %v", err)
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
	deadlock := errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction")
	duplicate := errors.New("Error 1062 (23000): Duplicate entry '1' for key 'PRIMARY'")
	inTransaction := func(m *recorder, in int) {
		m.mock.ExpectQuery("SELECT @@in_transaction").WillReturnRows(sqlmock.NewRows([]string{"@@in_transaction"}).AddRow(in))
	}
	for _, tc := range []struct {
		name  string
		dc    rowlockDialect
		fails error
		probe int // MariaDB's answer to @@in_transaction; -1: not asked
		ended bool
	}{
		{"mysql deadlock", rowlockMySQL, deadlock, -1, true},
		{"mysql duplicate key", rowlockMySQL, duplicate, -1, false},
		{"mariadb deadlock", rowlockMariaDB, deadlock, 0, true},
		{"mariadb duplicate key", rowlockMariaDB, duplicate, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newRecorder(t, 0)
			rowlockExpectOpen(m, tc.dc, tc.dc.full)
			rowlockExpectClaimFull(m, tc.dc, 6)
			m.mock.ExpectExec("SAVEPOINT inbox_handler").WillReturnResult(sqlmock.NewResult(0, 0))
			m.mock.ExpectExec("UPDATE accounts SET balance = 0").WillReturnError(tc.fails)
			if tc.probe >= 0 {
				inTransaction(m, tc.probe)
			}
			if tc.ended {
				m.mock.ExpectRollback()
			} else {
				m.mock.ExpectExec("INSERT INTO audit VALUES (6)").WillReturnResult(sqlmock.NewResult(0, 1))
				m.mock.ExpectExec(tc.dc.full.ack).WithArgs(rowlockTimeNear{time.Now()}, int64(6)).WillReturnResult(sqlmock.NewResult(0, 1))
				m.mock.ExpectCommit()
			}

			f := tc.dc.form(rowlockFullTable)
			rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue, Transactional: true})
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
				return
			}
			if !errors.Is(err, inbox.ErrTransactionEnded) || !errors.Is(err, deadlock) || !strings.Contains(err.Error(), `"jobs", row 6`) {
				t.Errorf("the statement after the deadlock: %v; want ErrTransactionEnded wrapping the deadlock, naming table and row", err)
			}
			var row int
			if err := d.Tx.QueryRowContext(ctx, "SELECT 1").Scan(&row); err == nil {
				t.Error("a QueryRow after the deadlock succeeded; want it refused")
			}
			if !errors.Is(settled, inbox.ErrTransactionEnded) {
				t.Errorf("Settle = %v; want ErrTransactionEnded", settled)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRowlockTransactionEndedWhileRowsWereRead: an error a locking read meets while its rows
// are read (InnoDB reports a deadlock there) reaches only the reader; on MariaDB the
// delivery's transaction asks the server before the next statement, refuses it once the
// transaction is over, and the settlement fails having run only a ROLLBACK.
func TestRowlockTransactionEndedWhileRowsWereRead(t *testing.T) {
	dc := rowlockMariaDB
	m := newRecorder(t, 0)
	rowlockExpectOpen(m, dc, dc.full)
	rowlockExpectClaimFull(m, dc, 6)
	m.mock.ExpectExec("SAVEPOINT inbox_handler").WillReturnResult(sqlmock.NewResult(0, 0))
	deadlock := errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction")
	m.mock.ExpectQuery("SELECT balance FROM accounts WHERE id = 1 FOR UPDATE").
		WillReturnRows(sqlmock.NewRows([]string{"balance"}).AddRow(1).RowError(0, deadlock))
	m.mock.ExpectQuery("SELECT @@in_transaction").WillReturnRows(sqlmock.NewRows([]string{"@@in_transaction"}).AddRow(0))
	m.mock.ExpectRollback()

	f := dc.form(rowlockFullTable)
	rowlockOpen(t, m, f, inbox.Queue{Name: rowlockQueue, Transactional: true})
	d := rowlockClaimOne(t, f)
	ctx := context.Background()
	var balance int
	if err := d.Tx.QueryRowContext(ctx, "SELECT balance FROM accounts WHERE id = 1 FOR UPDATE").Scan(&balance); !errors.Is(err, deadlock) {
		t.Fatalf("the locking read: %v, want the deadlock", err)
	}
	if _, err := d.Tx.ExecContext(ctx, "UPDATE accounts SET balance = 2 WHERE id = 1"); !errors.Is(err, inbox.ErrTransactionEnded) {
		t.Errorf("the write after the failed read: %v; want ErrTransactionEnded", err)
	}
	if err := f.Settle(ctx, d, outcome.Ack()); !errors.Is(err, inbox.ErrTransactionEnded) {
		t.Errorf("Settle = %v; want ErrTransactionEnded", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestRowlockOpenStatementLost: a prepare refused for the connection's own prepared statement
// (42P05, as PgBouncer in transaction pooling causes) is the connection's failure, not
// ErrSchema: the error says so and names the pooler, and a consumer would try again.
func TestRowlockOpenStatementLost(t *testing.T) {
	dc := rowlockPostgres
	m := newRecorder(t, 0)
	m.mock.ExpectQuery(dc.version).WillReturnRows(sqlmock.NewRows([]string{"v"}).AddRow(dc.versionAnswer))
	expectColumns(m.mock, dc.db(), rowlockFullTable, "")
	for range 2 {
		m.mock.ExpectPrepare(dc.full.claim).WillReturnError(rowlockSQLState{"42P05"})
	}
	m.mock.ExpectPing()

	f := dc.form(rowlockFullTable)
	_, err := f.Open(context.Background(), m.db, inbox.Queue{Name: rowlockQueue})
	if err == nil || errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), "PgBouncer") || !strings.Contains(err.Error(), "claim statement") {
		t.Fatalf("Open = %v; want a connection failure naming the claim statement and the pooler, not ErrSchema", err)
	}
}

// TestOpenRefusesGalera: on a node of a Galera cluster the row lock and advisory forms are
// refused at Open with ErrDialect naming the lease form, before anything is prepared.
func TestOpenRefusesGalera(t *testing.T) {
	forms := map[string]inbox.Form{
		"rowlock":  rowlock.New(dialect.MariaDB[isolation.Default]{}, rowlockFullTable),
		"advisory": advisory.New(dialect.MariaDB[isolation.Default]{}, rowlockFullTable, nil),
	}
	for name, f := range forms {
		t.Run(name, func(t *testing.T) {
			m := newRecorder(t, 0)
			m.mock.ExpectQuery("SELECT VERSION()").WillReturnRows(sqlmock.NewRows([]string{"v"}).AddRow("10.11.6-MariaDB-0+deb12u1"))
			m.mock.ExpectQuery("SHOW GLOBAL VARIABLES LIKE 'wsrep_on'").WillReturnRows(sqlmock.NewRows([]string{"Variable_name", "Value"}).AddRow("wsrep_on", "ON"))
			m.mock.ExpectQuery("SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'").WillReturnRows(sqlmock.NewRows([]string{"Variable_name", "Value"}).AddRow("wsrep_cluster_size", "3"))
			_, err := f.Open(context.Background(), m.db, inbox.Queue{Name: rowlockQueue})
			if !errors.Is(err, inbox.ErrDialect) || !strings.Contains(err.Error(), "Galera") || !strings.Contains(err.Error(), "lease form") || !strings.Contains(err.Error(), `"jobs"`) {
				t.Fatalf("Open = %v; want ErrDialect naming Galera, the lease form and the table", err)
			}
		})
	}
}

// rowlockNextDue is the consumer's query for when the full table's next delayed row of the
// queue falls due, after a claim that found nothing.
func rowlockNextDue(dc rowlockDialect) string {
	if strings.HasPrefix(dc.name, "postgres") {
		return `SELECT MIN("retry_after") FROM "jobs" WHERE "processed_at" IS NULL AND "retry_after" > $1 AND "grp" = $2`
	}
	return "SELECT MIN(`retry_after`) FROM `jobs` WHERE `processed_at` IS NULL AND `retry_after` > ? AND `grp` = ?"
}

// withoutSearch is a form whose plan offers no search for unclaimable rows, whose reads run
// beside the claims in no fixed order (TestUnclaimableSearchesAreBoundedReads pins them).
type withoutSearch struct{ inbox.Form }

func (f withoutSearch) Open(ctx context.Context, db *sql.DB, q inbox.Queue) (inbox.Plan, error) {
	plan, err := f.Form.Open(ctx, db, q)
	plan.FindUnclaimable = nil
	return plan, err
}
