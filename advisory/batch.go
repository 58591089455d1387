package advisory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/settleplan"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/outcome"
)

// ClaimBatch claims at most max due rows in claim order under one hold: one pooled connection,
// pinned for the batch, holds the lock of every row's key. It selects candidates as Claim does,
// then, on that connection, tries each candidate's lock without waiting and, in a statement that
// starts after the lock is held, re-checks the row and counts its attempt, until max rows are
// held or the candidates run out. It takes one row per key: the rows behind the first of a key
// wait for a later claim, so the batch locks each key once.
//
// In transactional mode one transaction begins on the batch's connection after the takes, and
// every delivery lends it. A failure after some rows were taken closes the connection, which
// gives those rows back at once (their attempts counted), and is returned.
func (f *Form[D]) ClaimBatch(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	if max <= 0 {
		return nil, nil
	}
	if err := f.life.Enter(); err != nil {
		return nil, err
	}
	defer f.life.Leave()

	now := f.d.Time(f.q.Now())
	cf, err := f.readFlows(ctx)
	if err != nil {
		return nil, err
	}
	cf.mine = map[string]bool{}
	cands, err := f.selectCandidates(ctx, now, max+candidateSlack, cf)
	if err != nil || len(cands) == 0 {
		return nil, err
	}
	conn, err := f.db.Conn(ctx)
	if err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(f.table.Name), "pinning a connection for a batch: %w", err)
	}
	h := &hold{conn: conn, batch: true}
	// fail ends the session, and with it every lock the batch took: the lock state after a failed
	// statement is unknown, and no lock may outlive the batch on a pooled connection.
	fail := func(err error) ([]*inbox.Delivery, error) {
		dialect.Discard(conn)
		if len(h.ds) > 0 {
			return nil, fmt.Errorf("%w; closed the batch's connection, which gives back the rows it had taken (%v), their attempts counted", err, ids(h.ds))
		}
		return nil, err
	}
	tried := map[string]bool{}
	for _, c := range cands {
		if len(h.ds) == max {
			break
		}
		// Rows behind the first of a key wait for it, whether or not its lock is taken here.
		if tried[c.key()] {
			continue
		}
		tried[c.key()] = true
		d, keys, err := f.takeKey(ctx, conn, c, now, cf)
		if err != nil {
			return fail(err)
		}
		if d == nil {
			continue
		}
		for _, k := range keys {
			cf.mine[k] = true
		}
		h.keys, h.ds = append(h.keys, keys...), append(h.ds, d)
	}
	if len(h.ds) == 0 {
		conn.Close()
		return nil, nil
	}
	if f.q.Transactional {
		// database/sql rolls a transaction back when its context ends; this one outlives the
		// claim.
		if h.tx, err = dialect.BeginOn(context.WithoutCancel(ctx), f.d, conn); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(f.table.Name), "beginning the transaction of the batch of rows %v: %w; %s", ids(h.ds), err, lockGone("the rows are back in the queue, their attempts counted"))
		}
	}
	if err := f.keep(ctx, h); err != nil {
		return nil, err
	}
	return h.ds, nil
}

// takeKey tries the lock of candidate c's key on conn without waiting (after its group's, where
// it has one) and, once held, admits the row (flows.go) and takes it: the delivery and every lock
// it took for it, or nil where a lock is another holder's, the row was not admitted or was
// settled between the select and the lock (its locks given back at once).
func (f *Form[D]) takeKey(ctx context.Context, conn *sql.Conn, c candidate, now any, cf *claimFlows) (*inbox.Delivery, []string, error) {
	keys, locked, err := f.lockGroup(ctx, conn, c)
	if err == nil && locked {
		if locked, err = f.lock(ctx, conn, c); locked {
			keys = append(keys, c.key())
		}
	}
	if err != nil {
		return nil, nil, sentinel.Errorf(nil, sentinel.Table(f.table.Name), "locking key %q of row %d for a batch: %w", c.key(), c.id, err)
	}
	var d *inbox.Delivery
	if locked && f.fl.on() {
		var slots []string
		slots, locked, err = f.admit(ctx, conn, c, cf)
		keys = append(keys, slots...)
	}
	if err == nil && locked {
		d, err = f.takeRow(ctx, conn, c, now)
	}
	if err != nil || d != nil {
		return d, keys, err
	}
	ok, err := f.releaseKeys(ctx, conn, keys)
	if err == nil && !ok {
		err = errors.New("the server did not confirm the release, so the session had lost its lock: do not run the advisory form through a transaction-pooling proxy")
	}
	if err != nil {
		return nil, nil, sentinel.Errorf(nil, sentinel.Table(f.table.Name), "releasing key %q of row %d, passed over: %w", c.key(), c.id, err)
	}
	return nil, nil, nil
}

