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

// RescheduleKey moves the queued row that holds the unique key to run at at, as
// inbox.Client.RescheduleKey does, and returns its id; inbox.ErrNotFound where no row holds it.
func (a *Admin) RescheduleKey(ctx context.Context, key string, at time.Time) (int64, error) {
	c, err := inbox.NewClient(a.db, a.d, a.t)
	if err != nil {
		return 0, err
	}
	return c.RescheduleKey(ctx, key, at)
}
