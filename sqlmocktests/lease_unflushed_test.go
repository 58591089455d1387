package sqlmocktests

import (
	"database/sql/driver"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// openLeaseUnflushed opens the lease form over fullShape on c's database for q with
// inbox.Binding.UnflushedAcks set, and returns the golden name of the ack it prepares: "ack
// unflushed" on Postgres outside transactional mode, "ack" elsewhere.
func openLeaseUnflushed(t *testing.T, c dbCase, q inbox.Binding) (*fixture, *lease.Form[dialect.Dialect], string) {
	t.Helper()
	fx := newUnflushedFixture(t, "lease", c, 1, q)
	fx.expectPreparesAcking(fx.ackStatement())
	f := lease.New(c.d, fullShape.table, nil)
	fx.opened(t, f)
	return fx, f, fx.ackStatement()
}

// TestLeaseUnflushedAcks pins what inbox.Binding.UnflushedAcks changes outside transactional mode:
// on Postgres a row's ack and a batch's carry the condition that turns synchronous_commit off
// for them, and a retry still waits; on MySQL, MariaDB and SQLite every statement is the one it
// is without the option.
func TestLeaseUnflushedAcks(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f, ack := openLeaseUnflushed(t, c, inbox.Binding{})

			fx.settleLeaseRow(t, f, 7, 1, outcome.Ack(), fx.sql(ack), c.near(time.Now()), int64(7))
			fx.settleLeaseRow(t, f, 8, 1, outcome.Retry(), fx.sql("retry"), int64(8))

			// A batch of three acked rows: one statement over the batch's ids.
			if c.mysqlFamily() {
				fx.mock.ExpectPrepare(fx.sql("stamp(3)")).WillBeClosed()
			}
			var token driver.Value
			fx.expectLeaseClaim(3, &token, leaseRow(9, 1), leaseRow(10, 1), leaseRow(11, 1))
			args := []driver.Value{c.near(time.Now()), int64(9), int64(10), int64(11), sameValue{&token}}
			if c.db == "postgres" {
				query := fx.sql("ackIn(3) returning unflushed")
				fx.expectPrepare(query)
				fx.mock.ExpectQuery(query).WithArgs(args...).WillReturnRows(fx.mock.NewRows([]string{"id"}).AddRow(int64(9)).AddRow(int64(10)).AddRow(int64(11)))
			} else {
				fx.expectLeaseBatchSettle(fx.sql("ackIn(3)"), args, 9, 10, 11)
			}
			settleBatch(t, f, claimBatch(t, f, 3, 3), outcome.Ack(), outcome.Ack(), outcome.Ack())
			fx.closed(t, f)
		})
	}
}

// TestLeaseUnflushedAcksTransactional: in transactional mode the ack commits the handler's
// writes, so it waits for the disk whatever inbox.Binding.UnflushedAcks says.
func TestLeaseUnflushedAcksTransactional(t *testing.T) {
	for _, c := range leaseTxCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f, _ := openLeaseUnflushed(t, c, inbox.Binding{Transactional: true}) // its ack: "ack"
			var token driver.Value
			fx.expectLeaseClaim(1, &token, leaseRow(7, 1))
			fx.expectBegin()
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(7), sameValue{&token}).WillReturnResult(changed(1))
			fx.expectCommit(nil)
			settle(t, f, claimOne(t, f, 7, 1), outcome.Ack())
			fx.closed(t, f)
		})
	}
}
