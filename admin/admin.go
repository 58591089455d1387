// Package admin operates an inbox table from outside a consumer: it prints the table a
// description needs (Schema) and checks an existing one against it (Check), counts the rows in
// each state per queue (Stats), and lists, requeues and purges dead rows and purges processed
// ones. The inbox command's schema, stats, dead and purge subcommands are built on it.
//
// Every statement it runs is safe while consumers run: the counts only read, and the changes
// touch dead rows (DeadAt set) and processed rows (ProcessedAt set) only, which no claim takes,
// so no row a consumer holds. A change is a loop of statements of at most 1,000 rows each,
// each committed on its own: one interrupted leaves the rows it has not reached as they were.
package admin

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/schema"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
)

// chunk is the most rows one statement changes.
const chunk = 1000

// Admin operates one table on one database.
type Admin struct {
	db  *sql.DB
	d   dialect.Dialect
	t   inbox.Table
	sql sqltext.Admin
}

// New returns the operator of the table t describes on db, whose database d speaks. Where a
// lease form holds the table, t must name its column (inbox.Table.LockedUntil), or Schema and
// Check leave it out and Stats cannot tell the rows in work. It fails, wrapping
// inbox.ErrSchema, on a description the forms would refuse (no name or id, a column named
// twice, a name the database would not keep).
func New(db *sql.DB, d dialect.Dialect, t inbox.Table) (*Admin, error) {
	q, err := t.Quote(d)
	if err != nil {
		return nil, err
	}
	return &Admin{db: db, d: d, t: t, sql: sqltext.New(d.Caps(), sqltext.Table(q)).Admin(q.LockedUntil)}, nil
}

// For returns the operator of c's table on c's database (see New).
func For[D dialect.Dialect](c *inbox.Client[D]) (*Admin, error) {
	return New(c.DB(), c.Dialect(), c.Table())
}

// Schema returns the statements that create the table t describes on d's database, with the
// lease form's column where t names one (inbox.Table.LockedUntil): the CREATE TABLE with every
// role's column typed as the README recommends, then, on Postgres and SQLite, the claim index
// (partial, over the rows neither processed nor dead); on MySQL and MariaDB the claim index is
// part of the CREATE TABLE, its equality columns first. A table whose claim orders by id alone
// gets no index: its primary key serves. It fails, wrapping inbox.ErrSchema, as New does.
func Schema(d dialect.Dialect, t inbox.Table) ([]string, error) {
	return schema.Create(d, t, t.LockedUntil)
}

// Schema returns the statements that create the operator's table (see the function Schema).
func (a *Admin) Schema() ([]string, error) { return schema.Create(a.d, a.t, a.t.LockedUntil) }

// needs refuses, wrapping inbox.ErrSchema, a call that needs a role the description lacks.
func (a *Admin) needs(call, role, column string) error {
	if column != "" {
		return nil
	}
	return sentinel.Errorf(inbox.ErrSchema, sentinel.Table(a.t.Name), "%s needs the %s role, which the description lacks: add the column (admin.Schema prints its definition) and name it in inbox.Table.%s", call, role, role)
}

// Unknown is a count or an age the table cannot tell (see Stats).
const Unknown = -1

