// Package rowlock is the row lock form, the default: a claim locks its row with SELECT … FOR
// UPDATE SKIP LOCKED in a transaction that stays open while the handler runs, and the
// settlement commits that transaction. Postgres (9.5+), MySQL (8.0.1+) and MariaDB (10.6+);
// SQLite has no row locks, so New on a SQLite dialect does not compile (take package lease).
//
// # What it guarantees
//
// Rows another claim holds are passed over, so claims of several workers and processes never
// wait for each other. The settlement's statement runs in the claim's transaction and commits
// it, so a row and its outcome change together. When the process dies or its connection is
// cut, the database rolls the transaction back and the row is claimable again at once; that
// costs no attempt, since a row's attempt column only moves when a Retry or RetryAfter commits
// (a delivery reads it plus one: the first delivery reads 1). Each transaction runs on a
// connection pinned for it (dialect.Tx): a claim, settlement or release whose COMMIT or
// ROLLBACK fails discards that connection, which ends the transaction with its session, rather
// than give it back to the pool with the transaction open. A COMMIT whose answer never came
// (inbox.ErrCommitUnknown) may have settled its rows.
//
// # Durability
//
// A delivery's claim and settlement share one transaction, which commits once, and that commit
// waits for the disk. Where inbox.Config.UnflushedAcks asks, on Postgres outside transactional
// mode, an Ack's or a Drop's does not (nor a Fail's on a table without dead_at, which settles
// as a Drop): the settlement's statement turns synchronous_commit off for its transaction
// (dialect.Caps.UnflushedCommit), with no round trip of its own, which saves a flush (about a
// third of a millisecond on a local disk) per message. A server crash may then forget the last
// acks, whose rows are claimable again, a second delivery. The setting holds for the whole
// transaction, so a batch that also retries, delays or fails a row waits, as do Retry,
// RetryAfter, Fail, the back-off after a failed settlement and, in transactional mode, every
// settlement, which commits the handler's writes. MySQL and MariaDB set durability for the
// whole server (innodb_flush_log_at_trx_commit), and wait as it says.
//
// # What it costs
//
// Each delivery in work holds one pooled connection and one open transaction until it settles
// (Plan.HoldsConnection), so a consumer runs at most the pool's size less one at once; a batch
// holds one of each for all its rows. A transaction held open for a long handler holds back
// Postgres's vacuum and MySQL's purge: long handlers belong in the lease form.
//
// # Batches
//
// The form is an inbox.BatchForm (drive it with inbox.NewBatchConsumer). ClaimBatch locks up to
// n rows with one SELECT … LIMIT n FOR UPDATE SKIP LOCKED in one transaction, and that one
// transaction, on one pooled connection, holds every row of the batch until SettleBatch commits
// it, ReleaseBatch rolls it back, or the process dies; what is said above of a row holds for
// each row of a batch. SettleBatch commits once: on Postgres after one prepared statement per
// kind of outcome, naming its rows in an id IN (…) list padded to the batch's size, so that a
// consumer prepares about one statement per kind and batch size; on MySQL and MariaDB after
// one statement per row on its id, since InnoDB may take an IN list through a scan that waits
// for the rows other batches hold. A batch of n rows thus costs one claim and one commit where
// single deliveries cost n of each. In exchange every row of a batch stays locked until the
// batch settles, and a batch settles or returns whole: a failed settlement statement or COMMIT
// returns every row of the batch, unchanged (a COMMIT whose answer never came may have settled
// them all). In transactional mode the batch's rows share its transaction: the handler's writes
// commit only when every outcome is Ack; otherwise they roll back, the other outcomes settle,
// and the Acks are retried.
//
// # FIFO groups, concurrency limits, rate limits
//
// A table with a group key column (inbox.Table.GroupKey), a limits table (Limits) or a rates
// table (Rates) is claimed as the lease form claims it, with holds that live as the claim's
// transaction does: a group is held by a lock on its row of inbox_groups, a limit's slot by a
// lock on its row of inbox_slots, both taken FOR UPDATE SKIP LOCKED in the claim's transaction,
// so that they end with the row's own lock (settlement, rollback, a killed process). A start
// slot of a rate is taken in a statement of its own that commits at once, never in that
// transaction, which would turn the rate into a cap on rows in work. On MySQL and MariaDB, and
// wherever the table has limits or rates, the claim reads its candidates without a lock and
// locks them one by one (a locking read there keeps every row it passed over locked). Groups,
// limits and rates combine: a group's head held back by a limit or a rate holds back its
// group. docs/groups.md, docs/limits.md and
// docs/rates.md give each guarantee per database.
//
// # Behind a pooler
//
// With inbox.Config.UnpreparedStatements the form prepares nothing: Open checks each statement
// by EXPLAIN, and every run sends the statement's text, as PgBouncer in transaction pooling
// (before 1.21) needs. Each delivery in work then holds a server connection of the pooler's
// for its transaction (docs/clusters.md).
//
// # Isolation levels
//
// The claim's transaction opens at the dialect's level. On Postgres read committed is the
// practical level. At repeatable read a claim fails with a serialization error (SQLSTATE
// 40001) whenever a row it meets was settled after its snapshot began; Claim and ClaimBatch
// retry such failures, and MySQL's deadlocks (1213) and lock wait timeouts (1205), up to ten
// times before they report one, so they cost time but reach no handler. At serializable
// Postgres also fails settlements: the claim's scan reads rows that other transactions settle,
// and their COMMITs abort with 40001. Settle returns that error and the row is delivered
// again, so rows are handled more than once (four consumers of four workers draining 1,000 rows
// delivered them 4,402 to 5,361 times in five runs of TestRowlockStrictLevels, each failed
// settlement backing its row off by the retry policy; 7,485 to 7,944 times before it did), and
// each failure counts an attempt toward the limit; Open logs a warning on that pair. On MariaDB 10.11 with the claim
// index below, drains at repeatable read and serializable delivered each row once, as at read
// committed.
//
// # The index the claim needs
//
// On MySQL and MariaDB the claim must find its row through an index in claim order, or the
// SKIP LOCKED select sorts the table and reads (and, above read committed, locks) far more
// rows than it returns. Index the queue, processed_at, priority, retry_after and id columns,
// each where the table has it, in that order:
//
//	CREATE INDEX jobs_claim ON jobs (queue, processed_at, priority, retry_after, id);
//
// processed_at belongs right after the queue: the claim asks for processed_at IS NULL, which
// the index then answers directly, whereas an index without it makes every claim step over
// all the processed rows kept in the table (draining 4,000 rows with 16 workers took 26 s
// without it and 3 s with it on MariaDB 10.11). On Postgres a partial index on (queue,
// priority, retry_after, id) WHERE processed_at IS NULL serves the same purpose.
package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/conflict"
	"github.com/sqlinbox/inbox/internal/formlife"
	"github.com/sqlinbox/inbox/internal/schema"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/settleplan"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/outcome"
)

