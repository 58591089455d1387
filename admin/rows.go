package admin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/schema"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// State is a row's state, as Stats counts it. A pending row (neither processed, dead nor
// cancelled) is in
// work while a lease holds it, delayed while its retry_after is ahead, and due otherwise; a
// pending row delivered before (attempt above 0) is retrying too.
type State int

// The states; AnyState is every row, whatever its state.
const (
	AnyState State = iota
	Due
	Delayed
	InWork
	Retrying
	Dead
	Processed
	Cancelled
)

// States are the states in the order an operator reads them.
var States = []State{Due, Delayed, InWork, Retrying, Dead, Processed, Cancelled}

var stateNames = [...]string{"any", "due", "delayed", "in work", "retrying", "dead", "processed", "cancelled"}

// String names the state as Stats' columns do: "due", "in work", …; "any" for AnyState.
func (s State) String() string {
	if s < 0 || int(s) >= len(stateNames) {
		return fmt.Sprintf("state(%d)", int(s))
	}
	return stateNames[s]
}

// MarshalText writes the state as String names it.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// ParseState reads a state as String names it.
func ParseState(name string) (State, error) {
	for i, n := range stateNames {
		if n == name {
			return State(i), nil
		}
	}
	return 0, sentinel.Errorf(nil, "", "no state %q: name one of %s", name, strings.Join(stateNames[:], ", "))
}

// Filter names rows by their state and what they hold. The zero Filter matches every row.
// Conditions on the last error and the payload read every row of the id range they are given
// (no index serves them): give them a bounded range on a large table.
type Filter struct {
	State  State
	Queues []string // the rows of these queues; every queue when empty (tables with a Queue column)
	Kinds  []string // the rows of these kinds of job; every kind when empty (tables with a Kind column)
	// FromID and ToID bound the ids, inclusive; 0 leaves the bound open.
	FromID, ToID int64
	// OlderThan takes the rows that entered their state more than this long ago, on the host's
	// clock: by DeadAt for dead rows, ProcessedAt for processed ones, CreatedAt (the
	// publishing) otherwise; 0 takes every age.
	OlderThan time.Duration
	// ErrorContains takes the rows whose last error contains this text, in any case (the
	// LastError role).
	ErrorContains string
	// Path, when set, takes the rows whose payload is JSON holding Value at this path: keys
	// apart by dots, array indexes in brackets (customer.id, items[0].sku; a leading $. is
	// allowed). Value is compared with the text of a string, or of a number or a boolean as it
	// is written (42, true); the database compares the text as it compares any (MySQL and
	// MariaDB in any case, by their default collation).
	Path, Value string
}

// Row is a row as Rows and Row read it. Times are in UTC, the zero time where the column is
// NULL or the table has none; counts and names are zero where the table has no such column.
type Row struct {
	ID    int64  `json:"id"`
	Queue string `json:"queue"`
	Kind  string `json:"kind,omitempty"` // the kind of job (the Kind role)
	// State is the row's state when it was read (on the host's clock); never Retrying, which
	// Attempt tells.
	State       State     `json:"state"`
	Attempt     int64     `json:"attempt"`
	Priority    int64     `json:"priority"`
	RetryAfter  time.Time `json:"retry_after"`
	LockedUntil time.Time `json:"locked_until"` // the lease's expiry: the lease column
	DeadAt      time.Time `json:"dead_at"`
	ProcessedAt time.Time `json:"processed_at"`
	CreatedAt   time.Time `json:"created_at"`
	CancelledAt time.Time `json:"cancelled_at"`
	// LastError is the last failure's text; Rows reads its first PreviewBytes characters.
	LastError string `json:"last_error"`
	// Payload is the row's payload, nil where NULL; Rows reads its first PreviewBytes bytes.
	Payload []byte `json:"payload"`
	// Headers is the headers column's text (a JSON object), as stored; Row reads it.
	Headers string `json:"headers"`
	// UniqueKey is the unique key the row holds (inbox.Table.UniqueKey), empty for none: a row
	// settled under the default scope holds none any more; Row reads it.
	UniqueKey string `json:"unique_key,omitempty"`
	// Columns are the application's own columns the description names (inbox.Table.Columns),
	// as the driver scans them; Row reads them.
	Columns map[string]any `json:"columns,omitempty"`
}

