package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// TestLeaseSettleAndClaimSQLite pins the lease form's settlement that claims the next row on
// SQLite: the ack and the claim (its SELECT and its stamp) in one transaction, one commit; and
// when that transaction fails, the ack and the claim apart, as Settle and Claim run them.
func TestLeaseSettleAndClaimSQLite(t *testing.T) {
	ctx := context.Background()
	c := onSQLite
	fx, f := openLease(t, c, fullShape, 2, inbox.Binding{})
	now := time.Now()

	var first, second, third driver.Value
	fx.expectLeaseClaim(1, &first, leaseRow(7, 1))
	d := claimOne(t, f, 7, 1)

	// One transaction: the guarded ack, the claim of the next row, one COMMIT.
	fx.expectBegin()
	fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(now), int64(7), sameValue{&first}).WillReturnResult(changed(1))
	fx.mock.ExpectQuery(fx.sql("claim")).WithArgs(fx.leaseClaimArgs(now, 1)...).WillReturnRows(fullShape.claimed("", leaseRow(8, 0)))
	fx.mock.ExpectExec(fx.sql("stamp(1)")).WithArgs(c.token(now.Add(lease.DefaultLease), &second), int64(8)).WillReturnResult(changed(1))
	fx.expectCommit(nil)
	ds, settleErr, claimErr := f.SettleAndClaim(ctx, d, outcome.Ack(), 1)
	if settleErr != nil || claimErr != nil || len(ds) != 1 || ds[0].ID != 8 || ds[0].Attempt != 1 {
		t.Fatalf("SettleAndClaim: %v, %v, %v; want row 8 claimed and the ack settled", ds, settleErr, claimErr)
	}

	// The transaction fails: SQLite rolled it back, and the ack and the claim run apart.
	busy := errors.New("database is locked (5) (SQLITE_BUSY)")
	fx.expectBegin()
	fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(now), int64(8), sameValue{&second}).WillReturnError(busy)
	fx.mock.ExpectExec("BEGIN").WillReturnError(errors.New("cannot start a transaction within a transaction"))
	fx.expectRollback()
	fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(now), int64(8), sameValue{&second}).WillReturnResult(changed(1))
	fx.expectLeaseClaim(1, &third, leaseRow(9, 1))
	ds, settleErr, claimErr = f.SettleAndClaim(ctx, ds[0], outcome.Ack(), 1)
	if settleErr != nil || claimErr != nil || len(ds) != 1 || ds[0].ID != 9 {
		t.Fatalf("SettleAndClaim after a failed transaction: %v, %v, %v; want row 9 claimed and the ack settled apart", ds, settleErr, claimErr)
	}
	// Close gives the row claimed last back.
	fx.mock.ExpectExec(fx.sql("retry")).WithArgs(int64(9), sameValue{&third}).WillReturnResult(changed(1))
	fx.closed(t, f)
}