// Dialect is what the row lock form needs from a dialect: SELECT … FOR UPDATE SKIP LOCKED.
// SQLite lacks it, so rowlock.New on a SQLite dialect does not compile (the compiler's message
// names dialect.NoRowLocksOnSQLiteUseLease: take package lease there).
type Dialect interface {
	dialect.Dialect
	RowLocks() dialect.SkipLocked
}

// Form is the row lock form over one table. Build it with New and hand it to a consumer, which
// opens it; its methods are safe for concurrent use.
//
// Claim returns up to max deliveries, each claimed in a transaction of its own that holds the
// row and a pooled connection until Settle, Release or Close ends it; it claims one row at a
// time and stops at the first claim that finds none. ClaimBatch claims up to max rows with one
// statement in one transaction, which holds all of them and one pooled connection until
// SettleBatch, ReleaseBatch or Close ends it (Form implements inbox.BatchForm).
type Form[D Dialect] struct {
	d D
	t inbox.Table

	// life admits calls between Open and Close and keeps the holds in work: the transactions
	// of the deliveries and batches, which Close gives back before it frees the statements.
	life *formlife.Life[*hold]

	// The batch claim statements by batch size, each prepared (or checked) at the first
	// ClaimBatch of its size, and on Postgres the batch settlement statements by kind and batch
	// size, each prepared at the first SettleBatch that runs it; batchMu is held while one
	// prepares, so that each is prepared once.
	batchMu      sync.Mutex
	batchClaims  map[int]*stmt.Stmt
	batchSettles map[settleKey]*stmt.Stmt

	// Set by Open, read-only until Close; the statements are freed by Close once no call uses
	// them.
	db   *sql.DB
	st   *stmt.Table
	text sqltext.RowLock // the text of every statement the form runs
	q    inbox.Binding
	// claimed are the values every claim binds (the queue, the kinds: stmt.Table.ClaimValues);
	// a claim binds a copy with its now.
	claimed sqltext.Values
	log     *slog.Logger
	// unflushed: an Ack's settlement, where it is the transaction's only change, commits without
	// waiting for the disk (inbox.Binding.UnflushedAcks outside transactional mode, on a database
	// that sets durability per statement).
	unflushed bool
	// The statements, prepared or run by their text (inbox.Binding.UnpreparedStatements): claim
	// and ack always; ackUnflushed where unflushed; retry where the table has an attempt column;
	// retryAfter where it has a retry_after column; dead where it has a dead_at column.
	claim, ack, ackUnflushed, retry, retryAfter, dead *stmt.Stmt
	cancel                                            *stmt.Stmt       // nil where the table has no CancelledAt
	addGroup                                          *stmt.Stmt       // nil where the table has no GroupKey
	picks                                             picks            // the claim's statements over groups, limits and rates
	locked                                            lockedRows       // the rows the form's claims lock, which pickByID passes over
	shape                                             settleplan.Table // what the table records of an outcome, for settleplan
}

