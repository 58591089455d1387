package admin

import (
	"context"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
)

// SetRate sets or changes a rate limit, as inbox.Client.SetRate does: from its commit every
// claim of the lease form admits at most r.Starts rows of the queue (of the kind, of the limit
// key, by r.Scope and r.Key) in any window of r.Per. It needs the description's rates table (inbox.Table.Rates; RatesSchema creates it),
// and fails wrapping inbox.ErrSchema without it.
func (a *Admin) SetRate(ctx context.Context, r inbox.Rate) error {
	c, err := inbox.NewClient(a.db, a.d, a.t)
	if err != nil {
		return err
	}
	return c.SetRate(ctx, r)
}

// ClearRate removes the rate of queue, scope and key, as inbox.Client.ClearRate does.
func (a *Admin) ClearRate(ctx context.Context, queue string, scope inbox.LimitScope, key string) error {
	c, err := inbox.NewClient(a.db, a.d, a.t)
	if err != nil {
		return err
	}
	return c.ClearRate(ctx, queue, scope, key)
}

// Rates lists the table's rates with the starts of their last interval, as inbox.Client.Rates
// does; none where the description names no rates table.
func (a *Admin) Rates(ctx context.Context) ([]inbox.Rate, error) {
	if a.t.Rates == "" {
		return []inbox.Rate{}, nil
	}
	c, err := inbox.NewClient(a.db, a.d, a.t)
	if err != nil {
		return nil, err
	}
	return c.Rates(ctx)
}

// RatesSchema returns the statement that creates, where it is not there, the rates table t
// names (inbox.Table.Rates, inbox.RatesTable by the inbox command) on d's database. A database
// needs it once, whatever the job tables that share it. It fails, wrapping inbox.ErrSchema,
// where t names none.
func RatesSchema(d dialect.Dialect, t inbox.Table) ([]string, error) {
	st, err := inbox.RatesSchema(d, t)
	if err != nil {
		return nil, err
	}
	return []string{st}, nil
}
