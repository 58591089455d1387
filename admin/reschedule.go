package admin

import (
	"context"
	"time"

	"github.com/sqlinbox/inbox"
)

// Reschedule moves the queued row id to run at at, as inbox.Client.Reschedule does (on this
// host's clock): it never waits for a row a consumer holds, and answers inbox.ErrInWork,
// inbox.ErrSettled or inbox.ErrNotFound for a row it leaves as it was. RetryNow (Act) makes
// delayed rows due at once in bulk; Reschedule moves one row to any time.
func (a *Admin) Reschedule(ctx context.Context, id int64, at time.Time) error {
	c, err := inbox.NewClient(a.db, a.d, a.t)
	if err != nil {
		return err
	}
	return c.Reschedule(ctx, id, at)
}
