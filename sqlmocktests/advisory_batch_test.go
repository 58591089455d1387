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
	"github.com/sqlinbox/inbox/outcome"
)

// advisoryBatchSQL is the exact text of the batch statements on the full table, whose length
// depends on how many rows or keys they cover.
type advisoryBatchSQL struct {
	ackIn, retryAfterIn, unlockMany func(n int) string
}

func advisoryBatchStatements(name string) advisoryBatchSQL {
	if name == "postgres" {
		params := func(from, n int) string {
			ps := make([]string, n)
			for i := range ps {
				ps[i] = fmt.Sprintf("$%d", from+i)
			}
			return strings.Join(ps, ", ")
		}
		return advisoryBatchSQL{
			ackIn:        func(n int) string { return `UPDATE "jobs" SET "done_at" = $1 WHERE "id" IN (` + params(2, n) + `)` },
			retryAfterIn: func(n int) string { return `UPDATE "jobs" SET "retry_after" = $1 WHERE "id" IN (` + params(2, n) + `)` },
			unlockMany: func(n int) string {
				rows := make([]string, n)
				for i := range rows {
					rows[i] = fmt.Sprintf("(CAST($%d AS TEXT))", i+1)
				}
				return "SELECT COUNT(*) FROM (VALUES " + strings.Join(rows, ", ") + ") AS k(v) WHERE pg_advisory_unlock(hashtextextended(k.v, 0))"
			},
		}
	}
	in := func(n int) string { return "(?" + strings.Repeat(", ?", n-1) + ")" }
	return advisoryBatchSQL{
		ackIn:        func(n int) string { return "UPDATE `jobs` SET `done_at` = ? WHERE `id` IN " + in(n) },
		retryAfterIn: func(n int) string { return "UPDATE `jobs` SET `retry_after` = ? WHERE `id` IN " + in(n) },
		unlockMany: func(n int) string {
			return "SELECT COUNT(*) FROM (SELECT CONCAT(DATABASE(), '.', ?) AS n" + strings.Repeat(" UNION ALL SELECT CONCAT(DATABASE(), '.', ?) AS n", n-1) +
				") AS k WHERE RELEASE_LOCK(IF(CHAR_LENGTH(n) > 64, SHA1(n), n)) = 1"
		},
	}
}

