package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
)

// Action is a change Act makes to rows.
type Action int

// The actions:
//   - Requeue puts dead rows back in their queue, as Admin.Requeue does: due at once, attempt
//     reset to 0, the last error kept (the DeadAt role).
//   - RetryNow makes delayed rows due now: their retry_after becomes now; attempt and last
//     error are kept (the RetryAfter role).
//   - Delete deletes rows of any state, but those in work.
//   - Cancel cancels pending rows (neither processed, dead nor cancelled), as Admin.Cancel
//     does: a queued row at once, a row in work through its consumer (the CancelledAt role).
const (
	Requeue Action = iota + 1
	RetryNow
	Delete
	Cancel
)

var actionNames = [...]string{Requeue: "requeue", RetryNow: "retry now", Delete: "delete", Cancel: "cancel"}

// Actions are the actions, in the order an operator reads them.
var Actions = []Action{Requeue, RetryNow, Cancel, Delete}

// String names the action: "requeue", "retry now", "delete", "cancel".
func (act Action) String() string {
	if act <= 0 || int(act) >= len(actionNames) {
		return fmt.Sprintf("action(%d)", int(act))
	}
	return actionNames[act]
}

// MarshalText writes the action as String names it.
func (act Action) MarshalText() ([]byte, error) { return []byte(act.String()), nil }

// ParseAction reads an action as String names it.
func ParseAction(name string) (Action, error) {
	for _, act := range Actions {
		if act.String() == name {
			return act, nil
		}
	}
	return 0, sentinel.Errorf(nil, "", "no action %q: name requeue, retry now, cancel or delete", name)
}

// Takes reports whether act changes rows of state s (AnyState: some rows of any state): a
// requeue dead rows, a retry now delayed rows (which retrying rows may be), a cancel pending
// rows (due, delayed, in work, retrying), a delete any row but those in work.
func (act Action) Takes(s State) bool {
	switch act {
	case Requeue:
		return s == Dead || s == AnyState
	case RetryNow:
		return s == Delayed || s == Retrying || s == AnyState
	case Delete:
		return s != InWork
	case Cancel:
		return s != Dead && s != Processed && s != Cancelled
	}
	return false
}

// sqlAct is the statements' name for the action.
func (act Action) sqlAct() sqltext.Act {
	switch act {
	case Requeue:
		return sqltext.RequeueAct
	case RetryNow:
		return sqltext.RetryNowAct
	case Cancel:
		return sqltext.CancelAct
	}
	return sqltext.DeleteAct
}

// Matching selects, for Act and Count, every row f matches. Dead, Requeue, PurgeDead and
// PurgeProcessed do not take it.
func Matching(f Filter) Selection { return Selection{filter: &f} }

// Result is what Act did.
type Result struct {
	// Changed counts the rows the action changed.
	Changed int64 `json:"changed"`
	// InWork counts the rows the action takes that it left alone because a consumer held them
	// when it came to them: a row lock (a claim's transaction; the statements skip locked rows
	// and never wait for one), or a lease ahead. The advisory form's rows in work are held by
	// session locks, which a table does not show: those are changed, and their handler's
	// settlement finds its row changed. A cancel asks their consumer to cancel them instead
	// (inbox.CancelRequested), and counts them here.
	InWork int64 `json:"in_work"`
	// Skipped counts the selected ids of rows the action does not take (a requeue's rows that
	// are not dead, a retry now's that are not delayed) or that are gone.
	Skipped int64 `json:"skipped"`
}