// Stats are the rows of one queue by state. A pending row is neither processed, dead nor
// cancelled; the pending rows are due, delayed or in work, and those of them delivered before
// are retrying too.
type Stats struct {
	Queue string `json:"queue"` // the queue column's value; empty for a table without a Queue column
	// Paused says the queue is paused (Pause): no claim takes its rows until it is resumed.
	// Always false where the description names no pauses table (inbox.Table.Pauses), and in
	// the entries of Kinds; left out of the JSON when false, as inbox stats -json leaves it.
	Paused bool `json:"paused,omitempty"`
	// Due rows may be claimed now. Without a lease column they include the rows in work (the
	// row lock and advisory forms hold rows by locks, which a table does not show).
	Due int64 `json:"due"`
	// Delayed rows wait for their retry_after; 0 without a RetryAfter column.
	Delayed int64 `json:"delayed"`
	// InWork rows are held by a lease (the lease column ahead); Unknown without a lease column.
	InWork int64 `json:"in_work"`
	// Retrying rows are due or delayed after a delivery (attempt above 0); Unknown without an
	// Attempt column.
	Retrying int64 `json:"retrying"`
	// Dead rows are kept with DeadAt set; 0 without a DeadAt column, where dead rows are not kept.
	Dead int64 `json:"dead"`
	// Processed rows are kept with ProcessedAt set; 0 without a ProcessedAt column, where they
	// are deleted.
	Processed int64 `json:"processed"`
	// Cancelled rows are kept with CancelledAt set and neither processed nor dead (Cancel); 0
	// without a CancelledAt column. A processed row a cancel was asked of counts as processed.
	Cancelled int64 `json:"cancelled"`
	// OldestDue is how long the longest-waiting due row has been due, since its retry_after,
	// or since its created_at where it was never delayed (Table.CreatedAt); 0 when no row is
	// due; Unknown when a due row has neither, and without both columns. JSON gives it in
	// seconds, as oldest_due_seconds (-1 when Unknown), as inbox stats -json does.
	OldestDue time.Duration `json:"-"`
	// Kind is the kind of job of the rows an entry of Kinds counts; empty (and left out of the
	// JSON) for the rows of no kind (a NULL or empty kind column), and in a queue's Stats.
	Kind string `json:"kind,omitempty"`
	// Kinds are the queue's rows counted per kind, in kind order, where the table has a Kind
	// column (Table.Kind): each entry is of one kind, its figures those of the queue's rows of
	// that kind, which add up to the queue's. Rows of a kind that no consumer runs are due
	// there, their OldestDue growing: no consumer of other kinds claims them. Nil without a
	// Kind column (and left out of the JSON).
	Kinds []Stats `json:"kinds,omitempty"`
}

// statsJSON is Stats as JSON writes it.
type statsJSON struct {
	statsFields
	OldestDue float64 `json:"oldest_due_seconds"`
}

// statsFields are the fields of Stats, without its JSON methods.
type statsFields Stats

// MarshalJSON writes s as JSON, OldestDue in seconds.
func (s Stats) MarshalJSON() ([]byte, error) {
	j := statsJSON{statsFields(s), s.OldestDue.Seconds()}
	if s.OldestDue == Unknown {
		j.OldestDue = Unknown
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads s as MarshalJSON writes it.
func (s *Stats) UnmarshalJSON(b []byte) error {
	var j statsJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*s = Stats(j.statsFields)
	s.OldestDue = time.Duration(math.Round(j.OldestDue * float64(time.Second)))
	if j.OldestDue == Unknown {
		s.OldestDue = Unknown
	}
	return nil
}

// Stats counts the table's rows by state, per queue in queue order (one Stats for a table
// without a Queue column), and where the table has a Kind column per kind of each queue too
// (Stats.Kinds), in one statement that reads every row of the table: on a large table, ask it
// seldom. Time is the host's clock, as the forms' claims take it. Where the description names a
// pauses table (inbox.Table.Pauses) it marks the paused queues (Stats.Paused), and lists after
// the others a paused queue that has no rows, its counts zero.
func (a *Admin) Stats(ctx context.Context) ([]Stats, error) {
	query, nows := a.sql.Stats()
	now := time.Now()
	args := make([]any, nows)
	for i := range args {
		args[i] = a.d.Time(now)
	}
	rows, err := a.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "counting rows: %w", err)
	}
	defer rows.Close()
	var out []Stats
	for rows.Next() {
		var s Stats
		var oldest any
		var undated int64
		var kind sql.NullString
		dest := []any{&s.Queue, &s.Due, &s.Delayed, &s.InWork, &s.Retrying, &s.Dead, &s.Processed, &oldest, &undated}
		if a.t.CancelledAt != "" {
			dest = append(dest, &s.Cancelled)
		}
		if a.t.Kind != "" {
			dest = append(dest, &kind)
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "counting rows: %w", err)
		}
		switch {
		case s.Due == 0:
		case undated > 0 || a.t.RetryAfter == "" && a.t.CreatedAt == "":
			s.OldestDue = Unknown
		default:
			since, err := dialect.ScannedTime(oldest)
			if err != nil {
				return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "reading the oldest due row's time (RetryAfter, CreatedAt): %w", err)
			}
			s.OldestDue = max(now.Sub(since), 0)
		}
		if a.t.Kind == "" {
			out = append(out, s)
			continue
		}
		// The statement counts per queue and kind, in queue order: a queue's figures are its
		// kinds' summed.
		s.Kind = kind.String
		if len(out) == 0 || out[len(out)-1].Queue != s.Queue {
			out = append(out, Stats{Queue: s.Queue})
		}
		q := &out[len(out)-1]
		q.add(s)
		if i := slices.IndexFunc(q.Kinds, func(k Stats) bool { return k.Kind == s.Kind }); i >= 0 {
			q.Kinds[i].add(s) // a NULL kind and an empty one are both no kind
		} else {
			q.Kinds = append(q.Kinds, s)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "counting rows: %w", err)
	}
	if out, err = a.markPaused(ctx, out); err != nil {
		return nil, err
	}
	for i := range out {
		a.unknowns(&out[i])
		slices.SortFunc(out[i].Kinds, func(x, y Stats) int { return strings.Compare(x.Kind, y.Kind) })
		for j := range out[i].Kinds {
			a.unknowns(&out[i].Kinds[j])
		}
	}
	return out, nil
}

