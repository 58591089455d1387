package sqltext

import (
	"strconv"
	"strings"

	"github.com/sqlinbox/inbox/dialect"
)

// Admin builds the statements that read and repair a table from outside a consumer: its
// statistics, the listing of its dead rows, their requeue and purge, and the purge of processed
// rows. A dead row (dead_at set) and a processed row (processed_at set) are never claimed, so
// none of these statements touches a row a consumer holds. The statements that change rows
// name their rows by id, so that each changes a bounded number: a caller picks the ids first
// (Pick), a bounded page in id order.
type Admin struct {
	s     SQL
	lease string // the lease form's column, quoted; empty for a table without one
}

// Admin returns the builder of the table's operating statements; lease is the lease form's
// column, quoted, or empty.
func (s SQL) Admin(lease string) Admin { return Admin{s: s, lease: lease} }

// Stats counts the table's rows by state, per queue (one row in all when the table has no
// group), in queue order. Its columns, in order: the queue (empty without a group); the rows due
// now; delayed (retry_after ahead); in work (the lease column ahead; 0 without one); retrying
// (due or delayed, attempt above 0; 0 without an attempt column); dead; processed; the
// earliest time a due row has been due since, its retry_after or else its created_at (NULL
// without a due row that has one); the due rows with neither (without the columns, every due
// row); where the table has a cancelled_at column, the cancelled rows (neither processed nor
// dead); and, where the table has a kind column, last, the kind (NULL for rows of none), the
// rows then counted per queue and kind, in queue order. A row is pending when it is neither
// processed, dead nor cancelled, and only pending rows are due, delayed, in work or retrying. It binds
// now, nows times.
func (a Admin) Stats() (query string, nows int) {
	t := a.s.t
	p := a.s.Params()
	now := func() string { nows++; return p.param() }
	var pending []string
	for _, c := range []string{t.ProcessedAt, t.DeadAt, t.CancelledAt} {
		if c != "" {
			pending = append(pending, c+" IS NULL")
		}
	}
	when := func(conds ...string) string {
		all := append(append([]string{}, pending...), conds...)
		if len(all) == 0 {
			return "1 = 1"
		}
		return strings.Join(all, " AND ")
	}
	free := func() []string {
		if a.lease == "" {
			return nil
		}
		return []string{"(" + a.lease + " IS NULL OR " + a.lease + " < " + now() + ")"}
	}
	count := func(cond string) string { return "COUNT(CASE WHEN " + cond + " THEN 1 END)" }
	name, _ := a.grouped(t.Queue)
	kind, _ := a.grouped(t.Kind)
	cols := []string{name}
	if t.RetryAfter != "" {
		cols = append(cols,
			count(when(append(free(), "("+t.RetryAfter+" IS NULL OR "+t.RetryAfter+" <= "+now()+")")...)),
			count(when(append(free(), t.RetryAfter+" > "+now())...)))
	} else {
		cols = append(cols, count(when(free()...)), "0")
	}
	if a.lease != "" {
		cols = append(cols, count(when(a.lease+" >= "+now())))
	} else {
		cols = append(cols, "0")
	}
	if t.Attempt != "" {
		cols = append(cols, count(when(append(free(), t.Attempt+" > 0")...)))
	} else {
		cols = append(cols, "0")
	}
	cols = append(cols, a.settledCounts(count)...)
	switch {
	case t.RetryAfter != "" && t.CreatedAt != "":
		cols = append(cols,
			"MIN(CASE WHEN "+when(append(free(), "("+t.RetryAfter+" IS NULL OR "+t.RetryAfter+" <= "+now()+")")...)+
				" THEN COALESCE("+t.RetryAfter+", "+t.CreatedAt+") END)",
			count(when(append(free(), t.RetryAfter+" IS NULL AND "+t.CreatedAt+" IS NULL")...)))
	case t.RetryAfter != "":
		cols = append(cols,
			"MIN(CASE WHEN "+when(append(free(), t.RetryAfter+" <= "+now())...)+" THEN "+t.RetryAfter+" END)",
			count(when(append(free(), t.RetryAfter+" IS NULL")...)))
	case t.CreatedAt != "":
		cols = append(cols,
			"MIN(CASE WHEN "+when(free()...)+" THEN "+t.CreatedAt+" END)",
			count(when(append(free(), t.CreatedAt+" IS NULL")...)))
	default:
		cols = append(cols, "NULL", count(when(free()...)))
	}
	var groups []string
	for _, c := range []string{t.Queue, t.Kind} {
		if _, g := a.grouped(c); g != "" {
			groups = append(groups, g)
		}
	}
	if t.CancelledAt != "" {
		cols = append(cols, count(a.kept(nil, CancelledRows)))
	}
	if t.Kind != "" {
		cols = append(cols, kind)
	}
	query = "SELECT " + strings.Join(cols, ", ") + " FROM " + t.Name
	if len(groups) > 0 {
		query += " GROUP BY " + strings.Join(groups, ", ") + " ORDER BY 1"
	}
	return query, nows
}

