package sqlmocktests

import (
	"context"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// TestRowlockSettleAndClaimChains pins the statement sequence of the row lock form's
// settle-and-claim on each dialect: the settlement's statement, COMMIT AND CHAIN, and the claim
// in the chained transaction, which began no transaction of its own (one BEGIN, at the level);
// the chained claim's row settles as any other, and a chained claim that finds no row rolls its
// transaction back.
func TestRowlockSettleAndClaimChains(t *testing.T) {
	for _, c := range rowlockCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openRowlock(t, c, fullShape, 0, inbox.Binding{Name: rowlockQueue})
			ack := func(id int64) {
				fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), id).WillReturnResult(changed(1))
			}
			chainedClaim := func(rows ...row) {
				fx.expectQuery(fx.sql("claim"), fx.rowlockClaimArgs()...).WillReturnRows(fx.sh.claimed(fx.q.Name, rows...))
			}
			fx.expectRowlockClaim("claim", rowlockRow(7))
			ack(7)
			fx.mock.ExpectExec("COMMIT AND CHAIN").WillReturnResult(changed(0))
			chainedClaim(rowlockRow(8))
			ack(8)
			fx.mock.ExpectExec("COMMIT AND CHAIN").WillReturnResult(changed(0))
			chainedClaim()
			fx.mock.ExpectRollback()

			d := rowlockClaimOne(t, f)
			ds, settled, claimErr := fx.plan.SettleAndClaim(context.Background(), d, outcome.Ack(), 1)
			if settled != nil || claimErr != nil || len(ds) != 1 || ds[0].ID != 8 || ds[0].Attempt != 3 {
				t.Fatalf("SettleAndClaim = %v, %v, %v; want row 8 at attempt 3, no errors", ds, settled, claimErr)
			}
			ds, settled, claimErr = fx.plan.SettleAndClaim(context.Background(), ds[0], outcome.Ack(), 1)
			if settled != nil || claimErr != nil || len(ds) != 0 {
				t.Fatalf("SettleAndClaim on an empty queue = %v, %v, %v; want no rows, no errors", ds, settled, claimErr)
			}
			fx.closed(t, f)
			fx.checkLevels(t, 1)
		})
	}
}

// TestRowlockNoChainBeforePostgres12: on Postgres 11, which has no COMMIT AND CHAIN, the row
// lock form offers no settle-and-claim; its settlements commit, and its claims begin, apart.
func TestRowlockNoChainBeforePostgres12(t *testing.T) {
	fx := newFixture(t, "rowlock", onPostgres, fullShape, 0, inbox.Binding{Name: rowlockQueue})
	expectVersion(fx.recorder, "postgres", "110022")
	expectVersion(fx.recorder, "postgres", "110022")
	expectColumns(fx.recorder, "postgres", fullShape.table, "")
	fx.expectPrepares()
	f := onPostgres.rowlockForm(fullShape.table)
	fx.opened(t, f)
	if fx.plan.SettleAndClaim != nil {
		t.Errorf("plan has a settle-and-claim on Postgres 11")
	}
	fx.closed(t, f)
}