// keep hands h to its deliveries (lending its transaction, if any) and records it as held, so
// that Close gives it back; if the form closed during the claim, it gives h back instead.
func (f *Form[D]) keep(ctx context.Context, h *hold) error {
	for _, d := range h.ds {
		inbox.SetHold(d, h)
	}
	if h.tx != nil {
		inbox.LendTx(h.tx, f.d, f.table.Name, h.ds...)
	}
	if !f.life.Keep(h) {
		f.giveBack(context.WithoutCancel(ctx), h)
		return sentinel.Errorf(inbox.ErrClosed, sentinel.Rows(f.table.Name, ids(h.ds)), "the advisory form closed during the claim; the rows are back in the queue")
	}
	return nil
}

// SettleBatch applies os[i] to ds[i], the rows of one ClaimBatch, on the batch's connection, one
// statement per kind of outcome: Ack and Drop together, then RetryAfter, one statement per
// distinct delay; Retry runs none, since the take counted the attempt. Then it releases every
// key of the batch and gives the connection back.
//
// In transactional mode the handler's writes commit with the settlements only when every outcome
// is Ack; otherwise they roll back, and each row settles by its outcome with an Ack settled as a
// Retry (its writes did not land). A batch holds its rows until it settles, so no row of it is
// ever lost to another consumer (this form never reports inbox.ErrLeaseLost). When the
// transaction cannot settle (inbox.ErrTransactionHeld, inbox.ErrTransactionEnded), nothing is
// settled and the rows are given back, as Settle does.
//
// It fails with inbox.ErrClosed when the batch's hold had already ended, and, changing nothing,
// when ds is not one whole batch or os does not give an outcome per delivery. A settlement
// statement that fails leaves its rows unchanged: they return when the keys are released, their
// attempts counted; the other statements still run.
func (f *Form[D]) SettleBatch(ctx context.Context, ds []*inbox.Delivery, os []outcome.Outcome) error {
	if len(os) != len(ds) {
		return sentinel.Errorf(nil, sentinel.Table(f.table.Name), "settling a batch of %d rows with %d outcomes: give one outcome per delivery; nothing changed", len(ds), len(os))
	}
	h, err := f.beginBatch(ds)
	if err != nil || h == nil {
		return err
	}
	defer f.life.Leave()
	if h.tx != nil {
		if err := h.takeBack(); err != nil {
			f.giveBack(ctx, h)
			return err
		}
		allAck := true
		for _, o := range os {
			allAck = allAck && o.Kind() == outcome.KindAck
		}
		if allAck {
			return f.commitBatch(ctx, h, ds, os)
		}
		if !f.rollback(h) {
			// The connection is gone, and with it the locks: the rows are back, unsettled.
			return sentinel.Errorf(nil, sentinel.Table(f.table.Name), "rolling back the transaction of the batch of rows %v failed, so it was not settled; its rows are back in the queue", ids(ds))
		}
		// The handler's writes did not land: an Ack is retried, so that they are made again.
		retried := make([]outcome.Outcome, len(os))
		for i, o := range os {
			if o.Kind() == outcome.KindAck {
				o = outcome.Retry()
			}
			retried[i] = o
		}
		os = retried
	}
	err = f.settleMany(ctx, h.conn, ds, os, true)
	f.unlock(ctx, h)
	return err
}

// commitBatch settles a batch of Acks in the handler's transaction and commits the two together,
// then releases the batch's keys.
func (f *Form[D]) commitBatch(ctx context.Context, h *hold, ds []*inbox.Delivery, os []outcome.Outcome) error {
	if err := f.settleMany(ctx, h.tx, ds, os, false); err != nil {
		if !stmt.BacksOff(err) || f.q.Backoff == nil || !f.rollback(h) {
			f.giveBack(ctx, h)
			return err
		}
		// Rolled back, the locks still held on the connection: back the rows off there.
		errs := []error{err}
		for _, d := range ds {
			errs = append(errs, f.backOff(ctx, h.conn, d, err))
		}
		f.unlock(ctx, h)
		return errors.Join(errs...)
	}
	if err := h.tx.Commit(); err != nil {
		return sentinel.Errorf(nil, sentinel.Table(f.table.Name), "committing the settlement of rows %v with the handler's writes: %w; %s", ids(ds), err, lockGone(committed(err, "the rows are")))
	}
	f.unlock(ctx, h)
	return nil
}

