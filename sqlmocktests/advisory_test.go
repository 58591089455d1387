package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
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
)

// advisoryFull has every role the advisory form uses; advisoryMinimal an id and a payload.
var (
	advisoryFull = inbox.Table{Name: "jobs", ID: "id", Payload: "payload", Attempt: "attempt",
		ProcessedAt: "done_at", Queue: "queue", RetryAfter: "retry_after"}
	advisoryMinimal = inbox.Table{Name: "jobs", ID: "id", Payload: "payload"}
)

// advisorySQL is the exact text of the form's statements for one table and dialect family,
// with the key template "jobs-{id}".
type advisorySQL struct {
	keyCheck, candidates, lock, unlock, take, read, ack, retryAfter string
	takeIsQuery                                                     bool
}

const (
	advisoryPGKey    = `'jobs-' || COALESCE(CAST("id" AS TEXT), '')`
	advisoryMyKey    = "CONCAT('jobs-', COALESCE(CAST(`id` AS CHAR), ''))"
	advisoryMyName   = "IF(CHAR_LENGTH(CONCAT(DATABASE(), '.', " + advisoryMyKey + ")) > 64, SHA1(CONCAT(DATABASE(), '.', " + advisoryMyKey + ")), CONCAT(DATABASE(), '.', " + advisoryMyKey + "))"
	advisoryMyLock   = "SELECT GET_LOCK(IF(CHAR_LENGTH(n) > 64, SHA1(n), n), 0) FROM (SELECT CONCAT(DATABASE(), '.', ?) AS n) AS k"
	advisoryMyUnlock = "SELECT RELEASE_LOCK(IF(CHAR_LENGTH(n) > 64, SHA1(n), n)) FROM (SELECT CONCAT(DATABASE(), '.', ?) AS n) AS k"
)

var (
	advisoryPGFull = advisorySQL{
		keyCheck:    `SELECT ` + advisoryPGKey + ` FROM "jobs" WHERE 1 = 0`,
		candidates:  `SELECT c."id", c.inbox_key FROM (SELECT "id", ` + advisoryPGKey + ` AS inbox_key FROM "jobs" WHERE "done_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $1) AND "queue" = $2 ORDER BY "retry_after" NULLS FIRST, "id" OFFSET 0) c WHERE pg_try_advisory_xact_lock_shared(hashtextextended(c.inbox_key, 0)) LIMIT $3`,
		lock:        `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`,
		unlock:      `SELECT pg_advisory_unlock(hashtextextended($1, 0))`,
		take:        `UPDATE "jobs" SET "attempt" = COALESCE("attempt", 0) + 1 WHERE "id" = $1 AND (` + advisoryPGKey + `) = $2 AND "done_at" IS NULL AND ("retry_after" IS NULL OR "retry_after" <= $3) AND "queue" = $4 RETURNING "id", "payload", "attempt", "queue"`,
		takeIsQuery: true,
		ack:         `UPDATE "jobs" SET "done_at" = $1 WHERE "id" = $2`,
		retryAfter:  `UPDATE "jobs" SET "retry_after" = $1 WHERE "id" = $2`,
	}
	advisoryPGMinimal = advisorySQL{
		keyCheck:    `SELECT ` + advisoryPGKey + ` FROM "jobs" WHERE 1 = 0`,
		candidates:  `SELECT c."id", c.inbox_key FROM (SELECT "id", ` + advisoryPGKey + ` AS inbox_key FROM "jobs" WHERE 1 = 1 ORDER BY "id" OFFSET 0) c WHERE pg_try_advisory_xact_lock_shared(hashtextextended(c.inbox_key, 0)) LIMIT $1`,
		lock:        `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`,
		unlock:      `SELECT pg_advisory_unlock(hashtextextended($1, 0))`,
		take:        `SELECT "id", "payload" FROM "jobs" WHERE "id" = $1 AND (` + advisoryPGKey + `) = $2`,
		takeIsQuery: true,
		ack:         `DELETE FROM "jobs" WHERE "id" = $1`,
	}
	advisoryMyFull = advisorySQL{
		keyCheck:   "SELECT " + advisoryMyKey + " FROM `jobs` WHERE 1 = 0",
		candidates: "SELECT `id`, " + advisoryMyKey + " FROM `jobs` WHERE `done_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `queue` = ? AND IS_USED_LOCK(" + advisoryMyName + ") IS NULL ORDER BY `retry_after`, `id` LIMIT ?",
		lock:       advisoryMyLock,
		unlock:     advisoryMyUnlock,
		take:       "UPDATE `jobs` SET `attempt` = COALESCE(`attempt`, 0) + 1 WHERE `id` = ? AND (" + advisoryMyKey + ") = ? AND `done_at` IS NULL AND (`retry_after` IS NULL OR `retry_after` <= ?) AND `queue` = ?",
		read:       "SELECT `id`, `payload`, `attempt`, `queue` FROM `jobs` WHERE `id` = ?",
		ack:        "UPDATE `jobs` SET `done_at` = ? WHERE `id` = ?",
		retryAfter: "UPDATE `jobs` SET `retry_after` = ? WHERE `id` = ?",
	}
	advisoryMyMinimal = advisorySQL{
		keyCheck:    "SELECT " + advisoryMyKey + " FROM `jobs` WHERE 1 = 0",
		candidates:  "SELECT `id`, " + advisoryMyKey + " FROM `jobs` WHERE IS_USED_LOCK(" + advisoryMyName + ") IS NULL ORDER BY `id` LIMIT ?",
		lock:        advisoryMyLock,
		unlock:      advisoryMyUnlock,
		take:        "SELECT `id`, `payload` FROM `jobs` WHERE `id` = ? AND (" + advisoryMyKey + ") = ?",
		takeIsQuery: true,
		ack:         "DELETE FROM `jobs` WHERE `id` = ?",
	}
)

