package admin

import (
	"context"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
)

// Pause pauses queue, as inbox.Client.Pause does: from its commit no claim of any consumer
// takes the queue's rows, and the rows in work finish. It needs the description's pauses table
// (inbox.Table.Pauses; PausesSchema creates it), and fails wrapping inbox.ErrSchema without it.
func (a *Admin) Pause(ctx context.Context, queue string) error {
	c, err := inbox.NewClient(a.db, a.d, a.t)
	if err != nil {
		return err
	}
	return c.Pause(ctx, queue)
}

// Resume resumes queue, as inbox.Client.Resume does: claims take its rows again from the
// commit. Consumers in other processes claim at their next poll, or at once where they listen
// for the table's notifications and the description asks for them (inbox.Table.Notify).
func (a *Admin) Resume(ctx context.Context, queue string) error {
	c, err := inbox.NewClient(a.db, a.d, a.t)
	if err != nil {
		return err
	}
	return c.Resume(ctx, queue)
}

// Paused lists the table's paused queues by name, as inbox.Client.Paused does; none where the
// description names no pauses table.
func (a *Admin) Paused(ctx context.Context) ([]inbox.PausedQueue, error) {
	if a.t.Pauses == "" {
		return []inbox.PausedQueue{}, nil
	}
	c, err := inbox.NewClient(a.db, a.d, a.t)
	if err != nil {
		return nil, err
	}
	return c.Paused(ctx)
}

// PausesSchema returns the statement that creates, where it is not there, the pauses table t
// names (inbox.Table.Pauses, inbox.PausesTable by the inbox command) on d's database. A
// database needs it once, whatever the job tables that share it, and only where queues are
// paused. It fails, wrapping inbox.ErrSchema, where t names none.
func PausesSchema(d dialect.Dialect, t inbox.Table) ([]string, error) {
	st, err := inbox.PausesSchema(d, t)
	if err != nil {
		return nil, err
	}
	return []string{st}, nil
}
