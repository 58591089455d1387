package lease

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/outcome"
)

// ClaimBatch claims at most max due rows of the queue, in claim order, with the statements
// Claim runs and one token for all of them: the batch's hold. Extend on any of its deliveries
// renews the lease of every row of the batch in one statement. In transactional mode it then
// opens one transaction, at the dialect's level, lent to every delivery; if it cannot be opened,
// the rows are given back and the error returned. On SQLite that transaction holds the one
// write lock from its first write until the batch settles, as a single delivery's does.
func (f *Form[D]) ClaimBatch(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := f.bound()
	if err != nil || max < 1 {
		return nil, err
	}
	ds, token, err := f.claimRows(ctx, b, max)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	h := &hold{token: token, batch: make([]int64, len(ds)), size: max}
	for i, d := range ds {
		h.batch[i] = d.ID
		d.Hold = h
	}
	b.holdsMu.Lock()
	b.holds[h] = ds[0].ID
	b.holdsMu.Unlock()
	if !b.q.Transactional {
		return ds, nil
	}
	// The transaction outlives this call: it must not end with the claim's context.
	tx, err := f.d.Begin(context.WithoutCancel(ctx), b.db)
	if err != nil {
		h.mu.Lock()
		defer h.mu.Unlock()
		return nil, errors.Join(fmt.Errorf("inbox: table %q: opening the transaction of the batch %v: %w; the claimed rows were given back", f.t.Name, h.batch, err), b.giveBack(context.WithoutCancel(ctx), h, ds[0].ID))
	}
	h.tx, h.lent = tx, ds[0]
	inbox.LendTx(tx, f.d, f.t.Name, ds...)
	return ds, nil
}

// SettleBatch applies os[i] to ds[i], the deliveries of one ClaimBatch, while the batch's lease
// holds, with one guarded statement per kind of outcome: Ack and Drop as Settle's ack, Retry as
// its retry, and one statement per distinct RetryAfter delay. A row whose lease ran out is left
// unchanged and reported with inbox.ErrLeaseLost; the others settle.
//
// In transactional mode, when every outcome is Ack the ack runs inside the batch's transaction
// and commits with the handler's writes; if a row's lease ran out meanwhile, neither lands and
// the rows still held are given back. Otherwise the transaction is rolled back and each row
// settles by its outcome outside it, an Ack as a Retry, since its writes did not land. When the
// transaction cannot settle (inbox.ErrTransactionHeld, inbox.ErrTransactionEnded), nothing is
// settled and the rows are given back, as Settle does.
//
// The batch's hold ends with SettleBatch, whatever it returns.
func (f *Form[D]) SettleBatch(ctx context.Context, ds []*inbox.Delivery, os []outcome.Outcome) error {
	if len(ds) == 0 {
		return nil
	}
	if len(os) != len(ds) {
		return fmt.Errorf("inbox: table %q: %d outcomes for a batch of %d deliveries: give one outcome per delivery", f.t.Name, len(os), len(ds))
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
			return errors.Join(err, fmt.Errorf("table %q: nothing settled, the handler's writes were rolled back and the batch's rows given back", f.t.Name), b.giveBack(ctx, h, ds[0].ID))
		}
		tx := h.tx
		h.tx = nil
		if allAck {
			return f.ackBatchInTx(ctx, b, h, ds[0], tx)
		}
		if err := tx.Rollback(); err != nil {
			b.log.Warn("inbox: rolling back the batch's transaction failed; settling its rows anyway", "table", f.t.Name, "ids", h.batch, "err", err)
		}
		h.txToken = time.Time{}
	}

	var acks, retries []int64
	delayed := map[time.Duration][]int64{}
	for i, o := range os {
		id := ds[i].ID
		switch o.Kind() {
		case outcome.KindAck:
			if b.q.Transactional {
				retries = append(retries, id) // its writes were rolled back
				continue
			}
			acks = append(acks, id)
		case outcome.KindDrop:
			acks = append(acks, id)
		case outcome.KindRetryAfter:
			if b.retryAfter != nil {
				delayed[o.Delay()] = append(delayed[o.Delay()], id)
				continue
			}
			b.noRetryAfter(id, o.Delay())
			retries = append(retries, id)
		default:
			retries = append(retries, id)
		}
	}
	var errs []error
	token := f.d.Time(h.token)
	if len(acks) > 0 {
		var head []any
		if b.st.Q.ProcessedAt != "" {
			head = []any{f.d.Time(time.Now())}
		}
		errs = append(errs, f.settleRows(ctx, b, h, "ack", head, acks, token))
	}
	if len(retries) > 0 {
		errs = append(errs, f.settleRows(ctx, b, h, "retry", nil, retries, token))
	}
	for _, delay := range slices.Sorted(maps.Keys(delayed)) {
		errs = append(errs, f.settleRows(ctx, b, h, "retry after", []any{f.d.Time(time.Now().Add(delay))}, delayed[delay], token))
	}
	return errors.Join(errs...)
}