// advisoryDialect is one dialect under test: how to build the form, what its server check
// asks, its statements, and how its server answers a lock (true/false, or 1/0).
type advisoryDialect struct {
	name      string
	form      func(inbox.Table) inbox.Form
	server    func(sqlmock.Sqlmock)
	full, min advisorySQL
	yes, no   driver.Value
}

func advisoryDialects() []advisoryDialect {
	pgServer := func(m sqlmock.Sqlmock) {
		// The dialect's check, then the form's own (hashtextextended needs 11).
		for range 2 {
			m.ExpectQuery("SHOW server_version_num").WillReturnRows(sqlmock.NewRows([]string{"server_version_num"}).AddRow("150020"))
		}
	}
	version := func(v string) func(sqlmock.Sqlmock) {
		return func(m sqlmock.Sqlmock) {
			m.ExpectQuery("SELECT VERSION()").WillReturnRows(sqlmock.NewRows([]string{"VERSION()"}).AddRow(v))
			if strings.Contains(v, "MariaDB") {
				expectNotGalera(m, "mariadb")
			} else {
				expectNotGalera(m, "mysql")
			}
		}
	}
	return []advisoryDialect{
		{name: "postgres", server: pgServer, full: advisoryPGFull, min: advisoryPGMinimal, yes: true, no: false,
			form: func(t inbox.Table) inbox.Form {
				return advisory.New(dialect.Postgres[isolation.Default]{}, t, &advisory.Config{Key: "jobs-{id}"})
			}},
		{name: "mysql", server: version("8.0.36"), full: advisoryMyFull, min: advisoryMyMinimal, yes: int64(1), no: int64(0),
			form: func(t inbox.Table) inbox.Form {
				return advisory.New(dialect.MySQL[isolation.Default]{}, t, &advisory.Config{Key: "jobs-{id}"})
			}},
		{name: "mariadb", server: version("10.11.19-MariaDB"), full: advisoryMyFull, min: advisoryMyMinimal, yes: int64(1), no: int64(0),
			form: func(t inbox.Table) inbox.Form {
				return advisory.New(dialect.MariaDB[isolation.Default]{}, t, &advisory.Config{Key: "jobs-{id}"})
			}},
	}
}

