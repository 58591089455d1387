package sqlmocktests

import (
	"database/sql/driver"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// unflushedAcks reports whether a form opened for q on c's database acks without waiting for the
// disk: on Postgres, outside transactional mode, with inbox.Binding.UnflushedAcks.
func unflushedAcks(c dbCase, q inbox.Binding) bool {
	return c.db == "postgres" && q.UnflushedAcks && !q.Transactional
}

// newUnflushedFixture is a fixture of form over fullShape on c's database on a mock of at most
// maxOpen connections (see newFixture), for q with inbox.Binding.UnflushedAcks set, that expects the
// server checks of the form's Open (expectServer).
func newUnflushedFixture(t *testing.T, form string, c dbCase, maxOpen int, q inbox.Binding) *fixture {
	t.Helper()
	q.UnflushedAcks = true
	fx := newFixture(t, form, c, fullShape, maxOpen, q)
	fx.expectServer()
	return fx
}

// ackStatement is the golden name of the statement a delivery's Ack runs: "ack unflushed" where
// the form's acks do not wait for the disk (unflushedAcks), "ack" elsewhere.
func (fx *fixture) ackStatement() string {
	if unflushedAcks(fx.c, fx.q) {
		return "ack unflushed"
	}
	return "ack"
}

// openRowlockUnflushed opens the row lock form over fullShape on c's database for q with
// inbox.Binding.UnflushedAcks set, and returns the golden name of the ack a delivery's Ack runs:
// where the acks are unflushed the form prepares "ack unflushed" after "ack", which it keeps for
// the back-off.
func openRowlockUnflushed(t *testing.T, c dbCase, q inbox.Binding) (*fixture, *rowlock.Form[rowlock.Dialect], string) {
	t.Helper()
	fx := newUnflushedFixture(t, "rowlock", c, 0, q)
	ack := fx.ackStatement()
	for _, name := range openStatements["rowlock"] {
		if fx.st.has(name) {
			fx.expectPrepare(fx.sql(name))
		}
		if name == "ack" && ack != "ack" {
			fx.expectPrepare(fx.sql(ack))
		}
	}
	f := c.rowlockForm(fullShape.table)
	fx.opened(t, f)
	return fx, f, ack
}

// TestRowlockUnflushedAcks pins what inbox.Binding.UnflushedAcks changes outside transactional
// mode: on Postgres an Ack's and a Drop's settlement carry the condition that turns
// synchronous_commit off for the claim's transaction, and a Retry and a RetryAfter still wait;
// on MySQL and MariaDB every statement is the one it is without the option.
func TestRowlockUnflushedAcks(t *testing.T) {
	for _, c := range rowlockCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f, ack := openRowlockUnflushed(t, c, inbox.Binding{Name: rowlockQueue})
			for _, s := range []struct {
				o    outcome.Outcome
				stmt string
				args []driver.Value
			}{
				{outcome.Ack(), ack, []driver.Value{c.near(time.Now()), int64(7)}},
				{outcome.Drop(), ack, []driver.Value{c.near(time.Now()), int64(7)}},
				{outcome.Retry(), "retry", []driver.Value{int64(7)}},
				{outcome.RetryAfter(time.Hour), "retryAfter", []driver.Value{c.near(time.Now().Add(time.Hour)), nil, int64(7)}},
			} {
				fx.expectRowlockClaim("claim", rowlockRow(7))
				fx.mock.ExpectExec(fx.sql(s.stmt)).WithArgs(s.args...).WillReturnResult(changed(1))
				fx.mock.ExpectCommit()
				settle(t, f, rowlockClaimOne(t, f), s.o)
			}
			fx.closed(t, f)
		})
	}
}

// TestRowlockUnflushedAcksBatch: the setting is the whole transaction's, so on Postgres a batch
// settles by the unflushed ack only where every row acks; a batch that also retries a row
// settles by the ack that waits. On MySQL a batch settles row by row with the one ack.
func TestRowlockUnflushedAcksBatch(t *testing.T) {
	for _, c := range rowlockBatchCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f, _ := openRowlockUnflushed(t, c, inbox.Binding{Name: rowlockQueue})
			now := []driver.Value{c.near(time.Now())}
			fx.mock.ExpectPrepare(fx.sql("claim(3)")).WillBeClosed()
			fx.expectRowlockSettlePrepares()

			fx.expectRowlockClaim("claim(3)", rowlockBatchRows(3)...)
			if fx.inLists() {
				// Prepared at the claim, on the connection the batch then takes.
				in := fx.sql("ackIn(3) unflushed")
				fx.mock.ExpectExec(in).WithArgs(padded(now, []int64{1, 2, 3}, 3)...).WillReturnResult(changed(3))
			} else {
				fx.expectRowlockBatchGroups([]rowlockBatchGroup{{"ack", now, []int64{1, 2, 3}}})
			}
			fx.mock.ExpectCommit()
			settleBatch(t, f, claimBatch(t, f, 3, 3), outcome.Ack(), outcome.Drop(), outcome.Ack())

			mixed := []rowlockBatchGroup{{"ack", now, []int64{1, 3}}, {"retry", nil, []int64{2}}}
			fx.expectRowlockClaim("claim(3)", rowlockBatchRows(3)...)
			fx.expectRowlockBatchGroups(mixed)
			fx.mock.ExpectCommit()
			settleBatch(t, f, claimBatch(t, f, 3, 3), outcome.Ack(), outcome.Retry(), outcome.Ack())
			fx.closed(t, f)
		})
	}
}

