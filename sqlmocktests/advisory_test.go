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
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/outcome"
)

// advisoryCases are the databases with session locks.
var advisoryCases = []dbCase{onPostgres, onMySQL, onMariaDB}

// key is row id's advisory key in the fixture's queue.
func (fx *fixture) key(id int64) string { return fx.sh.advisoryKey(fx.q.Name, id) }

// advisoryDueArgs are the arguments a candidate select or a take binds after its own where the
// table has a retry_after column (any time) and a queue column (the queue).
func (fx *fixture) advisoryDueArgs() []driver.Value {
	var args []driver.Value
	if fx.sh.table.RetryAfter != "" {
		args = append(args, sqlmock.AnyArg())
	}
	if fx.sh.table.Queue != "" {
		args = append(args, fx.q.Name)
	}
	return args
}

// expectCandidates expects the candidate select asking for limit rows, answering ids with
// their keys.
func (fx *fixture) expectCandidates(limit int, ids ...int64) {
	rows := sqlmock.NewRows([]string{"id", "inbox_key"})
	for _, id := range ids {
		rows.AddRow(id, fx.key(id))
	}
	fx.mock.ExpectQuery(fx.sql("candidates")).WithArgs(append(fx.advisoryDueArgs(), limit)...).WillReturnRows(rows)
}

func (fx *fixture) expectLock(id int64, ok bool) {
	fx.mock.ExpectQuery(fx.sql("lock")).WithArgs(fx.key(id)).WillReturnRows(sqlmock.NewRows([]string{"locked"}).AddRow(fx.c.lockAnswer(ok)))
}

func (fx *fixture) expectUnlock(id int64) *sqlmock.ExpectedQuery {
	return fx.mock.ExpectQuery(fx.sql("unlock")).WithArgs(fx.key(id))
}

// unlocked is the server's answer to an unlock: released, or not.
func (fx *fixture) unlocked(ok bool) *sqlmock.Rows {
	return sqlmock.NewRows([]string{"released"}).AddRow(fx.c.lockAnswer(ok))
}

// expectTake expects the take of row id at attempt; found says whether the row is still
// claimable. Where the table counts attempts on MySQL and MariaDB the take is an UPDATE, and a
// read of the row follows; elsewhere it is one statement that returns the row.
func (fx *fixture) expectTake(id int64, attempt int, found bool) {
	args := append([]driver.Value{id, fx.key(id)}, fx.advisoryDueArgs()...)
	var rows []row
	if found {
		rows = []row{{id: id, attempt: int64(attempt), payload: []byte("p")}}
	}
	if !fx.st.has("read") {
		fx.mock.ExpectQuery(fx.sql("take")).WithArgs(args...).WillReturnRows(fx.sh.claimed(fx.q.Name, rows...))
		return
	}
	fx.mock.ExpectExec(fx.sql("take")).WithArgs(args...).WillReturnResult(changed(int64(len(rows))))
	if found {
		fx.mock.ExpectQuery(fx.sql("read")).WithArgs(id).WillReturnRows(fx.sh.claimed(fx.q.Name, rows...))
	}
}

// expectLockFirst expects the read that locks the first due row whose key is free (Postgres),
// answering row id, or no row when id is 0.
func (fx *fixture) expectLockFirst(id int64) {
	rows := sqlmock.NewRows([]string{"id", "inbox_key"})
	if id != 0 {
		rows.AddRow(id, fx.key(id))
	}
	fx.mock.ExpectQuery(fx.sql("lockFirst")).WithArgs(fx.advisoryDueArgs()...).WillReturnRows(rows)
}

// expectAdvisoryClaim expects a Claim of up to max rows that finds rows ids, each locked and
// taken at attempt: where a read takes the lock (Postgres), each row's locking read and take,
// then, short of max, a locking read that finds nothing; elsewhere as a batch's claim.
func (fx *fixture) expectAdvisoryClaim(max, attempt int, ids ...int64) {
	if !fx.st.has("lockFirst") {
		fx.expectAdvisoryBatchClaim(max, attempt, ids...)
		return
	}
	for _, id := range ids {
		fx.expectLockFirst(id)
		fx.expectTake(id, attempt, true)
	}
	if len(ids) < max {
		fx.expectLockFirst(0)
	}
}