// hold is a claim's open transaction and the rows it holds: one delivery's (Claim), or a
// batch's (ClaimBatch).
type hold struct {
	tx     dialect.Tx
	cancel context.CancelFunc // ends the context the transaction was begun with
	ds     []*inbox.Delivery
	batch  bool
	size   int // a batch's: the size its ClaimBatch asked for, which its settlements pad id lists to
}

// For returns the row lock form over c's table, on c's database: the form a consumer of c
// (inbox.Client.NewConsumer) holds its rows by. It compiles only where the database has row
// locks to skip, as New does.
func For[D Dialect](c *inbox.Client[D]) *Form[D] { return New(c.Dialect(), c.Table()) }

// New returns the row lock form over table t.
func New[D Dialect](d D, t inbox.Table) *Form[D] {
	closed := sentinel.Errorf(inbox.ErrClosed, sentinel.Table(t.Name), "the row lock form is not open: open it (a consumer does) before claiming or settling, and not after Close")
	return &Form[D]{d: d, t: t, life: formlife.New[*hold](closed)}
}

// Open checks the dialect and the server, checks the type of every column the description
// names, and prepares every statement the form runs against the table, or where
// q.UnpreparedStatements asks checks it by EXPLAIN without preparing it (a missing table or
// column, or a column whose type breaks its role, fails with inbox.ErrSchema naming the table
// and the statement or the column). The plan it returns says each delivery in work holds a pooled connection.
func (f *Form[D]) Open(ctx context.Context, db *sql.DB, q inbox.Binding) (inbox.Plan, error) {
	already := func() error {
		return sentinel.Errorf(inbox.ErrAlreadyConsuming, sentinel.Table(f.t.Name), "the row lock form is open already (queue %q): a form serves one consumer at a time, so build one per consumer", f.q.Name)
	}
	if err := f.life.Open(already, func() error { return f.bind(ctx, db, q) }); err != nil {
		return inbox.Plan{}, err
	}
	return inbox.Plan{Table: f.t.Name, Form: dialect.RowLockForm.String(), HoldsConnection: true, Dialect: f.d, Described: f.t, FindUnclaimable: f.FindUnclaimable}, nil
}

// bind checks the form against db and binds it to q, as Open says.
func (f *Form[D]) bind(ctx context.Context, db *sql.DB, q inbox.Binding) error {
	if err := f.d.Allows(dialect.RowLockForm); err != nil {
		return sentinel.At(sentinel.Queue(f.t.Name, q.Name), err)
	}
	if err := f.d.CheckServer(ctx, db); err != nil {
		return sentinel.At(sentinel.Queue(f.t.Name, q.Name), err)
	}
	if err := dialect.CheckGalera(ctx, f.d, db, dialect.RowLockForm); err != nil {
		return sentinel.At(sentinel.Queue(f.t.Name, q.Name), err)
	}
	st, err := stmt.New(f.d, f.t)
	if err != nil {
		return err
	}
	st.Claiming(q)
	if err := schema.VerifyHolding(ctx, db, f.d, f.t, q); err != nil {
		return err
	}
	if err := f.checkSideTables(ctx, db, q.Name); err != nil {
		return err
	}
	text := st.SQL().RowLock()
	// In transactional mode the ack commits the handler's writes, which are the user's.
	unflushed := q.UnflushedAcks && !q.Transactional && f.d.Caps().UnflushedCommit != ""
	if err := f.prepare(ctx, db, st, text, unflushed); err != nil {
		return err
	}
	f.db, f.st, f.text, f.q, f.unflushed = db, st, text, q, unflushed
	f.claimed = st.ClaimValues(q.Name)
	f.log = q.Logger
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if slices.Contains(f.d.Caps().PredicateLockLevels, f.d.Level()) {
		f.log.Warn("inbox: the row lock form at this level: concurrent settlements fail with serialization errors and their rows are delivered again; take read committed",
			"table", f.t.Name, "queue", q.Name, "database", f.d.Caps().Title, "level", f.d.Level())
	}
	f.batchClaims = map[int]*stmt.Stmt{}
	f.batchSettles = map[settleKey]*stmt.Stmt{}
	return nil
}

