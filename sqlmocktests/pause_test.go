package sqlmocktests

import (
	"database/sql/driver"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// The claims over a table whose description names a pauses table (inbox.Table.Pauses): the
// golden files' "paused" shape, whose claims pass over the paused queues, binding the table's
// name and the queue after Due's other arguments.

// pausedShape has every role and the pauses table inbox_pauses.
var pausedShape = goldenShape("paused")

// pauseArgs are the arguments a claim binds for its pause predicate: the table's name as
// described, then the queue's where the table has a queue column.
func (fx *fixture) pauseArgs() []driver.Value {
	if fx.sh.table.Pauses == "" {
		return nil
	}
	args := []driver.Value{fx.sh.table.Name}
	if fx.sh.table.Queue != "" {
		args = append(args, fx.q.Name)
	}
	return args
}

// TestRowlockClaimsPassOverPausedQueues: each claim binds now, the queue, the table's name and
// the queue again; a claim that finds nothing (the queue paused) ends its transaction.
func TestRowlockClaimsPassOverPausedQueues(t *testing.T) {
	for _, c := range rowlockCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openRowlock(t, c, pausedShape, 0, inbox.Binding{Name: "emails"})
			if got, want := fx.rowlockClaimArgs()[2:], []driver.Value{"jobs", "emails"}; !equalValues(got, want) {
				t.Fatalf("the claim binds %v for its pause, want %v", got, want)
			}
			fx.expectRowlockClaim("claim", rowlockRow(5))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(fx.c.near(time.Now()), int64(5)).WillReturnResult(changed(1))
			fx.mock.ExpectCommit()
			settle(t, f, rowlockClaimOne(t, f), outcome.Ack())

			fx.expectRowlockClaim("claim")
			fx.mock.ExpectRollback()
			if ds := claimed(t, f.Claim, 1); len(ds) != 0 {
				t.Fatalf("an empty claim returned %d rows", len(ds))
			}
			fx.closed(t, f)
		})
	}
}

// TestLeaseClaimsPassOverPausedQueues: on every database the lease claim binds now, the queue,
// the table's name and the queue again, then the lease's arguments.
func TestLeaseClaimsPassOverPausedQueues(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openLease(t, c, pausedShape, 1, inbox.Binding{Name: "emails"})
			if got, want := fx.leaseClaimArgs(time.Now(), 1)[2:4], []driver.Value{"jobs", "emails"}; !equalValues(got, want) {
				t.Fatalf("the claim binds %v for its pause, want %v", got, want)
			}
			var token driver.Value
			fx.expectLeaseClaim(1, &token, leaseRow(7, 1))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(7), sameValue{&token}).WillReturnResult(changed(1))
			settle(t, f, claimOne(t, f, 7, 1), outcome.Ack())
			fx.closed(t, f)
		})
	}
}
