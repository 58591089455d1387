package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// TestLeaseMergesSettlementsThatArriveTogether: on Postgres and SQLite, acks that arrive while
// another ack's statement runs share the next statement, which returns the ids it deleted; a
// row it did not delete (its lease was taken) reports ErrLeaseLost, and the other settles.
func TestLeaseMergesSettlementsThatArriveTogether(t *testing.T) {
	for _, c := range leaseCases {
		if c.mysqlFamily() {
			continue // MySQL and MariaDB cannot return the rows a DELETE changed: one per row
		}
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			fx, f := openLease(t, c, minimalShape, 4, inbox.Binding{})
			var token driver.Value
			fx.expectLeaseClaim(3, &token, leaseRow(7, 0), leaseRow(8, 0), leaseRow(9, 0))
			ds, err := f.Claim(ctx, 3)
			if err != nil || len(ds) != 3 {
				t.Fatalf("Claim: %v, %v", ds, err)
			}

			// The first ack runs alone and slowly; the two that arrive meanwhile wait for it,
			// then share one statement.
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(int64(7), sameValue{&token}).WillDelayFor(time.Second).WillReturnResult(changed(1))
			merged := fx.sql("ackPairs(2)")
			fx.expectPrepare(merged)
			fx.mock.ExpectQuery(merged).WithArgs(sqlmock.AnyArg(), sameValue{&token}, sqlmock.AnyArg(), sameValue{&token}).
				WillReturnRows(sqlmock.NewRows([]string{"id"}).AddRow(int64(8)))

			running := fx.whenExec(fx.sql("ack"))
			first := make(chan error, 1)
			go func() { first <- f.Settle(ctx, ds[0], outcome.Ack()) }()
			select {
			case <-running:
			case <-time.After(10 * time.Second):
				t.Fatal("the first ack's statement never ran")
			}
			results := make(chan error, 2)
			for _, d := range ds[1:] {
				go func() {
					err := f.Settle(ctx, d, outcome.Ack())
					if d.ID == 8 && err != nil {
						err = errors.New("row 8: " + err.Error())
					}
					results <- err
				}()
			}
			if err := <-first; err != nil {
				t.Fatalf("the first ack: %v", err)
			}
			var lost int
			for range 2 {
				err := <-results
				switch {
				case errors.Is(err, inbox.ErrLeaseLost) && strings.Contains(err.Error(), "row 9"):
					lost++
				case err != nil:
					t.Errorf("merged ack: %v, want nil for row 8 and ErrLeaseLost for row 9", err)
				}
			}
			if lost != 1 {
				t.Errorf("%d merged acks reported row 9's lost lease, want 1", lost)
			}
			fx.closed(t, f)
		})
	}
}
