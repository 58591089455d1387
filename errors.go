package inbox

import (
	"fmt"

	"github.com/sqlinbox/inbox/internal/sentinel"
)

// The library's sentinel errors. Errors returned by the library wrap them with where (queue,
// table, column, statement) and what to change; test for them with errors.Is.
var (
	// ErrLeaseLost: a lease form's token no longer holds (the lease ran out and another consumer
	// may have claimed the row). The extension or settlement changed nothing.
	ErrLeaseLost = sentinel.LeaseLost
	// ErrClosed: the consumer or form is closed, or the delivery's hold on its row was already
	// given up (at shutdown, say); the row is back in the queue.
	ErrClosed = sentinel.Closed
	// ErrDialect: the dialect cannot run what was asked of it: a level its database does not open,
	// a form its database lacks the locks for, a server that is another database, or a
	// connection that loses its prepared statements (a pooler in transaction mode).
	ErrDialect = sentinel.Dialect
	// ErrSchema: the table description does not match the database: a missing table or column,
	// an identifier the database would not keep, or a column of the wrong type.
	ErrSchema = sentinel.Schema
	// ErrServerTooOld: the server predates what the library needs (Postgres 9.5, MySQL 8.0.1,
	// MariaDB 10.6, SQLite 3.35).
	ErrServerTooOld = sentinel.ServerTooOld
	// ErrAlreadyConsuming: another consumer in this process already consumes the queue.
	ErrAlreadyConsuming = sentinel.AlreadyConsuming
	// ErrTransactionHeld: in transactional mode the handler was still using the delivery's
	// transaction when it returned. Nothing was settled; the row goes back to the queue.
	ErrTransactionHeld = sentinel.TransactionHeld
	// ErrTransactionEnded: in transactional mode the database ended the delivery's transaction
	// while the handler had it (MySQL and MariaDB end the whole transaction on a deadlock, for
	// one): its writes were rolled back, every later statement through Delivery.Tx is refused,
	// and nothing is settled; the row goes back to the queue.
	ErrTransactionEnded = sentinel.TransactionEnded
	// ErrCommitUnknown: a COMMIT was sent and its answer never came (the connection broke), so
	// the transaction may have committed or not. Its connection was discarded. A settlement that
	// fails with it may have settled its rows: if it did not, they return by the form's rule.
	ErrCommitUnknown = sentinel.CommitUnknown
	// ErrDeathFailed: a row at its attempt limit can neither settle nor die: its settlement
	// failed, and so did its death (stamping dead_at, or where the table has no DeadAt column
	// deleting it, often the very statement that failed). The row stays in the table, its
	// attempt column at the limit, and no claim takes it again (Binding.MaxAttempts); a consumer
	// logs it once at ERROR and reports it among the queue's unclaimable rows.
	ErrDeathFailed = sentinel.DeathFailed
	// ErrNotFound: no row of the table has the id asked for (Reschedule): it was never
	// published, or it was deleted (where the table has no ProcessedAt or DeadAt column, a
	// settlement deletes the row).
	ErrNotFound = sentinel.NotFound
	// ErrInWork: the row is held by a consumer, so it was left unchanged (Reschedule): a row
	// lock's transaction holds it (the row lock form, or a claim under way), or its lease runs
	// ahead (the lease form). Its handler's outcome decides what becomes of it.
	ErrInWork = sentinel.InWork
	// ErrSettled: the row is processed or dead, so it was left unchanged (Reschedule): requeue a
	// dead row (admin) to run it again. A row Cancel finds processed, dead or cancelled is
	// settled too (CancelResult.Err).
	ErrSettled = sentinel.Settled
	// ErrUniqueKeyTooLong: a Message's UniqueKey is longer than MaxUniqueKey characters, which
	// the unique key column holds; nothing of the publish landed. Hash a longer natural key into
	// one.
	ErrUniqueKeyTooLong = sentinel.UniqueKeyTooLong
	// ErrPaused: a client that refuses paused queues (Client.RefusingPaused) was asked to
	// publish to a queue that is paused (Client.Pause): nothing of the call was published.
	ErrPaused = sentinel.Paused
	// ErrCancelled is the cause (context.Cause) of a handler's context that a consumer
	// cancelled because its row was cancelled while the handler ran (Cancel): stop and return;
	// the row settles as cancelled whatever the handler returns, but for an Ack outside
	// transactional mode (docs/cancel.md).
	ErrCancelled = sentinel.Cancelled
	// ErrGroupKeyTooLong: a Message's GroupKey is longer than MaxGroupKey characters, which the
	// group column holds; nothing of the publish landed. Hash a longer natural key into one.
	ErrGroupKeyTooLong = sentinel.GroupKeyTooLong
	// ErrLimitKeyTooLong: a Message's LimitKey, or the key of a limit set, is longer than
	// MaxLimitKey characters, which the limit key column and the limits' table hold; nothing was
	// written. Hash a longer natural key into one.
	ErrLimitKeyTooLong = sentinel.LimitKeyTooLong
)

// LeaseLostError is the ErrLeaseLost of a lease batch's settlement that found rows of the batch
// no longer held: IDs are the rows whose outcome it did not apply, in the batch's order, and
// every other row of the batch settled. (Outside transactional mode a row whose lease ran out
// but that no one else had taken still settles; in transactional mode a batch whose outcomes are
// all Ack settles whole or not at all, so IDs are then every row.) It matches ErrLeaseLost.
type LeaseLostError struct {
	Table string  // the table
	IDs   []int64 // the rows left unchanged, which another consumer may hold now
}

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("%v: table %q, rows %v: the lease ran out before the settlement; those rows were not changed, the others settled; see docs/errors.md#lease-lost", ErrLeaseLost, e.Table, e.IDs)
}

// Unwrap returns ErrLeaseLost.
func (e *LeaseLostError) Unwrap() error { return ErrLeaseLost }
