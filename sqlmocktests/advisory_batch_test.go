package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// The advisory form settles a batch's rows of one kind by their ids and releases its keys in
// one statement, each over as many as there are: the golden files hold those statements over
// three, and the tests resize them.

// many is the golden file's statement name+"(3)" over n ids: its id list, the last thing in it,
// resized.
func (fx *fixture) many(name string, n int) string {
	fx.st.t.Helper()
	s := fx.sql(name + "(3)")
	at := strings.LastIndex(s, " IN (")
	if at < 0 || !strings.HasSuffix(s, ")") {
		fx.st.t.Fatalf("%s: %s(3) does not end in its id list: %s", fx.st.path, name, s)
	}
	first, _, _ := strings.Cut(s[at+len(" IN ("):len(s)-1], ", ")
	ps := make([]string, n)
	for i := range ps {
		ps[i] = first // "?"
		if k, err := strconv.Atoi(strings.TrimPrefix(first, "$")); err == nil {
			ps[i] = "$" + strconv.Itoa(k+i)
		}
	}
	return s[:at] + " IN (" + strings.Join(ps, ", ") + ")"
}

// unlockMany is the golden file's release of three keys, resized to n keys.
func (fx *fixture) unlockMany(n int) string {
	fx.st.t.Helper()
	keys := func(n int) string {
		if fx.c.db == "postgres" {
			ks := make([]string, n)
			for i := range ks {
				ks[i] = fmt.Sprintf("(CAST($%d AS TEXT))", i+1)
			}
			return strings.Join(ks, ", ")
		}
		return strings.Repeat("SELECT CONCAT(DATABASE(), '.', ?) AS n UNION ALL ", n-1) + "SELECT CONCAT(DATABASE(), '.', ?) AS n"
	}
	s := fx.sql("unlockMany(3)")
	if !strings.Contains(s, keys(3)) {
		fx.st.t.Fatalf("%s: unlockMany(3) lists its keys otherwise than as %s: %s", fx.st.path, keys(3), s)
	}
	return strings.Replace(s, keys(3), keys(n), 1)
}

// TestAdvisoryBatchStatementText pins the resizing of the batch statements for two rows, so
// that the sequences below test the form against statements written out.
func TestAdvisoryBatchStatementText(t *testing.T) {
	pg := newFixture(t, "advisory", onPostgres, fullShape, 0, inbox.Binding{})
	my := newFixture(t, "advisory", onMySQL, fullShape, 0, inbox.Binding{})
	for got, want := range map[string]string{
		pg.many("ackMany", 2):        `UPDATE "jobs" SET "processed_at" = $1 WHERE "id" IN ($2, $3)`,
		pg.many("retryAfterMany", 1): `UPDATE "jobs" SET "retry_after" = $1, "last_error" = $2 WHERE "id" IN ($3)`,
		pg.unlockMany(2):             `SELECT COUNT(*) FROM (VALUES (CAST($1 AS TEXT)), (CAST($2 AS TEXT))) AS k(v) WHERE pg_advisory_unlock(hashtextextended(k.v, 0))`,
		my.many("ackMany", 2):        "UPDATE `jobs` SET `processed_at` = ? WHERE `id` IN (?, ?)",
		my.unlockMany(2):             "SELECT COUNT(*) FROM (SELECT CONCAT(DATABASE(), '.', ?) AS n UNION ALL SELECT CONCAT(DATABASE(), '.', ?) AS n) AS k WHERE RELEASE_LOCK(IF(CHAR_LENGTH(n) > 64, SHA1(n), n)) = 1",
	} {
		if got != want {
			t.Errorf("got  %s\nwant %s", got, want)
		}
	}
}

// claimPair claims a batch of two rows, 7 and 8 at attempt 1, and expects the one statement
// that releases their keys, the server confirming released of them.
func (fx *fixture) claimPair(t *testing.T, f inbox.BatchForm, released int) []*inbox.Delivery {
	t.Helper()
	fx.expectAdvisoryBatchClaim(2, 1, 7, 8)
	ds := claimed(t, f.ClaimBatch, 2)
	fx.expectUnlockMany(released, 7, 8)
	return ds
}

// expectUnlockMany expects the one statement that releases the keys of rows ids, answering
// that released of them were released.
func (fx *fixture) expectUnlockMany(released int, ids ...int64) {
	args := make([]driver.Value, len(ids))
	for i, id := range ids {
		args[i] = fx.key(id)
	}
	fx.mock.ExpectQuery(fx.unlockMany(len(ids))).WithArgs(args...).
		WillReturnRows(sqlmock.NewRows([]string{"count"}).AddRow(int64(released)))
}