// advisoryMock is a sqlmock database with a pool of two connections (a claim of two rows pins
// both), which sees the form's statements in the order the form runs them, and a log of the
// form's warnings (a release or rollback the mock refused shows there rather than as an error).
type advisoryMock struct {
	mock sqlmock.Sqlmock
	form inbox.Form
	sql  advisorySQL
	d    advisoryDialect

	warnings logBuffer
}

// newAdvisoryMock opens the form over tbl (full or minimal) on a fresh mock, expecting the
// server check, the catalog query of the table's columns and every statement prepared. When the test ends it checks that every
// expectation was met and, unless the test took them, that the form warned of nothing.
func newAdvisoryMock(t *testing.T, d advisoryDialect, tbl inbox.Table, q inbox.Queue) *advisoryMock {
	t.Helper()
	db, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(2)
	m := &advisoryMock{mock: mock, d: d, sql: d.full}
	if tbl.Attempt == "" {
		m.sql = d.min
	}
	m.form = d.form(tbl)
	d.server(mock)
	expectColumns(mock, d.name, tbl, "")
	mock.ExpectPrepare(m.sql.keyCheck).WillBeClosed()
	mock.ExpectPrepare(m.sql.candidates)
	mock.ExpectPrepare(m.sql.lock).WillBeClosed()
	mock.ExpectPrepare(m.sql.unlock).WillBeClosed()
	mock.ExpectPrepare(m.sql.take).WillBeClosed()
	if m.sql.read != "" {
		mock.ExpectPrepare(m.sql.read).WillBeClosed()
	}
	mock.ExpectPrepare(m.sql.ack).WillBeClosed()
	if m.sql.retryAfter != "" {
		mock.ExpectPrepare(m.sql.retryAfter).WillBeClosed()
	}
	q.Logger = slog.New(slog.NewTextHandler(&m.warnings, &slog.HandlerOptions{Level: slog.LevelWarn}))
	plan, err := m.form.Open(context.Background(), db, q)
	if err != nil {
		t.Fatal(err)
	}
	if !plan.HoldsConnection || plan.ExtendEvery != 0 || plan.Table != "jobs" {
		t.Fatalf("plan %+v: want the table, a held connection and no extension", plan)
	}
	t.Cleanup(func() {
		m.form.Close()
		db.Close()
		if err := mock.ExpectationsWereMet(); err != nil {
			t.Error(err)
		}
	})
	return m
}

// expectCandidates expects the candidate select asking for limit rows, answering ids with
// their keys "jobs-<id>".
func (m *advisoryMock) expectCandidates(queue string, limit int, ids ...int64) {
	rows := sqlmock.NewRows([]string{"id", "inbox_key"})
	for _, id := range ids {
		rows.AddRow(id, fmt.Sprintf("jobs-%d", id))
	}
	var args []driver.Value
	if m.sql.retryAfter != "" {
		args = append(args, sqlmock.AnyArg(), queue)
	}
	m.mock.ExpectQuery(m.sql.candidates).WithArgs(append(args, limit)...).WillReturnRows(rows)
}

func (m *advisoryMock) expectLock(id int64, ok bool) {
	answer := m.d.no
	if ok {
		answer = m.d.yes
	}
	m.mock.ExpectQuery(m.sql.lock).WithArgs(fmt.Sprintf("jobs-%d", id)).WillReturnRows(sqlmock.NewRows([]string{"locked"}).AddRow(answer))
}

func (m *advisoryMock) expectUnlock(id int64) *sqlmock.ExpectedQuery {
	return m.mock.ExpectQuery(m.sql.unlock).WithArgs(fmt.Sprintf("jobs-%d", id))
}

func (m *advisoryMock) unlockAnswers(ok bool) *sqlmock.Rows {
	answer := m.d.no
	if ok {
		answer = m.d.yes
	}
	return sqlmock.NewRows([]string{"released"}).AddRow(answer)
}

