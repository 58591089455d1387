package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/settleplan"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/outcome"
)

// Extend writes a new lease of now plus the lease length into the row, guarded by the token it
// holds, and holds the new token from then on. It fails with inbox.ErrLeaseLost, changing
// nothing, when the lease had run out and another consumer took the row. It may run while the
// handler runs, but not with Settle or Release of the same delivery.
//
// On SQLite in transactional mode the extension runs inside the delivery's transaction: SQLite
// has one write lock, which that transaction holds from its first write (or from BEGIN
// IMMEDIATE) until its end, so an extension from another connection could only wait it out and
// fail. Inside the transaction it takes the write lock itself if the transaction does not hold
// it yet, and while the transaction holds it no other consumer can claim the row. Such an
// extension lands with an Ack's commit; any other outcome rolls it back and settles by the
// token committed before. It waits up to the database's busy timeout for the write lock.
func (f *Form[D]) Extend(ctx context.Context, d *inbox.Delivery) error {
	b, h, unlock, err := f.lockHold(d)
	if err != nil {
		return err
	}
	defer unlock()
	// A new token always differs from the old, even when the clock stood still or stepped
	// back: MySQL counts only rows an UPDATE changed, and the guard must tell holders apart.
	held := h.current()
	now := b.q.Now()
	next := tokenAt(now.Add(b.lease))
	if !next.After(held) {
		next = held.Add(time.Microsecond)
	}
	s := b.inWork(h, "extend")
	v := sqltext.Values{Lease: f.d.Time(next), Table: b.claimed.Table, Queue: b.claimed.Queue, Now: f.d.Time(now)}
	h.guard(&v, d.ID, f.d.Time(held))
	args := s.Bind(nil, &v)
	if h.tx != nil && f.d.Caps().OneWriter {
		// Not cancelled: SQLite rolls the whole transaction back when a write in it is
		// interrupted. A lock it cannot take fails the extension after the busy timeout with
		// SQLITE_BUSY instead, which leaves the transaction as it was.
		res, err := s.ExecIn(context.WithoutCancel(ctx), h.tx, args...)
		n, err := f.guarded(res, err, d, h, "extension")
		if n > 0 {
			h.txToken = next
		}
		return err
	}
	res, err := b.exec(ctx, s, args...)
	n, err := f.guarded(res, err, d, h, "extension")
	if n > 0 {
		h.token = next // the rows of a batch still held hold the new token
	}
	return err
}

// statement returns the statement what ("extend", "ack", "retry", "retry after" or "fail")
// over h's rows: the single-row statement, or the one over the batch's ids (listStmt).
func (b *binding) statement(ctx context.Context, h *hold, what string) (*stmt.Stmt, error) {
	if h.batch == nil {
		return b.single(what), nil
	}
	return b.listStmt(ctx, what, b.overBatch(what), h.size)
}

// inWork returns the statement what over h's rows for a call made while they are in work: an
// extension, which runs beside the handler, and the ack inside the handler's transaction, which
// holds the handler's locks meanwhile. Neither waits for a connection of the pool, which the
// handlers' transactions may hold, one of them waiting for those very locks: each runs the
// statement prepared before (ClaimBatch readies the ack), or else its text, on the form's own
// connection or in the transaction.
func (b *binding) inWork(h *hold, what string) *stmt.Stmt {
	if h.batch == nil {
		return b.single(what)
	}
	if s := b.kept(listKey{what, h.size}); s != nil {
		return s
	}
	return stmt.ByText(b.db, b.overBatch(what)(h.size))
}

// overBatch writes statement what over a batch of n ids.
func (b *binding) overBatch(what string) func(n int) sqltext.Statement {
	return func(n int) sqltext.Statement { return b.text(what, sqltext.ByIDsAndToken(n)) }
}