// markPaused marks the paused queues among out, and adds after them those out lacks (a queue
// paused before any row of it was published, or whose rows are all gone), by name.
func (a *Admin) markPaused(ctx context.Context, out []Stats) ([]Stats, error) {
	paused, err := a.Paused(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range paused {
		i := slices.IndexFunc(out, func(s Stats) bool { return s.Queue == p.Queue })
		if i < 0 {
			i = len(out)
			out = append(out, Stats{Queue: p.Queue})
		}
		out[i].Paused = true
	}
	return out, nil
}

// add counts the rows of o in s too: its counts added, and its oldest due row if older, or
// Unknown if its age is.
func (s *Stats) add(o Stats) {
	s.Due += o.Due
	s.Delayed += o.Delayed
	s.InWork += o.InWork
	s.Retrying += o.Retrying
	s.Dead += o.Dead
	s.Processed += o.Processed
	s.Cancelled += o.Cancelled
	if s.OldestDue != Unknown && (o.OldestDue == Unknown || o.OldestDue > s.OldestDue) {
		s.OldestDue = o.OldestDue
	}
}

// unknowns marks the counts s cannot tell as Unknown: the rows in work without a lease column,
// the retrying rows without an Attempt column.
func (a *Admin) unknowns(s *Stats) {
	if a.t.LockedUntil == "" {
		s.InWork = Unknown
	}
	if a.t.Attempt == "" {
		s.Retrying = Unknown
	}
}

// A Selection names rows for Dead, Requeue, PurgeDead and PurgeProcessed: All, a Queue, or
// IDs; and for Act and Count, Matching too. The zero Selection names none, and is refused.
type Selection struct {
	all     bool
	byQueue bool
	queue   string
	ids     []int64
	filter  *Filter // Matching
}

// All selects every row, of every queue.
func All() Selection { return Selection{all: true} }

// Queue selects the rows of one queue (tables with a Queue column).
func Queue(name string) Selection { return Selection{byQueue: true, queue: name} }

// IDs selects the rows of these ids.
func IDs(ids ...int64) Selection { return Selection{ids: ids} }

func (s Selection) String() string {
	switch {
	case s.all:
		return "every queue"
	case s.byQueue:
		return fmt.Sprintf("queue %q", s.queue)
	case s.filter != nil:
		return "the rows a filter matches"
	}
	return fmt.Sprintf("ids %v", s.ids)
}

// check refuses a selection that names nothing, or a queue of a table without a Queue column.
func (a *Admin) check(call string, sel Selection) error {
	switch {
	case sel.filter != nil:
		return sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s does not take admin.Matching (Act and Count do): select with admin.All(), admin.Queue(name) or admin.IDs(ids...)", call)
	case !sel.all && !sel.byQueue && sel.ids == nil:
		return sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s was given no rows: select them with admin.All(), admin.Queue(name) or admin.IDs(ids...)", call)
	case sel.byQueue && a.t.Queue == "":
		return sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s of queue %q: the description has no Queue column, so the table is one queue: select with admin.All()", call, sel.queue)
	}
	return nil
}

// DeadRow is a dead row as Dead lists it.
type DeadRow struct {
	ID        int64     `json:"id"`
	Queue     string    `json:"queue"`      // empty without a Queue column
	Attempt   int       `json:"attempt"`    // the deliveries it had; 0 without an Attempt column
	DeadAt    time.Time `json:"dead_at"`    // when it died, in UTC
	LastError string    `json:"last_error"` // its last failure's text; empty without a LastError column
}

// Cursor is where a page of Dead ends: the next page starts after it. The zero Cursor starts at
// the newest dead row.
type Cursor struct {
	DeadAt time.Time
	ID     int64
}

// Cursor is the cursor of the page that ends with r.
func (r DeadRow) Cursor() Cursor { return Cursor{DeadAt: r.DeadAt, ID: r.ID} }

// String writes the cursor as ParseCursor reads it: dead_at (RFC 3339, to the nanosecond), a
// slash, the id.
func (c Cursor) String() string {
	return c.DeadAt.UTC().Format(time.RFC3339Nano) + "/" + strconv.FormatInt(c.ID, 10)
}

// ParseCursor reads a cursor as Cursor.String writes it.
func ParseCursor(s string) (Cursor, error) {
	at, id, ok := strings.Cut(s, "/")
	t, err := time.Parse(time.RFC3339Nano, at)
	n, nerr := strconv.ParseInt(id, 10, 64)
	if !ok || err != nil || nerr != nil {
		return Cursor{}, fmt.Errorf("cursor %q: write it as its page printed it, dead_at/id (2006-01-02T15:04:05.999999Z/42)", s)
	}
	return Cursor{DeadAt: t, ID: n}, nil
}

// Dead lists up to limit dead rows of sel, newest first (by dead_at, then id), after the
// cursor; pass the last row's Cursor for the next page. Rows that die meanwhile are newer than
// every cursor, so they never shift a later page: they show on a listing from the zero Cursor.
// An IDs selection lists those of the ids that are dead. It needs the DeadAt role.
func (a *Admin) Dead(ctx context.Context, sel Selection, after Cursor, limit int) ([]DeadRow, error) {
	if err := a.needs("Dead", "DeadAt", a.t.DeadAt); err != nil {
		return nil, err
	}
	if err := a.check("Dead", sel); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "Dead with a limit of %d: give a limit above 0", limit)
	}
	if sel.ids != nil {
		return a.deadByID(ctx, sel.ids, after, limit)
	}
	var args []any
	if sel.byQueue {
		args = append(args, sel.queue)
	}
	started := after != Cursor{}
	if started {
		at := a.d.Time(after.DeadAt)
		args = append(args, at, at, after.ID)
	}
	rows, err := a.db.QueryContext(ctx, a.sql.Dead(sel.byQueue, started), append(args, limit)...)
	if err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "listing the dead rows of %s: %w", sel, err)
	}
	defer rows.Close()
	var out []DeadRow
	for rows.Next() {
		var r DeadRow
		var at any
		if err := rows.Scan(&r.ID, &r.Queue, &r.Attempt, &at, &r.LastError); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "listing dead rows: %w", err)
		}
		if r.DeadAt, err = dialect.ScannedTime(at); err != nil {
			return nil, sentinel.Errorf(nil, "", "table %q, row %d, column %q: %w", a.t.Name, r.ID, a.t.DeadAt, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "listing dead rows: %w", err)
	}
	return out, nil
}

