package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/settleplan"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/outcome"
)

// ClaimBatch claims at most max due rows of the queue, in claim order, with the statements
// Claim runs and one token for all of them: the batch's hold. Extend on any of its deliveries
// renews the lease of every row of the batch in one statement, run by its text: an extension
// never waits for a connection of the pool to prepare one. In transactional mode it then
// prepares the ack over the batch's ids where the pool has a connection to spare (the ack runs
// inside the transaction, where nothing waits for the pool: without one it runs by its text),
// and opens one transaction, at the dialect's level, lent to every delivery; if it cannot be
// opened, the rows are given back and the error returned. On SQLite that transaction holds the
// one write lock from its first write until the batch settles, as a single delivery's does.
func (f *Form[D]) ClaimBatch(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	if err := f.life.Enter(); err != nil {
		return nil, err
	}
	defer f.life.Leave()
	b := f.b
	if max < 1 {
		return nil, nil
	}
	ds, token, err := f.claimRows(ctx, b, max)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	h := &hold{token: token, id: ds[0].ID, batch: make([]int64, len(ds)), size: max}
	for i, d := range ds {
		h.batch[i] = d.ID
		inbox.SetHold(d, h)
	}
	var failed error
	if b.q.Transactional {
		// The ack runs inside the transaction, where nothing waits for the pool (inWork): it is
		// readied before the transaction holds any lock. The transaction outlives this call: it
		// must not end with the claim's context.
		if _, err := b.statement(ctx, h, "ack"); err != nil {
			failed = sentinel.Errorf(nil, sentinel.Table(f.t.Name), "readying the ack of the batch %v: %w; the claimed rows were given back", h.batch, err)
		} else if tx, err := f.d.Begin(context.WithoutCancel(ctx), b.db); err != nil {
			failed = sentinel.Errorf(nil, sentinel.Table(f.t.Name), "opening the transaction of the batch %v: %w; the claimed rows were given back", h.batch, err)
		} else {
			h.tx, h.lent = tx, ds[0]
			inbox.LendTx(tx, f.d, f.t.Name, ds...)
		}
	}
	if failed == nil && f.life.Keep(h) {
		return ds, nil
	}
	if failed == nil {
		failed = sentinel.Errorf(inbox.ErrClosed, sentinel.Table(f.t.Name), "the form was closed during the claim of the batch %v; its rows were given back", h.batch)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return nil, errors.Join(failed, b.giveBack(context.WithoutCancel(ctx), h, h.id))
}

// SettleBatch applies os[i] to ds[i], the deliveries of one ClaimBatch, while the batch's lease
// holds, with one guarded statement per kind of outcome: Ack and Drop as Settle's ack, Retry as
// its retry, and one statement per distinct RetryAfter delay. A row another consumer took after
// its lease ran out is left unchanged, and the others settle: the error is then an
// *inbox.LeaseLostError naming exactly the rows left unchanged (it matches inbox.ErrLeaseLost).
// On Postgres and SQLite each statement returns the ids it changed; on MySQL and MariaDB it runs
// in a transaction, committed when it changed every row of its kind, and otherwise rolled back
// and run again over the rows it first locks as still held.
//
// In transactional mode, when every outcome is Ack the ack runs inside the batch's transaction
// and commits with the handler's writes; if a row's lease ran out meanwhile, neither lands and
// the rows still held are given back. Otherwise the transaction is rolled back and each row
// settles by its outcome outside it, an Ack as a Retry, since its writes did not land. If a row's lease ran out,
// the *inbox.LeaseLostError names every row. When the
// transaction cannot settle (inbox.ErrTransactionHeld, inbox.ErrTransactionEnded), nothing is
// settled and the rows are given back, as Settle does.
//
// The batch's hold ends with SettleBatch, whatever it returns.
func (f *Form[D]) SettleBatch(ctx context.Context, ds []*inbox.Delivery, os []outcome.Outcome) error {
	if len(ds) == 0 {
		return nil
	}
	if len(os) != len(ds) {
		return sentinel.Errorf(nil, sentinel.Table(f.t.Name), "%d outcomes for a batch of %d deliveries: give one outcome per delivery", len(os), len(ds))
	}
	b, h, unlock, err := f.lockBatch(ds)
	if err != nil {
		return err
	}
	defer unlock()
	defer b.end(h)

	allAck := true
	for _, o := range os {
		allAck = allAck && o.Kind() == outcome.KindAck
	}
	if h.tx != nil {
		if err := b.takeBack(h); err != nil {
			return errors.Join(err, sentinel.Errorf(nil, sentinel.Table(f.t.Name), "nothing settled, the handler's writes were rolled back and the batch's rows given back"), b.giveBack(ctx, h, ds[0].ID))
		}
		tx := h.tx
		h.tx = nil
		if allAck {
			return f.ackBatchInTx(ctx, b, h, ds, tx)
		}
		if err := tx.Rollback(); err != nil {
			b.log.Warn("inbox: rolling back the batch's transaction failed; settling its rows anyway", "table", f.t.Name, "ids", h.batch, "err", err)
		}
		h.txToken = time.Time{}
	}

	p := settleplan.Of(b.shape, os, b.q.Transactional) // in transactional mode the writes rolled back
	for _, i := range p.Unscheduled {
		b.noRetryAfter(ds[i].ID, os[i].Delay())
	}
	var errs []error
	unchanged := map[int64]bool{}
	now := b.q.Now()
	for _, step := range p.Steps {
		ids := make([]int64, len(step.Rows))
		for j, i := range step.Rows {
			ids[j] = ds[i].ID
		}
		changed, err := f.settleRows(ctx, b, h, step.Kind.String(), b.shape.Values(step, now, f.d.Time), ids)
		if err != nil {
			errs = append(errs, err)
			for _, i := range step.Rows {
				errs = append(errs, f.backOff(ctx, b, h, ds[i], err))
			}
			continue
		}
		for _, id := range ids {
			if !changed[id] {
				unchanged[id] = true
			}
		}
	}
	if len(unchanged) > 0 {
		lost := &inbox.LeaseLostError{Table: f.t.Name}
		for _, d := range ds {
			if unchanged[d.ID] {
				lost.IDs = append(lost.IDs, d.ID)
			}
		}
		errs = append(errs, lost)
	}
	return errors.Join(errs...)
}

// settleRows runs statement what over ids, a part of h's batch, guarded by the batch's token,
// binding step's values (settleplan.Table.Values), the ids padded to the batch's size and the
// token, and returns the ids it changed. Its error says it changed none.
func (f *Form[D]) settleRows(ctx context.Context, b *binding, h *hold, what string, step sqltext.Values, ids []int64) (map[int64]bool, error) {
	changed := make(map[int64]bool, len(ids))
	step.Tokens = []any{f.d.Time(h.token)}
	var err error
	if !f.d.Caps().Returning {
		err = f.settleInTx(ctx, b, h, what, step, ids, changed)
	} else {
		var s *stmt.Stmt
		s, err = b.listStmt(ctx, what+" returning", func(n int) sqltext.Statement { return b.settles(what).SettleReturning(kindOf(what), n) }, h.size)
		if err == nil {
			step.IDs = padded(ids, h.size)
			err = b.query(ctx, s, s.Bind(nil, &step), func(rows *sql.Rows) error {
				return scanIDs(rows, changed)
			})
		}
	}
	if err != nil {
		return nil, sentinel.Errorf(nil, "", "table %q, rows %v: %s: %w; they were not changed, and return when their lease runs out", f.t.Name, ids, what, err)
	}
	return changed, nil
}

// settleInTx runs statement what over ids in a transaction (MySQL and MariaDB, whose statements
// cannot return the ids they changed), binding step's values and token (settleRows), and records
// the ids it changed: when it changed every row, COMMIT; otherwise it rolls back, locks the rows
// that still hold the token (heldIn), and runs the statement again over those alone. A
// transient conflict runs it all again.
func (f *Form[D]) settleInTx(ctx context.Context, b *binding, h *hold, what string, step sqltext.Values, ids []int64, changed map[int64]bool) error {
	s, err := b.statement(ctx, h, what)
	if err != nil {
		return err
	}
	run := func(tx dialect.Tx, ids []int64) (int64, error) {
		v := step
		v.IDs = padded(ids, h.size)
		res, err := s.ExecIn(ctx, tx, s.Bind(nil, &v)...)
		if err != nil {
			return 0, err
		}
		return res.RowsAffected()
	}
	return b.written(ctx, func() error {
		clear(changed)
		tx, done, err := b.begin(ctx)
		if err != nil {
			return err
		}
		n, err := run(tx, ids)
		if err == nil && n == int64(len(ids)) {
			err = tx.Commit()
			done()
			if err != nil {
				return err
			}
			for _, id := range ids {
				changed[id] = true
			}
			return nil
		}
		err = errors.Join(err, tx.Rollback())
		done()
		if err != nil {
			return err
		}
		held, err := b.listStmt(ctx, "held", b.sql.Held, h.size)
		if err != nil {
			return err
		}
		if tx, done, err = b.begin(ctx); err != nil {
			return err
		}
		defer done()
		v := sqltext.Values{IDs: padded(ids, h.size), Tokens: step.Tokens}
		rows, err := held.QueryIn(ctx, tx, held.Bind(nil, &v)...)
		if err == nil {
			err = scanIDs(rows, changed)
		}
		if err == nil && len(changed) > 0 {
			var still []int64
			for _, id := range ids {
				if changed[id] {
					still = append(still, id)
				}
			}
			if n, err = run(tx, still); err == nil && n != int64(len(still)) {
				err = fmt.Errorf("the statement changed %d of the %d rows it had locked", n, len(still))
			}
		}
		if err == nil {
			err = tx.Commit()
		} else {
			err = errors.Join(err, tx.Rollback())
		}
		if err != nil {
			clear(changed)
		}
		return err
	})
}

// scanIDs reads the ids rows return into ids and closes rows.
func scanIDs(rows *sql.Rows, ids map[int64]bool) error {
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids[id] = true
	}
	return rows.Err()
}