// prepare prepares (or checks, see stmt.Table.Statement) the form's statements, as r writes
// them, on db, or none of them; with unflushed, the unflushed ack too.
func (f *Form[D]) prepare(ctx context.Context, db *sql.DB, st *stmt.Table, r sqltext.RowLock, unflushed bool) (err error) {
	t := st.Q
	var prepared []*stmt.Stmt
	defer func() {
		if err != nil {
			for _, s := range prepared {
				s.Close()
			}
		}
	}()
	prep := func(what string, query sqltext.Statement) *stmt.Stmt {
		if err != nil {
			return nil
		}
		var s *stmt.Stmt
		if s, err = st.Statement(ctx, db, what, query); err == nil {
			prepared = append(prepared, s)
		}
		return s
	}

	settle := func(k outcome.Kind) *stmt.Stmt { return prep(k.String(), r.Settle(k, sqltext.ByID())) }

	claim := prep("claim", r.Claim(1))
	ack := settle(outcome.KindAck)
	var ackUnflushed, retry, retryAfter, dead *stmt.Stmt
	if unflushed {
		ackUnflushed = prep("unflushed ack", r.Unflushed().Settle(outcome.KindAck, sqltext.ByID()))
	}
	if t.Attempt != "" {
		retry = settle(outcome.KindRetry)
	}
	if t.RetryAfter != "" {
		retryAfter = settle(outcome.KindRetryAfter)
	}
	if t.DeadAt != "" {
		dead = settle(outcome.KindFail)
	}
	var cancel, addGroup *stmt.Stmt
	if t.CancelledAt != "" {
		cancel = settle(outcome.KindCancel)
	}
	if t.GroupKey != "" {
		addGroup = prep("group hold row", r.AddGroup())
	}
	picks := f.preparePicks(r, prep)
	if err != nil {
		return err
	}
	f.addGroup, f.picks = addGroup, picks
	f.claim, f.ack, f.ackUnflushed, f.retry, f.retryAfter, f.dead, f.cancel = claim, ack, ackUnflushed, retry, retryAfter, dead, cancel
	f.shape = settleplan.Table{
		ProcessedAt: f.t.ProcessedAt != "", DeadAt: dead != nil, RetryAfter: retryAfter != nil,
		LastError: f.t.LastError != "", RetryWrites: retry != nil, // a retry counts the attempt
		CancelledAt: cancel != nil,
	}
	return nil
}

// Claim claims up to max due rows of the queue in claim order, one transaction per row, opened
// at the dialect's level and held until the delivery settles. It stops at the first claim that
// finds no row. A transient conflict (a serialization failure, a deadlock, a lock wait timeout)
// is retried a few times before Claim reports it. When a claim fails after others succeeded,
// Claim returns the rows it holds and no error: the failure shows again at the next call.
//
// In transactional mode each delivery's Tx is its claim's transaction, behind a savepoint.
func (f *Form[D]) Claim(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	if err := f.life.Enter(); err != nil {
		return nil, err
	}
	defer f.life.Leave()
	var out []*inbox.Delivery
	for len(out) < max {
		d, err := f.claimRetrying(ctx)
		if err != nil {
			if len(out) > 0 {
				return out, nil
			}
			return nil, err
		}
		if d == nil {
			break
		}
		out = append(out, d)
	}
	return out, nil
}

func (f *Form[D]) claimRetrying(ctx context.Context) (*inbox.Delivery, error) {
	var ds []*inbox.Delivery
	err := f.retrying(ctx, func() (err error) {
		ds, err = f.claimTx(ctx, f.claim, 0)
		return err
	})
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	return ds[0], nil
}

// retrying runs claim until it succeeds or fails for good (see conflict.Retry).
func (f *Form[D]) retrying(ctx context.Context, claim func() error) error {
	err := conflict.Retry(ctx, f.d, claim)
	switch {
	case errors.Is(err, conflict.ErrTooMany):
		return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "the claim conflicted %d times in a row at level %s: %w; see the rowlock package doc on isolation levels and the claim index", f.d.Caps().ConflictTries, f.d.Level(), err)
	case err != nil:
		return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "claim: %w", err)
	}
	return nil
}

// claimTx runs claim (f.claim, or a batch claim statement of size rows) in a transaction of its
// own and holds the rows it returns under one hold, a batch's when size is not 0. It returns
// none, and rolls back, when no row is due.
func (f *Form[D]) claimTx(ctx context.Context, claim *stmt.Stmt, size int) ([]*inbox.Delivery, error) {
	if f.t.GroupKey != "" || f.t.Limits != "" || f.t.Rates != "" {
		return f.claimGrouped(ctx, claim, size)
	}
	return f.claimOnce(ctx, size, func(tx dialect.Tx, v *sqltext.Values) ([]*inbox.Delivery, error) {
		rows, err := claim.QueryIn(ctx, tx, claim.Bind(nil, v)...)
		if err != nil {
			return nil, err
		}
		return f.st.Scan(rows)
	})
}