// expectAdvisoryBatchClaim expects a claim of up to max rows over one list of candidates that
// finds rows ids, each locked and taken at attempt: the candidate select of max+4 rows, then each
// row's lock and take (ClaimBatch; Claim where no read takes a lock).
func (fx *fixture) expectAdvisoryBatchClaim(max, attempt int, ids ...int64) {
	fx.expectCandidates(max+4, ids...)
	for _, id := range ids {
		fx.expectLock(id, true)
		fx.expectTake(id, attempt, true)
	}
}

// TestAdvisorySequence pins each outcome's statements: candidates, lock, take, settlement,
// unlock.
func TestAdvisorySequence(t *testing.T) {
	outcomes := []struct {
		o      outcome.Outcome
		settle func(fx *fixture, id int64)
	}{
		{outcome.Ack(), func(fx *fixture, id int64) {
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(sqlmock.AnyArg(), id).WillReturnResult(changed(1))
		}},
		{outcome.Drop(), func(fx *fixture, id int64) {
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(sqlmock.AnyArg(), id).WillReturnResult(changed(1))
		}},
		{outcome.Retry(), func(*fixture, int64) {}},
		{outcome.RetryAfter(time.Minute), func(fx *fixture, id int64) {
			fx.mock.ExpectExec(fx.sql("retryAfter")).WithArgs(fx.c.near(time.Now().Add(time.Minute)), nil, id).WillReturnResult(changed(1))
		}},
	}
	for _, c := range advisoryCases {
		for _, oc := range outcomes {
			t.Run(c.name+"/"+oc.o.String(), func(t *testing.T) {
				fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q"})
				fx.expectAdvisoryClaim(1, 3, 7)
				ds := claimed(t, f.Claim, 1)
				if len(ds) != 1 || ds[0].ID != 7 || ds[0].Attempt != 3 || ds[0].Queue != "q" || string(ds[0].Payload) != "p" {
					t.Fatalf("claimed %+v, want row 7 as read by the take", ds)
				}
				oc.settle(fx, 7)
				fx.expectUnlock(7).WillReturnRows(fx.unlocked(true))
				settle(t, f, ds[0], oc.o)
				fx.noWarnings(t)
			})
		}
	}
}

// TestAdvisoryMinimalTable pins the take of a table without an attempt column (a re-read, no
// write), Ack's DELETE, and RetryAfter without a retry_after column (no statement, a warning).
func TestAdvisoryMinimalTable(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, minimalShape, inbox.Binding{})
			fx.expectAdvisoryClaim(2, 0, 7, 8)
			ds := claimed(t, f.Claim, 2)
			if len(ds) != 2 || ds[0].Attempt != 0 {
				t.Fatalf("claimed %+v, want rows 7 and 8", ds)
			}
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(int64(7)).WillReturnResult(changed(1))
			fx.expectUnlock(7).WillReturnRows(fx.unlocked(true))
			settle(t, f, ds[0], outcome.Ack())
			fx.expectUnlock(8).WillReturnRows(fx.unlocked(true))
			settle(t, f, ds[1], outcome.RetryAfter(time.Minute))
			if !fx.warned("RetryAfter column") {
				t.Fatalf("RetryAfter without the column: logs %q, want a warning", fx.logs.String())
			}
		})
	}
}

// TestAdvisoryPassesOver pins the rows a claim passes over: a key held elsewhere (no unlock:
// the lock was never taken), a row settled by its holder between the select and the lock
// (unlock after the take found nothing), and a second row of a key already tried. Where a read
// takes the lock (Postgres) the server passes over held keys inside it; a row settled since the
// read is unlocked and the read runs again.
func TestAdvisoryPassesOver(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q"})
			if fx.st.has("lockFirst") {
				fx.expectLockFirst(6)
				fx.expectTake(6, 0, false)
				fx.expectUnlock(6).WillReturnRows(fx.unlocked(true))
				for _, id := range []int64{7, 8} {
					fx.expectLockFirst(id)
					fx.expectTake(id, 1, true)
				}
			} else {
				fx.mock.ExpectQuery(fx.sql("candidates")).WithArgs(sqlmock.AnyArg(), "q", 2+4).WillReturnRows(
					sqlmock.NewRows([]string{"id", "inbox_key"}).
						AddRow(5, fx.key(5)).AddRow(6, fx.key(6)).AddRow(7, fx.key(7)).AddRow(70, fx.key(7)).AddRow(8, fx.key(8)))
				fx.expectLock(5, false)
				fx.expectLock(6, true)
				fx.expectTake(6, 0, false)
				fx.expectUnlock(6).WillReturnRows(fx.unlocked(true))
				for _, id := range []int64{7, 8} {
					fx.expectLock(id, true)
					fx.expectTake(id, 1, true)
				}
			}
			ds := claimed(t, f.Claim, 2)
			if len(ds) != 2 || ds[0].ID != 7 || ds[1].ID != 8 {
				t.Fatalf("claimed %+v, want rows 7 and 8", ds)
			}
			for _, id := range []int64{7, 8} {
				fx.expectUnlock(id).WillReturnRows(fx.unlocked(true))
			}
			for _, dv := range ds {
				if err := f.Release(context.Background(), dv); err != nil {
					t.Fatal(err)
				}
			}
			fx.noWarnings(t)
		})
	}
}

