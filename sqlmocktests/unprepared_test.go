package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// The forms with inbox.Binding.UnpreparedStatements: every statement runs by its text, and none
// is prepared. The mock refuses a Prepare it was not told of (the recorder fails the test on
// it), so each sequence below proves that nothing prepares: Open checks each statement by
// EXPLAIN, in the order it would prepare them, and a statement first needed later (a batch
// size, an id list) is checked by EXPLAIN where it would be prepared.

// TestUnpreparedRowlockSequence pins the row lock form's statements by text on each database:
// Open's EXPLAINs, a claim settled in its transaction (plain and transactional), then a batch,
// whose claim of three and, on Postgres, its id-list settlements are checked at their first use.
func TestUnpreparedRowlockSequence(t *testing.T) {
	for _, c := range []dbCase{onPostgres, onMySQL, onMariaDB} {
		for _, transactional := range []bool{false, true} {
			name := c.name
			if transactional {
				name += "/transactional"
			}
			t.Run(name, func(t *testing.T) {
				fx, f := openRowlock(t, c, fullShape, 0, inbox.Binding{Name: rowlockQueue, Transactional: transactional, UnpreparedStatements: true})

				fx.expectRowlockClaim("claim", rowlockRow(7))
				if transactional {
					fx.mock.ExpectExec(fx.sql("savepoint")).WillReturnResult(changed(0))
					fx.mock.ExpectExec(fx.sql("rollbackToSavepoint")).WillReturnResult(changed(0))
				}
				fx.mock.ExpectExec(fx.sql("retryAfter")).WithArgs(c.near(time.Now().Add(time.Hour)), nil, int64(7)).WillReturnResult(changed(1))
				fx.mock.ExpectCommit()
				settle(t, f, rowlockClaimOne(t, f), outcome.RetryAfter(time.Hour))

				fx.expectPrepare(fx.sql("claim(3)"))
				if fx.inLists() {
					// Checked at the claim, before its transaction begins; run by their text.
					fx.expectPrepare(fx.sql("ackIn(3)"))
					fx.expectPrepare(fx.sql("retryIn(3)"))
				}
				fx.expectRowlockClaim("claim(3)", rowlockBatchRows(3)...)
				if transactional {
					fx.mock.ExpectExec(fx.sql("savepoint")).WillReturnResult(changed(0))
				}
				groups := []rowlockBatchGroup{{"ack", []driver.Value{c.near(time.Now())}, []int64{1, 2, 3}}}
				fx.expectRowlockBatchGroups(groups)
				fx.mock.ExpectCommit()
				ds := claimBatch(t, f, 3, 3)
				settleBatch(t, f, ds, outcome.Ack(), outcome.Ack(), outcome.Ack())

				fx.closed(t, f)
			})
		}
	}
}

// TestUnpreparedLeaseSequence pins the lease form's statements by text on each database: Open's
// EXPLAINs (on SQLite the claim's too, which runs by its text anyway), a claim, an extension and
// an ack, then a batch of three, whose claim and settlements over id lists are checked at their
// first use (its extension runs by its text, as every batch's does: see TestLeaseBatchSequence).
func TestUnpreparedLeaseSequence(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openLease(t, c, fullShape, 1, inbox.Binding{UnpreparedStatements: true})

			var claimed, extended driver.Value
			fx.expectLeaseClaim(1, &claimed, leaseRow(7, 1))
			fx.mock.ExpectExec(fx.sql("extend")).WithArgs(c.token(time.Now().Add(lease.DefaultLease), &extended), int64(7), sameValue{&claimed}).WillReturnResult(changed(1))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(7), sameValue{&extended}).WillReturnResult(changed(1))
			d := claimOne(t, f, 7, 1)
			extend(t, f, d)
			settle(t, f, d, outcome.Ack())

			if c.mysqlFamily() {
				fx.expectPrepare(fx.sql("stamp(3)"))
			}
			claimed, extended = nil, nil
			fx.expectLeaseClaim(3, &claimed, leaseRow(8, 1), leaseRow(9, 1), leaseRow(10, 1))
			extendIn := fx.sql("extendIn(3)")
			fx.mock.ExpectExec(extendIn).WithArgs(c.token(time.Now().Add(lease.DefaultLease), &extended), int64(8), int64(9), int64(10), sameValue{&claimed}).WillReturnResult(changed(3))
			fx.expectLeaseBatchSettle(fx.sql("ackIn(3)"), []driver.Value{c.near(time.Now()), int64(8), int64(10), int64(10), sameValue{&extended}}, 8, 10)
			fx.expectLeaseBatchSettle(fx.sql("retryIn(3)"), []driver.Value{int64(9), int64(9), int64(9), sameValue{&extended}}, 9)
			ds := claimBatch(t, f, 3, 3)
			extend(t, f, ds[0])
			settleBatch(t, f, ds, outcome.Ack(), outcome.Retry(), outcome.Drop())

			fx.closed(t, f)
		})
	}
}

// TestUnpreparedLeaseOwnConnection: while the pool has no connection to spare, the lease form's
// statements run on its own connection by their text, prepared there neither (compare
// TestLeaseOwnConnection).
func TestUnpreparedLeaseOwnConnection(t *testing.T) {
	checkLeaseOwnConnection(t, inbox.Binding{UnpreparedStatements: true})
}

// TestUnpreparedAdvisoryRefused: the advisory form refuses the setting at Open with ErrDialect
// that names the setting and what to do instead, and points to the docs for why, before it asks
// the server anything.
func TestUnpreparedAdvisoryRefused(t *testing.T) {
	for _, c := range []dbCase{onPostgres, onMySQL} {
		t.Run(c.name, func(t *testing.T) {
			m := newRecorder(t, 1) // no expectations: nothing may run
			_, err := c.advisoryForm(fullShape.table, "").Open(context.Background(), m.db, inbox.Binding{Name: "q", UnpreparedStatements: true})
			if !errors.Is(err, inbox.ErrDialect) {
				t.Fatalf("Open: %v, want ErrDialect", err)
			}
			for _, want := range []string{`table "jobs", queue "q"`, "UnpreparedStatements", "connect directly", "docs/errors.md#dialect"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Open: %v; want it to say %q", err, want)
				}
			}
		})
	}
}