// deadByID lists the dead rows among ids, newest first, a page of Dead over every queue read
// until it has them: the ids are few, as a person types them.
func (a *Admin) deadByID(ctx context.Context, ids []int64, after Cursor, limit int) ([]DeadRow, error) {
	want := map[int64]bool{}
	for _, id := range ids {
		want[id] = true
	}
	var out []DeadRow
	for len(out) < limit {
		page, err := a.Dead(ctx, All(), after, chunk)
		if err != nil {
			return nil, err
		}
		for _, r := range page {
			if want[r.ID] && len(out) < limit {
				out = append(out, r)
			}
		}
		if len(page) < chunk {
			break
		}
		after = page[len(page)-1].Cursor()
	}
	return out, nil
}

// Requeue puts the dead rows of sel back in their queue, and returns how many it requeued:
// DeadAt and RetryAfter are cleared, so each is due at once, and Attempt is reset to 0, so each
// gets the attempt limit's every attempt again; LastError is kept until a failure replaces it.
// An id that is not of a dead row is left alone. It needs the DeadAt role.
func (a *Admin) Requeue(ctx context.Context, sel Selection) (int64, error) {
	if err := a.needs("Requeue", "DeadAt", a.t.DeadAt); err != nil {
		return 0, err
	}
	return a.change(ctx, "Requeue", sel, sqltext.DeadRows, nil, a.sql.Requeue)
}