// Act runs act on the rows of sel, and returns what it did: on IDs, each of them; on All,
// Queue or Matching, every row they take that the action takes, picked a chunk at a time in id
// order. It changes at most 1,000 rows a statement, each chunk in a statement (and, on a
// database with row locks, a transaction) of its own, committed alone, and never waits for a
// row a consumer holds (see Result.InWork): it is safe while consumers run. A cancel runs
// Admin.Cancel on each chunk, in a transaction of its own. When it fails, the
// Result counts the chunks committed before. It needs the role each action names (see Action).
func (a *Admin) Act(ctx context.Context, act Action, sel Selection) (Result, error) {
	call := act.String()
	if err := a.actionNeeds(act); err != nil {
		return Result{}, err
	}
	var total Result
	fail := func(err error) (Result, error) {
		return total, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s of %s, after %d rows: %w", call, sel, total.Changed, err)
	}
	if sel.ids != nil {
		for ids := range slices.Chunk(sel.ids, chunk) {
			r, err := a.actOn(ctx, act, ids)
			total.add(r)
			if err != nil {
				return fail(err)
			}
		}
		return total, nil
	}
	f, err := a.selected(call, sel)
	if err != nil {
		return Result{}, err
	}
	for after := int64(math.MinInt64); ; {
		sf, v, err := a.filter(ctx, call, f, act.sqlAct())
		if err != nil {
			return Result{}, err
		}
		v.after, v.limit = after, chunk
		pick := a.sql.PickMatching(sf)
		ids, err := stmt.ReadIDs(ctx, a.db, pick.SQL, v.args(pick.Binds)...)
		if err != nil {
			return fail(err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		r, err := a.actOn(ctx, act, ids)
		total.add(r)
		if err != nil {
			return fail(err)
		}
		if len(ids) < chunk {
			return total, nil
		}
		after = ids[len(ids)-1]
	}
}

func (r *Result) add(o Result) {
	r.Changed += o.Changed
	r.InWork += o.InWork
	r.Skipped += o.Skipped
}

// actOn runs act on ids, at most a chunk: it reads which of them the action takes, in a read
// that waits for no lock; then, on a database with row locks, locks those no one holds (SKIP
// LOCKED, and no lease ahead) and changes them in one transaction (see perStatement); elsewhere
// (SQLite, one writer) it changes them in one statement that passes over those a lease holds.
func (a *Admin) actOn(ctx context.Context, act Action, ids []int64) (Result, error) {
	if act == Cancel {
		return a.cancelChunk(ctx, ids)
	}
	now := a.d.Time(time.Now())
	eligible := a.sql.Eligible(act.sqlAct(), len(ids))
	v := &values{now: now, ids: ids}
	taken, err := stmt.ReadIDs(ctx, a.db, eligible.SQL, v.args(eligible.Binds)...)
	if err != nil {
		return Result{}, err
	}
	r := Result{Skipped: int64(len(ids) - len(taken))}
	if len(taken) == 0 {
		return r, nil
	}
	changed, err := a.changeUnheld(ctx, act, now, taken)
	if err != nil {
		return r, err
	}
	r.Changed, r.InWork = changed, int64(len(taken))-changed
	return r, nil
}

// changeUnheld changes those of ids, rows act takes, that no consumer holds, and returns how
// many.
func (a *Admin) changeUnheld(ctx context.Context, act Action, now any, ids []int64) (int64, error) {
	if !a.d.Caps().SkipLocked {
		return a.exec(ctx, a.db, act, now, ids)
	}
	tx, err := a.d.Begin(ctx, a.db)
	if err != nil {
		return 0, err
	}
	lock := a.sql.Lock(act.sqlAct(), len(ids))
	v := &values{now: now, ids: ids}
	rows, err := tx.QueryContext(ctx, lock.SQL, v.args(lock.Binds)...)
	var free []int64
	if err == nil {
		free, err = readIDs(rows)
	}
	var n int64
	for ids := range slices.Chunk(free, a.perStatement()) {
		if err != nil {
			break
		}
		var changed int64
		changed, err = a.exec(ctx, tx, act, now, ids)
		n += changed
	}
	if err != nil {
		return 0, errors.Join(err, tx.Rollback())
	}
	if err := tx.Commit(); err != nil {
		return 0, err
	}
	return n, nil
}

// perStatement is how many locked rows one statement changes: all of a chunk where the
// database changes an id list by its primary key (Caps.IDListSettles); elsewhere one, by its
// id, since InnoDB may read an id list by a scan that locks every row it reads, and so wait
// for the rows consumers hold, which the lock passed over.
func (a *Admin) perStatement() int {
	if a.d.Caps().IDListSettles {
		return chunk
	}
	return 1
}

// exec runs act's change over ids through ex.
func (a *Admin) exec(ctx context.Context, ex execer, act Action, now any, ids []int64) (int64, error) {
	change := a.sql.Change(act.sqlAct(), len(ids))
	v := &values{now: now, ids: ids}
	res, err := ex.ExecContext(ctx, change.SQL, v.args(change.Binds)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Count counts the rows of sel that act takes, held by a consumer or not, up to limit: the
// count an operator reads before the action runs. A count that reaches limit means limit or
// more. On IDs it reads the ids a chunk at a time; otherwise it reads the rows in one statement
// (an index serves the states' conditions, but not those of Filter on the last error and the
// payload, which read every row of the filter's id range).
func (a *Admin) Count(ctx context.Context, act Action, sel Selection, limit int64) (int64, error) {
	call := "counting the rows to " + act.String()
	if err := a.actionNeeds(act); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s up to %d: give a limit above 0", call, limit)
	}
	if sel.ids != nil {
		var n int64
		for ids := range slices.Chunk(sel.ids, chunk) {
			eligible := a.sql.Eligible(act.sqlAct(), len(ids))
			v := &values{now: a.d.Time(time.Now()), ids: ids}
			taken, err := stmt.ReadIDs(ctx, a.db, eligible.SQL, v.args(eligible.Binds)...)
			if err != nil {
				return 0, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s of %s: %w", call, sel, err)
			}
			n += int64(len(taken))
		}
		return min(n, limit), nil
	}
	f, err := a.selected(call, sel)
	if err != nil {
		return 0, err
	}
	sf, v, err := a.filter(ctx, call, f, act.sqlAct())
	if err != nil {
		return 0, err
	}
	v.limit = limit
	b := a.sql.Count(sf)
	var n int64
	if err := a.db.QueryRowContext(ctx, b.SQL, v.args(b.Binds)...).Scan(&n); err != nil {
		return 0, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s of %s: %w", call, sel, err)
	}
	return n, nil
}

// selected is the filter of a selection that is not IDs: All's matches every row; Queue's the
// rows of its queue.
func (a *Admin) selected(call string, sel Selection) (Filter, error) {
	switch {
	case sel.filter != nil:
		return *sel.filter, nil
	case sel.all:
		return Filter{}, nil
	case sel.byQueue:
		return Filter{Queues: []string{sel.queue}}, nil
	}
	return Filter{}, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s was given no rows: select them with admin.IDs(ids...), admin.Matching(filter), admin.Queue(name) or admin.All()", call)
}

// actionNeeds refuses an action whose role the description lacks.
func (a *Admin) actionNeeds(act Action) error {
	switch act {
	case Requeue:
		return a.needs("requeue", "DeadAt", a.t.DeadAt)
	case RetryNow:
		return a.needs("retry now", "RetryAfter", a.t.RetryAfter)
	case Delete:
		return nil
	case Cancel:
		return a.needs("cancel", "CancelledAt", a.t.CancelledAt)
	}
	return sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%v: no such action: name admin.Requeue, admin.RetryNow, admin.Cancel or admin.Delete", act)
}

// execer runs a change: the pool, or a transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// readIDs reads the ids rows hold, one column each, and closes rows.
func readIDs(rows *sql.Rows) ([]int64, error) {
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