// ackBatchInTx runs the batch's guarded ack inside its transaction and commits both. When a row
// of the batch is no longer held, the handler's writes roll back and the rows still held are
// given back.
func (f *Form[D]) ackBatchInTx(ctx context.Context, b *binding, h *hold, ds []*inbox.Delivery, tx dialect.Tx) error {
	first := ds[0]
	v := b.shape.Values(settleplan.Step{Kind: outcome.KindAck}, b.q.Now(), f.d.Time)
	h.guard(&v, first.ID, f.d.Time(h.current()))
	ack := b.inWork(h, "ack")
	res, err := ack.ExecIn(ctx, tx, ack.Bind(nil, &v)...)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n < int64(len(h.batch)) {
			err = errors.Join(&inbox.LeaseLostError{Table: f.t.Name, IDs: slices.Clone(h.batch)},
				sentinel.Errorf(nil, sentinel.Table(f.t.Name), "the lease of %d of the batch's rows ran out before the ack, so none of them settled", int64(len(h.batch))-n))
		}
	}
	if err != nil && !errors.Is(err, inbox.ErrLeaseLost) {
		err = sentinel.Errorf(nil, "", "table %q, batch %v: ack: %w", f.t.Name, h.batch, err)
	}
	if err != nil {
		h.txToken = time.Time{}
		err = errors.Join(err, rollback(tx, f.t.Name, first.ID), sentinel.Errorf(nil, sentinel.Table(f.t.Name), "the handler's writes for the batch %v were rolled back", h.batch))
		if b.q.Backoff == nil || !stmt.BacksOff(err) {
			return errors.Join(err, b.giveBack(ctx, h, first.ID))
		}
		// Still leased: back every row off under the batch's token rather than give it back
		// to be claimed at once.
		errs := []error{err}
		for _, d := range ds {
			errs = append(errs, f.backOff(ctx, b, h, d, err))
		}
		return errors.Join(errs...)
	}
	if err := tx.Commit(); err != nil {
		return sentinel.Errorf(nil, "", "table %q, batch %v: committing the handler's writes with the ack failed: %w; %s", f.t.Name, h.batch, err, landed(err, "the rows return"))
	}
	return nil
}