// single returns the single-row statement what ("extend", "ack", "retry", "retry after", "fail"
// or "cancel"); nil for a retry after, a fail or a cancel the table has no column for.
func (b *binding) single(what string) *stmt.Stmt {
	switch what {
	case "extend":
		return b.extend
	case "ack":
		return b.ack
	case "retry":
		return b.retry
	case "fail":
		return b.dead
	case "cancel":
		return b.cancel
	}
	return b.retryAfter
}

// text is the text of statement what over the rows g names.
func (b *binding) text(what string, g sqltext.Guard) sqltext.Statement {
	if what == "extend" {
		return b.sql.Extend(g)
	}
	return b.settles(what).Settle(kindOf(what), g)
}

// settles is the builder of settlement what: acked for an ack, sql for the others.
func (b *binding) settles(what string) sqltext.Lease {
	if what == "ack" {
		return b.acked
	}
	return b.sql
}

// kindOf is the outcome settlement what ("ack", "retry", "retry after", "fail" or "cancel")
// settles by.
func kindOf(what string) outcome.Kind {
	switch what {
	case "ack":
		return outcome.KindAck
	case "retry":
		return outcome.KindRetry
	case "fail":
		return outcome.KindFail
	case "cancel":
		return outcome.KindCancel
	}
	return outcome.KindRetryAfter
}

// guard sets the rows v names, guarded by token, to h's: the row id, or the batch's ids padded
// to the batch's size. The caller holds h.mu and binds v before it lets go (see rowArgs).
func (h *hold) guard(v *sqltext.Values, id int64, token any) {
	h.args.set(v, id, token)
	if h.batch != nil {
		v.IDs = padded(h.batch, h.size)
	}
}

// rowArgs holds the id and the token of one row's guarded statement (sqltext.Values.IDs and
// Tokens), kept beside what the statement runs for (a hold, a merged settlement's row), so that
// a run binds them without a slice of its own: the hot path's extensions and acks allocate no
// more than the values they box. Bind copies them out, so a run may reuse them once bound.
type rowArgs struct {
	ids    [1]int64
	tokens [1]any
}

// set sets the row v names to id, guarded by token, through r.
func (r *rowArgs) set(v *sqltext.Values, id int64, token any) {
	r.ids[0], r.tokens[0] = id, token
	v.IDs, v.Tokens = r.ids[:], r.tokens[:]
}

// padded is ids repeating the last up to size (IN ignores repeats): ids itself where it has
// size ids already.
func padded(ids []int64, size int) []int64 {
	if len(ids) >= size {
		return ids
	}
	out := make([]int64, size)
	for i := range out {
		out[i] = ids[min(i, len(ids)-1)]
	}
	return out
}

// Settle applies o to the row while its lease holds: Ack and Drop delete it (or stamp
// processed_at where the table has the column), Retry clears the lease, RetryAfter sets
// retry_after and clears the lease (without a retry_after column it acts as Retry and logs a
// warning). The zero Outcome acts as Retry. When the lease no longer holds it changes nothing
// and fails with inbox.ErrLeaseLost.
//
// In transactional mode an Ack settles inside the handler's transaction and commits both, so
// the handler's writes land only with a lease that still held; every other outcome rolls the
// transaction back first and settles outside it. When the handler's transaction cannot settle
// (a statement of the handler's still runs on it, inbox.ErrTransactionHeld, or the database
// ended it under the handler, inbox.ErrTransactionEnded), Settle settles nothing, whatever the
// outcome: it rolls the transaction back and clears the lease, so the row is claimable again at
// once. A settlement whose statement or commit fails returns that error and leaves the row
// leased until its lease runs out, unless its COMMIT's outcome is unknown (the error wraps
// inbox.ErrCommitUnknown), when the ack may have landed.
//
// The delivery's hold ends with Settle, whatever it returns.
func (f *Form[D]) Settle(ctx context.Context, d *inbox.Delivery, o outcome.Outcome) error {
	b, h, unlock, err := f.lockHold(d)
	if err != nil {
		return err
	}
	defer unlock()
	if h.batch != nil {
		return f.inBatch(d, "settled", "SettleBatch")
	}
	defer b.end(h)

	if h.tx != nil {
		if err := b.takeBack(h); err != nil {
			return errors.Join(sentinel.Errorf(nil, sentinel.Row(f.t.Name, d.ID), "nothing settled, the handler's writes were rolled back and the row given back: %w", err), b.giveBack(ctx, h, d.ID))
		}
		tx := h.tx
		h.tx = nil
		if o.Kind() == outcome.KindAck {
			return f.ackInTx(ctx, b, tx, h, d)
		}
		if err := tx.Rollback(); err != nil {
			b.log.Warn("inbox: rolling back the handler's transaction failed; settling the row anyway", "table", f.t.Name, "id", d.ID, "err", err)
		}
	}

	switch k := o.Kind(); {
	case b.acks != nil && (k == outcome.KindAck || k == outcome.KindDrop || k == outcome.KindFail && b.dead == nil || k == outcome.KindCancel && b.cancel == nil):
		return f.backedOff(ctx, b, h, d, b.acks.settle(ctx, d.ID, h.token))
	case b.retries != nil && (k == outcome.KindRetry || k == outcome.KindNone):
		return f.backedOff(ctx, b, h, d, b.retries.settle(ctx, d.ID, h.token))
	}
	s, args, what := f.settlement(b, d, h, o)
	res, err := b.exec(ctx, s, args...)
	_, err = f.guarded(res, err, d, h, what)
	return f.backedOff(ctx, b, h, d, err)
}