// PreviewBytes is how much of a row's payload and last error Rows reads.
const PreviewBytes = 120

// ErrNoRow is the error of Row for an id the table does not hold.
var ErrNoRow = errors.New("inbox: no such row")

// Bounds returns the table's lowest and highest id, both 0 in an empty table. It reads the
// primary key's two ends.
func (a *Admin) Bounds(ctx context.Context) (lowest, highest int64, err error) {
	var lo, hi sql.NullInt64
	if err := a.db.QueryRowContext(ctx, a.sql.Bounds()).Scan(&lo, &hi); err != nil {
		return 0, 0, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "reading its lowest and highest id: %w", err)
	}
	return lo.Int64, hi.Int64, nil
}

// Rows lists up to limit rows f matches, the highest id first, each with the first
// PreviewBytes of its payload and last error. For the next page, set f.ToID to the last row's
// ID less 1: pages follow the primary key, so rows that come or go meanwhile never shift one.
func (a *Admin) Rows(ctx context.Context, f Filter, limit int) ([]Row, error) {
	if limit <= 0 {
		return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "Rows with a limit of %d: give a limit above 0", limit)
	}
	sf, v, err := a.filter(ctx, "Rows", f, sqltext.NoAct)
	if err != nil {
		return nil, err
	}
	v.limit = int64(limit)
	b := a.sql.Rows(sf, PreviewBytes)
	rows, err := a.db.QueryContext(ctx, b.SQL, v.args(b.Binds)...)
	if err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "listing rows: %w", err)
	}
	defer rows.Close()
	var out []Row
	for rows.Next() {
		var r Row
		var times [6]any
		dest := []any{&r.ID, &r.Queue, &r.Attempt, &r.Priority, &times[0], &times[1], &times[2], &times[3], &times[4], &r.LastError, &r.Payload, &r.Kind}
		if a.t.CancelledAt != "" {
			dest = append(dest, &times[5])
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "listing rows: %w", err)
		}
		for i, at := range []*time.Time{&r.RetryAfter, &r.LockedUntil, &r.DeadAt, &r.ProcessedAt, &r.CreatedAt, &r.CancelledAt} {
			if *at, err = scannedTime(times[i]); err != nil {
				return nil, sentinel.Errorf(nil, sentinel.Row(a.t.Name, r.ID), "%w", err)
			}
		}
		r.State = r.stateAt(v.nowTime)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "listing rows: %w", err)
	}
	return out, nil
}

// Row reads the row of id, whole, or fails with ErrNoRow.
func (a *Admin) Row(ctx context.Context, id int64) (Row, error) {
	t := a.t
	names := []string{t.ID, t.Payload, t.Attempt, t.ProcessedAt, t.Queue, t.Priority, t.RetryAfter, t.Headers, t.DeadAt, t.LastError, t.CreatedAt, a.t.LockedUntil, t.Kind, t.UniqueKey, t.CancelledAt}
	var r Row
	var text struct{ queue, headers, lastError, kind, uniqueKey sql.NullString }
	var times [6]any
	var attempt, priority sql.NullInt64
	dests := []any{&r.ID, &r.Payload, &attempt, &times[0], &text.queue, &priority, &times[1], &text.headers, &times[2], &text.lastError, &times[3], &times[4], &text.kind, &text.uniqueKey, &times[5]}
	var scan []any
	for i, name := range names {
		if name != "" {
			scan = append(scan, dests[i])
		}
	}
	own := make([]any, len(t.Columns))
	for i := range own {
		scan = append(scan, &own[i])
	}
	err := a.db.QueryRowContext(ctx, a.sql.Row(), id).Scan(scan...)
	if errors.Is(err, sql.ErrNoRows) {
		return Row{}, sentinel.Errorf(ErrNoRow, "", "table %q holds no row %d", t.Name, id)
	}
	if err != nil {
		return Row{}, sentinel.Errorf(nil, sentinel.Table(t.Name), "reading row %d: %w", id, err)
	}
	r.Queue, r.Headers, r.LastError = text.queue.String, text.headers.String, text.lastError.String
	r.Kind, r.UniqueKey = text.kind.String, text.uniqueKey.String
	r.Attempt, r.Priority = attempt.Int64, priority.Int64
	for i, at := range []*time.Time{&r.ProcessedAt, &r.RetryAfter, &r.DeadAt, &r.CreatedAt, &r.LockedUntil, &r.CancelledAt} {
		if *at, err = scannedTime(times[i]); err != nil {
			return Row{}, sentinel.Errorf(nil, sentinel.Row(t.Name, id), "%w", err)
		}
	}
	if len(t.Columns) > 0 {
		r.Columns = map[string]any{}
		for i, c := range t.Columns {
			r.Columns[c] = own[i]
		}
	}
	r.State = r.stateAt(time.Now())
	return r, nil
}

