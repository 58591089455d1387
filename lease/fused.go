package lease

import (
	"context"
	"errors"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/outcome"
)

// SettleAndClaim settles d by o, as Settle does, and claims at most max rows, as Claim does: the
// form's inbox.Plan.SettleAndClaim where the database has one writer and the binding is not
// transactional. On SQLite, outside transactional mode, both run in one transaction, so that a worker that
// settles a row and claims the next pays for one commit, not two (SQLite commits one writer at
// a time, so a lone worker's rate is its commits'). If that transaction fails, the settlement
// and the claim run apart, as they would otherwise. Elsewhere they always run apart.
func (f *Form[D]) SettleAndClaim(ctx context.Context, d *inbox.Delivery, o outcome.Outcome, max int) (claimed []*inbox.Delivery, settled, claimErr error) {
	fused := false
	if f.life.Enter() == nil {
		fused = !f.b.q.Transactional && f.d.Caps().OneWriter && max > 0
		f.life.Leave()
	}
	if !fused {
		settled = f.Settle(ctx, d, o)
		claimed, claimErr = f.Claim(ctx, max)
		return claimed, settled, claimErr
	}

	b, h, unlock, err := f.lockHold(d)
	if err != nil {
		return nil, err, nil
	}
	defer unlock()
	if h.batch != nil {
		return nil, f.inBatch(d, "settled", "SettleBatch"), nil
	}
	defer b.end(h)

	s, args, what := f.settlement(b, d, h, o)
	ds, token, settled, err := f.settleAndClaimInTx(ctx, b, d, h, s.Text(), args, what, max)
	if err != nil {
		// The transaction changed nothing: settle and claim apart.
		res, err := b.exec(ctx, s, args...)
		_, settled = f.guarded(res, err, d, h, what)
		settled = f.backedOff(ctx, b, h, d, settled)
		if ds, token, claimErr = f.claimRows(ctx, b, max); claimErr != nil {
			return nil, settled, claimErr
		}
	}
	claimed, claimErr = f.keepRows(ctx, b, ds, token)
	return claimed, settled, claimErr
}

// settleAndClaimInTx runs the settlement's statement and the claim in one transaction under the
// SQLite writer lock. Its error says the transaction did not commit and changed nothing;
// settled is the settlement's own result (ErrLeaseLost when the lease had run out).
func (f *Form[D]) settleAndClaimInTx(ctx context.Context, b *binding, d *inbox.Delivery, h *hold, text string, args []any, what string, max int) (ds []*inbox.Delivery, token time.Time, settled, err error) {
	unlock := b.write()
	defer unlock()
	tx, err := beginWrite(ctx, b.db)
	if err != nil {
		return nil, token, nil, err
	}
	res, err := tx.ExecContext(ctx, text, args...)
	if err != nil {
		return nil, token, nil, errors.Join(err, tx.Rollback())
	}
	_, settled = f.guarded(res, nil, d, h, what)
	now := b.q.Now()
	token = tokenAt(now.Add(b.lease))
	ds, err = f.pick(ctx, b, tx, max, now, token)
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		return nil, token, nil, errors.Join(sentinel.Errorf(nil, sentinel.Row(f.t.Name, d.ID), "settling and claiming in one transaction: %w", err), tx.Rollback())
	}
	return ds, token, settled, nil
}