// backedOff returns err, the settlement's, joined with the failure of the back-off it leads to.
func (f *Form[D]) backedOff(ctx context.Context, b *binding, h *hold, d *inbox.Delivery, err error) error {
	if err == nil {
		return nil
	}
	return errors.Join(err, f.backOff(ctx, b, h, d, err))
}

// backOff applies the consumer's back-off (inbox.Binding.Backoff) to d's row when its settlement
// failed with err for a reason of its own (a statement the database refused, not a lost
// connection): the row is still leased under h's token, so the back-off runs under the same
// guard, and a settlement that can never commit counts its attempts and waits like a retry. A
// death at the attempt limit that fails too leaves the row leased until its lease runs out,
// its attempt (which the claim counted) at the limit, where no claim takes it again: the
// failure then wraps inbox.ErrDeathFailed. It returns the back-off's own failure, if any.
func (f *Form[D]) backOff(ctx context.Context, b *binding, h *hold, d *inbox.Delivery, err error) error {
	if b.q.Backoff == nil || ctx.Err() != nil || !stmt.BacksOff(err) {
		return nil
	}
	o := b.q.Backoff(d, err)
	s, args, what := f.settlement(b, d, h, o)
	res, berr := b.exec(ctx, s, args...)
	if berr == nil {
		var n int64
		if n, berr = res.RowsAffected(); berr == nil && n == 0 {
			berr = lostLease(f.t.Name, fmt.Sprintf("row %d", d.ID), what)
		}
	}
	if berr == nil {
		return nil
	}
	if o.Kind() == outcome.KindFail && !errors.Is(berr, inbox.ErrLeaseLost) {
		if dead := b.st.DeathFailed(b.q.Name, d, berr); dead != nil {
			return dead
		}
	}
	return sentinel.Errorf(nil, sentinel.Row(f.t.Name, d.ID), "backing the row off after its failed settlement: %w", berr)
}

// settlement is the statement that applies o to d's row under h's token outside a
// transaction, its arguments, and what it does.
func (f *Form[D]) settlement(b *binding, d *inbox.Delivery, h *hold, o outcome.Outcome) (*stmt.Stmt, []any, string) {
	step, _ := settleplan.One(b.shape, o, false) // a lease's retry writes: it always has a step
	if o.Kind() == outcome.KindRetryAfter && step.Kind == outcome.KindRetry {
		b.noRetryAfter(d.ID, o.Delay())
	}
	v := b.shape.Values(step, b.q.Now(), f.d.Time)
	h.args.set(&v, d.ID, f.d.Time(h.token))
	s := b.single(step.Kind.String())
	return s, s.Bind(nil, &v), step.Kind.String()
}