// ReleaseBatch gives the rows of one ClaimBatch back without an outcome: it rolls back the
// batch's transaction, if any, and clears the lease of every row still held, so they are
// claimable at once. The attempt the claim counted stays counted.
func (f *Form[D]) ReleaseBatch(ctx context.Context, ds []*inbox.Delivery) error {
	if len(ds) == 0 {
		return nil
	}
	b, h, unlock, err := f.lockBatch(ds)
	if err != nil {
		return err
	}
	defer unlock()
	return b.giveBack(ctx, h, ds[0].ID)
}

// lockBatch locks the hold ds share, as lockHold does; it fails when ds are not the deliveries
// of one batch of this form.
func (f *Form[D]) lockBatch(ds []*inbox.Delivery) (*binding, *hold, func(), error) {
	b, h, unlock, err := f.lockHold(ds[0])
	if err != nil {
		return nil, nil, nil, err
	}
	ok := h.batch != nil && len(ds) == len(h.batch)
	for i, d := range ds {
		dh, _ := inbox.HoldOf[*hold](d)
		ok = ok && dh == h && d.ID == h.batch[i]
	}
	if !ok {
		unlock()
		return nil, nil, nil, sentinel.Errorf(nil, sentinel.Table(f.t.Name), "the deliveries %v are not one batch of this form as ClaimBatch returned it: settle or release a batch whole, in claim order", deliveryIDs(ds))
	}
	return b, h, unlock, nil
}

func deliveryIDs(ds []*inbox.Delivery) []int64 {
	ids := make([]int64, len(ds))
	for i, d := range ds {
		ids[i] = d.ID
	}
	return ids
}