// TestAdvisoryTransactional pins transactional mode: the transaction begins on the locked
// connection after the take; Ack settles in it and commits before the unlock; another outcome
// rolls back, then settles on the connection.
func TestAdvisoryTransactional(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q", Transactional: true})
			fx.expectAdvisoryClaim(1, 1, 7)
			fx.mock.ExpectBegin()
			ack := claimed(t, f.Claim, 1)[0]
			fx.mock.ExpectExec("INSERT INTO audit VALUES (7)").WillReturnResult(changed(1))
			if _, err := ack.Tx.ExecContext(context.Background(), "INSERT INTO audit VALUES (7)"); err != nil {
				t.Fatal(err)
			}
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(sqlmock.AnyArg(), int64(7)).WillReturnResult(changed(1))
			fx.mock.ExpectCommit()
			fx.expectUnlock(7).WillReturnRows(fx.unlocked(true))
			settle(t, f, ack, outcome.Ack())

			fx.expectAdvisoryClaim(1, 1, 8)
			fx.mock.ExpectBegin()
			drop := claimed(t, f.Claim, 1)[0]
			fx.mock.ExpectRollback()
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(sqlmock.AnyArg(), int64(8)).WillReturnResult(changed(1))
			fx.expectUnlock(8).WillReturnRows(fx.unlocked(true))
			settle(t, f, drop, outcome.Drop())
			fx.noWarnings(t)
		})
	}
}

// TestAdvisoryTransactionEnds: in transactional mode a COMMIT or a ROLLBACK of the delivery's
// transaction that fails closes the delivery's connection, which ends the transaction and
// releases the lock with the session, instead of releasing the lock on it and returning it to
// the pool. The error says what became of the row.
func TestAdvisoryTransactionEnds(t *testing.T) {
	broken := errors.New("write: broken pipe")
	for _, c := range advisoryCases {
		t.Run(c.name+"/commit", func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q", Transactional: true})
			fx.expectAdvisoryClaim(1, 1, 7)
			fx.mock.ExpectBegin()
			dv := claimed(t, f.Claim, 1)[0]
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(sqlmock.AnyArg(), int64(7)).WillReturnResult(changed(1))
			fx.mock.ExpectCommit().WillReturnError(broken)
			fx.mock.ExpectClose()
			err := f.Settle(context.Background(), dv, outcome.Ack())
			if !errors.Is(err, broken) || !errors.Is(err, inbox.ErrCommitUnknown) || !strings.Contains(err.Error(), "either settled with the handler's writes or back in the queue") {
				t.Fatalf("Settle = %v; want the COMMIT's error, its outcome unknown, saying where the row stands", err)
			}
			fx.checkDiscarded(t, "the failed COMMIT")
		})
		t.Run(c.name+"/rollback", func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q", Transactional: true})
			fx.expectAdvisoryClaim(1, 1, 8)
			fx.mock.ExpectBegin()
			dv := claimed(t, f.Claim, 1)[0]
			fx.mock.ExpectRollback().WillReturnError(broken)
			fx.mock.ExpectClose()
			err := f.Settle(context.Background(), dv, outcome.Drop())
			if err == nil || !strings.Contains(err.Error(), "back in the queue") {
				t.Fatalf("Settle = %v; want an error saying the row is back in the queue, unsettled", err)
			}
			fx.checkDiscarded(t, "the failed ROLLBACK", "closed its connection")
		})
	}
}