// ackInTx runs the guarded ack inside the handler's transaction and commits both; a lost lease
// rolls the handler's writes back with it.
func (f *Form[D]) ackInTx(ctx context.Context, b *binding, tx dialect.Tx, h *hold, d *inbox.Delivery) error {
	v := b.shape.Values(settleplan.Step{Kind: outcome.KindAck}, b.q.Now(), f.d.Time)
	h.args.set(&v, d.ID, f.d.Time(h.current()))
	res, err := b.ack.ExecIn(ctx, tx, b.ack.Bind(nil, &v)...)
	if _, err := f.guarded(res, err, d, h, "ack"); err != nil {
		err = errors.Join(err, rollback(tx, f.t.Name, d.ID))
		h.txToken = time.Time{} // rolled back with the transaction: the claim's token holds
		return errors.Join(err, f.backOff(ctx, b, h, d, err))
	}
	if err := tx.Commit(); err != nil {
		err = sentinel.Errorf(nil, sentinel.Row(f.t.Name, d.ID), "committing the handler's writes with the ack failed: %w; %s", err, landed(err, "the row returns"))
		h.txToken = time.Time{}
		return errors.Join(err, f.backOff(ctx, b, h, d, err))
	}
	return nil
}

// landed says what a failed COMMIT of the handler's writes with an ack means: neither landed,
// and the rows return when their lease runs out; or, when the COMMIT's outcome is unknown, both
// landed or neither did.
func landed(err error, rows string) string {
	if errors.Is(err, inbox.ErrCommitUnknown) {
		return "both landed or neither did, and if neither, " + rows + " when the lease runs out"
	}
	return "neither landed, and " + rows + " when the lease runs out"
}

func rollback(tx dialect.Tx, table string, id int64) error {
	if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
		return sentinel.Errorf(nil, sentinel.Row(table, id), "rolling back the handler's transaction: %w", err)
	}
	return nil
}

// Release gives the row back without an outcome: it rolls back the handler's transaction, if
// any, and clears the lease, so the row is claimable at once. The attempt the claim counted
// stays counted. A handler still running on the delivery's transaction finds it closed.
func (f *Form[D]) Release(ctx context.Context, d *inbox.Delivery) error {
	b, h, unlock, err := f.lockHold(d)
	if err != nil {
		return err
	}
	defer unlock()
	if h.batch != nil {
		return f.inBatch(d, "released", "ReleaseBatch")
	}
	return b.giveBack(ctx, h, d.ID)
}

// takeBack ends the handlers' loan of h's transaction, if it was lent, and reports why it
// cannot settle: inbox.ErrTransactionHeld or inbox.ErrTransactionEnded, or nil. A transaction
// a statement of the handler's still runs on is taken from h and rolled back once that
// statement is done, without waiting for it here: database/sql's Rollback (and SQLite's one
// connection) waits for it, and the handler may run it for as long as it likes. The caller
// holds h.mu.
func (b *binding) takeBack(h *hold) error {
	if h.lent == nil {
		return nil
	}
	err := inbox.TakeBackTx(h.lent)
	if tx := h.tx; tx != nil && errors.Is(err, inbox.ErrTransactionHeld) {
		h.tx, h.txToken = nil, time.Time{}
		table, id := b.st.Raw.Name, h.lent.ID
		go func() {
			if err := rollback(tx, table, id); err != nil {
				b.log.Warn("inbox: rolling back a transaction the handler had held failed", "err", err)
			}
		}()
	}
	return err
}

