package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// The failure lifecycle's tests run over the full table, which has dead_at and last_error:
// its claims pass over dead rows, Fail stamps both, and a RetryAfter keeps its last error.

// refusedFK is the error a foreign key's refusal of an ack's DELETE (or UPDATE) gives.
var refusedFK = errors.New(`pq: update or delete on table "jobs" violates foreign key constraint "notes_job_fkey" on table "notes"`)

// lifecycleBackoff is the consumer's back-off as a test gives the form: a retry after an hour,
// the settlement's error its reason.
func lifecycleBackoff(d *inbox.Delivery, err error) outcome.Outcome {
	return outcome.RetryAfter(time.Hour).WithError(fmt.Errorf("settlement failed: %w", err))
}

// lifecycleRows are the rows a lifecycle claim of n returns: ids from 5, at attempt 2 (the
// deliveries read 3).
func lifecycleRows(n int) []row {
	rows := make([]row, n)
	for i := range rows {
		rows[i] = row{id: int64(5 + i), attempt: 2, payload: []byte("{}")}
	}
	return rows
}

// TestRowlockLifecycle pins, per dialect, the claim that passes over dead rows, a Fail that
// stamps dead_at and last_error, a RetryAfter that keeps its last error, and a failed ack's
// back-off: the transaction rolls back, a new one locks the row again (SKIP LOCKED, guarded by
// the attempt the claim read) and retries it after the policy's delay, the settlement's error
// as its last; for a single row and for a batch.
func TestRowlockLifecycle(t *testing.T) {
	boom := errors.New("boom")
	q := inbox.Binding{Name: rowlockQueue, Backoff: lifecycleBackoff}
	for _, c := range []dbCase{onPostgres, onMySQL} {
		t.Run(c.name+"/fail", func(t *testing.T) {
			fx, f := openRowlock(t, c, fullShape, 1, q)
			fx.expectRowlockClaim("claim", lifecycleRows(1)...)
			fx.mock.ExpectExec(fx.sql("fail")).WithArgs(c.near(time.Now()), "boom", int64(5)).WillReturnResult(changed(1))
			fx.mock.ExpectCommit()
			fx.expectRowlockClaim("claim", lifecycleRows(1)...)
			fx.mock.ExpectExec(fx.sql("retryAfter")).WithArgs(c.near(time.Now().Add(time.Minute)), "boom", int64(5)).WillReturnResult(changed(1))
			fx.mock.ExpectCommit()
			settle(t, f, rowlockClaimOne(t, f), outcome.Fail(boom))
			settle(t, f, rowlockClaimOne(t, f), outcome.RetryAfter(time.Minute).WithError(boom))
			f.Close()
		})
		t.Run(c.name+"/failed ack backs off", func(t *testing.T) {
			fx, f := openRowlock(t, c, fullShape, 1, q)
			fx.expectRowlockClaim("claim", lifecycleRows(1)...)
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(5)).WillReturnError(refusedFK)
			fx.mock.ExpectRollback()
			fx.mock.ExpectBegin()
			fx.mock.ExpectQuery(fx.sql("relock")).WithArgs(int64(5), int64(2)).WillReturnRows(fx.mock.NewRows([]string{"id"}).AddRow(int64(5)))
			fx.mock.ExpectExec(fx.sql("retryAfter")).WithArgs(c.near(time.Now().Add(time.Hour)), textHas{"foreign key"}, int64(5)).WillReturnResult(changed(1))
			fx.mock.ExpectCommit()
			err := f.Settle(context.Background(), rowlockClaimOne(t, f), outcome.Ack())
			if !errors.Is(err, refusedFK) {
				t.Fatalf("Settle = %v, want the ack's error", err)
			}
			f.Close()
		})
		t.Run(c.name+"/batch", func(t *testing.T) {
			// Where a batch settles by id lists its ack and retry are prepared at the first
			// ClaimBatch, before its transaction holds a connection, then again on the
			// transaction's (see expectRowlockBatchGroups); its fail runs by its text.
			pool := 1
			if c.d.Caps().IDListSettles {
				pool = 0
			}
			fx, f := openRowlock(t, c, fullShape, pool, q)
			fx.mock.ExpectPrepare(fx.sql("claim(3)")).WillBeClosed()
			fx.expectRowlockSettlePrepares()
			fx.expectRowlockClaim("claim(3)", lifecycleRows(3)...)
			groups := []rowlockBatchGroup{
				{"ack", []driver.Value{c.near(time.Now())}, []int64{6, 7}},
				{"fail", []driver.Value{c.near(time.Now()), "boom"}, []int64{5}},
			}
			fx.expectRowlockBatchGroups(groups)
			fx.mock.ExpectCommit()
			// The second batch's ack is refused: its rows back off in one transaction.
			fx.expectRowlockClaim("claim(3)", lifecycleRows(3)...)
			ack, args := fx.sql("ack"), []driver.Value{c.near(time.Now()), int64(5)}
			if fx.inLists() {
				ack, args = fx.sql("ackIn(3)"), []driver.Value{c.near(time.Now()), int64(5), int64(6), int64(7)}
			}
			fx.mock.ExpectExec(ack).WithArgs(args...).WillReturnError(refusedFK)
			fx.mock.ExpectRollback()
			fx.mock.ExpectBegin()
			for _, id := range []int64{5, 6, 7} {
				fx.mock.ExpectQuery(fx.sql("relock")).WithArgs(id, int64(2)).WillReturnRows(fx.mock.NewRows([]string{"id"}).AddRow(id))
				fx.mock.ExpectExec(fx.sql("retryAfter")).WithArgs(c.near(time.Now().Add(time.Hour)), textHas{"foreign key"}, id).WillReturnResult(changed(1))
			}
			fx.mock.ExpectCommit()

			ctx := context.Background()
			ds := claimBatch(t, f, 3, 3)
			settleBatch(t, f, ds, outcome.Fail(boom), outcome.Ack(), outcome.Ack())
			ds = claimBatch(t, f, 3, 3)
			if err := f.SettleBatch(ctx, ds, []outcome.Outcome{outcome.Ack(), outcome.Ack(), outcome.Ack()}); !errors.Is(err, refusedFK) {
				t.Fatalf("SettleBatch = %v, want the ack's error", err)
			}
			f.Close()
		})
	}
}

