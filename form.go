package inbox

import (
	"context"
	"database/sql"
	"log/slog"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/outcome"
)

// Form is how a table's rows are held while their handlers run. The packages rowlock, lease and
// advisory each build one; a Consumer drives it, and so may a test. A Form value serves one
// consumer at a time: Open binds it to a database and a queue until Close.
type Form interface {
	// Open binds the form to db and b and checks it against the server before anything is
	// claimed: the dialect's pair and server version, the type of every column the table
	// description names (a type that breaks its role fails with ErrSchema naming the column and
	// the statement that fixes it), and every statement the form runs, prepared against the
	// server, or checked there by EXPLAIN where q.UnpreparedStatements asks (a missing table or
	// column fails with ErrSchema naming the table and the statement). It returns the plan the
	// consumer drives the form by.
	Open(ctx context.Context, db *sql.DB, b Binding) (Plan, error)
	// Claim claims at most max due rows of the queue, in claim order, and returns them held.
	// No rows is not an error.
	Claim(ctx context.Context, max int) ([]*Delivery, error)
	// Extend renews the hold on a delivery in work (the lease form; the others hold without it).
	// It fails with ErrLeaseLost when the hold no longer stands.
	Extend(ctx context.Context, d *Delivery) error
	// Settle applies the handler's outcome to the row and ends the hold. In transactional mode
	// an Ack commits the handler's writes with the settlement and any other outcome rolls them
	// back. It fails with ErrLeaseLost, ErrClosed, ErrTransactionHeld or ErrTransactionEnded
	// when it changed nothing.
	Settle(ctx context.Context, d *Delivery, o outcome.Outcome) error
	// Release gives the row back without an outcome (a handler abandoned at shutdown, a
	// transaction the handler held): the row is claimable again at once, and the hold ends.
	Release(ctx context.Context, d *Delivery) error
	// Close ends the binding Open made: it frees prepared statements and gives back every hold
	// still open. Settlements after Close fail with ErrClosed.
	Close() error
}

// Binding is what a consumer binds a form to when it opens it: the queue it claims from, and
// how the consumer runs.
type Binding struct {
	// Name is the queue the form claims from, a value of the table's queue column
	// (Table.Queue). Ignored where the table has none.
	Name string
	// Transactional asks for a transaction per delivery, lent to the handler as Delivery.Tx.
	Transactional bool
	// UnflushedAcks lets an Ack (and a Drop, which settles as one) commit without waiting for
	// the disk outside transactional mode, where the database sets that per statement
	// (Config.UnflushedAcks). A form that does not honour it waits; one whose ack shares its
	// transaction with other changes waits unless losing them all costs a second delivery.
	UnflushedAcks bool
	// UnpreparedStatements has the form run every statement by its text and check each at Open
	// without preparing it (Config.UnpreparedStatements). A form whose holds need a session of
	// their own (the advisory form's locks) refuses it with ErrDialect.
	UnpreparedStatements bool
	// Logger receives the form's warnings; never nil once the consumer opens the form.
	Logger *slog.Logger
	// Clock is what the form reads the time from (Binding.Now); nil: this host's clock.
	Clock Clock
	// MaxAttempts is the attempt limit (Config.MaxAttempts), where the table counts attempts:
	// no claim takes a row whose attempt column has reached it, so no delivery reads an
	// Attempt past it, whatever ended the row's last delivery (a consumer that stopped during
	// it, a settlement and a death the database both refused). Zero: no limit.
	MaxAttempts int
	// Kinds are the kinds of job the consumer runs (the kinds registered with its *Kinds), each
	// with its attempt limit, which replaces MaxAttempts for its rows; its claims take rows of
	// these kinds alone (Table.Kind), so that rows of other kinds wait for a consumer that runs
	// them. They are in the order the form binds them: by limit, then by name. Empty: rows of
	// every kind.
	Kinds []ClaimedKind
	// Backoff, when set, is what a settlement that failed leaves instead: given the delivery
	// and the settlement's error, it returns the outcome (a Retry, RetryAfter or Fail carrying
	// that error) the form then applies, under the hold it still has or through a guarded
	// statement that passes over a row another consumer holds, so that a settlement that can
	// never commit counts its attempts and backs off like a retry. A Fail is the row's death;
	// where that fails too at the attempt limit, the row is left counted at the limit (the row
	// lock form counts the attempt; the others' claims did), so that no claim takes it again,
	// and the settlement fails with ErrDeathFailed. Backoff is not called for a lost hold, a
	// lost connection (dialect.ConnectionFailed: the row returns by the form's rule, as after a
	// crash), ErrClosed, ErrTransactionHeld, ErrTransactionEnded or ErrCommitUnknown. Nil (a
	// form driven without a consumer): a failed settlement leaves the row as it was.
	Backoff func(d *Delivery, err error) outcome.Outcome
}