// TestAdvisoryBatchSequence pins a batch claim (one candidate select, then lock and take of each
// candidate on the one pinned connection, passing over a key held elsewhere, a row settled
// meanwhile and a second row of a key already tried) and a mixed settlement: one statement for
// the Ack and the Drop, one per RetryAfter delay, none for the Retry, then one release of every
// key.
func TestAdvisoryBatchSequence(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q"})
			candidates := sqlmock.NewRows([]string{"id", "inbox_key"})
			for _, id := range []int64{5, 6, 7, 70, 8, 9, 10, 11, 12, 13} {
				key := fx.key(id)
				if id == 70 {
					key = fx.key(7)
				}
				candidates.AddRow(id, key)
			}
			fx.mock.ExpectQuery(fx.sql("candidates")).WithArgs(sqlmock.AnyArg(), "q", 6+4).WillReturnRows(candidates)
			fx.expectLock(5, false)
			fx.expectLock(6, true)
			fx.expectTake(6, 0, false)
			fx.expectUnlock(6).WillReturnRows(fx.unlocked(true))
			for _, id := range []int64{7, 8, 9, 10, 11, 12} {
				fx.expectLock(id, true)
				fx.expectTake(id, 2, true)
			}
			ds := claimed(t, f.ClaimBatch, 6)
			if got := fmt.Sprint(advisoryBatchIDs(ds)); got != "[7 8 9 10 11 12]" {
				t.Fatalf("claimed %s, want rows 7 to 12 (row 13 is beyond the batch)", got)
			}
			first, _ := inbox.HoldOf[any](ds[0])
			for _, dv := range ds {
				if h, _ := inbox.HoldOf[any](dv); h != first || dv.Attempt != 2 || dv.Tx != nil {
					t.Fatalf("delivery %+v: want one hold for the batch, the take's attempt, no transaction", dv)
				}
			}

			if err := f.Extend(context.Background(), ds[3]); err != nil {
				t.Fatalf("Extend on a delivery of the batch: %v", err)
			}
			if err := f.Settle(context.Background(), ds[0], outcome.Ack()); err == nil || !strings.Contains(err.Error(), "SettleBatch") {
				t.Fatalf("Settle on a delivery of a batch: %v, want an error pointing to SettleBatch", err)
			}
			if err := f.Release(context.Background(), ds[0]); err == nil || !strings.Contains(err.Error(), "ReleaseBatch") {
				t.Fatalf("Release on a delivery of a batch: %v, want an error pointing to ReleaseBatch", err)
			}
			if err := f.SettleBatch(context.Background(), ds[:2], []outcome.Outcome{outcome.Ack(), outcome.Ack()}); err == nil || !strings.Contains(err.Error(), "whole batch") {
				t.Fatalf("SettleBatch on part of a batch: %v, want an error asking for the whole batch", err)
			}

			now := time.Now()
			fx.mock.ExpectExec(fx.many("ackMany", 2)).WithArgs(c.near(now), int64(7), int64(9)).WillReturnResult(changed(2))
			fx.mock.ExpectExec(fx.many("retryAfterMany", 2)).WithArgs(c.near(now.Add(time.Minute)), nil, int64(8), int64(11)).WillReturnResult(changed(2))
			fx.mock.ExpectExec(fx.many("retryAfterMany", 1)).WithArgs(c.near(now.Add(time.Hour)), nil, int64(10)).WillReturnResult(changed(1))
			fx.expectUnlockMany(6, 7, 8, 9, 10, 11, 12)
			os := []outcome.Outcome{outcome.Ack(), outcome.RetryAfter(time.Minute), outcome.Drop(), outcome.RetryAfter(time.Hour), outcome.RetryAfter(time.Minute), outcome.Retry()}
			settleBatch(t, f, ds, os...)
			if err := f.Extend(context.Background(), ds[0]); !errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("Extend after the batch settled: %v, want ErrClosed", err)
			}
			if err := f.SettleBatch(context.Background(), ds, os); !errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("settling a batch twice: %v, want ErrClosed", err)
			}
			fx.noWarnings(t)
		})
	}
}

// TestAdvisoryBatchRetryRunsNothing: a batch of Retries runs no settlement statement, only the
// release of its keys; ReleaseBatch does the same.
func TestAdvisoryBatchRetryRunsNothing(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q"})
			for _, settle := range []func([]*inbox.Delivery) error{
				func(ds []*inbox.Delivery) error {
					return f.SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Retry(), {}})
				},
				func(ds []*inbox.Delivery) error { return f.ReleaseBatch(context.Background(), ds) },
			} {
				ds := fx.claimPair(t, f, 2)
				if err := settle(ds); err != nil {
					t.Fatal(err)
				}
			}
			fx.noWarnings(t)
		})
	}
}