// expectTake expects the take of row id; found says whether the row is still claimable.
func (m *advisoryMock) expectTake(queue string, id int64, attempt int, found bool) {
	key := fmt.Sprintf("jobs-%d", id)
	args := []driver.Value{id, key}
	if m.sql.retryAfter != "" {
		args = append(args, sqlmock.AnyArg(), queue)
	}
	full := m.sql.retryAfter != ""
	row := func() *sqlmock.Rows {
		if full {
			return sqlmock.NewRows([]string{"id", "payload", "attempt", "queue"}).AddRow(id, []byte("p"), attempt, queue)
		}
		return sqlmock.NewRows([]string{"id", "payload"}).AddRow(id, []byte("p"))
	}
	switch {
	case m.sql.takeIsQuery && found:
		m.mock.ExpectQuery(m.sql.take).WithArgs(args...).WillReturnRows(row())
	case m.sql.takeIsQuery:
		cols := []string{"id", "payload"}
		if full {
			cols = append(cols, "attempt", "queue")
		}
		m.mock.ExpectQuery(m.sql.take).WithArgs(args...).WillReturnRows(sqlmock.NewRows(cols))
	case found:
		m.mock.ExpectExec(m.sql.take).WithArgs(args...).WillReturnResult(sqlmock.NewResult(0, 1))
		m.mock.ExpectQuery(m.sql.read).WithArgs(id).WillReturnRows(row())
	default:
		m.mock.ExpectExec(m.sql.take).WithArgs(args...).WillReturnResult(sqlmock.NewResult(0, 0))
	}
}

func (m *advisoryMock) claim(t *testing.T, max int) []*inbox.Delivery {
	t.Helper()
	ds, err := m.form.Claim(context.Background(), max)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func (m *advisoryMock) noWarnings(t *testing.T) {
	t.Helper()
	if w := m.warnings.String(); w != "" {
		t.Fatalf("the form warned:\n%s", w)
	}
}

// TestAdvisorySequence pins each outcome's statements: candidates, lock, take, settlement,
// unlock.
func TestAdvisorySequence(t *testing.T) {
	outcomes := []struct {
		o      outcome.Outcome
		settle func(m *advisoryMock, id int64)
	}{
		{outcome.Ack(), func(m *advisoryMock, id int64) {
			m.mock.ExpectExec(m.sql.ack).WithArgs(sqlmock.AnyArg(), id).WillReturnResult(sqlmock.NewResult(0, 1))
		}},
		{outcome.Drop(), func(m *advisoryMock, id int64) {
			m.mock.ExpectExec(m.sql.ack).WithArgs(sqlmock.AnyArg(), id).WillReturnResult(sqlmock.NewResult(0, 1))
		}},
		{outcome.Retry(), func(*advisoryMock, int64) {}},
		{outcome.RetryAfter(time.Minute), func(m *advisoryMock, id int64) {
			m.mock.ExpectExec(m.sql.retryAfter).WithArgs(advisoryTimeNear(time.Now().Add(time.Minute)), id).WillReturnResult(sqlmock.NewResult(0, 1))
		}},
	}
	for _, d := range advisoryDialects() {
		for _, oc := range outcomes {
			t.Run(d.name+"/"+oc.o.String(), func(t *testing.T) {
				m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q"})
				m.expectCandidates("q", 1+4, 7)
				m.expectLock(7, true)
				m.expectTake("q", 7, 3, true)
				ds := m.claim(t, 1)
				if len(ds) != 1 || ds[0].ID != 7 || ds[0].Attempt != 3 || ds[0].Queue != "q" || string(ds[0].Payload) != "p" {
					t.Fatalf("claimed %+v, want row 7 as read by the take", ds)
				}
				oc.settle(m, 7)
				m.expectUnlock(7).WillReturnRows(m.unlockAnswers(true))
				if err := m.form.Settle(context.Background(), ds[0], oc.o); err != nil {
					t.Fatal(err)
				}
				m.noWarnings(t)
			})
		}
	}
}

// TestAdvisoryMinimalTable pins the take of a table without an attempt column (a re-read, no
// write), Ack's DELETE, and RetryAfter without a retry_after column (no statement, a warning).
func TestAdvisoryMinimalTable(t *testing.T) {
	for _, d := range advisoryDialects() {
		t.Run(d.name, func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryMinimal, inbox.Queue{})
			m.expectCandidates("", 2+4, 7, 8)
			m.expectLock(7, true)
			m.expectTake("", 7, 0, true)
			m.expectLock(8, true)
			m.expectTake("", 8, 0, true)
			ds := m.claim(t, 2)
			if len(ds) != 2 || ds[0].Attempt != 0 {
				t.Fatalf("claimed %+v, want rows 7 and 8", ds)
			}
			m.mock.ExpectExec(m.sql.ack).WithArgs(int64(7)).WillReturnResult(sqlmock.NewResult(0, 1))
			m.expectUnlock(7).WillReturnRows(m.unlockAnswers(true))
			if err := m.form.Settle(context.Background(), ds[0], outcome.Ack()); err != nil {
				t.Fatal(err)
			}
			m.expectUnlock(8).WillReturnRows(m.unlockAnswers(true))
			if err := m.form.Settle(context.Background(), ds[1], outcome.RetryAfter(time.Minute)); err != nil {
				t.Fatal(err)
			}
			if w := m.warnings.String(); !strings.Contains(w, "RetryAfter column") {
				t.Fatalf("RetryAfter without the column: logs %q, want a warning", w)
			}
		})
	}
}