// ClaimedKind is a kind of job a consumer claims (Binding.Kinds), and its attempt limit (zero:
// none).
type ClaimedKind struct {
	Kind        string
	MaxAttempts int
}

// Plan is what an opened form tells the consumer about driving it.
type Plan struct {
	// Table is the table's name, as the description gives it (publishes to it wake its
	// consumers).
	Table string
	// Form names the form in what the consumer tells its Observer, as dialect.Form names it:
	// "rowlock", "lease", "advisory".
	Form string
	// ExtendEvery is how often the consumer calls Extend on each delivery in work; zero: never.
	ExtendEvery time.Duration
	// HoldsConnection says each delivery in work holds a pooled connection until it settles,
	// so the consumer keeps its deliveries to the pool's size less one.
	HoldsConnection bool
	// OwnConnection says the form keeps one pooled connection of its own from Open to Close, on
	// which its statements run when the pool has none to spare, so that they never wait behind
	// the handlers' (the lease form). The consumer counts it in the pool's budget.
	OwnConnection bool
	// SerialClaims says claims must not run side by side (SQLite: one writer): the consumer
	// keeps one claim in flight. It does so too where deliveries hold no connection and it
	// claims single rows, since each claim then takes a row for every worker waiting.
	SerialClaims bool
	// Dialect and Described are the form's database and its table as described. From them the
	// consumer asks, after a claim that found nothing, when the queue's next delayed row falls
	// due (where the table has a RetryAfter column), and waits until then where that comes
	// before its next poll. A form that leaves them zero is polled. Described also says which
	// columns of the failure lifecycle the table has (Attempt, RetryAfter, DeadAt, LastError):
	// what the consumer's retry policy and attempt limit can do there.
	Dialect   dialect.Dialect
	Described Table

	// The form's optional abilities, each nil where the form does not offer it for this
	// binding.

	// SettleAndClaim settles d by o, as Settle does, and claims at most max rows, as Claim does,
	// in one transaction, where that saves a commit (the lease form on SQLite outside
	// transactional mode: one writer commits one transaction at a time). It returns the rows
	// claimed, the settlement's error and the claim's. When the consumer calls it: see "Where
	// settlements run" in the package documentation.
	SettleAndClaim func(ctx context.Context, d *Delivery, o outcome.Outcome, max int) (claimed []*Delivery, settleErr, claimErr error)
	// FindUnclaimable returns each kind of unclaimable row the open form's queue has (see
	// Unclaimable), with at least one row; none when every row can be claimed. The forms of
	// this module offer it. A consumer searches at Run's start and then every ten minutes, and
	// logs what it finds when that changed since its last search. Each search is a few bounded
	// reads of their own (at most 1,001 ids each), which take no lock that a claim waits for.
	FindUnclaimable func(ctx context.Context) ([]Unclaimable, error)
}