// claimOnce is claimTx's one claim: it begins the claim's transaction and has pick lock the
// rows, binding v (the claim's values, with its now); when pick fails or finds none it rolls
// back.
func (f *Form[D]) claimOnce(ctx context.Context, size int, pick func(dialect.Tx, *sqltext.Values) ([]*inbox.Delivery, error)) ([]*inbox.Delivery, error) {
	// database/sql rolls a transaction back when the context it was begun with ends. The hold
	// must outlive ctx (a consumer may cancel its claim context at shutdown while handlers
	// finish), so it gets a context of its own, tied to ctx only until the claim is done.
	holdCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	tx, err := f.d.Begin(holdCtx, f.db)
	if err != nil {
		stop()
		cancel()
		return nil, fmt.Errorf("beginning the claim's transaction (level %s): %w", f.d.Level(), err)
	}
	abandon := func(err error) ([]*inbox.Delivery, error) {
		stop()
		tx.Rollback()
		cancel()
		return nil, err
	}

	v := f.claimed
	now := f.q.Now()
	v.Now, v.NowUs = f.d.Time(now), now.UnixMicro()
	ds, err := pick(tx, &v)
	if err != nil || len(ds) == 0 {
		return abandon(err)
	}
	if f.t.Attempt != "" {
		// The attempt column counts the deliveries that ended in a retry; this one is the next.
		for _, d := range ds {
			d.Attempt++
		}
	}
	if f.q.Transactional {
		if _, err := tx.ExecContext(ctx, f.text.Savepoint().SQL); err != nil {
			return abandon(fmt.Errorf("%s: SAVEPOINT for the handler's writes: %w", rowsOf(ds), err))
		}
		inbox.LendTx(tx, f.d, f.t.Name, ds...)
	}
	if !stop() {
		// ctx ended after the rows were read: database/sql is rolling the transaction back.
		return abandon(ctx.Err())
	}

	h := &hold{tx: tx, ds: ds, batch: size > 0, size: size}
	h.cancel = cancel
	if f.picks.lockRow != nil {
		h.cancel = f.locked.track(h, cancel) // pickByID passes over its rows
	}
	for _, d := range ds {
		inbox.SetHold(d, h)
	}
	if !f.life.Keep(h) {
		// Close ran meanwhile and did not see this hold.
		h.end()
		return nil, sentinel.Errorf(inbox.ErrClosed, sentinel.Table(f.t.Name), "the form closed during the claim; %s back in the queue", isBack(ds))
	}
	return ds, nil
}

// rowsOf names the rows of ds for a message: "row 7", "rows 7, 8, 9".
func rowsOf(ds []*inbox.Delivery) string {
	if len(ds) == 1 {
		return "row " + strconv.FormatInt(ds[0].ID, 10)
	}
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = strconv.FormatInt(d.ID, 10)
	}
	return "rows " + strings.Join(ids, ", ")
}

// isBack says that the rows of ds are back in the queue.
func isBack(ds []*inbox.Delivery) string {
	if len(ds) == 1 {
		return rowsOf(ds) + " is"
	}
	return rowsOf(ds) + " are"
}

// take takes d's hold from the form, so that exactly one of Settle, Release and Close ends it,
// and admits the call, which the caller ends with f.life.Leave. A delivery of a batch is refused
// and stays held: its batch settles whole.
func (f *Form[D]) take(d *inbox.Delivery) (*hold, error) {
	h, _ := inbox.HoldOf[*hold](d)
	switch kept, err := f.life.Take(h, func() error {
		if h.batch {
			return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "delivery %d is in a batch of %d rows: use SettleBatch or ReleaseBatch", d.ID, len(h.ds))
		}
		return nil
	}); {
	case err != nil:
		return nil, err
	case !kept:
		return nil, sentinel.Errorf(inbox.ErrClosed, sentinel.Table(f.t.Name), "delivery %d is not held by this form (settled, released, or given back at Close); its row is back in the queue or settled", d.ID)
	}
	return h, nil
}