// settledCounts are Stats' counts of the dead rows and of the processed ones (not dead), each
// "0" where the table has no such column; count counts the rows of a condition.
func (a Admin) settledCounts(count func(string) string) []string {
	t := a.s.t
	var cols []string
	for _, c := range []string{t.DeadAt, t.ProcessedAt} {
		switch {
		case c == "":
			cols = append(cols, "0")
		case c == t.ProcessedAt && t.DeadAt != "":
			cols = append(cols, count(c+" IS NOT NULL AND "+t.DeadAt+" IS NULL"))
		default:
			cols = append(cols, count(c+" IS NOT NULL"))
		}
	}
	return cols
}

// grouped is how Stats reads column c, whose values it groups by: the value of each group, as
// selected, and the group (empty, and the value an empty string, where the table has no such
// column).
func (a Admin) grouped(c string) (value, group string) {
	switch {
	case c == "":
		return "''", ""
	case a.s.c.PartialIndexes:
		return c, c
	}
	// The claim index covers every row and leads with the queue: grouped by the column, the
	// optimizer walks it in queue order and reads every row through it (MariaDB 10.11: 27 s over
	// a million rows, against 5 s for a scan of the table). No index serves an expression, and
	// its groups are the column's.
	return "MIN(" + c + ")", "CONCAT(" + c + ", '')"
}