// BatchForm is a form that also claims rows in batches: the rows of one batch share one hold
// (one transaction, one lease token, one locked connection), are handed to a BatchHandler
// together, and settle together, one statement per kind of outcome. The packages rowlock, lease
// and advisory build one; NewBatchConsumer drives it.
//
// Extend on any delivery of a batch renews the hold of the whole batch. Settle and Release on a
// single delivery of a batch fail: a batch settles with SettleBatch and gives its rows back with
// ReleaseBatch.
type BatchForm interface {
	Form
	// ClaimBatch claims at most max due rows of the queue, in claim order, under one hold. No
	// rows is not an error. In transactional mode every delivery lends the same transaction.
	ClaimBatch(ctx context.Context, max int) ([]*Delivery, error)
	// SettleBatch applies os[i] to ds[i], the rows of one ClaimBatch, and ends the batch's hold.
	// In transactional mode the handler's writes commit with the settlements only when every
	// outcome is Ack; otherwise they roll back and each row settles by its outcome, an Ack as a
	// Retry (its writes did not land). A row the batch no longer holds is left unchanged and
	// reported with ErrLeaseLost (the lease form's *LeaseLostError names those rows); the other
	// rows settle.
	SettleBatch(ctx context.Context, ds []*Delivery, os []outcome.Outcome) error
	// ReleaseBatch gives the rows of one ClaimBatch back without an outcome and ends the hold.
	ReleaseBatch(ctx context.Context, ds []*Delivery) error
}

// The functions below are the rest of the forms' contract with the consumer (see "Writing a
// form" in the package documentation): a form calls them on the deliveries it claims, and
// nothing else needs them.

// SetColumns records the values of the application's own columns of table
// (names, as Table.Columns describes them) that the claim read with d's row, in that order,
// for Column to read. The form shares names between deliveries; values becomes d's.
func SetColumns(d *Delivery, table string, names []string, values []any) {
	d.ownTable, d.ownNames, d.ownValues = table, names, values
}

// SetHold records h, the claiming form's handle on d's row (a transaction, a
// lease token, a locked connection), which HoldOf gives back when the delivery returns to the
// form. Handlers never see it.
func SetHold(d *Delivery, h any) { d.hold = h }

// HoldOf returns the handle SetHold recorded on d as an H, and whether there is
// one of that type (a delivery another form claimed has none).
func HoldOf[H any](d *Delivery) (H, bool) {
	h, ok := d.hold.(H)
	return h, ok
}

// LendTx lends tx, a transaction the form began through dialect dl on table
// table, to the handlers of ds, the rows of one claim (one delivery, or a batch whose deliveries
// share tx): each Delivery.Tx becomes one guarded view of tx. The guard counts the statements
// running through it. After a statement fails, and before the next statement after rows were
// read (whose errors reach only their reader), it asks dl.TxEnded whether the database ended
// tx; once it has, the guard refuses every statement with an error wrapping
// ErrTransactionEnded, so that nothing the handler runs lands outside the transaction (MySQL
// and MariaDB would run it in autocommit). TakeBackTx ends the loan before the form settles.
func LendTx(tx dialect.Tx, dl dialect.Dialect, table string, ds ...*Delivery) {
	l := &loan{tx: tx, dl: dl, table: table, ds: ds}
	for _, d := range ds {
		d.lent = l
		d.Tx = l
	}
}

// TakeBackTx ends the handler's use of d.Tx (and of every delivery's it was
// lent with), so that later statements through it fail. It fails with ErrTransactionHeld when a
// statement of the handler's is still running on the transaction (from a goroutine the handler
// left behind, or a handler abandoned at shutdown), and with ErrTransactionEnded when the
// database ended the transaction while the handler had it. Either way the form must settle
// nothing and give the rows back. A held transaction must not be waited for: database/sql's
// Rollback waits for the statement running on it, which may run for as long as the handler
// likes, so the form rolls such a transaction back in the background. Every call after the
// first, for any delivery of the loan, returns the first call's error.
func TakeBackTx(d *Delivery) error {
	if d.lent == nil {
		return nil
	}
	return d.lent.takeBack()
}