// giveBack takes h's transaction back from the handler (see takeBack), rolls it back and
// clears the row's lease; the caller holds h.mu.
func (b *binding) giveBack(ctx context.Context, h *hold, id int64) error {
	defer b.end(h)
	b.takeBack(h) // the handler may still run: its later statements must fail, not land
	var errs []error
	if tx := h.tx; tx != nil {
		h.tx = nil
		errs = append(errs, rollback(tx, b.st.Raw.Name, id))
	}
	what := fmt.Sprintf("row %d", id)
	if h.batch != nil {
		what = fmt.Sprintf("rows %v", h.batch)
	}
	s, err := b.statement(ctx, h, "retry")
	var res sql.Result
	if err == nil {
		var v sqltext.Values
		h.guard(&v, id, b.st.D.Time(h.token))
		res, err = b.exec(ctx, s, s.Bind(nil, &v)...)
	}
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = sentinel.Errorf(inbox.ErrLeaseLost, "", "table %q, %s: the lease ran out before the rows were given back; nothing was changed", b.st.Raw.Name, what)
		}
	}
	if err != nil && !errors.Is(err, inbox.ErrLeaseLost) {
		err = sentinel.Errorf(nil, "", "table %q, %s: giving the rows back: %w; they return when their lease runs out", b.st.Raw.Name, what, err)
	}
	return errors.Join(append(errs, err)...)
}

// end marks h ended and forgets it; the caller holds h.mu.
func (b *binding) end(h *hold) {
	h.ended = true
	b.life.Forget(h)
}

// guarded turns a guarded statement's result into the rows it changed and the error its
// caller returns: the statement's own error, or ErrLeaseLost when it changed fewer rows than h
// holds (one, or the batch's).
func (f *Form[D]) guarded(res sql.Result, err error, d *inbox.Delivery, h *hold, what string) (int64, error) {
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return 0, sentinel.Errorf(nil, sentinel.Row(f.t.Name, d.ID), "%s: %w", what, err)
	}
	if want := int64(max(len(h.batch), 1)); n < want {
		rows := fmt.Sprintf("row %d", d.ID)
		if h.batch != nil {
			rows = fmt.Sprintf("%d of the batch's rows %v", want-n, h.batch)
		}
		return n, lostLease(f.t.Name, rows, what)
	}
	return n, nil
}

// lostLease is the error of a guarded statement that found rows no longer held.
func lostLease(table, rows, what string) error {
	return sentinel.Errorf(inbox.ErrLeaseLost, "", "table %q, %s: the lease ran out before the %s; nothing changed; see docs/errors.md#lease-lost", table, rows, what)
}

// lockHold admits the call (Close waits for it before freeing the statements) and takes the
// lock of d's hold, so that the caller runs apart from any other Extend, Settle or Release of d
// and from Close giving the hold back, and returns the binding and d's hold with the function
// that ends both. It fails, holding neither, when the form is not open, d is not this form's, or
// its hold has ended.
func (f *Form[D]) lockHold(d *inbox.Delivery) (*binding, *hold, func(), error) {
	if err := f.life.Enter(); err != nil {
		return nil, nil, nil, err
	}
	h, ok := inbox.HoldOf[*hold](d)
	if !ok {
		f.life.Leave()
		return nil, nil, nil, sentinel.Errorf(nil, sentinel.Row(f.t.Name, d.ID), "the delivery was not claimed by this lease form")
	}
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		f.life.Leave()
		return nil, nil, nil, f.ended(d)
	}
	return f.b, h, func() {
		h.mu.Unlock()
		f.life.Leave()
	}, nil
}

func (f *Form[D]) ended(d *inbox.Delivery) error {
	return sentinel.Errorf(inbox.ErrClosed, sentinel.Row(f.t.Name, d.ID), "the delivery's hold already ended (settled, released, or given back when the form closed)")
}

func (f *Form[D]) inBatch(d *inbox.Delivery, done, use string) error {
	return sentinel.Errorf(nil, sentinel.Row(f.t.Name, d.ID), "the delivery belongs to a batch, which is %s whole: use %s", done, use)
}

// noRetryAfter warns that a RetryAfter on a table without a retry_after column retries at once.
func (b *binding) noRetryAfter(id int64, delay time.Duration) {
	b.log.Warn("inbox: RetryAfter on a table without a retry_after column retries at once: set inbox.Table.RetryAfter to delay retries", "table", b.st.Raw.Name, "id", id, "delay", delay)
}