// Dead lists dead rows, newest first (dead_at, then id, descending), up to a limit. Its
// columns, in order: id, queue (empty without a group), attempt (0 without the column, or where
// it is NULL), dead_at, last error (empty without the column, or where it is NULL). It binds, in
// order: the queue's name when byQueue; when after, the cursor's dead_at twice and its id (the
// rows after it in that order); the limit.
func (a Admin) Dead(byQueue, after bool) string {
	t := a.s.t
	p := a.s.Params()
	cols := []string{t.ID, "''", "0", t.DeadAt, "''"}
	if t.Queue != "" {
		cols[1] = t.Queue
	}
	if t.Attempt != "" {
		cols[2] = "COALESCE(" + t.Attempt + ", 0)"
	}
	if t.LastError != "" {
		cols[4] = "COALESCE(" + t.LastError + ", '')"
	}
	conds := []string{t.DeadAt + " IS NOT NULL"}
	if byQueue {
		conds = append(conds, t.Queue+" = "+p.param())
	}
	if after {
		conds = append(conds, "("+t.DeadAt+" < "+p.param()+" OR "+t.DeadAt+" = "+p.param()+" AND "+t.ID+" < "+p.param()+")")
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM " + t.Name + " WHERE " + strings.Join(conds, " AND ") +
		" ORDER BY " + t.DeadAt + " DESC, " + t.ID + " DESC LIMIT " + p.param()
}

// Kept is which rows a Pick or a change over ids takes: the dead rows, or the rows processed
// before a time.
type Kept int

const (
	DeadRows Kept = iota
	ProcessedRows
	CancelledRows // stamped cancelled_at, neither processed nor dead
)

// kept is the predicate of the rows k names; it binds the time before which a processed row
// was processed.
func (a Admin) kept(p *Params, k Kept) string {
	t := a.s.t
	switch k {
	case ProcessedRows:
		return t.ProcessedAt + " < " + p.param()
	case CancelledRows:
		conds := []string{t.CancelledAt + " IS NOT NULL"}
		for _, c := range []string{t.ProcessedAt, t.DeadAt} {
			if c != "" {
				conds = append(conds, c+" IS NULL")
			}
		}
		return strings.Join(conds, " AND ")
	}
	return t.DeadAt + " IS NOT NULL"
}

// Pick reads the ids of up to a limit of the rows k names, in id order, after an id. It binds,
// in order: the time before which a row was processed (ProcessedRows); the queue's name when
// byQueue; the id the page starts after; the limit.
func (a Admin) Pick(k Kept, byQueue bool) string {
	t := a.s.t
	p := a.s.Params()
	conds := []string{a.kept(p, k)}
	if byQueue {
		conds = append(conds, t.Queue+" = "+p.param())
	}
	conds = append(conds, t.ID+" > "+p.param())
	return "SELECT " + t.ID + " FROM " + t.Name + " WHERE " + strings.Join(conds, " AND ") + " ORDER BY " + t.ID + " LIMIT " + p.param()
}

// Requeue puts n dead rows back in the queue by their ids: dead_at and retry_after cleared,
// attempt reset to 0 (each where the table has it), the last error kept. A row no longer dead
// is left alone. It binds the n ids.
func (a Admin) Requeue(n int) string { return a.requeue(n, a.s.t.DeadAt, DeadRows) }

// RequeueCancelled puts n cancelled rows back in the queue by their ids, as Requeue puts dead
// ones, cancelled_at cleared. A row no longer cancelled is left alone. It binds the n ids.
func (a Admin) RequeueCancelled(n int) string {
	return a.requeue(n, a.s.t.CancelledAt, CancelledRows)
}

// requeue puts n of the rows k names back in the queue by their ids: stamp (the column that
// settled them) and retry_after cleared, attempt reset to 0.
func (a Admin) requeue(n int, stamp string, k Kept) string {
	t := a.s.t
	sets := []string{stamp + " = NULL"}
	if t.RetryAfter != "" {
		sets = append(sets, t.RetryAfter+" = NULL")
	}
	if t.Attempt != "" {
		sets = append(sets, t.Attempt+" = 0")
	}
	p := a.s.Params()
	return "UPDATE " + t.Name + " SET " + strings.Join(sets, ", ") + " WHERE " + t.ID + " IN (" + p.list(n) + ") AND " + a.kept(p, k)
}

// Purge deletes n of the rows k names by their ids; a row no longer of them is left alone. It
// binds the n ids, then the time before which a row was processed (ProcessedRows).
func (a Admin) Purge(k Kept, n int) string {
	t := a.s.t
	p := a.s.Params()
	return "DELETE FROM " + t.Name + " WHERE " + t.ID + " IN (" + p.list(n) + ") AND " + a.kept(p, k)
}

// The operator's page (package ui, through package admin) lists rows by state and by filter,
// counts them, and changes them by id: requeue, retry now, delete. The parameters of these
// statements depend on the conditions they carry, so each is built with the list of what its
// parameters bind, in order (Bound).

// State is a row's state, as Stats counts it: a pending row (neither processed, dead nor
// cancelled) is in work (its lease ahead), or else due or delayed (its retry_after ahead), and
// retrying besides when it was delivered before (attempt above 0).
type State int

// The states a listing takes; AnyState takes every row.
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

// Act is a change over ids, and so the rows it takes (its guard).
type Act int

// The changes: RequeueAct puts dead rows back in their queue, as Requeue does; RetryNowAct makes
// delayed rows due now; DeleteAct deletes any row no lease holds; CancelAct takes the pending
// rows (neither processed, dead nor cancelled), held or not, which the statements of Cancels
// change one at a time (Lock and Change have no statement of it).
const (
	NoAct Act = iota
	RequeueAct
	RetryNowAct
	DeleteAct
	CancelAct
)

// JSONSource is what a payload's JSON is read from on Postgres, whose JSON functions take
// JSON, not the bytes or text a payload column holds: bytes (BYTEA), text, or a JSON column.
// The other databases read any of them the same way.
type JSONSource int

// The sources; NoPayload: the statement filters on no payload.
const (
	NoPayload JSONSource = iota
	PayloadBytes
	PayloadText
	PayloadJSON
)

// Filter is the conditions a statement over rows carries, each bound as its Bound says.
type Filter struct {
	State   State
	Queues  int        // the rows of one of so many queues (bound, each)
	Kinds   int        // the rows of one of so many kinds (bound, each)
	From    bool       // the rows of an id at least the one bound
	To      bool       // the rows of an id at most the one bound
	Before  bool       // the rows that entered their state before the time bound (see age)
	Error   bool       // the rows whose last error matches the LIKE pattern bound ('!' escapes)
	Payload JSONSource // the rows whose payload holds, at the JSON path bound, the value bound
	Act     Act        // the rows the act takes (held ones too: see Lock)
}

// Bind is what a parameter binds.
type Bind int

// The things a parameter binds: the host's now; a queue's name; a kind's; the lowest id, the highest;
// the time before which a row entered its state; a pattern of the last error; a JSON path into
// the payload (Postgres: a text[] literal, '{a,0,b}'; elsewhere '$."a"[0]."b"'), and the value
// there; the id a pick starts after; a limit; one id of a list; the table's name, as described
// (the key of its rows in the tables several tables share).
const (
	BindNow Bind = iota + 1
	BindQueue
	BindKind
	BindFrom
	BindTo
	BindBefore
	BindError
	BindPath
	BindValue
	BindAfter
	BindLimit
	BindID
	BindTable
)

// Bound is a statement and what each of its parameters binds, in order.
type Bound struct {
	SQL   string
	Binds []Bind
}

// binder numbers a statement's parameters and records what each binds.
type binder struct {
	p     *Params
	binds []Bind
}

func (a Admin) binder() *binder { return &binder{p: a.s.Params()} }

func (b *binder) next(k Bind) string {
	b.binds = append(b.binds, k)
	return b.p.param()
}

func (b *binder) list(k Bind, n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = b.next(k)
	}
	return strings.Join(ps, ", ")
}

