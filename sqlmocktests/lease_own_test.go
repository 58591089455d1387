package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// TestLeaseOwnConnection pins the lease form's statements while the pool has no connection to
// spare: with a pool of two, Open keeps one for the form (the plan says so) and prepares on the
// other; once the application holds that other, the claim (on MySQL its transaction), the
// extensions and the ack run on the form's own connection, each prepared there once by its
// text; Close frees them.
func TestLeaseOwnConnection(t *testing.T) {
	checkLeaseOwnConnection(t, inbox.Binding{})
}

// checkLeaseOwnConnection runs, on Postgres and MySQL, the lease form opened for q on a pool of
// two while the application holds the pool's other connection: a claim, two extensions and an
// ack on the form's own connection, each statement prepared there once by its text before it
// first runs, or where q asks for unprepared statements run by its text alone.
func checkLeaseOwnConnection(t *testing.T, q inbox.Binding) {
	for _, c := range []dbCase{onPostgres, onMySQL} {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openLease(t, c, fullShape, 2, q)
			if !fx.plan.OwnConnection {
				t.Fatalf("plan %+v on a pool of two, want OwnConnection", fx.plan)
			}
			app, err := fx.db.Conn(context.Background()) // the pool's other connection
			if err != nil {
				t.Fatal(err)
			}

			now := time.Now()
			var claimed, extended, again driver.Value
			claim, tok := fx.sql("claim"), c.token(now.Add(lease.DefaultLease), &claimed)
			if c.db == "postgres" {
				fx.expectPrepareOnOwn(claim)
				fx.mock.ExpectQuery(claim).WithArgs(append(fx.leaseClaimArgs(now, 1), tok)...).WillReturnRows(fullShape.claimed("", leaseRow(7, 1)))
			} else {
				fx.mock.ExpectBegin()
				fx.expectPrepareOnOwn(claim)
				fx.mock.ExpectQuery(claim).WithArgs(fx.leaseClaimArgs(now, 1)...).WillReturnRows(fullShape.claimed("", leaseRow(7, 0)))
				fx.expectPrepareOnOwn(fx.sql("stamp(1)"))
				fx.mock.ExpectExec(fx.sql("stamp(1)")).WithArgs(tok, int64(7)).WillReturnResult(changed(1))
				fx.mock.ExpectCommit()
			}
			fx.expectPrepareOnOwn(fx.sql("extend"))
			fx.mock.ExpectExec(fx.sql("extend")).WithArgs(c.token(now.Add(lease.DefaultLease), &extended), int64(7), sameValue{&claimed}).WillReturnResult(changed(1))
			fx.mock.ExpectExec(fx.sql("extend")).WithArgs(c.token(now.Add(lease.DefaultLease), &again), int64(7), sameValue{&extended}).WillReturnResult(changed(1))
			fx.expectPrepareOnOwn(fx.sql("ack"))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(now), int64(7), sameValue{&again}).WillReturnResult(changed(1))

			d := claimOne(t, f, 7, 1)
			for range 2 {
				extend(t, f, d)
			}
			settle(t, f, d, outcome.Ack())
			app.Close()
			fx.closed(t, f)
		})
	}
}

// expectPrepareOnOwn expects query prepared on the form's own connection, and closed by the end;
// nothing where the fixture's queue asks for unprepared statements, which run by their text.
func (fx *fixture) expectPrepareOnOwn(query string) {
	if !fx.q.UnpreparedStatements {
		fx.mock.ExpectPrepare(query).WillBeClosed()
	}
}
