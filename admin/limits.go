package admin

import (
	"context"

	"github.com/sqlinbox/inbox"
)

// SetLimit sets or changes a concurrency limit, as inbox.Client.SetLimit does: from its commit
// no claim of the lease form takes a row under it while l.Max rows under it are in work. It
// needs the description's limits table (inbox.Table.Limits; inbox.LimitsSchema creates it), and
// fails wrapping inbox.ErrSchema without it.
func (a *Admin) SetLimit(ctx context.Context, l inbox.Limit) error {
	c, err := inbox.NewClient(a.db, a.d, a.t)
	if err != nil {
		return err
	}
	return c.SetLimit(ctx, l)
}

// ClearLimit removes the concurrency limit of queue, scope and key, as
// inbox.Client.ClearLimit does.
func (a *Admin) ClearLimit(ctx context.Context, queue string, scope inbox.LimitScope, key string) error {
	c, err := inbox.NewClient(a.db, a.d, a.t)
	if err != nil {
		return err
	}
	return c.ClearLimit(ctx, queue, scope, key)
}

// Limits lists the table's concurrency limits with the rows in work under each, as
// inbox.Client.Limits does; none where the description names no limits table.
func (a *Admin) Limits(ctx context.Context) ([]inbox.Limit, error) {
	if a.t.Limits == "" {
		return []inbox.Limit{}, nil
	}
	c, err := inbox.NewClient(a.db, a.d, a.t)
	if err != nil {
		return nil, err
	}
	return c.Limits(ctx)
}