func (b *binder) bound(query string) Bound { return Bound{SQL: query, Binds: b.binds} }

// pending are the conditions of a row neither processed, dead nor cancelled.
func (a Admin) pending() []string {
	var out []string
	for _, c := range []string{a.s.t.ProcessedAt, a.s.t.DeadAt, a.s.t.CancelledAt} {
		if c != "" {
			out = append(out, c+" IS NULL")
		}
	}
	return out
}

// free is the condition of a pending row no lease holds; nil without a lease column.
func (a Admin) free(b *binder) []string {
	if a.lease == "" {
		return nil
	}
	return []string{"(" + a.lease + " IS NULL OR " + a.lease + " < " + b.next(BindNow) + ")"}
}

// state are the conditions of a row in state s, as Stats counts it.
func (a Admin) state(b *binder, s State) []string {
	t := a.s.t
	switch s {
	case Due:
		conds := append(a.pending(), a.free(b)...)
		if t.RetryAfter != "" {
			conds = append(conds, "("+t.RetryAfter+" IS NULL OR "+t.RetryAfter+" <= "+b.next(BindNow)+")")
		}
		return conds
	case Delayed:
		return append(append(a.pending(), a.free(b)...), t.RetryAfter+" > "+b.next(BindNow))
	case InWork:
		return append(a.pending(), a.lease+" >= "+b.next(BindNow))
	case Retrying:
		return append(append(a.pending(), a.free(b)...), t.Attempt+" > 0")
	case Dead:
		return []string{t.DeadAt + " IS NOT NULL"}
	case Processed:
		if t.DeadAt != "" {
			return []string{t.ProcessedAt + " IS NOT NULL", t.DeadAt + " IS NULL"}
		}
		return []string{t.ProcessedAt + " IS NOT NULL"}
	case Cancelled:
		return []string{a.kept(nil, CancelledRows)}
	}
	return nil
}

