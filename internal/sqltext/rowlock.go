package sqltext

import (
	"strconv"

	"github.com/sqlinbox/inbox/outcome"
)

// RowLock builds the row lock form's statements: a claim that locks its rows with SELECT … FOR
// UPDATE SKIP LOCKED (dialect.Caps.SkipLocked) in a transaction that stays open while the
// handler runs, and settlements that run in that transaction before its commit. That commit is
// the claim's too, and it waits for the disk unless the builder is Unflushed.
type RowLock struct {
	s         SQL
	unflushed bool // the settlements carry Caps.UnflushedCommit
}

// HasGroups reports whether the table has a FIFO group column.
func (r RowLock) HasGroups() bool { return r.s.HasGroups() }

// HasLimits reports whether the description names a limits table.
func (r RowLock) HasLimits() bool { return r.s.HasLimits() }

// HasRates reports whether the description names a rates table.
func (r RowLock) HasRates() bool { return r.s.HasRates() }

// RowLock returns the row lock form's statements over the table.
func (s SQL) RowLock() RowLock { return RowLock{s: s} }

// Unflushed returns the builder whose settlements turn the transaction they run in, the claim's,
// into one that commits without waiting for the disk, where the database sets durability per
// statement (dialect.Caps.UnflushedCommit); elsewhere it builds what r builds. The setting is
// the whole transaction's: a form settles with it only where every statement of that
// transaction may be lost in a server crash at the cost of a second delivery, and never in the
// handler's transaction (transactional mode), whose writes are the user's.
func (r RowLock) Unflushed() RowLock {
	r.unflushed = true
	return r
}

// Claim selects and locks up to n due rows in claim order (the limit is written into the
// text), passing over the rows other transactions lock. It binds Due's arguments.
//
// Over a table of FIFO groups it is ClaimSkipping(n, 0): the row's group follows the Columns,
// and the claim takes only heads of groups not paused, binding the table's name and the queue
// after Due's arguments.
func (r RowLock) Claim(n int) Statement {
	if r.s.HasGroups() {
		return r.ClaimSkipping(n, 0)
	}
	s, p := r.s, r.s.Params()
	return p.statement("SELECT " + s.Columns("") + " FROM " + s.t.Name + " WHERE " + s.Due(p, "") +
		" ORDER BY " + s.Order("") + " LIMIT " + strconv.Itoa(n) + " FOR UPDATE SKIP LOCKED")
}

// Settle applies an outcome of kind k to the rows g names (ByID, or ByIDs for a batch):
//
//	Ack, Drop          DELETE, or SET processed_at = ?; binds the time first where it stamps
//	Retry, none        SET attempt = attempt + 1
//	RetryAfter         SET retry_after = ? (and last_error = ?, attempt = attempt + 1); binds
//	                   the time first, then the last error where the table has the column
//	Fail               SET dead_at = ? (and last_error = ?, attempt = attempt + 1), binding as
//	                   RetryAfter does; as Ack on a table without a dead_at column
//
// then g's ids. It is empty where the outcome changes nothing in the row: a retry on a table
// without an attempt column (rolling the claim back is the retry), and a RetryAfter on a table
// without a retry_after column (which the form settles as a retry). Its transaction waits for
// the disk unless the builder is Unflushed.
func (r RowLock) Settle(k outcome.Kind, g Guard) Statement {
	return r.s.settle(k, g, settles{stamped: attemptCounted(r.s.t, ", "), retried: attemptCounted(r.s.t, ""), failAsAck: true, unflushed: r.unflushed})
}

// Relock locks one row again after its settlement failed and rolled back, for the back-off that
// follows in a transaction of its own: it passes over the row when another transaction holds
// it, it was settled after all (processed or dead) or its attempt has moved since the claim. It
// binds the id, then the attempt the claim read where the table counts attempts.
func (r RowLock) Relock() Statement {
	t, p := r.s.t, r.s.Params()
	q := "SELECT " + t.ID + " FROM " + t.Name + " WHERE " + t.ID + " = " + p.Next(ArgID)
	for _, c := range []string{t.ProcessedAt, t.DeadAt} {
		if c != "" {
			q += " AND " + c + " IS NULL"
		}
	}
	if t.Attempt != "" {
		q += " AND COALESCE(" + t.Attempt + ", 0) = " + p.Next(ArgAttempt)
	}
	return p.statement(q + " FOR UPDATE SKIP LOCKED")
}

// Savepoint marks where statements that may be undone begin: in transactional mode the
// handler's writes, inside the claim's transaction; in a back-off's transaction a row's death,
// which the database may refuse. It binds nothing.
func (RowLock) Savepoint() Statement { return Statement{SQL: "SAVEPOINT " + savepoint} }

// RollbackToSavepoint undoes what ran since Savepoint and keeps the transaction's row locks:
// the handler's writes before every settlement but an Ack's in transactional mode, a death the
// database refused in a back-off. It binds nothing.
func (RowLock) RollbackToSavepoint() Statement {
	return Statement{SQL: "ROLLBACK TO SAVEPOINT " + savepoint}
}

const savepoint = "inbox_handler"

// attemptCounted is the SET assignment that counts an attempt, after sep, where the table
// counts them; empty where it does not.
func attemptCounted(t Table, sep string) string {
	if t.Attempt == "" {
		return ""
	}
	return sep + t.Attempt + " = COALESCE(" + t.Attempt + ", 0) + 1"
}

// stamp is the SET assignment of a time to col, then of the last error where the table keeps
// it: the head of a RetryAfter's and a Fail's settlement. It binds the time, then the text.
func (s SQL) stamp(col string, p *Params) string {
	set := col + " = " + p.Next(ArgAt)
	if s.t.LastError != "" {
		set += ", " + s.t.LastError + " = " + p.Next(ArgError)
	}
	return set
}