// TestAdvisoryBatchStatementText pins the batch statements' text for a few sizes, so that the
// sequences below test the form against statements written out by hand.
func TestAdvisoryBatchStatementText(t *testing.T) {
	pg, my := advisoryBatchStatements("postgres"), advisoryBatchStatements("mysql")
	for got, want := range map[string]string{
		pg.ackIn(2):      `UPDATE "jobs" SET "done_at" = $1 WHERE "id" IN ($2, $3)`,
		pg.unlockMany(2): `SELECT COUNT(*) FROM (VALUES (CAST($1 AS TEXT)), (CAST($2 AS TEXT))) AS k(v) WHERE pg_advisory_unlock(hashtextextended(k.v, 0))`,
		my.ackIn(2):      "UPDATE `jobs` SET `done_at` = ? WHERE `id` IN (?, ?)",
		my.unlockMany(2): "SELECT COUNT(*) FROM (SELECT CONCAT(DATABASE(), '.', ?) AS n UNION ALL SELECT CONCAT(DATABASE(), '.', ?) AS n) AS k WHERE RELEASE_LOCK(IF(CHAR_LENGTH(n) > 64, SHA1(n), n)) = 1",
	} {
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}

func (m *advisoryMock) batchForm(t *testing.T) inbox.BatchForm {
	t.Helper()
	bf, ok := m.form.(inbox.BatchForm)
	if !ok {
		t.Fatalf("%T does not implement inbox.BatchForm", m.form)
	}
	return bf
}

func (m *advisoryMock) claimBatch(t *testing.T, max int) []*inbox.Delivery {
	t.Helper()
	ds, err := m.batchForm(t).ClaimBatch(context.Background(), max)
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

// expectUnlockMany expects the one statement that releases the keys of rows ids, answering
// that released of them were released.
func (m *advisoryMock) expectUnlockMany(released int, ids ...int64) {
	args := make([]driver.Value, len(ids))
	for i, id := range ids {
		args[i] = fmt.Sprintf("jobs-%d", id)
	}
	m.mock.ExpectQuery(advisoryBatchStatements(m.d.name).unlockMany(len(ids))).WithArgs(args...).
		WillReturnRows(sqlmock.NewRows([]string{"count"}).AddRow(int64(released)))
}

// TestAdvisoryBatchSequence pins a batch claim (one candidate select, then lock and take of each
// candidate on the one pinned connection, passing over a key held elsewhere, a row settled
// meanwhile and a second row of a key already tried) and a mixed settlement: one statement for
// the Ack and the Drop, one per RetryAfter delay, none for the Retry, then one release of every
// key.
func TestAdvisoryBatchSequence(t *testing.T) {
	for _, d := range advisoryDialects() {
		t.Run(d.name, func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q"})
			b := advisoryBatchStatements(d.name)
			m.mock.ExpectQuery(m.sql.candidates).WithArgs(sqlmock.AnyArg(), "q", 6+4).WillReturnRows(
				sqlmock.NewRows([]string{"id", "inbox_key"}).
					AddRow(5, "jobs-5").AddRow(6, "jobs-6").AddRow(7, "jobs-7").AddRow(70, "jobs-7").
					AddRow(8, "jobs-8").AddRow(9, "jobs-9").AddRow(10, "jobs-10").AddRow(11, "jobs-11").AddRow(12, "jobs-12").
					AddRow(13, "jobs-13"))
			m.expectLock(5, false)
			m.expectLock(6, true)
			m.expectTake("q", 6, 0, false)
			m.expectUnlock(6).WillReturnRows(m.unlockAnswers(true))
			for _, id := range []int64{7, 8, 9, 10, 11, 12} {
				m.expectLock(id, true)
				m.expectTake("q", id, 2, true)
			}
			ds := m.claimBatch(t, 6)
			if got := fmt.Sprint(advisoryBatchIDs(ds)); got != "[7 8 9 10 11 12]" {
				t.Fatalf("claimed %s, want rows 7 to 12 (row 13 is beyond the batch)", got)
			}
			first, _ := inbox.HoldOf[any](ds[0])
			for _, dv := range ds {
				if h, _ := inbox.HoldOf[any](dv); h != first || dv.Attempt != 2 || dv.Tx != nil {
					t.Fatalf("delivery %+v: want one hold for the batch, the take's attempt, no transaction", dv)
				}
			}

			bf := m.batchForm(t)
			if err := bf.Extend(context.Background(), ds[3]); err != nil {
				t.Fatalf("Extend on a delivery of the batch: %v", err)
			}
			if err := bf.Settle(context.Background(), ds[0], outcome.Ack()); err == nil || !strings.Contains(err.Error(), "SettleBatch") {
				t.Fatalf("Settle on a delivery of a batch: %v, want an error pointing to SettleBatch", err)
			}
			if err := bf.Release(context.Background(), ds[0]); err == nil || !strings.Contains(err.Error(), "ReleaseBatch") {
				t.Fatalf("Release on a delivery of a batch: %v, want an error pointing to ReleaseBatch", err)
			}
			if err := bf.SettleBatch(context.Background(), ds[:2], []outcome.Outcome{outcome.Ack(), outcome.Ack()}); err == nil || !strings.Contains(err.Error(), "whole batch") {
				t.Fatalf("SettleBatch on part of a batch: %v, want an error asking for the whole batch", err)
			}

			now := time.Now()
			m.mock.ExpectExec(b.ackIn(2)).WithArgs(advisoryTimeNear(now), int64(7), int64(9)).WillReturnResult(sqlmock.NewResult(0, 2))
			m.mock.ExpectExec(b.retryAfterIn(2)).WithArgs(advisoryTimeNear(now.Add(time.Minute)), int64(8), int64(11)).WillReturnResult(sqlmock.NewResult(0, 2))
			m.mock.ExpectExec(b.retryAfterIn(1)).WithArgs(advisoryTimeNear(now.Add(time.Hour)), int64(10)).WillReturnResult(sqlmock.NewResult(0, 1))
			m.expectUnlockMany(6, 7, 8, 9, 10, 11, 12)
			os := []outcome.Outcome{outcome.Ack(), outcome.RetryAfter(time.Minute), outcome.Drop(), outcome.RetryAfter(time.Hour), outcome.RetryAfter(time.Minute), outcome.Retry()}
			if err := bf.SettleBatch(context.Background(), ds, os); err != nil {
				t.Fatal(err)
			}
			if err := bf.Extend(context.Background(), ds[0]); !errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("Extend after the batch settled: %v, want ErrClosed", err)
			}
			if err := bf.SettleBatch(context.Background(), ds, os); !errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("settling a batch twice: %v, want ErrClosed", err)
			}
			m.noWarnings(t)
		})
	}
}