// RequeueCancelled puts the cancelled rows of sel (inbox.Cancel) back in their queue, and
// returns how many it requeued: CancelledAt and RetryAfter are cleared, so each is due at once,
// and Attempt is reset to 0; LastError is kept. An id that is not of a cancelled row (queued,
// processed, dead, or not there) is left alone. It needs the CancelledAt role.
func (a *Admin) RequeueCancelled(ctx context.Context, sel Selection) (int64, error) {
	if err := a.needs("RequeueCancelled", "CancelledAt", a.t.CancelledAt); err != nil {
		return 0, err
	}
	return a.change(ctx, "RequeueCancelled", sel, sqltext.CancelledRows, nil, a.sql.RequeueCancelled)
}

// PurgeDead deletes the dead rows of sel, and returns how many it deleted. An id that is not of
// a dead row is left alone. It needs the DeadAt role.
func (a *Admin) PurgeDead(ctx context.Context, sel Selection) (int64, error) {
	if err := a.needs("PurgeDead", "DeadAt", a.t.DeadAt); err != nil {
		return 0, err
	}
	return a.change(ctx, "PurgeDead", sel, sqltext.DeadRows, nil, func(n int) string { return a.sql.Purge(sqltext.DeadRows, n) })
}

// PurgeProcessed deletes the rows of sel processed more than olderThan ago (by ProcessedAt, on
// the host's clock), and returns how many it deleted. It needs the ProcessedAt role.
func (a *Admin) PurgeProcessed(ctx context.Context, sel Selection, olderThan time.Duration) (int64, error) {
	if err := a.needs("PurgeProcessed", "ProcessedAt", a.t.ProcessedAt); err != nil {
		return 0, err
	}
	if olderThan < 0 {
		return 0, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "PurgeProcessed of rows processed %v ago: give an age of 0 or more", olderThan)
	}
	return a.change(ctx, "PurgeProcessed", sel, sqltext.ProcessedRows, a.d.Time(time.Now().Add(-olderThan)),
		func(n int) string { return a.sql.Purge(sqltext.ProcessedRows, n) })
}

// change runs the statement build makes over the ids of the rows of kind k that sel names, at
// most chunk ids a statement, and returns the rows changed. An IDs selection is taken as it
// is; otherwise the ids are picked a chunk at a time in id order. before is the time before
// which a processed row was processed (ProcessedRows), bound after the ids.
func (a *Admin) change(ctx context.Context, call string, sel Selection, k sqltext.Kept, before any, build func(n int) string) (int64, error) {
	if err := a.check(call, sel); err != nil {
		return 0, err
	}
	var total int64
	run := func(ids []int64) error {
		args := make([]any, 0, len(ids)+1)
		for _, id := range ids {
			args = append(args, id)
		}
		if before != nil {
			args = append(args, before)
		}
		res, err := a.db.ExecContext(ctx, build(len(ids)), args...)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		total += n
		return err
	}
	fail := func(err error) (int64, error) {
		return total, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s of %s, after %d rows: %w", call, sel, total, err)
	}
	if sel.ids != nil {
		for ids := range slices.Chunk(sel.ids, chunk) {
			if err := run(ids); err != nil {
				return fail(err)
			}
		}
		return total, nil
	}
	pick := a.sql.Pick(k, sel.byQueue)
	for last := int64(math.MinInt64); ; {
		var args []any
		if before != nil {
			args = append(args, before)
		}
		if sel.byQueue {
			args = append(args, sel.queue)
		}
		ids, err := stmt.ReadIDs(ctx, a.db, pick, append(args, last, chunk)...)
		if err != nil {
			return fail(err)
		}
		if len(ids) == 0 {
			return total, nil
		}
		if err := run(ids); err != nil {
			return fail(err)
		}
		if len(ids) < chunk {
			return total, nil
		}
		last = ids[len(ids)-1]
	}
}