// TestLeaseLifecycle pins, on MySQL, the lease form's Fail (dead_at and last_error under the
// token) and a refused ack's back-off, run under the same token: the row is still leased, so
// the retry after needs no other guard.
func TestLeaseLifecycle(t *testing.T) {
	c := onMySQL
	fx, f := openLease(t, c, fullShape, 1, inbox.Binding{Backoff: lifecycleBackoff})
	var token driver.Value
	fx.expectLeaseClaim(1, &token, leaseRow(7, 3))
	fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(7), sameValue{&token}).WillReturnError(refusedFK)
	fx.mock.ExpectExec(fx.sql("retryAfter")).WithArgs(c.near(time.Now().Add(time.Hour)), textHas{"foreign key"}, int64(7), sameValue{&token}).
		WillReturnResult(changed(1))
	var token2 driver.Value
	fx.expectLeaseClaim(1, &token2, leaseRow(8, 1))
	fx.mock.ExpectExec(fx.sql("fail")).WithArgs(c.near(time.Now()), "boom", int64(8), sameValue{&token2}).WillReturnResult(changed(1))

	ctx := context.Background()
	if err := f.Settle(ctx, claimOne(t, f, 7, 3), outcome.Ack()); !errors.Is(err, refusedFK) {
		t.Fatalf("Settle = %v, want the ack's error", err)
	}
	settle(t, f, claimOne(t, f, 8, 1), outcome.Fail(errors.New("boom")))
	fx.closed(t, f)
}