// TestAdvisoryBatchRetryRunsNothing: a batch of Retries runs no settlement statement, only the
// release of its keys; ReleaseBatch does the same.
func TestAdvisoryBatchRetryRunsNothing(t *testing.T) {
	for _, d := range advisoryDialects() {
		t.Run(d.name, func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q"})
			bf := m.batchForm(t)
			for _, settle := range []func([]*inbox.Delivery) error{
				func(ds []*inbox.Delivery) error {
					return bf.SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Retry(), {}})
				},
				func(ds []*inbox.Delivery) error { return bf.ReleaseBatch(context.Background(), ds) },
			} {
				m.expectCandidates("q", 2+4, 7, 8)
				m.expectLock(7, true)
				m.expectTake("q", 7, 1, true)
				m.expectLock(8, true)
				m.expectTake("q", 8, 1, true)
				ds := m.claimBatch(t, 2)
				m.expectUnlockMany(2, 7, 8)
				if err := settle(ds); err != nil {
					t.Fatal(err)
				}
			}
			m.noWarnings(t)
		})
	}
}

// TestAdvisoryBatchMinimalTable pins a batch on a table without processed_at or retry_after:
// Ack and Drop delete in one statement, and RetryAfter runs none, with a warning.
func TestAdvisoryBatchMinimalTable(t *testing.T) {
	for _, d := range advisoryDialects() {
		t.Run(d.name, func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryMinimal, inbox.Queue{})
			m.expectCandidates("", 3+4, 7, 8, 9)
			for _, id := range []int64{7, 8, 9} {
				m.expectLock(id, true)
				m.expectTake("", id, 0, true)
			}
			ds := m.claimBatch(t, 3)
			del := "DELETE FROM `jobs` WHERE `id` IN (?, ?)"
			if d.name == "postgres" {
				del = `DELETE FROM "jobs" WHERE "id" IN ($1, $2)`
			}
			m.mock.ExpectExec(del).WithArgs(int64(7), int64(9)).WillReturnResult(sqlmock.NewResult(0, 2))
			m.expectUnlockMany(3, 7, 8, 9)
			if err := m.batchForm(t).SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Ack(), outcome.RetryAfter(time.Minute), outcome.Drop()}); err != nil {
				t.Fatal(err)
			}
			if w := m.warnings.String(); !strings.Contains(w, "RetryAfter column") || !strings.Contains(w, "8") {
				t.Fatalf("RetryAfter without the column: logs %q, want a warning naming row 8", w)
			}
		})
	}
}

// TestAdvisoryBatchTransactional pins transactional mode: one transaction begins on the batch's
// connection after the takes and every delivery lends it; all Acks settle in it and commit before
// the keys are released; a batch with any other outcome rolls back, then settles on the
// connection with its Acks retried.
func TestAdvisoryBatchTransactional(t *testing.T) {
	for _, d := range advisoryDialects() {
		t.Run(d.name, func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q", Transactional: true})
			b := advisoryBatchStatements(d.name)
			bf := m.batchForm(t)
			claim := func(ids ...int64) []*inbox.Delivery {
				m.expectCandidates("q", len(ids)+4, ids...)
				for _, id := range ids {
					m.expectLock(id, true)
					m.expectTake("q", id, 1, true)
				}
				m.mock.ExpectBegin()
				ds := m.claimBatch(t, len(ids))
				for _, dv := range ds {
					if dv.Tx == nil {
						t.Fatal("no transaction lent in transactional mode")
					}
				}
				return ds
			}

			ds := claim(7, 8)
			m.mock.ExpectExec("INSERT INTO audit VALUES (8)").WillReturnResult(sqlmock.NewResult(0, 1))
			if _, err := ds[1].Tx.ExecContext(context.Background(), "INSERT INTO audit VALUES (8)"); err != nil {
				t.Fatal(err)
			}
			m.mock.ExpectExec(b.ackIn(2)).WithArgs(sqlmock.AnyArg(), int64(7), int64(8)).WillReturnResult(sqlmock.NewResult(0, 2))
			m.mock.ExpectCommit()
			m.expectUnlockMany(2, 7, 8)
			if err := bf.SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Ack(), outcome.Ack()}); err != nil {
				t.Fatal(err)
			}
			if _, err := ds[0].Tx.ExecContext(context.Background(), "INSERT INTO audit VALUES (7)"); !errors.Is(err, inbox.ErrTransactionHeld) {
				t.Fatalf("the transaction after settlement: %v, want ErrTransactionHeld", err)
			}

			ds = claim(9, 10, 11)
			m.mock.ExpectRollback()
			m.mock.ExpectExec(b.ackIn(1)).WithArgs(sqlmock.AnyArg(), int64(11)).WillReturnResult(sqlmock.NewResult(0, 1))
			m.expectUnlockMany(3, 9, 10, 11)
			if err := bf.SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Ack(), outcome.Retry(), outcome.Drop()}); err != nil {
				t.Fatal(err)
			}
			m.noWarnings(t)
		})
	}
}

