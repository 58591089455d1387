package admin

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/sqlinbox/inbox/internal/conflict"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
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
	// DeadHead is the dead row the group's hold names: a head that died in work. Where the
	// group's consumers keep groups blocked (lease.Config.GroupsStayBlocked) the group waits
	// for it until UnblockGroup, a requeue or a purge of the row; elsewhere the next claim of
	// the group lets its next row go. 0 where the hold names no dead row (or the description
	// names no DeadAt or lease column).
	DeadHead int64 `json:"dead_head,omitempty"`
	// PausedSince is when the group was paused (PauseGroup), on the database's clock, in UTC;
	// zero while it is not paused.
	PausedSince time.Time `json:"paused_since,omitzero"`
}

// Blocked reports whether the group waits at now for a head that failed: one that runs again
// later (its retry), or one that died in work and still holds the group (DeadHead), while no
// row of the group is in work.
func (g Group) Blocked(now time.Time) bool {
	return g.HeldBy == 0 && (g.HeadRetryAt.After(now) || g.DeadHead != 0)
}

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
		var attempt, holder, dead sql.NullInt64
		var retryAt, paused any
		if err := rows.Scan(&g.Queue, &g.Key, &g.Head, &g.Pending, &attempt, &retryAt, &holder, &dead, &paused); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "listing its groups: %w", err)
		}
		if g.HeadRetryAt, err = scannedTime(retryAt); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Row(a.t.Name, g.Head), "%w", err)
		}
		if g.PausedSince, err = scannedTime(paused); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Queue(a.t.Name, g.Queue), "the time group %q was paused: %w", g.Key, err)
		}
		g.HeadAttempt, g.HeldBy, g.DeadHead = attempt.Int64, holder.Int64, dead.Int64
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "listing its groups: %w", err)
	}
	return out, nil
}

// UnblockGroup lets a group that a dead head blocks go on (lease.Config.GroupsStayBlocked): its
// hold, which names the dead row, then names none, and the next claim takes the group's next
// pending row. The dead row stays dead, to be inspected, requeued (it then rejoins its group at
// its id's place: it runs once the row in work, if any, has settled, before the group's later
// rows) or purged. Requeueing or purging the dead row unblocks the group too, without this.
// Queue is the group's queue (empty for a table without a Queue column). It returns the dead
// row it stepped past, or 0 where the group's hold names no dead row (the group is not blocked
// by one, has no hold, or was unblocked meanwhile): nothing changed. It needs the GroupKey,
// DeadAt and lease columns.
func (a *Admin) UnblockGroup(ctx context.Context, queue, group string) (int64, error) {
	if err := a.groupCall("UnblockGroup", queue, group); err != nil {
		return 0, err
	}
	if err := a.needs("UnblockGroup", "LockedUntil", a.t.LockedUntil); err != nil {
		return 0, err
	}
	if err := a.needs("UnblockGroup", "DeadAt", a.t.DeadAt); err != nil {
		return 0, err
	}
	v := sqltext.Values{Table: a.t.Name, Queue: queue, Group: group}
	read := a.sql.DeadHolder()
	var dead int64
	switch err := a.db.QueryRowContext(ctx, read.SQL, read.Bind(nil, &v)...).Scan(&dead); {
	case errors.Is(err, sql.ErrNoRows):
		return 0, nil
	case err != nil:
		return 0, sentinel.Errorf(nil, sentinel.Queue(a.t.Name, queue), "reading the hold of group %q: %w", group, err)
	}
	v.IDs = []int64{dead}
	unblock := a.sql.UnblockGroup()
	res, err := a.db.ExecContext(ctx, unblock.SQL, unblock.Bind(nil, &v)...)
	if err != nil {
		return 0, sentinel.Errorf(nil, sentinel.Queue(a.t.Name, queue), "unblocking group %q: %w", group, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, err
	}
	return dead, nil
}

// PauseGroup pauses a FIFO group of queue (empty for a table without a Queue column): from its
// commit no claim of any consumer takes a row of the group, whose row in work, if any, finishes
// and settles; the other groups run. Pausing a paused group keeps the time of its first pause,
// and a group no row names yet may be paused. It is kept in the group's hold (inbox_groups),
// which the lease form's claims and the advisory form's read, so it needs the GroupKey column
// and that table.
func (a *Admin) PauseGroup(ctx context.Context, queue, group string) error {
	return a.pauseGroup(ctx, "PauseGroup", queue, group, a.sql.PauseGroup())
}

// ResumeGroup resumes a group PauseGroup paused: from its commit claims take its rows again (a
// consumer elsewhere at its next poll). Resuming a group that is not paused changes nothing.
func (a *Admin) ResumeGroup(ctx context.Context, queue, group string) error {
	return a.pauseGroup(ctx, "ResumeGroup", queue, group, a.sql.ResumeGroup())
}

// pauseGroup runs st, which pauses or resumes a group, for call.
func (a *Admin) pauseGroup(ctx context.Context, call, queue, group string, st sqltext.Statement) error {
	if err := a.groupCall(call, queue, group); err != nil {
		return err
	}
	v := sqltext.Values{Table: a.t.Name, Queue: queue, Group: group}
	// The statement writes the group's hold, which claims write too: on a Galera node it fails
	// certification (1213) where the node has not yet applied a claim another node committed on
	// the hold. It changed nothing then, and pausing or resuming twice is pausing or resuming
	// once: it runs again, as the forms' guarded statements do.
	err := conflict.Retry(ctx, a.d, func() error {
		_, err := a.db.ExecContext(ctx, st.SQL, st.Bind(nil, &v)...)
		return err
	})
	if err != nil {
		return sentinel.Errorf(nil, sentinel.Queue(a.t.Name, queue), "%s of group %q: %w", call, group, err)
	}
	return nil
}

// groupCall refuses call on a group where the description lacks the GroupKey column, or names a
// queue where it has no Queue column, and an empty group key (NULL: no group).
func (a *Admin) groupCall(call, queue, group string) error {
	if err := a.needs(call, "GroupKey", a.t.GroupKey); err != nil {
		return err
	}
	switch {
	case a.t.Queue == "" && queue != "":
		return sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s of queue %q: the description has no Queue column, so the table is one queue: name it by the empty string", call, queue)
	case group == "":
		return sentinel.Errorf(nil, sentinel.Queue(a.t.Name, queue), "%s of the empty group: a row without a group key belongs to no group; name a group", call)
	}
	return nil
}
