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

// The statements at the attempt limit (issue 22, defect 2), over a table whose ack and death
// both delete the row (neither processed_at nor dead_at) and that counts attempts: the claims
// pass over rows at the limit ("claim, max attempts 25" in the golden files), and a row whose
// settlement and death the database both refuse is left counted at the limit.

// deletesShape counts attempts, and an ack or a death deletes its row.
var deletesShape = goldenShape("attempt-deletes")

// limitBackoff is the consumer's back-off at the limit of 25 attempts: the row's death, a Fail
// with the settlement's error, at attempt 25; a retry below it.
func limitBackoff(d *inbox.Delivery, err error) outcome.Outcome {
	if d.Attempt >= inbox.DefaultMaxAttempts {
		return outcome.Fail(fmt.Errorf("attempt %d of %d: settlement failed: %w", d.Attempt, inbox.DefaultMaxAttempts, err))
	}
	return outcome.Retry().WithError(fmt.Errorf("settlement failed: %w", err))
}

// limitQueue is the queue the tests open their forms for: the consumer's default limit, and
// its back-off.
var limitQueue = inbox.Binding{Name: "q", MaxAttempts: inbox.DefaultMaxAttempts, Backoff: limitBackoff}

// checkDeathFailed checks the error of a settlement whose ack and death were both refused.
func checkDeathFailed(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, refusedFK) || !errors.Is(err, inbox.ErrDeathFailed) {
		t.Fatalf("Settle = %v, want the ack's error and ErrDeathFailed", err)
	}
}

// TestRowlockDeathRefusedAtTheLimit: at attempt 25 of 25 the ack's DELETE is refused and rolls
// back; the back-off's transaction locks the row again (at the attempt its claim read), tries
// its death, the same DELETE, behind a savepoint, undoes it when it is refused too, and counts
// the attempt instead, which brings the row to the limit, where no claim takes it.
func TestRowlockDeathRefusedAtTheLimit(t *testing.T) {
	for _, c := range rowlockCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openRowlock(t, c, deletesShape, 0, limitQueue)
			fx.expectRowlockClaim("claim", row{id: 5, attempt: 24, payload: []byte("p")})
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(int64(5)).WillReturnError(refusedFK)
			fx.mock.ExpectRollback()
			fx.mock.ExpectBegin()
			fx.mock.ExpectQuery(fx.sql("relock")).WithArgs(int64(5), int64(24)).WillReturnRows(fx.mock.NewRows([]string{"id"}).AddRow(int64(5)))
			fx.mock.ExpectExec(fx.sql("savepoint")).WillReturnResult(changed(0))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(int64(5)).WillReturnError(refusedFK)
			fx.mock.ExpectExec(fx.sql("rollbackToSavepoint")).WillReturnResult(changed(0))
			fx.mock.ExpectExec(fx.sql("retry")).WithArgs(int64(5)).WillReturnResult(changed(1))
			fx.mock.ExpectCommit()

			d := rowlockClaimOne(t, f)
			if d.Attempt != 25 {
				t.Fatalf("claimed attempt %d, want 25", d.Attempt)
			}
			checkDeathFailed(t, f.Settle(context.Background(), d, outcome.Ack()))
			fx.closed(t, f)
		})
	}
}

// TestLeaseDeathRefusedAtTheLimit: at attempt 25 of 25, which the claim counted, the ack's
// guarded DELETE is refused, and so is the death, the same statement under the same token; the
// row is left leased until its lease runs out, at the limit, where no claim takes it.
func TestLeaseDeathRefusedAtTheLimit(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openLease(t, c, deletesShape, 1, limitQueue)
			var token driver.Value
			fx.expectLeaseClaim(1, &token, leaseRow(7, 25))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(int64(7), sameValue{&token}).WillReturnError(refusedFK)
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(int64(7), sameValue{&token}).WillReturnError(refusedFK)

			checkDeathFailed(t, f.Settle(context.Background(), claimOne(t, f, 7, 25), outcome.Ack()))
			fx.closed(t, f)
		})
	}
}

// TestAdvisoryDeathRefusedAtTheLimit: at attempt 25 of 25, which the take counted, the ack's
// DELETE is refused on the locked connection, and so is the death, the same DELETE; then the key
// is released, the row left at the limit, where no claim takes it.
func TestAdvisoryDeathRefusedAtTheLimit(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, deletesShape, limitQueue)
			fx.expectAdvisoryClaim(1, 25, 7)
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(int64(7)).WillReturnError(refusedFK)
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(int64(7)).WillReturnError(refusedFK)
			fx.expectUnlock(7).WillReturnRows(fx.unlocked(true))

			ds := claimed(t, f.Claim, 1)
			checkDeathFailed(t, f.Settle(context.Background(), ds[0], outcome.Ack()))
			fx.closed(t, f)
		})
	}
}

// lostConnection is the error of a settlement whose connection was lost, as c's driver reports
// it: Postgres's terminated session (pgx, with its SQLSTATE), go-sql-driver/mysql's invalid
// connection.
func lostConnection(c dbCase) error {
	if c.db == "postgres" {
		return sqlState{"57P01"}
	}
	return errors.New("invalid connection")
}

// TestSettlementConnectionLostIsNotBackedOff: a settlement that fails because its connection was
// lost runs no back-off, on a table where the back-off would retry the row after a delay with
// the settlement's error as its last: the row returns by its form's rule, with no attempt
// counted for it (no relock and retry after of the row lock form, no guarded retry after of
// the lease form, nothing more on the advisory form's connection but the release of its key).
func TestSettlementConnectionLostIsNotBackedOff(t *testing.T) {
	q := inbox.Binding{Name: "q", Backoff: lifecycleBackoff}
	for _, c := range rowlockCases {
		t.Run("rowlock/"+c.name, func(t *testing.T) {
			fx, f := openRowlock(t, c, fullShape, 0, q)
			fx.expectRowlockClaim("claim", lifecycleRows(1)...)
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(5)).WillReturnError(lostConnection(c))
			fx.mock.ExpectRollback()
			if err := f.Settle(context.Background(), rowlockClaimOne(t, f), outcome.Ack()); err == nil {
				t.Fatal("Settle succeeded, want the lost connection's error")
			}
			fx.closed(t, f)
		})
	}
	for _, c := range leaseCases {
		if c.db == "sqlite" {
			continue // no connection to lose
		}
		t.Run("lease/"+c.name, func(t *testing.T) {
			fx, f := openLease(t, c, fullShape, 1, q)
			var token driver.Value
			fx.expectLeaseClaim(1, &token, leaseRow(7, 3))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(7), sameValue{&token}).WillReturnError(lostConnection(c))
			if err := f.Settle(context.Background(), claimOne(t, f, 7, 3), outcome.Ack()); err == nil {
				t.Fatal("Settle succeeded, want the lost connection's error")
			}
			fx.closed(t, f)
		})
	}
	for _, c := range advisoryCases {
		t.Run("advisory/"+c.name, func(t *testing.T) {
			fx, f := openAdvisory(t, c, fullShape, q)
			fx.expectAdvisoryClaim(1, 3, 7)
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(sqlmock.AnyArg(), int64(7)).WillReturnError(lostConnection(c))
			fx.expectUnlock(7).WillReturnRows(fx.unlocked(true))
			ds := claimed(t, f.Claim, 1)
			if err := f.Settle(context.Background(), ds[0], outcome.Ack()); err == nil {
				t.Fatal("Settle succeeded, want the lost connection's error")
			}
			fx.closed(t, f)
		})
	}
}