// age is the column that says when a row of state s entered it: dead_at for a dead row,
// processed_at for a processed one, cancelled_at for a cancelled one, created_at (its
// publishing) otherwise.
func (a Admin) age(s State) string {
	switch s {
	case Dead:
		return a.s.t.DeadAt
	case Processed:
		return a.s.t.ProcessedAt
	case Cancelled:
		return a.s.t.CancelledAt
	}
	return a.s.t.CreatedAt
}

// guard are the conditions of the rows act takes, held or not: dead rows for a requeue, delayed
// ones for a retry now, pending ones for a cancel, any row for a delete.
func (a Admin) guard(b *binder, act Act) []string {
	switch act {
	case RequeueAct:
		return []string{a.s.t.DeadAt + " IS NOT NULL"}
	case RetryNowAct:
		return append(a.pending(), a.s.t.RetryAfter+" > "+b.next(BindNow))
	case CancelAct:
		return a.pending()
	}
	return nil
}

// unheld are the conditions of a row of act's guard that no lease holds: for a delete, one
// that is processed, dead, or not leased; for a retry now, one not leased. A requeue takes dead
// rows, which no lease holds. Nil without a lease column.
func (a Admin) unheld(b *binder, act Act) []string {
	switch {
	case a.lease == "" || act == RequeueAct:
		return nil
	case act == DeleteAct:
		var or []string
		for _, c := range []string{a.s.t.ProcessedAt, a.s.t.DeadAt} {
			if c != "" {
				or = append(or, c+" IS NOT NULL")
			}
		}
		or = append(or, a.lease+" IS NULL", a.lease+" < "+b.next(BindNow))
		return []string{"(" + strings.Join(or, " OR ") + ")"}
	}
	return a.free(b)
}

// filter are f's conditions, bound in their order: the state's, then the queues, the kinds, the ids, the
// age, the last error, the payload, then the act's guard.
func (a Admin) filter(b *binder, f Filter) []string {
	t := a.s.t
	conds := a.state(b, f.State)
	if f.Queues > 0 {
		conds = append(conds, t.Queue+" IN ("+b.list(BindQueue, f.Queues)+")")
	}
	if f.Kinds > 0 {
		conds = append(conds, t.Kind+" IN ("+b.list(BindKind, f.Kinds)+")")
	}
	if f.From {
		conds = append(conds, t.ID+" >= "+b.next(BindFrom))
	}
	if f.To {
		conds = append(conds, t.ID+" <= "+b.next(BindTo))
	}
	if f.Before {
		conds = append(conds, a.age(f.State)+" < "+b.next(BindBefore))
	}
	if f.Error {
		conds = append(conds, "LOWER("+t.LastError+") LIKE LOWER("+b.next(BindError)+") ESCAPE '!'")
	}
	if f.Payload != NoPayload {
		conds = append(conds, a.payloadAt(b, f.Payload)+" = "+b.next(BindValue))
	}
	return append(conds, a.guard(b, f.Act)...)
}

