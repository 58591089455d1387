package admin

import (
	"context"
	"database/sql"
	"time"

	"github.com/sqlinbox/inbox/internal/sentinel"
)

// Group is a FIFO group (inbox.Table.GroupKey) with rows pending, as Groups reads it.
type Group struct {
	Queue string `json:"queue"` // empty for a table without a Queue column
	Key   string `json:"key"`
	// Head is the group's lowest pending id: the row its group runs next, or runs now.
	Head int64 `json:"head"`
	// Pending counts the group's rows neither processed, dead nor cancelled, the head among them.
	Pending int64 `json:"pending"`
	// HeadAttempt and HeadRetryAt are the head's attempt and retry_after (zero where the table
	// has no such column, or the head never failed): a head retrying later blocks its group
	// until then.
	HeadAttempt int64     `json:"head_attempt"`
	HeadRetryAt time.Time `json:"head_retry_at"`
	// HeldBy is the row that holds the group, its lease running ahead: 0 where no row does (or
	// the description names no lease column, which the holds need).
	HeldBy int64 `json:"held_by"`
}

// Blocked reports whether the group waits for its head's retry at now: the head failed and runs
// again later, and nothing of its group runs before it.
func (g Group) Blocked(now time.Time) bool { return g.HeldBy == 0 && g.HeadRetryAt.After(now) }

// Groups lists up to limit of the table's FIFO groups that have rows pending, by queue and key,
// with their head, backlog and holder, in one read that takes no lock. It needs the GroupKey
// role.
func (a *Admin) Groups(ctx context.Context, limit int) ([]Group, error) {
	return a.groups(ctx, "Groups", nil, limit)
}

// QueueGroups is Groups of one queue: up to limit of its groups, by key. It reads that queue's
// pending rows alone (the claim index leads with the queue). It needs the GroupKey and Queue
// roles.
func (a *Admin) QueueGroups(ctx context.Context, queue string, limit int) ([]Group, error) {
	if err := a.needs("QueueGroups", "Queue", a.t.Queue); err != nil {
		return nil, err
	}
	return a.groups(ctx, "QueueGroups", &queue, limit)
}

// groups lists the groups of queue, or of every queue where it is nil, for call.
func (a *Admin) groups(ctx context.Context, call string, queue *string, limit int) ([]Group, error) {
	if err := a.needs(call, "GroupKey", a.t.GroupKey); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s with a limit of %d: give a limit above 0", call, limit)
	}
	now := time.Now()
	v := &values{nowTime: now, now: a.d.Time(now), table: a.t.Name, limit: int64(limit)}
	b := a.sql.Groups()
	if queue != nil {
		v.queues, b = []string{*queue}, a.sql.QueueGroups()
	}
	rows, err := a.db.QueryContext(ctx, b.SQL, v.args(b.Binds)...)
	if err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "listing its groups: %w", err)
	}
	defer rows.Close()
	out := []Group{}
	for rows.Next() {
		var g Group
		var attempt, holder sql.NullInt64
		var retryAt any
		if err := rows.Scan(&g.Queue, &g.Key, &g.Head, &g.Pending, &attempt, &retryAt, &holder); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "listing its groups: %w", err)
		}
		if g.HeadRetryAt, err = scannedTime(retryAt); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Row(a.t.Name, g.Head), "%w", err)
		}
		g.HeadAttempt, g.HeldBy = attempt.Int64, holder.Int64
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "listing its groups: %w", err)
	}
	return out, nil
}