// TestAdvisoryPassesOver pins the rows a claim passes over: a key held elsewhere (no unlock:
// the lock was never taken), a row settled by its holder between the select and the lock
// (unlock after the take found nothing), and a second row of a key already tried.
func TestAdvisoryPassesOver(t *testing.T) {
	for _, d := range advisoryDialects() {
		t.Run(d.name, func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q"})
			m.mock.ExpectQuery(m.sql.candidates).WithArgs(sqlmock.AnyArg(), "q", 2+4).WillReturnRows(
				sqlmock.NewRows([]string{"id", "inbox_key"}).
					AddRow(5, "jobs-5").AddRow(6, "jobs-6").AddRow(7, "jobs-7").AddRow(70, "jobs-7").AddRow(8, "jobs-8"))
			m.expectLock(5, false)
			m.expectLock(6, true)
			m.expectTake("q", 6, 0, false)
			m.expectUnlock(6).WillReturnRows(m.unlockAnswers(true))
			m.expectLock(7, true)
			m.expectTake("q", 7, 1, true)
			m.expectLock(8, true)
			m.expectTake("q", 8, 1, true)
			ds := m.claim(t, 2)
			if len(ds) != 2 || ds[0].ID != 7 || ds[1].ID != 8 {
				t.Fatalf("claimed %+v, want rows 7 and 8", ds)
			}
			for _, id := range []int64{7, 8} {
				m.expectUnlock(id).WillReturnRows(m.unlockAnswers(true))
			}
			for _, dv := range ds {
				if err := m.form.Release(context.Background(), dv); err != nil {
					t.Fatal(err)
				}
			}
			m.noWarnings(t)
		})
	}
}

// TestAdvisoryTransactional pins transactional mode: the transaction begins on the locked
// connection after the take; Ack settles in it and commits before the unlock; another outcome
// rolls back, then settles on the connection.
func TestAdvisoryTransactional(t *testing.T) {
	for _, d := range advisoryDialects() {
		t.Run(d.name, func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q", Transactional: true})
			m.expectCandidates("q", 1+4, 7)
			m.expectLock(7, true)
			m.expectTake("q", 7, 1, true)
			m.mock.ExpectBegin()
			ack := m.claim(t, 1)[0]
			m.mock.ExpectExec("INSERT INTO audit VALUES (7)").WillReturnResult(sqlmock.NewResult(0, 1))
			if _, err := ack.Tx.ExecContext(context.Background(), "INSERT INTO audit VALUES (7)"); err != nil {
				t.Fatal(err)
			}
			m.mock.ExpectExec(m.sql.ack).WithArgs(sqlmock.AnyArg(), int64(7)).WillReturnResult(sqlmock.NewResult(0, 1))
			m.mock.ExpectCommit()
			m.expectUnlock(7).WillReturnRows(m.unlockAnswers(true))
			if err := m.form.Settle(context.Background(), ack, outcome.Ack()); err != nil {
				t.Fatal(err)
			}

			m.expectCandidates("q", 1+4, 8)
			m.expectLock(8, true)
			m.expectTake("q", 8, 1, true)
			m.mock.ExpectBegin()
			drop := m.claim(t, 1)[0]
			m.mock.ExpectRollback()
			m.mock.ExpectExec(m.sql.ack).WithArgs(sqlmock.AnyArg(), int64(8)).WillReturnResult(sqlmock.NewResult(0, 1))
			m.expectUnlock(8).WillReturnRows(m.unlockAnswers(true))
			if err := m.form.Settle(context.Background(), drop, outcome.Drop()); err != nil {
				t.Fatal(err)
			}
			m.noWarnings(t)
		})
	}
}