// payloadAt is the text of the payload's JSON value at the path it binds: a string's content,
// a number or a boolean as written (true, false), NULL where the payload is not JSON or the path
// leads nowhere. Postgres reads JSON that starts with { or [ (a payload that starts so and is
// not JSON fails the statement); MySQL and MariaDB read the payload as utf8mb4 text where it is
// valid JSON; SQLite where it is valid JSON, with booleans spelled as elsewhere (json_extract
// reads them as 1 and 0).
func (a Admin) payloadAt(b *binder, src JSONSource) string {
	p := a.s.t.Payload
	switch a.s.c.Catalog {
	case dialect.PostgresCatalog:
		var doc string
		switch src {
		case PayloadBytes:
			doc = "CASE WHEN substr(" + p + ", 1, 1) IN ('{'::bytea, '['::bytea) THEN convert_from(" + p + ", 'UTF8')::jsonb END"
		case PayloadText:
			doc = "CASE WHEN " + p + " LIKE '{%' OR " + p + " LIKE '[%' THEN CAST(" + p + " AS JSONB) END"
		default:
			doc = "CAST(" + p + " AS JSONB)"
		}
		return "(" + doc + ") #>> CAST(CAST(" + b.next(BindPath) + " AS TEXT) AS TEXT[])"
	case dialect.SQLiteCatalog:
		doc := "CAST(" + p + " AS TEXT)"
		return "CASE WHEN json_valid(" + doc + ") THEN CASE json_type(" + doc + ", " + b.next(BindPath) + ") WHEN 'true' THEN 'true' WHEN 'false' THEN 'false' ELSE CAST(json_extract(" + doc + ", " + b.next(BindPath) + ") AS TEXT) END END"
	}
	doc := "CONVERT(" + p + " USING utf8mb4)"
	return "CASE WHEN JSON_VALID(" + doc + ") THEN JSON_UNQUOTE(JSON_EXTRACT(" + doc + ", " + b.next(BindPath) + ")) END"
}

