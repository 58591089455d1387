package sqlmocktests

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// TestLeaseBatchInWorkWaitsForNoPooledConnection: a batch in work never waits for a connection
// of the pool, where the handlers' transactions may hold them all (one waiting for a lock that
// another's transaction holds, whose settlement would wait for the pool: the stall
// TestClusterGalera's conflicting handlers met). On a pool of three, the batch's transaction
// holds one, the form's own connection another and the application the third: the batch's
// extension, over an id list not yet prepared, runs by its text on the form's own connection,
// and its ack runs inside the batch's transaction, prepared when the batch was claimed. No
// request waits for the pool.
func TestLeaseBatchInWorkWaitsForNoPooledConnection(t *testing.T) {
	for _, c := range []dbCase{onPostgres, onMySQL, onMariaDB} {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openLease(t, c, fullShape, 3, inbox.Binding{Transactional: true})
			if !fx.plan.OwnConnection {
				t.Fatalf("plan %+v on a pool of three in transactional mode, want OwnConnection", fx.plan)
			}
			if c.mysqlFamily() {
				fx.expectPrepare(fx.sql("stamp(3)"))
			}
			var claimed, extended driver.Value
			fx.expectLeaseClaim(3, &claimed, leaseRow(7, 1), leaseRow(8, 1), leaseRow(9, 1))
			ack, extendIn := fx.sql("ackIn(3)"), fx.sql("extendIn(3)")
			fx.expectPrepare(ack)
			fx.expectBegin()
			fx.mock.ExpectExec(extendIn).WithArgs(c.token(time.Now().Add(lease.DefaultLease), &extended), int64(7), int64(8), int64(9), sameValue{&claimed}).WillReturnResult(changed(3))
			fx.mock.ExpectExec(ack).WithArgs(c.near(time.Now()), int64(7), int64(8), int64(9), sameValue{&extended}).WillReturnResult(changed(3))
			fx.expectCommit(nil)

			ds := claimBatch(t, f, 3, 3)
			app, err := fx.db.Conn(context.Background()) // the pool's last connection
			if err != nil {
				t.Fatal(err)
			}
			ctx, waited := failOnPoolWait(t, fx.db)
			if err := f.Extend(ctx, ds[0]); err != nil {
				t.Fatalf("Extend: %v (waited for the pool: %v)", err, waited())
			}
			if err := f.SettleBatch(ctx, ds, []outcome.Outcome{outcome.Ack(), outcome.Ack(), outcome.Ack()}); err != nil {
				t.Fatalf("SettleBatch: %v (waited for the pool: %v)", err, waited())
			}
			if waited() {
				t.Error("a request waited for a connection of the pool")
			}
			app.Close()
			fx.closed(t, f)
		})
	}
}

// failOnPoolWait returns a context, cancelled when the test ends, that is cancelled as soon as a
// request begins to wait for a connection of db's pool (its WaitCount grows), so that a call that
// would wait fails at once rather than block, and reports whether one did.
func failOnPoolWait(t *testing.T, db *sql.DB) (context.Context, func() bool) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	base := db.Stats().WaitCount
	go func() {
		for ctx.Err() == nil {
			if db.Stats().WaitCount > base {
				cancel()
				return
			}
			time.Sleep(time.Millisecond)
		}
	}()
	return ctx, func() bool { return db.Stats().WaitCount > base }
}
