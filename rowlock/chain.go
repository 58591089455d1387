package rowlock

import (
	"context"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// SettleAndClaim settles d by o, as Settle does, and claims at most max rows, as Claim does: the
// form's inbox.Plan.SettleAndClaim where the server chains transactions (Postgres 12 or later,
// MySQL, MariaDB) and the binding is not transactional. The settlement commits with COMMIT AND
// CHAIN, which begins the first claim's transaction on the same connection, at the same level,
// in the same round trip: a worker that settles and claims next saves the claim's BEGIN (one
// round trip of four a message on Postgres, two of five on MySQL and MariaDB, where a
// transaction at a level other than the session's sets it first). The settlement is committed,
// and as durable, before the claim runs, and a row claimed is held as Claim holds it, in a
// transaction of its own. Where the settlement does not commit (a Retry on a table without an
// attempt column rolls back; a failure) or the chained claim fails, the claim runs apart, as
// Claim; a chained claim that finds no row rolls its transaction back and claims no more.
func (f *Form[D]) SettleAndClaim(ctx context.Context, d *inbox.Delivery, o outcome.Outcome, max int) (claimed []*inbox.Delivery, settled, claimErr error) {
	h, err := f.take(d)
	if err != nil {
		return nil, err, nil
	}
	chained, settled := f.settle(ctx, h, d, o, f.chains && max > 0)
	if chained {
		// The chained transaction is the claim's: its context lives on with the rows it holds.
		stop := context.AfterFunc(ctx, h.cancel)
		claimed, claimErr = f.claimIn(ctx, h.tx, h.cancel, stop, f.claim, 0)
	} else {
		h.cancel()
	}
	f.life.Leave()
	switch {
	case !chained || claimErr != nil:
		// The claim runs apart, retrying a transient conflict as Claim does.
		claimed, claimErr = f.Claim(ctx, max)
	case len(claimed) > 0 && max > 1:
		more, _ := f.Claim(ctx, max-1) // a failure shows again at the next claim, as in Claim
		claimed = append(claimed, more...)
	}
	return claimed, settled, claimErr
}