// where joins conditions into a WHERE clause; "" when there are none.
func where(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// Bounds reads the table's lowest and highest id (NULL in an empty table), each through the
// primary key. It binds nothing.
func (a Admin) Bounds() string {
	t := a.s.t
	return "SELECT (SELECT MIN(" + t.ID + ") FROM " + t.Name + "), (SELECT MAX(" + t.ID + ") FROM " + t.Name + ")"
}

// Rows lists the rows f matches, the highest id first, up to a limit (bound last). Its
// columns, in order: id; queue (” without the column); attempt and priority (0 without the
// column, or where NULL); retry_after, the lease column, dead_at, processed_at and created_at
// (NULL without the column); the first preview characters of the last error (” without the
// column), the first preview bytes of the payload (NULL without the column), and the kind (”
// without the column); then, where the table has the column, cancelled_at.
func (a Admin) Rows(f Filter, preview int) Bound {
	t := a.s.t
	b := a.binder()
	or := func(col, absent string) string {
		if col == "" {
			return absent
		}
		return col
	}
	coalesce := func(col, zero string) string {
		if col == "" {
			return zero
		}
		return "COALESCE(" + col + ", " + zero + ")"
	}
	n := strconv.Itoa(preview)
	cols := []string{
		t.ID, or(t.Queue, "''"), coalesce(t.Attempt, "0"), coalesce(t.Priority, "0"),
		or(t.RetryAfter, "NULL"), or(a.lease, "NULL"), or(t.DeadAt, "NULL"), or(t.ProcessedAt, "NULL"), or(t.CreatedAt, "NULL"),
		"''", "NULL", or(t.Kind, "''"),
	}
	if t.LastError != "" {
		cols[9] = "SUBSTR(COALESCE(" + t.LastError + ", ''), 1, " + n + ")"
	}
	if t.Payload != "" {
		cols[10] = "SUBSTR(" + t.Payload + ", 1, " + n + ")"
	}
	if t.CancelledAt != "" {
		cols = append(cols, t.CancelledAt)
	}
	query := "SELECT " + strings.Join(cols, ", ") + " FROM " + t.Name + where(a.filter(b, f)) + " ORDER BY " + t.ID + " DESC LIMIT " + b.next(BindLimit)
	return b.bound(query)
}

// Count counts the rows f matches, up to a limit (bound last): a count that reaches it means
// that many or more.
func (a Admin) Count(f Filter) Bound {
	t := a.s.t
	b := a.binder()
	query := "SELECT COUNT(*) FROM (SELECT 1 FROM " + t.Name + where(a.filter(b, f)) + " LIMIT " + b.next(BindLimit) + ") matched"
	return b.bound(query)
}

// PickMatching reads the ids of up to a limit of the rows f matches, in id order, after an
// id: the rows of a change over every row a filter matches, a page at a time.
func (a Admin) PickMatching(f Filter) Bound {
	t := a.s.t
	b := a.binder()
	conds := append(a.filter(b, f), t.ID+" > "+b.next(BindAfter))
	return b.bound("SELECT " + t.ID + " FROM " + t.Name + where(conds) + " ORDER BY " + t.ID + " LIMIT " + b.next(BindLimit))
}

// RowColumns are the columns Row reads, in order: id, payload, attempt, processed_at, queue,
// priority, retry_after, headers, dead_at, last_error, created_at, the lease column, kind, the
// unique key, cancelled_at, each where the table has it, then the application's own columns
// (Table.Columns).
func (a Admin) RowColumns() []string {
	t := a.s.t
	var cols []string
	for _, c := range []string{t.ID, t.Payload, t.Attempt, t.ProcessedAt, t.Queue, t.Priority, t.RetryAfter, t.Headers, t.DeadAt, t.LastError, t.CreatedAt, a.lease, t.Kind, t.UniqueKey, t.CancelledAt} {
		if c != "" {
			cols = append(cols, c)
		}
	}
	return append(cols, t.Columns...)
}

// Row reads one row, whole, by its id (bound): its RowColumns.
func (a Admin) Row() string {
	t := a.s.t
	return "SELECT " + strings.Join(a.RowColumns(), ", ") + " FROM " + t.Name + " WHERE " + t.ID + " = " + a.s.Params().param()
}

// Eligible reads which of n ids are of rows act takes, held or not, in a plain read that waits
// for no lock.
func (a Admin) Eligible(act Act, n int) Bound {
	t := a.s.t
	b := a.binder()
	conds := append([]string{t.ID + " IN (" + b.list(BindID, n) + ")"}, a.guard(b, act)...)
	return b.bound("SELECT " + t.ID + " FROM " + t.Name + where(conds))
}

// Lock locks, in the transaction of the change that follows it, those of n ids that act takes
// and no one holds, and reads them: a row no lease holds (unheld), and, by SKIP LOCKED, no
// transaction locks (a row lock consumer's claim): it never waits for a row in work. For the
// databases with row locks (Caps.SkipLocked).
func (a Admin) Lock(act Act, n int) Bound {
	t := a.s.t
	b := a.binder()
	conds := append([]string{t.ID + " IN (" + b.list(BindID, n) + ")"}, a.guard(b, act)...)
	conds = append(conds, a.unheld(b, act)...)
	return b.bound("SELECT " + t.ID + " FROM " + t.Name + where(conds) + " FOR UPDATE SKIP LOCKED")
}

// Change runs act on n ids, the rows of its guard that no lease holds: a requeue as Requeue;
// a retry now sets retry_after to now; a delete deletes.
func (a Admin) Change(act Act, n int) Bound {
	t := a.s.t
	b := a.binder()
	var head string
	switch act {
	case RequeueAct:
		return Bound{SQL: a.Requeue(n), Binds: repeat(BindID, n)}
	case RetryNowAct:
		head = "UPDATE " + t.Name + " SET " + t.RetryAfter + " = " + b.next(BindNow)
	default:
		head = "DELETE FROM " + t.Name
	}
	conds := append([]string{t.ID + " IN (" + b.list(BindID, n) + ")"}, a.guard(b, act)...)
	conds = append(conds, a.unheld(b, act)...)
	return b.bound(head + where(conds))
}

func repeat(k Bind, n int) []Bind {
	out := make([]Bind, n)
	for i := range out {
		out[i] = k
	}
	return out
}

// Groups lists the table's FIFO groups that have rows pending (neither processed, dead nor
// cancelled), by queue and group key, up to a limit: each group's queue (” without a queue
// column), key, head (its lowest pending id, the next to run), pending rows, the head's attempt
// and retry_after (NULL where the table has no such column), the id of the row that holds
// the group (its hold names it and its lease runs ahead of now; NULL where none does), the id of
// the dead row its hold names (a head that died in work, which blocks the group where its
// consumers keep groups blocked; NULL where none, or the table has no dead_at column), and when
// the group was paused (NULL while it is not); the last three are NULL where the description
// names no lease column. It reads without locks. The limit applies where the groups are formed,
// in the order of the group index (queue, group key): a database can then stop reading the
// index after the groups asked for, rather than group every pending row of the table first. It
// binds the limit, the table's name, then now.
func (a Admin) Groups() Bound { return a.groups(false) }

// QueueGroups is Groups of the queue bound first: its groups alone, which the group index,
// whose first column is the queue, finds without reading the other queues' rows. For a table
// with a Queue column.
func (a Admin) QueueGroups() Bound { return a.groups(true) }

func (a Admin) groups(ofQueue bool) Bound {
	t := a.s.t
	b := a.binder()
	queue, groupBy := "''", t.GroupKey // Postgres refuses a constant in GROUP BY
	if t.Queue != "" {
		queue, groupBy = t.Queue, t.Queue+", "+t.GroupKey
	}
	pending := append(a.s.queued(nil, ""), t.GroupKey+" IS NOT NULL")
	if ofQueue {
		pending = append([]string{t.Queue + " = " + b.next(BindQueue)}, pending...)
	}
	or := func(col string) string {
		if col == "" {
			return "NULL"
		}
		return "inbox_head." + col
	}
	heads := "SELECT " + queue + " AS inbox_queue, " + t.GroupKey + " AS inbox_group, MIN(" + t.ID + ") AS inbox_head, COUNT(*) AS inbox_pending FROM " + t.Name +
		" WHERE " + strings.Join(pending, " AND ") + " GROUP BY " + groupBy + " ORDER BY " + groupBy + " LIMIT " + b.next(BindLimit)
	holder, joins := "", ""
	if a.lease == "" {
		// Without a lease column (the advisory form's table) no hold names a holder: the hold
		// row carries only a pause.
		holder = "NULL, NULL, inbox_hold.paused_at"
		joins = " LEFT JOIN " + GroupsTable + " inbox_hold ON inbox_hold.table_name = " + b.next(BindTable) +
			" AND inbox_hold.queue = inbox_g.inbox_queue AND inbox_hold.group_key = inbox_g.inbox_group"
	} else {
		holder = "inbox_holder." + t.ID + ", NULL, inbox_hold.paused_at"
		joins = " LEFT JOIN " + GroupsTable + " inbox_hold ON inbox_hold.table_name = " + b.next(BindTable) +
			" AND inbox_hold.queue = inbox_g.inbox_queue AND inbox_hold.group_key = inbox_g.inbox_group" +
			" LEFT JOIN " + t.Name + " inbox_holder ON inbox_holder." + t.ID + " = inbox_hold.holder_id AND inbox_holder." + a.lease + " >= " + b.next(BindNow)
		if t.DeadAt != "" {
			holder = "inbox_holder." + t.ID + ", inbox_dead." + t.ID + ", inbox_hold.paused_at"
			joins += " LEFT JOIN " + t.Name + " inbox_dead ON inbox_dead." + t.ID + " = inbox_hold.holder_id AND inbox_dead." + t.DeadAt + " IS NOT NULL"
		}
	}
	query := "SELECT inbox_g.inbox_queue, inbox_g.inbox_group, inbox_g.inbox_head, inbox_g.inbox_pending, " +
		or(t.Attempt) + ", " + or(t.RetryAfter) + ", " + holder + " FROM (" + heads + ") inbox_g JOIN " + t.Name + " inbox_head ON inbox_head." + t.ID +
		" = inbox_g.inbox_head" + joins + " ORDER BY inbox_g.inbox_queue, inbox_g.inbox_group"
	return b.bound(query)
}
