package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// openLeaseBatch opens the lease form over the full table on c's database for batches of three
// (the golden files' lists are of three): on MySQL and MariaDB the first batch claim prepares
// the stamp of three ids.
func openLeaseBatch(t *testing.T, c dbCase, q inbox.Binding) (*fixture, *lease.Form[dialect.Dialect]) {
	t.Helper()
	fx, f := openLease(t, c, fullShape, 1, q)
	if c.mysqlFamily() {
		fx.expectPrepare(fx.sql("stamp(3)"))
	}
	return fx, f
}

// expectLeaseBatchSettle expects one statement of a batch's settlement, query over the batch's
// id list with args, prepared at its first run, that changes rows ids: on Postgres and
// SQLite query returning the ids it changed; on MySQL and MariaDB query in a transaction,
// committed.
func (fx *fixture) expectLeaseBatchSettle(query string, args []driver.Value, ids ...int64) {
	if fx.c.mysqlFamily() {
		fx.expectPrepare(query)
		fx.mock.ExpectBegin()
		fx.mock.ExpectExec(query).WithArgs(args...).WillReturnResult(changed(int64(len(ids))))
		fx.mock.ExpectCommit()
		return
	}
	col, _ := fx.c.d.Quote(fx.sh.table.ID)
	query += " RETURNING " + col
	fx.expectPrepare(query)
	rows := fx.mock.NewRows([]string{"id"})
	for _, id := range ids {
		rows.AddRow(id)
	}
	fx.mock.ExpectQuery(query).WithArgs(args...).WillReturnRows(rows)
}

// TestLeaseBatchSequence pins a batch's statements: one claim of up to 3 rows under one token
// (on MySQL and MariaDB a stamp over 3 ids), one extension of every row, run by its text (an
// extension never waits for a pooled connection to prepare one: see
// TestLeaseBatchInWorkWaitsForNoPooledConnection), then one guarded statement per kind of
// outcome over an id list padded to the batch's size; and a short batch, whose stamp on MySQL
// and MariaDB repeats its last id to that size, as its settlement does.
func TestLeaseBatchSequence(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			fx, f := openLeaseBatch(t, c, inbox.Binding{})
			var claimed, extended driver.Value
			fx.expectLeaseClaim(3, &claimed, leaseRow(7, 1), leaseRow(8, 1), leaseRow(9, 3))
			extendIn := fx.sql("extendIn(3)")
			fx.mock.ExpectExec(extendIn).WithArgs(c.token(time.Now().Add(lease.DefaultLease), &extended), int64(7), int64(8), int64(9), sameValue{&claimed}).WillReturnResult(changed(3))
			fx.expectLeaseBatchSettle(fx.sql("ackIn(3)"), []driver.Value{c.near(time.Now()), int64(7), int64(9), int64(9), sameValue{&extended}}, 7, 9)
			fx.expectLeaseBatchSettle(fx.sql("retryAfterIn(3)"), []driver.Value{c.near(time.Now().Add(time.Minute)), nil, int64(8), int64(8), int64(8), sameValue{&extended}}, 8)

			ds, err := f.ClaimBatch(ctx, 3)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 3 || ds[2].ID != 9 || ds[2].Attempt != 3 {
				t.Fatalf("claimed %+v, want rows 7, 8, 9 with row 9 at attempt 3", ds)
			}
			extend(t, f, ds[1])
			settleBatch(t, f, ds, outcome.Ack(), outcome.RetryAfter(time.Minute), outcome.Drop())

			var token driver.Value
			fx.expectLeaseClaim(3, &token, leaseRow(10, 1))
			fx.expectLeaseBatchSettle(fx.sql("retryIn(3)"), []driver.Value{int64(10), int64(10), int64(10), sameValue{&token}}, 10)
			if ds, err = f.ClaimBatch(ctx, 3); err != nil || len(ds) != 1 {
				t.Fatalf("the short batch: %v, %v; want row 10 alone", ds, err)
			}
			settleBatch(t, f, ds, outcome.Retry())
			fx.closed(t, f)
		})
	}
}

// TestLeaseBatchLostSequence pins how a batch's settlement learns which rows it changed when a
// row's lease was lost (row 9, to be acked): on Postgres and SQLite from the statement's
// RETURNING; on MySQL and MariaDB the statement changes fewer rows than it names, so its
// transaction rolls back, the rows still holding the token are locked and read, and the
// statement runs again over those alone. The error names row 9 alone.
func TestLeaseBatchLostSequence(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			fx, f := openLeaseBatch(t, c, inbox.Binding{})
			var claimed driver.Value
			fx.expectLeaseClaim(3, &claimed, leaseRow(7, 1), leaseRow(8, 1), leaseRow(9, 1))
			ack := fx.sql("ackIn(3)")
			now := c.near(time.Now())
			if c.mysqlFamily() {
				held := fx.sql("heldIn(3)")
				fx.expectPrepare(ack)
				fx.mock.ExpectBegin()
				fx.mock.ExpectExec(ack).WithArgs(now, int64(7), int64(9), int64(9), sameValue{&claimed}).WillReturnResult(changed(1))
				fx.mock.ExpectRollback()
				fx.expectPrepare(held)
				fx.mock.ExpectBegin()
				fx.mock.ExpectQuery(held).WithArgs(int64(7), int64(9), int64(9), sameValue{&claimed}).WillReturnRows(fx.mock.NewRows([]string{"id"}).AddRow(int64(7)))
				fx.mock.ExpectExec(ack).WithArgs(now, int64(7), int64(7), int64(7), sameValue{&claimed}).WillReturnResult(changed(1))
				fx.mock.ExpectCommit()
			} else {
				fx.expectLeaseBatchSettle(ack, []driver.Value{now, int64(7), int64(9), int64(9), sameValue{&claimed}}, 7)
			}
			fx.expectLeaseBatchSettle(fx.sql("retryIn(3)"), []driver.Value{int64(8), int64(8), int64(8), sameValue{&claimed}}, 8)

			ds := claimBatch(t, f, 3, 3)
			err := f.SettleBatch(ctx, ds, []outcome.Outcome{outcome.Ack(), outcome.Retry(), outcome.Ack()})
			var lost *inbox.LeaseLostError
			if !errors.Is(err, inbox.ErrLeaseLost) || !errors.As(err, &lost) || len(lost.IDs) != 1 || lost.IDs[0] != 9 || lost.Table != "jobs" {
				t.Fatalf("SettleBatch: %v (%+v), want a *inbox.LeaseLostError of table jobs naming row 9 alone", err, lost)
			}
			if !strings.Contains(err.Error(), "rows [9]") {
				t.Errorf("the error does not name row 9: %v", err)
			}
			fx.closed(t, f)
		})
	}
}
