package inbox

import (
	"context"
	"database/sql"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqlitewriter"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// LimitScope is what a concurrency limit counts: the rows of a queue, of a kind, or of a limit
// key, in work at once.
type LimitScope string

// The scopes of a concurrency limit (Limit.Scope).
const (
	// LimitPerQueue bounds every row of the queue; its key is empty.
	LimitPerQueue LimitScope = sqltext.ScopeQueue
	// LimitPerKind bounds the rows of one kind (Table.Kind); its key is the kind's name.
	LimitPerKind LimitScope = sqltext.ScopeKind
	// LimitPerKey bounds the rows of one limit key (Table.LimitKey, Message.LimitKey).
	LimitPerKey LimitScope = sqltext.ScopeKey
)

// MaxLimitKey is the longest limit key (Message.LimitKey, Limit.Key), in characters: the
// column is a VARCHAR(191), which the limits' and slots' primary keys take whole on MySQL and
// MariaDB. A longer key is refused, never cut: hash a longer natural key into one.
const MaxLimitKey = 191

// Limit is a concurrency limit of a table: at most Max rows of Queue in work at once, of all
// of them (LimitPerQueue), of the kind Key (LimitPerKind) or of the limit key Key
// (LimitPerKey), across every consumer and process of the lease form (docs/limits.md).
type Limit struct {
	// Queue is the queue's name; empty for the one queue of a table without a Queue column.
	Queue string `json:"queue"`
	// Scope is what the limit counts.
	Scope LimitScope `json:"scope"`
	// Key is the kind's name or the limit key; empty for a queue's limit.
	Key string `json:"key,omitempty"`
	// Max is the most rows in work at once: 1 or more.
	Max int `json:"max"`
	// InWork is the number of the limit's slots held when Limits read it (their holder's lease
	// running ahead of the reader's clock); ignored by SetLimit.
	InWork int `json:"in_work"`
}

// SetLimit sets a concurrency limit, replacing the one of its queue, scope and key: from the
// commit, no claim of any consumer, in this process or another, takes a row under it while Max
// rows under it are in work. Rows in work when a limit is lowered finish; no claim takes
// another until fewer than the new Max are in work. A limit counts the rows claimed while it
// is set: rows already in work when a limit is first set are not counted (docs/limits.md).
// After the write it removes up to 1,000 of the table's slots that no limit needs and no row
// holds (a cleared limit's, those at or above a lowered limit), never a slot whose holder's lease
// runs; it fails, saying the limit is written, where that removal fails.
//
// It refuses a Max below 1 (pause the queue to stop it: Pause), a scope other than the three,
// a key with LimitPerQueue or none with the others, LimitPerKind or LimitPerKey where the
// table has no kind or limit key column, a key longer than MaxLimitKey (ErrLimitKeyTooLong),
// and a queue name where the table has no Queue column. It fails wrapping ErrSchema where the
// description names no limits table (Table.Limits) or the database has none (naming the
// statement that creates it).
func (c *Client[D]) SetLimit(ctx context.Context, l Limit) error {
	if l.Max < 1 {
		return sentinel.Errorf(nil, sentinel.Queue(c.t.Name, l.Queue), "SetLimit: a limit of %d rows in work: give 1 or more (to stop the queue, pause it: Client.Pause, inbox pause)", l.Max)
	}
	return c.limitsWrite(ctx, "SetLimit", l, func(w sqltext.Limits) sqltext.Statement { return w.Set() })
}

// ClearLimit removes the concurrency limit of queue, scope and key: from the commit, claims no
// longer count its slots. Clearing a limit that is not set changes nothing. It removes the
// slots no limit needs as SetLimit does, and fails as SetLimit does.
func (c *Client[D]) ClearLimit(ctx context.Context, queue string, scope LimitScope, key string) error {
	return c.limitsWrite(ctx, "ClearLimit", Limit{Queue: queue, Scope: scope, Key: key}, func(w sqltext.Limits) sqltext.Statement { return w.Clear() })
}

// Limits lists the table's concurrency limits, in order of queue, scope and key, each with the
// number of its slots held now (InWork, read on this host's clock). It fails as SetLimit does.
func (c *Client[D]) Limits(ctx context.Context) ([]Limit, error) {
	w, err := c.limits("Limits")
	if err != nil {
		return nil, err
	}
	col, err := c.leaseColumn()
	if err != nil {
		return nil, err
	}
	list := w.List(col)
	now := c.d.Time(time.Now().UTC().Truncate(time.Microsecond))
	rows, err := c.db.QueryContext(ctx, list.SQL, list.Bind(nil, &sqltext.Values{Table: c.t.Name, Now: now})...)
	if err != nil {
		return nil, c.limitsFailed(ctx, "Limits", w, err)
	}
	defer rows.Close()
	out := []Limit{}
	for rows.Next() {
		var l Limit
		var scope string
		if err := rows.Scan(&l.Queue, &scope, &l.Key, &l.Max, &l.InWork); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(c.t.Name), "reading its limits: %w", err)
		}
		l.Scope = LimitScope(scope)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(c.t.Name), "reading its limits: %w", err)
	}
	return out, nil
}

