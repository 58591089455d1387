package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"errors"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// TestLeaseSettleAndClaimSQLite pins the lease form's settlement that claims the next row on
// SQLite: the ack and the claim (its SELECT and its stamp) in one transaction, one commit; and when that transaction
// fails, the ack and the claim apart, as Settle and Claim run them.
func TestLeaseSettleAndClaimSQLite(t *testing.T) {
	var c leaseCase
	for _, lc := range leaseCases {
		if lc.name == "sqlite" {
			c = lc
		}
	}
	ctx := context.Background()
	m := newRecorder(t, 2)
	st := c.jobs
	f := openLease(t, m, c, st)
	claimRows := func(id int64) *sqlmock.Rows {
		return sqlmock.NewRows([]string{"id", "payload", "attempt"}).AddRow(id, []byte("payload"), int64(0))
	}
	now := time.Now()
	due := []driver.Value{leaseTime{want: now}, leaseTime{want: now}, int64(1)}

	var first, second, third driver.Value
	expectClaim(m, c, st, true, &first, leaseClaimed{7, 1})
	d := claimOne(t, f, 7, 1)

	// One transaction: the guarded ack, the claim of the next row, one COMMIT.
	m.mock.ExpectExec("BEGIN IMMEDIATE").WillReturnResult(leaseResult(0))
	m.mock.ExpectExec(st.ack).WithArgs(int64(7), leaseSame{&first}).WillReturnResult(leaseResult(1))
	m.mock.ExpectQuery(st.claim).WithArgs(due...).WillReturnRows(claimRows(8))
	m.mock.ExpectExec(st.stamp).WithArgs(leaseTime{want: now.Add(lease.DefaultLease), into: &second}, int64(8)).WillReturnResult(leaseResult(1))
	m.mock.ExpectExec("COMMIT").WillReturnResult(leaseResult(0))
	ds, settleErr, claimErr := f.SettleAndClaim(ctx, d, outcome.Ack(), 1)
	if settleErr != nil || claimErr != nil || len(ds) != 1 || ds[0].ID != 8 || ds[0].Attempt != 1 {
		t.Fatalf("SettleAndClaim: %v, %v, %v; want row 8 claimed and the ack settled", ds, settleErr, claimErr)
	}

	// The transaction fails: SQLite rolled it back, and the ack and the claim run apart.
	busy := errors.New("database is locked (5) (SQLITE_BUSY)")
	m.mock.ExpectExec("BEGIN IMMEDIATE").WillReturnResult(leaseResult(0))
	m.mock.ExpectExec(st.ack).WithArgs(int64(8), leaseSame{&second}).WillReturnError(busy)
	m.mock.ExpectExec("BEGIN").WillReturnError(errors.New("cannot start a transaction within a transaction"))
	m.mock.ExpectExec("ROLLBACK").WillReturnResult(leaseResult(0))
	m.mock.ExpectExec(st.ack).WithArgs(int64(8), leaseSame{&second}).WillReturnResult(leaseResult(1))
	expectClaim(m, c, st, true, &third, leaseClaimed{9, 1})
	ds, settleErr, claimErr = f.SettleAndClaim(ctx, ds[0], outcome.Ack(), 1)
	if settleErr != nil || claimErr != nil || len(ds) != 1 || ds[0].ID != 9 {
		t.Fatalf("SettleAndClaim after a failed transaction: %v, %v, %v; want row 9 claimed and the ack settled apart", ds, settleErr, claimErr)
	}
	// Close gives the row claimed last back.
	m.mock.ExpectExec(st.retry).WithArgs(int64(9), leaseSame{&third}).WillReturnResult(leaseResult(1))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.mock.ExpectationsWereMet(); err != nil {
		t.Fatal(err)
	}
}