// takeBack ends the handlers' loan of the hold's transaction (in transactional mode) and reports
// why the hold cannot settle: inbox.ErrTransactionHeld or inbox.ErrTransactionEnded, or nil.
func (h *hold) takeBack() error {
	var first error
	for _, d := range h.ds {
		if err := inbox.TakeBackTx(d); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// end rolls the hold's transaction back, ending the handler's loan first so that its later
// statements fail with inbox.ErrTransactionHeld. A transaction a statement of the handler's
// still runs on is rolled back once that statement is done, without waiting for it here:
// database/sql's Rollback waits for it, and the handler may run it for as long as it likes (a
// handler abandoned at shutdown, a goroutine it left behind). Its rows are claimable again when
// the rollback runs.
func (h *hold) end() error {
	if errors.Is(h.takeBack(), inbox.ErrTransactionHeld) {
		go h.rollback()
		return nil
	}
	return h.rollback()
}

func (h *hold) rollback() error {
	err := h.tx.Rollback()
	h.cancel()
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// Settle applies o to the row in the claim's transaction and commits it: Ack and Drop delete
// the row or stamp processed_at; Retry adds one to attempt (without an attempt column it rolls
// back, which leaves the row as it was); RetryAfter sets retry_after and adds one to attempt
// (without a retry_after column it acts as Retry and logs a warning). The zero outcome is
// retried, as the consumer does.
//
// In transactional mode Settle first takes the transaction back from the handler: when a
// statement of the handler's is still running on it, Settle fails with
// inbox.ErrTransactionHeld at once, and the whole transaction is rolled back once that
// statement is done (the row is unchanged, and claimable again then). When the database ended the transaction while the handler had it (MySQL
// and MariaDB end it on a deadlock, releasing the row lock with it), Settle rolls back and
// fails with inbox.ErrTransactionEnded, whatever the outcome: a settlement statement would run
// in autocommit, on a row another consumer may hold by then. Ack commits the handler's writes
// with the settlement; every other outcome rolls them back to the savepoint first.
//
// A failure rolls the transaction back, so the row is unchanged and claimable again; so does a
// failed COMMIT, unless its outcome is unknown (the connection broke after the COMMIT was sent:
// the error wraps inbox.ErrCommitUnknown), when the row may be settled instead. A delivery of a
// batch is refused and stays held: a batch settles whole, with SettleBatch.
func (f *Form[D]) Settle(ctx context.Context, d *inbox.Delivery, o outcome.Outcome) error {
	h, err := f.take(d)
	if err != nil {
		return err
	}
	defer f.life.Leave()
	defer h.cancel()

	if err := h.takeBack(); err != nil {
		return errors.Join(sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "settling row %d (%s): nothing settled, the row is back in the queue: %w", d.ID, o, err), f.rollback(h))
	}
	k, s, args := f.settlement(d, o)
	if s == nil {
		// Retry without an attempt column: the row as it was is the retry.
		return f.rollback(h)
	}
	if k == outcome.KindAck && f.unflushed {
		// The ack is the transaction's one change: losing it costs a second delivery.
		s = f.ackUnflushed
	}
	if f.q.Transactional && o.Kind() != outcome.KindAck {
		if _, err := h.tx.ExecContext(ctx, f.text.RollbackToSavepoint().SQL); err != nil {
			return f.fail(h, h.ds, "rolling back the handler's writes for "+k.String(), err)
		}
	}
	if _, err := s.ExecIn(ctx, h.tx, args...); err != nil {
		err = f.fail(h, h.ds, "the "+k.String()+" statement", err)
		if f.conflicted(ctx, h.ds, o, err) {
			return nil
		}
		return f.backOff(ctx, h.ds, err)
	}
	if err := h.tx.Commit(); err != nil {
		return f.backOff(ctx, h.ds, f.commitFailed(h.ds, "the "+k.String(), err))
	}
	return nil
}

// backOff applies the consumer's back-off (inbox.Binding.Backoff) to the rows of ds, whose
// settlement failed with err and whose transaction has rolled back, so that a settlement that
// can never commit (a foreign key refusing the ack's DELETE) counts its attempts and waits like
// a retry. The claim's lock is gone with its transaction, so the back-off runs in a
// transaction of its own that locks each row again, passing over a row another transaction
// locks (SKIP LOCKED) or whose attempt has moved since this claim (another consumer claimed
// and settled it meanwhile); only the failure path pays for it. A death (a Fail, at the
// attempt limit) that fails too is undone to a savepoint and the attempt counted instead (see
// die). It returns err, joined with the back-off's own failure; nothing is backed off after a
// COMMIT whose outcome is unknown, nor after a lost connection (the rows are back as they
// were, as after a crash).
func (f *Form[D]) backOff(ctx context.Context, ds []*inbox.Delivery, err error) error {
	if f.q.Backoff == nil || ctx.Err() != nil || !stmt.BacksOff(err) {
		return err
	}
	died, _, aerr := f.again(ctx, ds, "backing off", func(d *inbox.Delivery) outcome.Outcome { return f.q.Backoff(d, err) })
	if aerr != nil {
		return errors.Join(err, aerr)
	}
	return errors.Join(append([]error{err}, died...)...)
}

// again settles the rows of ds, whose claim's transaction has rolled back, each by
// outcomeOf(d), in a transaction of its own that locks each row again (see backOff), doing what
// its errors name. It returns the deaths that failed, each row's attempt counted instead, and its
// own failure, after which nothing of it stays, and how many rows it passed over (another
// consumer has them, or had them).
func (f *Form[D]) again(ctx context.Context, ds []*inbox.Delivery, doing string, outcomeOf func(*inbox.Delivery) outcome.Outcome) (died []error, passed int, err error) {
	where := sentinel.Queue(f.t.Name, f.q.Name)
	tx, err := f.d.Begin(ctx, f.db)
	if err != nil {
		return nil, 0, sentinel.Errorf(nil, where, "%s %s: %w", doing, rowsOf(ds), err)
	}
	lock := f.text.Relock()
	for _, d := range ds {
		o := outcomeOf(d)
		k, s, args := f.settlement(d, o)
		if s == nil {
			continue // a retry without an attempt column: the row as it was is the retry
		}
		largs := lock.Bind(nil, &sqltext.Values{IDs: []int64{d.ID}, Attempt: d.Attempt - 1})
		var id int64
		switch lerr := tx.QueryRowContext(ctx, lock.SQL, largs...).Scan(&id); {
		case errors.Is(lerr, sql.ErrNoRows):
			passed++ // another consumer has the row, or had it
			continue
		case lerr != nil:
			tx.Rollback()
			return nil, 0, sentinel.Errorf(nil, where, "%s row %d: locking it again: %w", doing, d.ID, lerr)
		}
		if o.Kind() == outcome.KindFail && f.retry != nil {
			derr, serr := f.die(ctx, tx, d, s, args)
			if serr != nil {
				tx.Rollback()
				return nil, 0, serr
			}
			if derr != nil {
				died = append(died, derr)
			}
			continue
		}
		if _, serr := s.ExecIn(ctx, tx, args...); serr != nil {
			tx.Rollback()
			return nil, 0, sentinel.Errorf(nil, where, "%s row %d: the %s statement: %w", doing, d.ID, k, serr)
		}
	}
	if cerr := tx.Commit(); cerr != nil {
		return nil, 0, sentinel.Errorf(nil, where, "%s %s: committing: %w", doing, rowsOf(ds), cerr)
	}
	return died, passed, nil
}

// conflicted settles the rows of ds again by o, where their settlement statement failed with a
// transient conflict (a deadlock: on MySQL and MariaDB an ack that frees a unique key deadlocks
// with publishes of that key), which rolled the claim's transaction back: the handler's work is
// done, and a retry would run it twice. It reports whether it settled them; where it did not
// (another consumer has a row meanwhile, or it failed too), the back-off follows. Not in
// transactional mode, where the rollback undid the handler's writes, which a retry must redo.
func (f *Form[D]) conflicted(ctx context.Context, ds []*inbox.Delivery, o outcome.Outcome, err error) bool {
	if f.q.Transactional || ctx.Err() != nil || !f.d.Retryable(err) {
		return false
	}
	var settled bool
	cerr := conflict.Retry(ctx, f.d, func() error {
		died, passed, aerr := f.again(ctx, ds, "settling again", func(*inbox.Delivery) outcome.Outcome { return o })
		settled = aerr == nil && len(died) == 0 && passed == 0
		return aerr
	})
	return cerr == nil && settled
}

// die runs, in tx, which locks d's row again, the statement s that makes the row dead (a
// dead_at stamp, or a DELETE where the table has no dead_at column). When the database refuses
// it, as it may refuse the very statement whose failure led here (a foreign key refusing the
// DELETE), the row must still not be claimed again: die undoes the statement to a savepoint
// and counts the attempt, which brings the attempt column to d.Attempt, the limit, where no
// claim takes the row (inbox.Binding.MaxAttempts). It returns the death's failure (wrapping
// inbox.ErrDeathFailed at the limit), and the failure, if any, of what else it ran, after which
// tx must be rolled back.
func (f *Form[D]) die(ctx context.Context, tx dialect.Tx, d *inbox.Delivery, s *stmt.Stmt, args []any) (died, err error) {
	if _, err := tx.ExecContext(ctx, f.text.Savepoint().SQL); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "backing row %d off: SAVEPOINT before its death: %w", d.ID, err)
	}
	_, derr := s.ExecIn(ctx, tx, args...)
	if derr == nil {
		return nil, nil
	}
	if _, err := tx.ExecContext(ctx, f.text.RollbackToSavepoint().SQL); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "backing row %d off: its death failed (%w), and so did undoing it: %w", d.ID, derr, err)
	}
	if _, err := f.retry.ExecIn(ctx, tx, d.ID); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "backing row %d off: its death failed (%w), and so did counting its attempt: %w", d.ID, derr, err)
	}
	if dead := f.st.DeathFailed(f.q.Name, d, derr); dead != nil {
		return dead, nil
	}
	return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "backing row %d off: its death failed, and its attempt was counted instead: %w", d.ID, derr), nil
}