// stateAt is the row's state at now, as Stats would count it.
func (r Row) stateAt(now time.Time) State {
	switch {
	case !r.DeadAt.IsZero():
		return Dead
	case !r.ProcessedAt.IsZero():
		return Processed
	case !r.CancelledAt.IsZero():
		return Cancelled
	case !r.LockedUntil.IsZero() && !r.LockedUntil.Before(now):
		return InWork
	case r.RetryAfter.After(now):
		return Delayed
	}
	return Due
}

// scannedTime is a scanned timestamp, the zero time for NULL.
func scannedTime(v any) (time.Time, error) {
	if v == nil {
		return time.Time{}, nil
	}
	t, err := dialect.ScannedTime(v)
	return t.UTC(), err
}

// values are what a statement of the page binds, by what each parameter binds
// (sqltext.Bind).
type values struct {
	nowTime               time.Time
	now                   any
	queues                []string
	kinds                 []string
	from, to              int64
	before                any
	errorPattern          string
	path, value           string
	after, limit          int64
	ids                   []int64
	table                 string // the table's name, as described
	queued, kinded, idded int    // how many queues, kinds and ids args has bound
}

// args are the arguments of a statement whose parameters bind binds, in order.
func (v *values) args(binds []sqltext.Bind) []any {
	out := make([]any, 0, len(binds))
	v.queued, v.kinded, v.idded = 0, 0, 0
	for _, k := range binds {
		switch k {
		case sqltext.BindNow:
			out = append(out, v.now)
		case sqltext.BindQueue:
			out = append(out, v.queues[v.queued])
			v.queued++
		case sqltext.BindKind:
			out = append(out, v.kinds[v.kinded])
			v.kinded++
		case sqltext.BindFrom:
			out = append(out, v.from)
		case sqltext.BindTo:
			out = append(out, v.to)
		case sqltext.BindBefore:
			out = append(out, v.before)
		case sqltext.BindError:
			out = append(out, v.errorPattern)
		case sqltext.BindPath:
			out = append(out, v.path)
		case sqltext.BindValue:
			out = append(out, v.value)
		case sqltext.BindAfter:
			out = append(out, v.after)
		case sqltext.BindLimit:
			out = append(out, v.limit)
		case sqltext.BindID:
			out = append(out, v.ids[v.idded])
			v.idded++
		case sqltext.BindTable:
			out = append(out, v.table)
		}
	}
	return out
}