// TestAdvisoryTransactionEnds: in transactional mode a COMMIT or a ROLLBACK of the delivery's
// transaction that fails closes the delivery's connection, which ends the transaction and
// releases the lock with the session, instead of releasing the lock on it and returning it to
// the pool. The error says what became of the row.
func TestAdvisoryTransactionEnds(t *testing.T) {
	broken := errors.New("write: broken pipe")
	for _, d := range advisoryDialects() {
		claim := func(m *advisoryMock, id int64) *inbox.Delivery {
			m.expectCandidates("q", 1+4, id)
			m.expectLock(id, true)
			m.expectTake("q", id, 1, true)
			m.mock.ExpectBegin()
			return m.claim(t, 1)[0]
		}
		t.Run(d.name+"/commit", func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q", Transactional: true})
			dv := claim(m, 7)
			m.mock.ExpectExec(m.sql.ack).WithArgs(sqlmock.AnyArg(), int64(7)).WillReturnResult(sqlmock.NewResult(0, 1))
			m.mock.ExpectCommit().WillReturnError(broken)
			m.mock.ExpectClose()
			err := m.form.Settle(context.Background(), dv, outcome.Ack())
			if !errors.Is(err, broken) || !errors.Is(err, inbox.ErrCommitUnknown) || !strings.Contains(err.Error(), "either settled with the handler's writes or back in the queue") {
				t.Fatalf("Settle = %v; want the COMMIT's error, its outcome unknown, saying where the row stands", err)
			}
			if err := m.mock.ExpectationsWereMet(); err != nil {
				t.Fatalf("the connection of the failed COMMIT was not closed: %v", err)
			}
		})
		t.Run(d.name+"/rollback", func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q", Transactional: true})
			dv := claim(m, 8)
			m.mock.ExpectRollback().WillReturnError(broken)
			m.mock.ExpectClose()
			err := m.form.Settle(context.Background(), dv, outcome.Drop())
			if err == nil || !strings.Contains(err.Error(), "back in the queue") {
				t.Fatalf("Settle = %v; want an error saying the row is back in the queue, unsettled", err)
			}
			if err := m.mock.ExpectationsWereMet(); err != nil {
				t.Fatalf("the connection of the failed ROLLBACK was not closed: %v", err)
			}
			if !strings.Contains(m.warnings.String(), "closed its connection") {
				t.Fatalf("logs %q: want a warning that the connection was closed", m.warnings.String())
			}
		})
	}
}

// TestAdvisoryUnconfirmedUnlockClosesConnection: an unlock the server answers with false (0, or
// NULL) or with an error closes the connection rather than returning it to the pool with a lock
// that may still stand.
func TestAdvisoryUnconfirmedUnlockClosesConnection(t *testing.T) {
	answers := map[string]func(m *advisoryMock, e *sqlmock.ExpectedQuery){
		"false": func(m *advisoryMock, e *sqlmock.ExpectedQuery) { e.WillReturnRows(m.unlockAnswers(false)) },
		"null": func(m *advisoryMock, e *sqlmock.ExpectedQuery) {
			e.WillReturnRows(sqlmock.NewRows([]string{"released"}).AddRow(nil))
		},
		"error": func(m *advisoryMock, e *sqlmock.ExpectedQuery) { e.WillReturnError(errors.New("connection reset")) },
	}
	for _, d := range advisoryDialects() {
		for name, answer := range answers {
			t.Run(d.name+"/"+name, func(t *testing.T) {
				m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q"})
				m.expectCandidates("q", 1+4, 7)
				m.expectLock(7, true)
				m.expectTake("q", 7, 1, true)
				dv := m.claim(t, 1)[0]
				m.mock.ExpectExec(m.sql.ack).WithArgs(sqlmock.AnyArg(), int64(7)).WillReturnResult(sqlmock.NewResult(0, 1))
				answer(m, m.expectUnlock(7))
				m.mock.ExpectClose()
				if err := m.form.Settle(context.Background(), dv, outcome.Ack()); err != nil {
					t.Fatalf("the settlement was applied, so Settle should succeed: %v", err)
				}
				if err := m.mock.ExpectationsWereMet(); err != nil {
					t.Fatal(err)
				}
				if !strings.Contains(m.warnings.String(), "closed the connection") {
					t.Fatalf("logs %q: want a warning that the connection was closed", m.warnings.String())
				}
			})
		}
	}
}