// TestRowlockUnflushedAcksTransactional: in transactional mode the ack commits the handler's
// writes, so it waits for the disk whatever inbox.Binding.UnflushedAcks says, and the form
// prepares no unflushed ack.
func TestRowlockUnflushedAcksTransactional(t *testing.T) {
	for _, c := range rowlockCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f, ack := openRowlockUnflushed(t, c, inbox.Binding{Name: rowlockQueue, Transactional: true})
			if ack != "ack" {
				t.Fatalf("the ack in transactional mode is %q, want the one that waits", ack)
			}
			fx.expectRowlockClaim("claim", rowlockRow(7))
			fx.mock.ExpectExec(fx.sql("savepoint")).WillReturnResult(changed(0))
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(7)).WillReturnResult(changed(1))
			fx.mock.ExpectCommit()
			settle(t, f, rowlockClaimOne(t, f), outcome.Ack())
			fx.closed(t, f)
		})
	}
}

// openAdvisoryUnflushed opens the advisory form over fullShape on c's database for q with
// inbox.Binding.UnflushedAcks set, and returns the golden names of its acks, a row's and a batch's
// of three: "ack unflushed" and "ackMany(3) unflushed" where the acks are unflushed, which Open
// checks in the ack's place.
func openAdvisoryUnflushed(t *testing.T, c dbCase, q inbox.Binding) (fx *fixture, f *advisory.Form[advisory.Dialect], ack, ackMany string) {
	t.Helper()
	fx = newUnflushedFixture(t, "advisory", c, 2, q)
	ack, ackMany = "ack", "ackMany(3)"
	if unflushedAcks(c, fx.q) {
		ack, ackMany = "ack unflushed", "ackMany(3) unflushed"
	}
	fx.expectPreparesAcking(ack)
	f = c.advisoryForm(fullShape.table, fullShape.key)
	fx.opened(t, f)
	t.Cleanup(func() { f.Close() })
	return fx, f, ack, ackMany
}

// TestAdvisoryUnflushedAcks pins what inbox.Binding.UnflushedAcks changes outside transactional
// mode: on Postgres a row's ack and a batch's carry the condition that turns
// synchronous_commit off for them, and a RetryAfter still waits; on MySQL and MariaDB every
// statement is the one it is without the option. (The take on Postgres carries the condition
// whatever the option says: its golden text.)
func TestAdvisoryUnflushedAcks(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f, ack, ackMany := openAdvisoryUnflushed(t, c, inbox.Binding{Name: "q"})

			fx.expectAdvisoryClaim(1, 1, 7)
			fx.mock.ExpectExec(fx.sql(ack)).WithArgs(c.near(time.Now()), int64(7)).WillReturnResult(changed(1))
			fx.expectUnlock(7).WillReturnRows(fx.unlocked(true))
			settle(t, f, claimed(t, f.Claim, 1)[0], outcome.Ack())

			fx.expectAdvisoryClaim(1, 1, 8)
			fx.mock.ExpectExec(fx.sql("retryAfter")).WithArgs(c.near(time.Now().Add(time.Hour)), nil, int64(8)).WillReturnResult(changed(1))
			fx.expectUnlock(8).WillReturnRows(fx.unlocked(true))
			settle(t, f, claimed(t, f.Claim, 1)[0], outcome.RetryAfter(time.Hour))

			fx.expectAdvisoryBatchClaim(3, 1, 9, 10, 11)
			fx.mock.ExpectExec(fx.sql(ackMany)).WithArgs(c.near(time.Now()), int64(9), int64(10), int64(11)).WillReturnResult(changed(3))
			fx.expectUnlockMany(3, 9, 10, 11)
			ds := claimed(t, f.ClaimBatch, 3)
			settleBatch(t, f, ds, outcome.Ack(), outcome.Drop(), outcome.Ack())
			fx.closed(t, f)
			fx.noWarnings(t)
		})
	}
}

// TestAdvisoryUnflushedAcksTransactional: in transactional mode every settlement waits for the
// disk whatever inbox.Binding.UnflushedAcks says: the Ack in the handler's transaction, which
// commits its writes, and a Drop on the connection after the rollback.
func TestAdvisoryUnflushedAcksTransactional(t *testing.T) {
	for _, c := range advisoryCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f, ack, _ := openAdvisoryUnflushed(t, c, inbox.Binding{Name: "q", Transactional: true})
			if ack != "ack" {
				t.Fatalf("the ack in transactional mode is %q, want the one that waits", ack)
			}
			fx.expectAdvisoryClaim(1, 1, 7)
			fx.mock.ExpectBegin()
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(sqlmock.AnyArg(), int64(7)).WillReturnResult(changed(1))
			fx.mock.ExpectCommit()
			fx.expectUnlock(7).WillReturnRows(fx.unlocked(true))
			settle(t, f, claimed(t, f.Claim, 1)[0], outcome.Ack())

			fx.expectAdvisoryClaim(1, 1, 8)
			fx.mock.ExpectBegin()
			fx.mock.ExpectRollback()
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(sqlmock.AnyArg(), int64(8)).WillReturnResult(changed(1))
			fx.expectUnlock(8).WillReturnRows(fx.unlocked(true))
			settle(t, f, claimed(t, f.Claim, 1)[0], outcome.Drop())
			fx.closed(t, f)
			fx.noWarnings(t)
		})
	}
}