// TestAdvisoryUnconfirmedUnlockClosesConnection: an unlock the server answers with false (0, or
// NULL) or with an error closes the connection rather than returning it to the pool with a lock
// that may still stand.
func TestAdvisoryUnconfirmedUnlockClosesConnection(t *testing.T) {
	answers := map[string]func(fx *fixture, e *sqlmock.ExpectedQuery){
		"false": func(fx *fixture, e *sqlmock.ExpectedQuery) { e.WillReturnRows(fx.unlocked(false)) },
		"null": func(_ *fixture, e *sqlmock.ExpectedQuery) {
			e.WillReturnRows(sqlmock.NewRows([]string{"released"}).AddRow(nil))
		},
		"error": func(_ *fixture, e *sqlmock.ExpectedQuery) { e.WillReturnError(errors.New("connection reset")) },
	}
	for _, c := range advisoryCases {
		for name, answer := range answers {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q"})
				fx.expectAdvisoryClaim(1, 1, 7)
				dv := claimed(t, f.Claim, 1)[0]
				fx.mock.ExpectExec(fx.sql("ack")).WithArgs(sqlmock.AnyArg(), int64(7)).WillReturnResult(changed(1))
				answer(fx, fx.expectUnlock(7))
				fx.mock.ExpectClose()
				if err := f.Settle(context.Background(), dv, outcome.Ack()); err != nil {
					t.Fatalf("the settlement was applied, so Settle should succeed: %v", err)
				}
				fx.checkDiscarded(t, "the unconfirmed unlock", "closed the connection")
			})
		}
	}
}

// TestAdvisoryCloseReleasesHolds: Close unlocks every delivery still in work, and a settlement,
// a release or a claim after it fails with ErrClosed, running nothing.
func TestAdvisoryCloseReleasesHolds(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q"})
			fx.expectAdvisoryClaim(1, 1, 7)
			dv := claimed(t, f.Claim, 1)[0]
			fx.expectUnlock(7).WillReturnRows(fx.unlocked(true))
			checkClosed(t, f, dv)
			fx.noWarnings(t)
		})
	}
}

// TestAdvisoryOpenSchemaError: a key over a column the table lacks fails Open with ErrSchema
// naming the template. No golden file keys on a missing column: the key check's text is
// written out here.
func TestAdvisoryOpenSchemaError(t *testing.T) {
	m := newRecorder(t, 0)
	f := onMySQL.advisoryForm(fullShape.table, "jobs-{account}")
	expectVersion(m, "mysql", "")
	expectNotGalera(m, "mysql")
	expectColumns(m, "mysql", fullShape.table, "")
	for range 2 { // a refused statement is refused again: it is the schema, not the connection
		m.mock.ExpectPrepare("SELECT CONCAT('jobs-', COALESCE(CAST(`account` AS CHAR), '')) FROM `jobs` WHERE 1 = 0").
			WillReturnError(errors.New("Error 1054 (42S22): Unknown column 'account' in 'field list'"))
	}
	if _, err := f.Open(context.Background(), m.db, inbox.Binding{}); !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), `"jobs-{account}"`) {
		t.Fatalf("Open: %v, want ErrSchema naming the template", err)
	}
}