// filter is f as a statement's conditions and their values, for call, over the rows act takes
// (sqltext.NoAct: every row f matches). It refuses a condition that needs a role the
// description lacks, naming the role.
func (a *Admin) filter(ctx context.Context, call string, f Filter, act sqltext.Act) (sqltext.Filter, *values, error) {
	now := time.Now()
	v := &values{nowTime: now, now: a.d.Time(now), queues: f.Queues, kinds: f.Kinds, from: f.FromID, to: f.ToID}
	sf := sqltext.Filter{State: sqltext.State(f.State), Queues: len(f.Queues), Kinds: len(f.Kinds), From: f.FromID != 0, To: f.ToID != 0, Act: act}
	if err := a.stateNeeds(call, f.State); err != nil {
		return sf, nil, err
	}
	if len(f.Queues) > 0 {
		if err := a.needs(call+" of queues", "Queue", a.t.Queue); err != nil {
			return sf, nil, err
		}
	}
	if len(f.Kinds) > 0 {
		if err := a.needs(call+" of kinds", "Kind", a.t.Kind); err != nil {
			return sf, nil, err
		}
	}
	if f.OlderThan < 0 {
		return sf, nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s of rows older than %v: give an age of 0 or more", call, f.OlderThan)
	}
	if f.OlderThan > 0 {
		role, column := a.ageRole(f.State)
		if err := a.needs(call+" by age of "+f.State.String()+" rows", role, column); err != nil {
			return sf, nil, err
		}
		sf.Before, v.before = true, a.d.Time(now.Add(-f.OlderThan))
	}
	if f.ErrorContains != "" {
		if err := a.needs(call+" by last error", "LastError", a.t.LastError); err != nil {
			return sf, nil, err
		}
		sf.Error, v.errorPattern = true, "%"+likeEscaper.Replace(f.ErrorContains)+"%"
	}
	if f.Path != "" {
		if err := a.needs(call+" by payload", "Payload", a.t.Payload); err != nil {
			return sf, nil, err
		}
		steps, err := parsePath(f.Path)
		if err != nil {
			return sf, nil, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s by payload: %w", call, err)
		}
		if sf.Payload, err = a.jsonSource(ctx); err != nil {
			return sf, nil, err
		}
		v.value = f.Value
		if a.d.Caps().Catalog == dialect.PostgresCatalog {
			v.path = steps.postgres()
		} else {
			v.path = steps.jsonPath()
		}
	}
	return sf, v, nil
}

// likeEscaper escapes LIKE's wildcards, and its escape character, '!'.
var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

// stateNeeds refuses a state the description cannot tell, naming the role it needs.
func (a *Admin) stateNeeds(call string, s State) error {
	switch s {
	case AnyState, Due:
		return nil
	case Delayed:
		return a.needs(call+" of delayed rows", "RetryAfter", a.t.RetryAfter)
	case InWork:
		if a.t.LockedUntil == "" {
			return sentinel.Errorf(inbox.ErrSchema, sentinel.Table(a.t.Name), "%s of rows in work needs the lease form's column: name it in Table.LockedUntil", call)
		}
		return nil
	case Retrying:
		return a.needs(call+" of retrying rows", "Attempt", a.t.Attempt)
	case Dead:
		return a.needs(call+" of dead rows", "DeadAt", a.t.DeadAt)
	case Processed:
		return a.needs(call+" of processed rows", "ProcessedAt", a.t.ProcessedAt)
	case Cancelled:
		return a.needs(call+" of cancelled rows", "CancelledAt", a.t.CancelledAt)
	}
	return sentinel.Errorf(nil, sentinel.Table(a.t.Name), "%s of %v: no such state", call, s)
}

// ageRole is the role, and its column, that dates a row's entry into state s (Filter.OlderThan).
func (a *Admin) ageRole(s State) (role, column string) {
	switch s {
	case Dead:
		return "DeadAt", a.t.DeadAt
	case Processed:
		return "ProcessedAt", a.t.ProcessedAt
	case Cancelled:
		return "CancelledAt", a.t.CancelledAt
	}
	return "CreatedAt", a.t.CreatedAt
}

// jsonSource is what the payload column's JSON is read from: on Postgres, whose JSON
// functions take JSON, the column's type, read from the catalog (bytes, text or JSON);
// elsewhere the statement reads any of them alike.
func (a *Admin) jsonSource(ctx context.Context) (sqltext.JSONSource, error) {
	if a.d.Caps().Catalog != dialect.PostgresCatalog {
		return sqltext.PayloadBytes, nil
	}
	tbl, err := schema.Read(ctx, a.db, a.d, a.t.Name)
	if err != nil {
		return 0, sentinel.Errorf(nil, sentinel.Table(a.t.Name), "reading the payload column's type: %w", err)
	}
	for _, c := range tbl.Columns {
		if c.Name != a.t.Payload {
			continue
		}
		switch c.Base {
		case "bytea":
			return sqltext.PayloadBytes, nil
		case "json", "jsonb":
			return sqltext.PayloadJSON, nil
		}
		return sqltext.PayloadText, nil
	}
	return 0, sentinel.Errorf(inbox.ErrSchema, "", "table %q has no payload column %q: add it, or name the column the payload is in (inbox.Table.Payload)", a.t.Name, a.t.Payload)
}