// leaseColumn is the lease form's lease column of the table, quoted.
func (c *Client[D]) leaseColumn() (string, error) {
	lease := c.t.LockedUntil
	if lease == "" {
		lease = "locked_until" // the lease form's default column
	}
	col, err := c.d.Quote(lease)
	if err != nil {
		return "", sentinel.Errorf(ErrSchema, "", "table %q, lease column: %v", c.t.Name, err)
	}
	return col, nil
}

// staleSlotsAtOnce bounds the slots one SetLimit or ClearLimit removes, one statement each, so
// that neither takes long after a limit over many keys was cleared; the next call goes on.
const staleSlotsAtOnce = 1000

// dropStaleSlots removes the table's slots that no limit needs and no row holds: those of
// limits no longer set, and those at or above a lowered limit, whose holder's lease has run
// out (sqltext.Limits.Stale), each by a compare-and-set of the holder and token read
// (sqltext.Limits.Drop), so that a slot a claim took since is kept. A held slot stays, to be
// removed by a later call once its holder has finished. No claim needs a removed slot: a slot
// of a limit set again, or raised, is inserted again when a claim takes its number.
func (c *Client[D]) dropStaleSlots(ctx context.Context, w sqltext.Limits) error {
	probe := w.AnySlot()
	var slot int
	switch err := c.db.QueryRowContext(ctx, probe.SQL, probe.Bind(nil, &sqltext.Values{Table: c.t.Name})...).Scan(&slot); {
	case errors.Is(err, sql.ErrNoRows):
		return nil // no slot rows: an advisory table's slots are locks, and it may have no lease column
	case err != nil:
		return err
	}
	col, err := c.leaseColumn()
	if err != nil {
		return err
	}
	stale, drop := w.Stale(col), w.Drop()
	now := c.d.Time(time.Now().UTC().Truncate(time.Microsecond))
	rows, err := c.db.QueryContext(ctx, stale.SQL, stale.Bind(nil, &sqltext.Values{Table: c.t.Name, Now: now, Limit: staleSlotsAtOnce})...)
	if err != nil {
		return err
	}
	var found []sqltext.Values
	for rows.Next() {
		v := sqltext.Values{Table: c.t.Name, Tokens: make([]any, 1)}
		if err := rows.Scan(&v.Queue, &v.Scope, &v.LimitKey, &v.Slot, &v.Holder, &v.Tokens[0]); err != nil {
			rows.Close()
			return err
		}
		found = append(found, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for i := range found {
		if _, err := c.db.ExecContext(ctx, drop.SQL, drop.Bind(nil, &found[i])...); err != nil {
			return err
		}
	}
	return nil
}

// limitsWrite checks l's queue, scope and key and runs the statement build makes of the limits
// table for it (call names the method): on SQLite under this process's writer lock, as
// publishing does.
func (c *Client[D]) limitsWrite(ctx context.Context, call string, l Limit, build func(sqltext.Limits) sqltext.Statement) error {
	w, err := c.limits(call)
	if err != nil {
		return err
	}
	if err := c.checkLimit(call, l); err != nil {
		return err
	}
	st := build(w)
	v := &sqltext.Values{Table: c.t.Name, Queue: l.Queue, Scope: string(l.Scope), LimitKey: l.Key, Limit: l.Max}
	if c.d.Caps().OneWriter {
		mu := sqlitewriter.For(c.db)
		mu.Lock()
		defer mu.Unlock()
	}
	if _, err := c.db.ExecContext(ctx, st.SQL, st.Bind(nil, v)...); err != nil {
		return c.limitsFailed(ctx, call, w, err)
	}
	if err := c.dropStaleSlots(ctx, w); err != nil {
		return sentinel.Errorf(nil, sentinel.Queue(c.t.Name, l.Queue), "%s: the limit is written; removing the slots no limit needs failed (the next SetLimit or ClearLimit tries again): %w", call, err)
	}
	if call == "ClearLimit" {
		wake(c.t.Name) // rows the limit held back may run now
	}
	return nil
}

// checkLimit refuses a limit's queue, scope and key that no claim could match.
func (c *Client[D]) checkLimit(call string, l Limit) error {
	where := sentinel.Queue(c.t.Name, l.Queue)
	switch {
	case c.t.Queue == "" && l.Queue != "":
		return sentinel.Errorf(nil, sentinel.Table(c.t.Name), "%s of queue %q: the description has no Queue column, so the table is one queue: give the empty name", call, l.Queue)
	case l.Scope != LimitPerQueue && l.Scope != LimitPerKind && l.Scope != LimitPerKey:
		return sentinel.Errorf(nil, where, "%s: scope %q is none of inbox.LimitPerQueue, LimitPerKind, LimitPerKey", call, l.Scope)
	case l.Scope == LimitPerQueue && l.Key != "":
		return sentinel.Errorf(nil, where, "%s: a queue's limit takes no key (%q): leave Key empty, or choose LimitPerKind or LimitPerKey", call, l.Key)
	case l.Scope != LimitPerQueue && l.Key == "":
		return sentinel.Errorf(nil, where, "%s: a limit per %s needs the %s in Key", call, l.Scope, map[LimitScope]string{LimitPerKind: "kind's name", LimitPerKey: "limit key"}[l.Scope])
	case l.Scope == LimitPerKind && c.t.Kind == "":
		return sentinel.Errorf(ErrSchema, where, "%s: a limit per kind needs a kind column, which the description does not name: set inbox.Table.Kind", call)
	case l.Scope == LimitPerKey && c.t.LimitKey == "":
		return sentinel.Errorf(ErrSchema, where, "%s: a limit per key needs a limit key column, which the description does not name: add it (inbox schema -limit-key) and set inbox.Table.LimitKey", call)
	case utf8.RuneCountInString(l.Key) > MaxLimitKey:
		return sentinel.Errorf(ErrLimitKeyTooLong, where, "%s: the key is %d characters, over the %d the limits table holds (MaxLimitKey): hash a longer key into one", call, utf8.RuneCountInString(l.Key), MaxLimitKey)
	}
	return nil
}

// limits is the builder of the statements over the description's limits table; it fails,
// wrapping ErrSchema, where the description names none.
func (c *Client[D]) limits(call string) (sqltext.Limits, error) {
	if c.t.Limits == "" {
		return sqltext.Limits{}, sentinel.Errorf(ErrSchema, sentinel.Table(c.t.Name), "%s needs a limits table, which the description does not name: set inbox.Table.Limits to inbox.LimitsTable (%q) and create it with `inbox schema -limits -apply`", call, LimitsTable)
	}
	q, err := c.t.Quote(c.d)
	if err != nil {
		return sqltext.Limits{}, err
	}
	return sqltext.New(c.d.Caps(), sqltext.Table(q)).Limits(), nil
}

// limitsFailed is the error of call, whose statement over the limits table failed with err: the
// connection's where it failed or the server answers none, otherwise ErrSchema naming the
// statements that create the limits and slots tables where reading them fails too.
func (c *Client[D]) limitsFailed(ctx context.Context, call string, w sqltext.Limits, err error) error {
	return c.sideFailed(ctx, call, err, []string{w.Check().SQL, sqltext.CheckSlots().SQL}, func(checkErr error) error {
		return sentinel.Errorf(ErrSchema, sentinel.Table(c.t.Name), "%s: the limits table %q (inbox.Table.Limits) or the slots table %s cannot be read (%v): create them with `inbox schema -limits -apply`, or run: %s; %s", call, c.t.Limits, sqltext.SlotsTable, checkErr, w.Create(), sqltext.CreateSlots(c.d.Caps()))
	})
}

// LimitsSchema returns the statements that create, where they are not there, the limits table t
// names (Table.Limits) and the slots table (inbox_slots) on d's database; one of each serves
// every job table that names them. It fails, wrapping ErrSchema, where t names none or a name d
// would not keep.
func LimitsSchema(d dialect.Dialect, t Table) ([]string, error) {
	if t.Limits == "" {
		return nil, sentinel.Errorf(ErrSchema, sentinel.Table(t.Name), "the description names no limits table: set inbox.Table.Limits (inbox.LimitsTable)")
	}
	q, err := t.Quote(d)
	if err != nil {
		return nil, err
	}
	return []string{sqltext.New(d.Caps(), sqltext.Table(q)).Limits().Create(), sqltext.CreateSlots(d.Caps())}, nil
}

// limitKey is the value m writes to t's limit key column: NULL for a message of no key. It
// refuses a LimitKey where t has no limit key column (ErrSchema) and a key longer than
// MaxLimitKey (ErrLimitKeyTooLong), before any statement runs.
func limitKey(t Table, m Message) (any, error) {
	return keyArg(t, keyColumn{"LimitKey", "limit key", "-limit-key", t.LimitKey, MaxLimitKey, ErrLimitKeyTooLong}, m.LimitKey)
}

// validateLimits refuses a limits table named as the job table.
func (t Table) validateLimits() error {
	if t.Limits != "" && t.Limits == t.Name {
		return sentinel.Errorf(ErrSchema, sentinel.Table(t.Name), "inbox.Table.Limits names the job table itself: name a table of its own (inbox.LimitsTable), or leave it empty")
	}
	return nil
}