// settleMany runs through ex the statements that settle ds[i] by os[i], as settleplan plans
// them: one for the Acks and Drops, one per distinct RetryAfter delay and last error, one per
// distinct Fail's last error; a Retry runs none. A statement that fails does not stop the
// others; with backOff, the rows of a statement that failed are backed off by the consumer's
// policy (see backOff).
func (f *Form[D]) settleMany(ctx context.Context, ex execer, ds []*inbox.Delivery, os []outcome.Outcome, backOff bool) error {
	p := settleplan.Of(f.shape, os, false)
	if len(p.Unscheduled) > 0 {
		f.log.Warn("inbox: RetryAfter on a table without a RetryAfter column: the rows are retried at once; add the column to delay retries", "table", f.table.Name, "ids", rowIDs(ds, p.Unscheduled))
	}
	now := f.q.Now()
	var errs []error
	for _, step := range p.Steps {
		ids := rowIDs(ds, step.Rows)
		v := f.shape.Values(step, now, f.d.Time)
		v.IDs = ids
		s := f.s.many(step.Kind, len(ids))
		if _, err := ex.ExecContext(ctx, s.SQL, s.Bind(nil, &v)...); err != nil {
			err = sentinel.Errorf(nil, sentinel.Table(f.table.Name), "settling rows %v (%s): %w; the rows return to the queue", ids, step.Kind, err)
			errs = append(errs, err)
			for _, i := range step.Rows {
				if backOff {
					errs = append(errs, f.backOff(ctx, ex, ds[i], err))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// rowIDs are the ids of the rows of ds at indexes rows.
func rowIDs(ds []*inbox.Delivery, rows []int) []int64 {
	ids := make([]int64, len(rows))
	for j, i := range rows {
		ids[j] = ds[i].ID
	}
	return ids
}

// ReleaseBatch gives the rows of one ClaimBatch back without an outcome: it rolls the handler's
// transaction back (in transactional mode), releases every key of the batch and gives the
// connection back. The rows are claimable at once, their attempts counted (once the handler's
// statement is done, when one still runs on the transaction, as Release says). It fails with
// inbox.ErrClosed when the batch's hold had already ended, and, changing nothing, when ds is not
// one whole batch.
func (f *Form[D]) ReleaseBatch(ctx context.Context, ds []*inbox.Delivery) error {
	h, err := f.beginBatch(ds)
	if err != nil || h == nil {
		return err
	}
	defer f.life.Leave()
	f.giveBack(ctx, h)
	return nil
}

// beginBatch takes the hold of batch ds from the form for its settlement or release, as begin
// does, and admits the call; nil, not admitted, for no deliveries. ds must be every delivery of
// one ClaimBatch.
func (f *Form[D]) beginBatch(ds []*inbox.Delivery) (*hold, error) {
	if len(ds) == 0 {
		return nil, nil
	}
	h, _ := inbox.HoldOf[*hold](ds[0])
	if h != nil && !h.batch {
		return nil, sentinel.Errorf(nil, sentinel.Row(f.table.Name, ds[0].ID), "the delivery was claimed alone, not in a batch: settle it with Settle or give it back with Release; nothing changed")
	}
	for _, d := range ds[1:] {
		if dh, _ := inbox.HoldOf[*hold](d); dh != h {
			return nil, sentinel.Errorf(nil, sentinel.Table(f.table.Name), "rows %d and %d are of different claims: settle or give back each batch on its own; nothing changed", ds[0].ID, d.ID)
		}
	}
	switch kept, err := f.life.Take(h, func() error {
		if len(ds) != len(h.ds) {
			return sentinel.Errorf(nil, sentinel.Table(f.table.Name), "%d of the %d rows of a batch given: settle or give back the whole batch at once; nothing changed", len(ds), len(h.ds))
		}
		return nil
	}); {
	case !kept:
		// A closed form keeps no holds: its locks were released at Close.
		return nil, sentinel.Errorf(inbox.ErrClosed, "", "table %q, rows %v: the batch's locks were already released; nothing changed; see docs/errors.md#closed", f.table.Name, ids(ds))
	case err != nil:
		return nil, err
	}
	return h, nil
}

// ids lists the deliveries' ids, for messages.
func ids(ds []*inbox.Delivery) []int64 {
	out := make([]int64, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}