// TestAdvisoryBatchUnconfirmedUnlockClosesConnection: a release of a batch's keys that the
// server confirms only in part closes the connection rather than returning it to the pool with
// a lock that may still stand.
func TestAdvisoryBatchUnconfirmedUnlockClosesConnection(t *testing.T) {
	for _, d := range advisoryDialects() {
		t.Run(d.name, func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q"})
			m.expectCandidates("q", 2+4, 7, 8)
			m.expectLock(7, true)
			m.expectTake("q", 7, 1, true)
			m.expectLock(8, true)
			m.expectTake("q", 8, 1, true)
			ds := m.claimBatch(t, 2)
			m.expectUnlockMany(1, 7, 8)
			m.mock.ExpectClose()
			if err := m.batchForm(t).ReleaseBatch(context.Background(), ds); err != nil {
				t.Fatal(err)
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

// TestAdvisoryBatchClaimFailureClosesConnection: a lock that fails after a row of the batch was
// taken closes the batch's connection, which gives that row back, and the claim fails.
func TestAdvisoryBatchClaimFailureClosesConnection(t *testing.T) {
	for _, d := range advisoryDialects() {
		t.Run(d.name, func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q"})
			m.expectCandidates("q", 2+4, 7, 8)
			m.expectLock(7, true)
			m.expectTake("q", 7, 1, true)
			m.mock.ExpectQuery(m.sql.lock).WithArgs("jobs-8").WillReturnError(errors.New("connection reset"))
			m.mock.ExpectClose()
			ds, err := m.batchForm(t).ClaimBatch(context.Background(), 2)
			if len(ds) != 0 || err == nil || !strings.Contains(err.Error(), "jobs-8") || !strings.Contains(err.Error(), "[7]") {
				t.Fatalf("ClaimBatch: %v, %v; want no rows and an error naming the key and the row given back", advisoryBatchIDs(ds), err)
			}
			if err := m.mock.ExpectationsWereMet(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestAdvisoryBatchCloseReleasesHolds: Close releases a batch still in work with one statement,
// and its settlement then fails with ErrClosed, running nothing.
func TestAdvisoryBatchCloseReleasesHolds(t *testing.T) {
	for _, d := range advisoryDialects() {
		t.Run(d.name, func(t *testing.T) {
			m := newAdvisoryMock(t, d, advisoryFull, inbox.Queue{Name: "q"})
			m.expectCandidates("q", 2+4, 7, 8)
			m.expectLock(7, true)
			m.expectTake("q", 7, 1, true)
			m.expectLock(8, true)
			m.expectTake("q", 8, 1, true)
			ds := m.claimBatch(t, 2)
			m.expectUnlockMany(2, 7, 8)
			if err := m.form.Close(); err != nil {
				t.Fatal(err)
			}
			if err := m.batchForm(t).SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Ack(), outcome.Ack()}); !errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("SettleBatch after Close: %v, want ErrClosed", err)
			}
			m.noWarnings(t)
		})
	}
}

func advisoryBatchIDs(ds []*inbox.Delivery) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}