// commitFailed describes the settlement of ds whose COMMIT failed: the rows are unchanged and
// back in the queue, unless the COMMIT's outcome is unknown (the connection broke after it was
// sent), when they may be settled instead. Either way the transaction's connection was
// discarded, so nothing of it stays open.
func (f *Form[D]) commitFailed(ds []*inbox.Delivery, what string, err error) error {
	if errors.Is(err, inbox.ErrCommitUnknown) {
		return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "committing %s of %s: %w; %s either settled or back in the queue", what, rowsOf(ds), err, isBack(ds))
	}
	return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "committing %s of %s: %w; %s unchanged and back in the queue", what, rowsOf(ds), err, isBack(ds))
}

// settlement is the statement that applies o to d's row, the kind it settles as and its
// arguments; a nil statement means the transaction is to be rolled back instead (a retry where
// the table counts no attempt: the row as it was is the retry).
func (f *Form[D]) settlement(d *inbox.Delivery, o outcome.Outcome) (outcome.Kind, *stmt.Stmt, []any) {
	step, ok := settleplan.One(f.shape, o, false)
	if o.Kind() == outcome.KindRetryAfter && step.Kind == outcome.KindRetry {
		f.log.Warn("inbox: RetryAfter on a table without a retry_after column retries at once: add the column and name it in inbox.Table.RetryAfter",
			"table", f.t.Name, "queue", f.q.Name, "id", d.ID, "delay", o.Delay())
	}
	if !ok {
		return step.Kind, nil, nil
	}
	s := f.one(step.Kind, false)
	if s == nil {
		return step.Kind, nil, nil
	}
	v := f.shape.Values(step, f.q.Now(), f.d.Time)
	v.IDs = []int64{d.ID}
	return step.Kind, s, s.Bind(make([]any, 0, 4), &v)
}