// TestAdvisoryBatchMinimalTable pins a batch on a table without processed_at or retry_after:
// Ack and Drop delete in one statement, and RetryAfter runs none, with a warning.
func TestAdvisoryBatchMinimalTable(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, minimalShape, inbox.Binding{})
			fx.expectAdvisoryBatchClaim(3, 0, 7, 8, 9)
			ds := claimed(t, f.ClaimBatch, 3)
			fx.mock.ExpectExec(fx.many("ackMany", 2)).WithArgs(int64(7), int64(9)).WillReturnResult(changed(2))
			fx.expectUnlockMany(3, 7, 8, 9)
			settleBatch(t, f, ds, outcome.Ack(), outcome.RetryAfter(time.Minute), outcome.Drop())
			if !fx.warned("RetryAfter column", "8") {
				t.Fatalf("RetryAfter without the column: logs %q, want a warning naming row 8", fx.logs.String())
			}
		})
	}
}

// TestAdvisoryBatchTransactional pins transactional mode: one transaction begins on the batch's
// connection after the takes and every delivery lends it; all Acks settle in it and commit before
// the keys are released; a batch with any other outcome rolls back, then settles on the
// connection with its Acks retried.
func TestAdvisoryBatchTransactional(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q", Transactional: true})
			claim := func(ids ...int64) []*inbox.Delivery {
				fx.expectAdvisoryBatchClaim(len(ids), 1, ids...)
				fx.mock.ExpectBegin()
				ds := claimed(t, f.ClaimBatch, len(ids))
				for _, dv := range ds {
					if dv.Tx == nil {
						t.Fatal("no transaction lent in transactional mode")
					}
				}
				return ds
			}

			ds := claim(7, 8)
			fx.mock.ExpectExec("INSERT INTO audit VALUES (8)").WillReturnResult(changed(1))
			if _, err := ds[1].Tx.ExecContext(context.Background(), "INSERT INTO audit VALUES (8)"); err != nil {
				t.Fatal(err)
			}
			fx.mock.ExpectExec(fx.many("ackMany", 2)).WithArgs(sqlmock.AnyArg(), int64(7), int64(8)).WillReturnResult(changed(2))
			fx.mock.ExpectCommit()
			fx.expectUnlockMany(2, 7, 8)
			settleBatch(t, f, ds, outcome.Ack(), outcome.Ack())
			if _, err := ds[0].Tx.ExecContext(context.Background(), "INSERT INTO audit VALUES (7)"); !errors.Is(err, inbox.ErrTransactionHeld) {
				t.Fatalf("the transaction after settlement: %v, want ErrTransactionHeld", err)
			}

			ds = claim(9, 10, 11)
			fx.mock.ExpectRollback()
			fx.mock.ExpectExec(fx.many("ackMany", 1)).WithArgs(sqlmock.AnyArg(), int64(11)).WillReturnResult(changed(1))
			fx.expectUnlockMany(3, 9, 10, 11)
			settleBatch(t, f, ds, outcome.Ack(), outcome.Retry(), outcome.Drop())
			fx.noWarnings(t)
		})
	}
}

// TestAdvisoryBatchUnconfirmedUnlockClosesConnection: a release of a batch's keys that the
// server confirms only in part closes the connection rather than returning it to the pool with
// a lock that may still stand.
func TestAdvisoryBatchUnconfirmedUnlockClosesConnection(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q"})
			ds := fx.claimPair(t, f, 1)
			fx.mock.ExpectClose()
			if err := f.ReleaseBatch(context.Background(), ds); err != nil {
				t.Fatal(err)
			}
			fx.checkDiscarded(t, "the release confirmed in part", "closed the connection")
		})
	}
}

// TestAdvisoryBatchClaimFailureClosesConnection: a lock that fails after a row of the batch was
// taken closes the batch's connection, which gives that row back, and the claim fails.
func TestAdvisoryBatchClaimFailureClosesConnection(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q"})
			fx.expectCandidates(2+4, 7, 8)
			fx.expectLock(7, true)
			fx.expectTake(7, 1, true)
			fx.mock.ExpectQuery(fx.sql("lock")).WithArgs(fx.key(8)).WillReturnError(errors.New("connection reset"))
			fx.mock.ExpectClose()
			ds, err := f.ClaimBatch(context.Background(), 2)
			if len(ds) != 0 || err == nil || !strings.Contains(err.Error(), fx.key(8)) || !strings.Contains(err.Error(), "[7]") {
				t.Fatalf("ClaimBatch: %v, %v; want no rows and an error naming the key and the row given back", advisoryBatchIDs(ds), err)
			}
			fx.checkDiscarded(t, "the failed lock")
		})
	}
}

// TestAdvisoryBatchCloseReleasesHolds: Close releases a batch still in work with one statement,
// and its settlement then fails with ErrClosed, running nothing.
func TestAdvisoryBatchCloseReleasesHolds(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, inbox.Binding{Name: "q"})
			ds := fx.claimPair(t, f, 2)
			fx.closed(t, f)
			if err := f.SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Ack(), outcome.Ack()}); !errors.Is(err, inbox.ErrClosed) {
				t.Fatalf("SettleBatch after Close: %v, want ErrClosed", err)
			}
			fx.noWarnings(t)
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