// settleRows runs statement what over ids, a part of h's batch: head, the ids padded to the
// batch's size, then the token. Rows it did not change are reported with ErrLeaseLost.
func (f *Form[D]) settleRows(ctx context.Context, b *binding, h *hold, what string, head []any, ids []int64, token any) error {
	s, _, err := b.statement(ctx, h, what)
	if err != nil {
		return fmt.Errorf("inbox: table %q, rows %v: %s: %w", f.t.Name, ids, what, err)
	}
	res, err := b.exec(ctx, s, append(append(head, padded(ids, h.size)...), token)...)
	var n int64
	if err == nil {
		n, err = res.RowsAffected()
	}
	if err != nil {
		return fmt.Errorf("inbox: table %q, rows %v: %s: %w; they return when their lease runs out", f.t.Name, ids, what, err)
	}
	if lost := int64(len(ids)) - n; lost > 0 {
		return fmt.Errorf("%w: table %q: %d of the rows %v: the lease ran out before the %s and they may be another consumer's now; they were not changed (raise lease.Config.Lease if extensions cannot keep up)", inbox.ErrLeaseLost, f.t.Name, lost, ids, what)
	}
	return nil
}

// ackBatchInTx runs the batch's guarded ack inside its transaction and commits both. When a row
// of the batch is no longer held, the handler's writes roll back and the rows still held are
// given back.
func (f *Form[D]) ackBatchInTx(ctx context.Context, b *binding, h *hold, first *inbox.Delivery, tx dialect.Tx) error {
	s, text, err := b.statement(ctx, h, "ack")
	if err == nil {
		var args []any
		if b.st.Q.ProcessedAt != "" {
			args = []any{f.d.Time(time.Now())}
		}
		args = append(append(args, h.idArgs(first.ID)...), f.d.Time(h.current()))
		var res sql.Result
		res, err = execIn(ctx, tx, s, text, args...)
		_, err = f.guarded(res, err, first, h, "ack")
	}
	if err != nil {
		h.txToken = time.Time{}
		return errors.Join(err, rollback(tx, f.t.Name, first.ID), fmt.Errorf("inbox: table %q: the handler's writes for the batch %v were rolled back", f.t.Name, h.batch), b.giveBack(ctx, h, first.ID))
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("inbox: table %q, batch %v: committing the handler's writes with the ack failed: %w; %s", f.t.Name, h.batch, err, landed(err, "the rows return"))
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
		ok = ok && d.Hold == h && d.ID == h.batch[i]
	}
	if !ok {
		unlock()
		return nil, nil, nil, fmt.Errorf("inbox: table %q: the deliveries %v are not one batch of this form as ClaimBatch returned it: settle or release a batch whole, in claim order", f.t.Name, deliveryIDs(ds))
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