// one is the statement that settles one row as kind k (Ack, Retry, RetryAfter, Fail or Cancel), the
// unflushed ack where asked.
func (f *Form[D]) one(k outcome.Kind, unflushed bool) *stmt.Stmt {
	switch {
	case k == outcome.KindAck && unflushed:
		return f.ackUnflushed
	case k == outcome.KindAck:
		return f.ack
	case k == outcome.KindRetry:
		return f.retry
	case k == outcome.KindFail:
		return f.dead
	case k == outcome.KindCancel:
		return f.cancel
	}
	return f.retryAfter
}

// rollback ends h (see end) and reports a rollback that failed.
func (f *Form[D]) rollback(h *hold) error {
	if err := h.end(); err != nil {
		return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "rolling back: %w", err)
	}
	return nil
}

// fail rolls back after a failed statement of the settlement of ds and reports both.
func (f *Form[D]) fail(h *hold, ds []*inbox.Delivery, what string, err error) error {
	return errors.Join(sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "settling %s: %s: %w; %s unchanged and back in the queue", rowsOf(ds), what, err, isBack(ds)), f.rollback(h))
}

// FindUnclaimable searches the queue for rows that no claim takes as they stand (see
// inbox.Unclaimable), with reads of their own that lock nothing.
func (f *Form[D]) FindUnclaimable(ctx context.Context) ([]inbox.Unclaimable, error) {
	if err := f.life.Enter(); err != nil {
		return nil, err
	}
	defer f.life.Leave()
	return f.st.FindUnclaimable(ctx, f.db, f.q.Name, f.q.Now())
}

// Extend does nothing: the claim's transaction holds the row, or the batch's rows, for as long
// as it stays open.
func (f *Form[D]) Extend(context.Context, *inbox.Delivery) error { return nil }

// Release rolls the delivery's transaction back: the row is claimable again at once, with its
// attempt count unchanged. In transactional mode a transaction a statement of the handler's
// still runs on is rolled back once that statement is done, and the row is claimable then;
// Release does not wait for it. A delivery of a batch is refused and stays held: a batch
// is given back whole, with ReleaseBatch.
func (f *Form[D]) Release(_ context.Context, d *inbox.Delivery) error {
	h, err := f.take(d)
	if err != nil {
		return err
	}
	defer f.life.Leave()
	if err := h.end(); err != nil {
		return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "releasing row %d: %w", d.ID, err)
	}
	return nil
}

// Close rolls back the transactions of the deliveries and batches still held (their rows are
// claimable again at once; a transaction a statement of the handler's still runs on is rolled
// back once that statement is done), waits for the calls in progress, and frees the prepared
// statements. Later calls fail with inbox.ErrClosed. Closing a form that is not open does
// nothing.
func (f *Form[D]) Close() error {
	return f.life.Close(func(h *hold) error {
		if err := h.end(); err != nil {
			return sentinel.Errorf(nil, sentinel.Table(f.t.Name), "rolling back %s at Close: %w", rowsOf(h.ds), err)
		}
		return nil
	}, f.free)
}

// free frees the prepared statements, once no call uses them.
func (f *Form[D]) free() error {
	var errs []error
	for _, s := range []*stmt.Stmt{f.claim, f.ack, f.ackUnflushed, f.retry, f.retryAfter, f.dead, f.cancel, f.addGroup,
		f.picks.window, f.picks.lockRow, f.picks.lockGroup, f.picks.groupSeen} {
		errs = append(errs, s.Close())
	}
	for _, s := range f.batchClaims {
		errs = append(errs, s.Close())
	}
	for _, s := range f.batchSettles {
		errs = append(errs, s.Close())
	}
	f.claim, f.ack, f.ackUnflushed, f.retry, f.retryAfter, f.dead, f.cancel, f.addGroup, f.batchClaims, f.batchSettles = nil, nil, nil, nil, nil, nil, nil, nil, nil, nil
	f.picks = picks{}
	return errors.Join(errs...)
}