// TestAdvisoryLifecycle pins, per dialect, the advisory form's claim past dead rows, its Fail
// (dead_at and last_error on the locked connection) and a refused ack's back-off, run on the
// same connection while the lock still holds the row, before the unlock; for a single row and
// for a batch.
func TestAdvisoryLifecycle(t *testing.T) {
	q := inbox.Binding{Name: "q", Backoff: lifecycleBackoff}
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, q)
			// A refused ack backs the row off on its connection, then the key is released.
			fx.expectAdvisoryClaim(1, 3, 7)
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(sqlmock.AnyArg(), int64(7)).WillReturnError(refusedFK)
			fx.mock.ExpectExec(fx.sql("retryAfter")).WithArgs(c.near(time.Now().Add(time.Hour)), textHas{"foreign key"}, int64(7)).
				WillReturnResult(changed(1))
			fx.expectUnlock(7).WillReturnRows(fx.unlocked(true))
			ds := claimed(t, f.Claim, 1)
			if err := f.Settle(context.Background(), ds[0], outcome.Ack()); !errors.Is(err, refusedFK) {
				t.Fatalf("Settle = %v, want the ack's error", err)
			}

			// Fail stamps dead_at with its reason.
			fx.expectAdvisoryClaim(1, 1, 8)
			fx.mock.ExpectExec(fx.sql("fail")).WithArgs(c.near(time.Now()), "boom", int64(8)).WillReturnResult(changed(1))
			fx.expectUnlock(8).WillReturnRows(fx.unlocked(true))
			ds = claimed(t, f.Claim, 1)
			settle(t, f, ds[0], outcome.Fail(errors.New("boom")))
		})
		t.Run(c.name+"/batch", func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, q)
			fx.expectAdvisoryBatchClaim(2, 2, 7, 8)
			ds := claimed(t, f.ClaimBatch, 2)
			// The acks' statement is refused: its row backs off on the batch's connection; the
			// fail's statement still runs; then the keys are released.
			fx.mock.ExpectExec(fx.many("ackMany", 1)).WithArgs(sqlmock.AnyArg(), int64(8)).WillReturnError(refusedFK)
			fx.mock.ExpectExec(fx.sql("retryAfter")).WithArgs(c.near(time.Now().Add(time.Hour)), textHas{"foreign key"}, int64(8)).
				WillReturnResult(changed(1))
			fx.mock.ExpectExec(fx.many("failMany", 1)).WithArgs(c.near(time.Now()), "boom", int64(7)).WillReturnResult(changed(1))
			fx.expectUnlockMany(2, 7, 8)
			err := f.SettleBatch(context.Background(), ds, []outcome.Outcome{outcome.Fail(errors.New("boom")), outcome.Ack()})
			if !errors.Is(err, refusedFK) {
				t.Fatalf("SettleBatch = %v, want the ack's error", err)
			}
		})
	}
}

// TestLeaseBatchLifecycle pins, per dialect, a lease batch's Fail (dead_at and last_error over
// the batch's id list, under its token) and the back-off of the rows whose ack the database
// refuses, run under the same token with the single row's retry after.
func TestLeaseBatchLifecycle(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openLeaseBatch(t, c, inbox.Binding{Backoff: lifecycleBackoff})
			var token driver.Value
			fx.expectLeaseClaim(3, &token, leaseRow(7, 1), leaseRow(8, 2), leaseRow(9, 2))

			ackIn := fx.sql("ackIn(3)")
			ackArgs := []driver.Value{c.near(time.Now()), int64(8), int64(9), int64(9), sameValue{&token}}
			if c.mysqlFamily() {
				fx.expectPrepare(ackIn)
				fx.mock.ExpectBegin()
				fx.mock.ExpectExec(ackIn).WithArgs(ackArgs...).WillReturnError(refusedFK)
				fx.mock.ExpectRollback()
			} else {
				col, _ := c.d.Quote(fullShape.table.ID)
				returning := ackIn + " RETURNING " + col
				fx.expectPrepare(returning)
				fx.mock.ExpectQuery(returning).WithArgs(ackArgs...).WillReturnError(refusedFK)
			}
			for _, id := range []int64{8, 9} {
				fx.mock.ExpectExec(fx.sql("retryAfter")).WithArgs(c.near(time.Now().Add(time.Hour)), textHas{"foreign key"}, id, sameValue{&token}).
					WillReturnResult(changed(1))
			}
			fx.expectLeaseBatchSettle(fx.sql("failIn(3)"),
				[]driver.Value{c.near(time.Now()), "boom", int64(7), int64(7), int64(7), sameValue{&token}}, 7)

			ctx := context.Background()
			ds := claimBatch(t, f, 3, 3)
			if err := f.SettleBatch(ctx, ds, []outcome.Outcome{outcome.Fail(errors.New("boom")), outcome.Ack(), outcome.Ack()}); !errors.Is(err, refusedFK) {
				t.Fatalf("SettleBatch = %v, want the ack's error", err)
			}
			fx.closed(t, f)
		})
	}
}