// TestAdvisoryOpenRefusesBadTemplate: a key template the form cannot render fails Open before
// any round trip to the server (the mock expects nothing, and no connection is opened) with
// ErrSchema, naming the table and the template and saying what to change. The form is left
// closed: a second Open fails the same way.
func TestAdvisoryOpenRefusesBadTemplate(t *testing.T) {
	long := strings.Repeat("x", 70)
	for _, c := range advisoryCases {
		for _, tc := range []struct{ key, says string }{
			{key: "jobs-{id", says: "is not closed by '}': write columns as {column}"},
			{key: "jobs-id}", says: "closes no '{': write columns as {column}"},
			{key: "jobs-{}", says: "empty braces at byte 5: name a column inside them"},
			{key: "it's-{id}", says: "leave them out of the key"},
			{key: "jobs-{" + long + "}", says: `column "` + long + `"`},
		} {
			t.Run(c.name+"/"+tc.key, func(t *testing.T) {
				m := newRecorder(t, 0)
				f := c.advisoryForm(fullShape.table, tc.key)
				for range 2 {
					_, err := f.Open(context.Background(), m.db, inbox.Binding{Name: "q"})
					if !errors.Is(err, inbox.ErrSchema) {
						t.Fatalf("Open: %v, want the template refused with ErrSchema", err)
					}
					for _, want := range []string{`table "jobs": advisory key template ` + fmt.Sprintf("%q", tc.key), tc.says} {
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

// TestAdvisoryOpenRefusesRuntimeSQLite: a SQLite dialect chosen at run time compiles with the
// advisory form and is refused at Open, before any statement, with ErrDialect.
func TestAdvisoryOpenRefusesRuntimeSQLite(t *testing.T) {
	m := newRecorder(t, 0)
	d, err := dialect.Parse("sqlite", "immediate")
	if err != nil {
		t.Fatal(err)
	}
	f := advisory.New(d, fullShape.table, &advisory.Config{Key: fullShape.key})
	if _, err := f.Open(context.Background(), m.db, inbox.Binding{}); !errors.Is(err, inbox.ErrDialect) || !strings.Contains(err.Error(), "advisory") {
		t.Fatalf("Open: %v, want ErrDialect naming the advisory form", err)
	}
}

// TestAdvisoryTransactionEnded: once the database has ended the handler's transaction (a
// deadlock), its later statements are refused without reaching the server, and an Ack runs no
// settlement (it would run in autocommit on the locked connection): Settle fails with
// ErrTransactionEnded, rolls back and unlocks, so the row is claimable again at once.
func TestAdvisoryTransactionEnded(t *testing.T) {
	for _, c := range onMySQLFamily(advisoryCases) {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q", Transactional: true})
			fx.expectAdvisoryClaim(1, 1, 7)
			fx.mock.ExpectBegin()
			dv := claimed(t, f.Claim, 1)[0]
			fx.expectDeadlock()
			fx.mock.ExpectRollback()
			fx.expectUnlock(7).WillReturnRows(fx.unlocked(true))
			checkTransactionEnded(t, dv.Tx, func() error { return f.Settle(context.Background(), dv, outcome.Ack()) })
			fx.noWarnings(t)
		})
	}
}

// TestAdvisoryAckConflictRunsAgain: an ack outside a handler's transaction that meets a transient
// conflict (on MySQL and MariaDB a deadlock with publishes of the row's unique key) runs again
// while the lock still holds the row: the row settles once, and the handler is not run again.
func TestAdvisoryAckConflictRunsAgain(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q"})
			fx.expectAdvisoryClaim(1, 3, 7)
			ds := claimed(t, f.Claim, 1)
			conflict := errDeadlock
			if c.db == "postgres" {
				conflict = sqlState{"40P01"}
			}
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(sqlmock.AnyArg(), int64(7)).WillReturnError(conflict)
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(sqlmock.AnyArg(), int64(7)).WillReturnResult(changed(1))
			fx.expectUnlock(7).WillReturnRows(fx.unlocked(true))
			settle(t, f, ds[0], outcome.Ack())
			fx.noWarnings(t)
		})
	}
}

// TestAdvisoryReadsAgainAfterARefusedLock pins what a claim over a list of candidates (MySQL,
// MariaDB) does when a lock the select found free was taken since by a claim beside it: it
// reads the candidates again, so that a claim comes back empty only where no key was free; a
// second read whose every lock is taken is its last but candidateSlack.
func TestAdvisoryReadsAgainAfterARefusedLock(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q"})
			if fx.st.has("lockFirst") {
				t.Skip("the read takes the lock: no list of candidates")
			}
			fx.expectCandidates(1+4, 5)
			fx.expectLock(5, false)
			fx.expectCandidates(1+4, 6)
			fx.expectLock(6, true)
			fx.expectTake(6, 1, true)
			ds := claimed(t, f.Claim, 1)
			if len(ds) != 1 || ds[0].ID != 6 {
				t.Fatalf("claimed %+v, want row 6 from the second read", ds)
			}
			fx.expectUnlock(6).WillReturnRows(fx.unlocked(true))
			if err := f.Release(context.Background(), ds[0]); err != nil {
				t.Fatal(err)
			}
			// Every read's lock refused: 1 + candidateSlack reads, then nothing.
			for range 1 + 4 {
				fx.expectCandidates(1+4, 5)
				fx.expectLock(5, false)
			}
			if ds := claimed(t, f.Claim, 1); len(ds) != 0 {
				t.Fatalf("claimed %+v, want nothing", ds)
			}
			fx.noWarnings(t)
		})
	}
}