// TestAdvisoryCloseReleasesHolds: Close unlocks every delivery still in work, and a settlement
// after it fails with ErrClosed, running nothing.
func TestAdvisoryCloseReleasesHolds(t *testing.T) {
	for _, d := range advisoryDialects() {
		t.Run(d.name, func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q"})
			m.expectCandidates("q", 1+4, 7)
			m.expectLock(7, true)
			m.expectTake("q", 7, 1, true)
			dv := m.claim(t, 1)[0]
			m.expectUnlock(7).WillReturnRows(m.unlockAnswers(true))
			if err := m.form.Close(); err != nil {
				t.Fatal(err)
			}
			if err := m.form.Settle(context.Background(), dv, outcome.Ack()); !errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("Settle after Close: %v, want ErrClosed", err)
			}
			if _, err := m.form.Claim(context.Background(), 1); !errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("Claim after Close: %v, want ErrClosed", err)
			}
			m.noWarnings(t)
		})
	}
}

// TestAdvisoryOpenSchemaError: a key over a column the table lacks fails Open with ErrSchema
// naming the template.
func TestAdvisoryOpenSchemaError(t *testing.T) {
	db, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f := advisory.New(dialect.MySQL[isolation.Default]{}, advisoryFull, &advisory.Config{Key: "jobs-{account}"})
	mock.ExpectQuery("SELECT VERSION()").WillReturnRows(sqlmock.NewRows([]string{"v"}).AddRow("8.0.36"))
	expectNotGalera(mock, "mysql")
	expectColumns(mock, "mysql", advisoryFull, "")
	for range 2 { // a refused statement is refused again: it is the schema, not the connection
		mock.ExpectPrepare("SELECT CONCAT('jobs-', COALESCE(CAST(`account` AS CHAR), '')) FROM `jobs` WHERE 1 = 0").
			WillReturnError(errors.New("Error 1054 (42S22): Unknown column 'account' in 'field list'"))
	}
	_, err = f.Open(context.Background(), db, inbox.Queue{})
	if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), `"jobs-{account}"`) {
		t.Fatalf("Open: %v, want ErrSchema naming the template", err)
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}

// TestAdvisoryOpenRefusesBadTemplate: a key template the form cannot render fails Open before
// any round trip to the server (the mock expects nothing, and no connection is opened), naming
// the table and the template and saying what to change; a column name the database would not
// keep wraps ErrSchema. The form is left closed: a second Open fails the same way.
func TestAdvisoryOpenRefusesBadTemplate(t *testing.T) {
	long := strings.Repeat("x", 70)
	for _, d := range []advisory.Dialect{dialect.Postgres[isolation.Default]{}, dialect.MySQL[isolation.Default]{}, dialect.MariaDB[isolation.Default]{}} {
		for _, c := range []struct {
			key, says string
			schema    bool
		}{
			{key: "jobs-{id", says: "is not closed by '}': write columns as {column}"},
			{key: "jobs-id}", says: "closes no '{': write columns as {column}"},
			{key: "jobs-{}", says: "empty braces at byte 5: name a column inside them"},
			{key: "it's-{id}", says: "leave them out of the key"},
			{key: "jobs-{" + long + "}", says: `column "` + long + `"`, schema: true},
		} {
			t.Run(d.Name()+"/"+c.key, func(t *testing.T) {
				m := newRecorder(t, 0)
				f := advisory.New(d, advisoryFull, &advisory.Config{Key: c.key})
				for range 2 {
					_, err := f.Open(context.Background(), m.db, inbox.Queue{Name: "q"})
					if err == nil || errors.Is(err, inbox.ErrSchema) != c.schema {
						t.Fatalf("Open: %v, want the template refused (ErrSchema: %v)", err, c.schema)
					}
					for _, want := range []string{`table "jobs": advisory key template ` + fmt.Sprintf("%q", c.key), c.says} {
						if strings.Count(err.Error(), want) != 1 {
							t.Errorf("Open: %v\nwant it to say %q once", err, want)
						}
					}
				}
				if n := m.db.Stats().OpenConnections; n != 0 {
					t.Errorf("Open refused the template after opening %d connections, want none", n)
				}
			})
		}
	}
}

// advisoryTimeNear matches a bound timestamp within a second of want.
type advisoryTimeNear time.Time

func (a advisoryTimeNear) Match(v driver.Value) bool {
	got, ok := v.(time.Time)
	d := got.Sub(time.Time(a))
	return ok && d > -time.Second && d < time.Second
}

// TestAdvisoryOpenRefusesRuntimeSQLite: a SQLite dialect chosen at run time compiles with the
// advisory form and is refused at Open, before any statement, with ErrDialect.
func TestAdvisoryOpenRefusesRuntimeSQLite(t *testing.T) {
	db, mock, err := sqlmock.New(sqlmock.QueryMatcherOption(sqlmock.QueryMatcherEqual))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d, err := dialect.Parse("sqlite", "immediate")
	if err != nil {
		t.Fatal(err)
	}
	f := advisory.New(d, advisoryFull, &advisory.Config{Key: "jobs-{id}"})
	if _, err := f.Open(context.Background(), db, inbox.Queue{}); !errors.Is(err, inbox.ErrDialect) || !strings.Contains(err.Error(), "advisory") {
		t.Fatalf("Open: %v, want ErrDialect naming the advisory form", err)
	}
	if err := mock.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}

// TestAdvisoryTransactionEnded: once the database has ended the handler's transaction (a
// deadlock), its later statements are refused without reaching the server, and an Ack runs no
// settlement (it would run in autocommit on the locked connection): Settle fails with
// ErrTransactionEnded, rolls back and unlocks, so the row is claimable again at once.
func TestAdvisoryTransactionEnded(t *testing.T) {
	deadlock := errors.New("Error 1213 (40001): Deadlock found when trying to get lock; try restarting transaction")
	for _, d := range advisoryDialects() {
		if d.name == "postgres" {
			continue
		}
		t.Run(d.name, func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q", Transactional: true})
			m.expectCandidates("q", 1+4, 7)
			m.expectLock(7, true)
			m.expectTake("q", 7, 1, true)
			m.mock.ExpectBegin()
			dv := m.claim(t, 1)[0]
			m.mock.ExpectExec("UPDATE accounts SET balance = 0").WillReturnError(deadlock)
			if d.name == "mariadb" {
				m.mock.ExpectQuery("SELECT @@in_transaction").WillReturnRows(sqlmock.NewRows([]string{"@@in_transaction"}).AddRow(0))
			}
			m.mock.ExpectRollback()
			m.expectUnlock(7).WillReturnRows(m.unlockAnswers(true))
			ctx := context.Background()
			if _, err := dv.Tx.ExecContext(ctx, "UPDATE accounts SET balance = 0"); !errors.Is(err, deadlock) {
				t.Fatalf("the failing statement: %v, want the deadlock", err)
			}
			if _, err := dv.Tx.ExecContext(ctx, "INSERT INTO audit VALUES (7)"); !errors.Is(err, inbox.ErrTransactionEnded) {
				t.Errorf("the statement after the deadlock: %v, want ErrTransactionEnded", err)
			}
			if err := m.form.Settle(ctx, dv, outcome.Ack()); !errors.Is(err, inbox.ErrTransactionEnded) {
				t.Errorf("Settle = %v, want ErrTransactionEnded", err)
			}
			m.noWarnings(t)
		})
	}
}
