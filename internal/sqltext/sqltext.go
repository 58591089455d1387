// Package sqltext builds, as text, every statement the library runs against an inbox table:
// the claims and settlements of the three forms and the INSERT that publishes. It runs nothing
// (no *sql.DB, no context, no I/O): its input is the table's names by role, already quoted,
// and the database's capability record (dialect.Caps); its output is the statement, whose
// arguments are documented, in order, next to the method that builds it. A form prepares and
// runs what it builds, and decides which statement an outcome needs.
//
// A settlement is built from the outcome's kind and the form's guard, the rows it names and
// what must still hold for it to change them (see Guard). The golden files under testdata hold
// the text of every statement per form, database and table shape.
package sqltext

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqlinbox/inbox/dialect"
)

// Table is an inbox table's name and its columns by role, each quoted for the database
// (Dialect.Quote); a role the table lacks is empty. Its fields are those of inbox.Table, so a
// quoted inbox.Table converts to it. They are written twice because the root package imports
// this one (publishing and the wake-ups build their statements here), so this one cannot name
// inbox.Table, and inbox.Table, the exported API with its methods and its fields' documentation,
// cannot be an alias of a type here. Every conversion, sqltext.Table(q), compiles only while
// the two agree field for field, so they cannot drift apart.
type Table struct {
	Name        string
	ID          string
	IDGenerated bool
	Payload     string
	Attempt     string
	ProcessedAt string
	Queue       string
	Kind        string
	Priority    string
	RetryAfter  string
	Headers     string
	DeadAt      string
	LastError   string
	CancelledAt string
	CreatedAt   string
	LockedUntil string // the lease form's; its statements take it by itself (Lease)
	UniqueKey   string // the unique key's column (inbox.Table.UniqueKey); see Unique
	// UniqueWhileQueued: the lease form's claim clears the unique key (inbox.Table's).
	UniqueWhileQueued bool
	// UniqueWindow: settlements keep the unique key, which a publish clears this long after
	// the row settled (inbox.Table's); zero: settlements clear it.
	UniqueWindow time.Duration
	GroupKey     string   // the FIFO group column (inbox.Table.GroupKey); see Lease's claim
	LimitKey     string   // the concurrency limit key column (inbox.Table.LimitKey); see Limits
	Columns      []string // the application's own columns a delivery reads (inbox.Table.Columns)
	Notify       bool     // Postgres: the publish notifies the table's channel (InsertNotifying)
	Pauses       string   // the table of paused queues, quoted; empty: no claim asks it (Pauses)
	Limits       string   // the table of concurrency limits, quoted; empty: no claim asks it (Limits)
	Rates        string   // the table of rate limits, quoted; empty: no claim asks it (Rates)
}

// SQL builds the statements over one table on one database.
type SQL struct {
	c *dialect.Caps
	t Table
	// maxAttempts is the attempt limit the claims honour (Limited); zero: none.
	maxAttempts int
	// kinds are the kinds the claims take (OfKinds), each with its attempt limit, in the order
	// the claims name them; nil: rows of every kind.
	kinds []Kind
}

// Kind is a kind of job the claims take (OfKinds): its name, as the kind column holds it, and
// its attempt limit (zero: none).
type Kind struct {
	Name        string
	MaxAttempts int
}

// New returns the builder of table t's statements on the database c describes.
func New(c *dialect.Caps, t Table) SQL { return SQL{c: c, t: t} }

// Limited returns the builder whose claimable rows (Due) are also below the attempt limit
// maxAttempts, where the table counts attempts: a row whose attempt column has reached it has
// had every delivery the limit allows, and no claim takes it again (a row that could neither
// settle nor die at its last attempt; see inbox.Binding.MaxAttempts). The limit is written into
// the text, as a claim's LIMIT is. Zero or less: no limit, the builder s is.
func (s SQL) Limited(maxAttempts int) SQL {
	s.maxAttempts = max(maxAttempts, 0)
	return s
}

// OfKinds returns the builder whose claimable rows (Due) are also of one of kinds, each below
// its own attempt limit (where the table counts attempts) instead of Limited's: kind IN (…) for
// each run of consecutive kinds of one limit, the runs ORed. The kinds' names are written into
// the text as string literals (dialect.Caps.Literal), as the limits are, and bind nothing: a
// consumer's kinds are fixed for its life, and a parameter per kind made each claim dearer
// than one without a kind filter (docs/benchmarks.md, issue 24).
// Empty: rows of every kind, the builder s is; and so it is where the table has no kind column
// (a consumer refuses to run kinds there).
func (s SQL) OfKinds(kinds []Kind) SQL {
	s.kinds = kinds
	return s
}

// Params numbers a statement's parameters in the order they appear: $1, $2, … where the
// database numbers them, ? elsewhere.
type Params struct {
	numbered bool
	n        int
	args     []Arg // the roles of the parameters Next numbered, in order
}

// Params starts numbering a statement's parameters from 1.
func (s SQL) Params() *Params { return &Params{numbered: s.c.NumberedParams} }

// Next returns the next parameter, which binds a value of role a.
func (p *Params) Next(a Arg) string {
	p.args = append(p.args, a)
	return p.param()
}

// param returns the next parameter without recording its role: for the statements whose
// callers bind by a record of their own (Admin's Bound) or by their own rule (Insert).
func (p *Params) param() string {
	p.n++
	if p.numbered {
		return "$" + strconv.Itoa(p.n)
	}
	return "?"
}

// list is n parameters, comma-separated, their roles unrecorded (see param).
func (p *Params) list(n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = p.param()
	}
	return strings.Join(ps, ", ")
}

// listOf is n parameters of role a, comma-separated.
func (p *Params) listOf(a Arg, n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = p.Next(a)
	}
	return strings.Join(ps, ", ")
}

// statement is query with the roles of the parameters p numbered in it.
func (p *Params) statement(query string) Statement { return Statement{SQL: query, Args: p.args} }

// Columns is the select list of a delivery: id, then payload, attempt, queue, kind and headers where
// the table has them, then the application's own columns in the description's order, each
// prefixed with alias and a dot when alias is not empty.
func (s SQL) Columns(alias string) string {
	prefix := dotted(alias)
	cols := []string{prefix + s.t.ID}
	for _, c := range append([]string{s.t.Payload, s.t.Attempt, s.t.Queue, s.t.Kind, s.t.Headers}, s.t.Columns...) {
		if c != "" {
			cols = append(cols, prefix+c)
		}
	}
	return strings.Join(cols, ", ")
}

// Due is the predicate of a claimable row, its columns prefixed as Columns prefixes them: not
// processed, not dead, not cancelled, below the attempt limit (Limited), due (retry_after
// passed), of the queue, of the kinds claimed (OfKinds, each below its own limit), each where the
// table has the column, of a queue not paused, where the description names a pauses table
// (Pauses.notPaused), and without a cancel request in CancelsTable, where the table has a
// cancelled_at column; "1 = 1" where it has none of them. It binds, in order: now (where the
// table has retry_after), the queue's name (where it has a queue column), the pause's table and
// queue (where it names a pauses table), then the table's name (where it has a cancelled_at
// column).
func (s SQL) Due(p *Params, alias string) string {
	prefix := dotted(alias)
	var conds []string
	if s.t.ProcessedAt != "" {
		conds = append(conds, prefix+s.t.ProcessedAt+" IS NULL")
	}
	if s.t.DeadAt != "" {
		conds = append(conds, prefix+s.t.DeadAt+" IS NULL")
	}
	if s.t.CancelledAt != "" {
		conds = append(conds, prefix+s.t.CancelledAt+" IS NULL")
	}
	if s.t.Attempt != "" && s.maxAttempts > 0 && len(s.kinds) == 0 {
		conds = append(conds, "COALESCE("+prefix+s.t.Attempt+", 0) < "+strconv.Itoa(s.maxAttempts))
	}
	if s.t.RetryAfter != "" {
		conds = append(conds, "("+prefix+s.t.RetryAfter+" IS NULL OR "+prefix+s.t.RetryAfter+" <= "+p.Next(ArgNow)+")")
	}
	if s.t.Queue != "" {
		conds = append(conds, prefix+s.t.Queue+" = "+p.Next(ArgQueue))
	}
	if len(s.kinds) > 0 && s.t.Kind != "" {
		conds = append(conds, s.ofKinds(prefix))
	}
	if s.t.Pauses != "" {
		conds = append(conds, s.Pauses().notPaused(p))
	}
	if s.t.CancelledAt != "" {
		// A row with a cancel request left by a holder that ended before it was told (a crash,
		// a rollback) waits for a consumer's poll to cancel it, rather than running again.
		outer := prefix
		if outer == "" {
			outer = s.t.Name + "."
		}
		conds = append(conds, "NOT EXISTS (SELECT 1 FROM "+CancelsTable+" r WHERE r.table_name = "+p.Next(ArgTable)+" AND r.id = "+outer+s.t.ID+")")
	}
	if len(conds) == 0 {
		return "1 = 1"
	}
	return strings.Join(conds, " AND ")
}

// ofKinds is the predicate of a row of the kinds OfKinds names, each below its attempt limit:
// one of the kinds (kindIn) [AND COALESCE(attempt, 0) < n] for each run of kinds of one limit,
// ORed and parenthesized where there are several.
func (s SQL) ofKinds(prefix string) string {
	var runs []string
	for i := 0; i < len(s.kinds); {
		limit := s.kinds[i].MaxAttempts
		var names []string
		for ; i < len(s.kinds) && s.kinds[i].MaxAttempts == limit; i++ {
			names = append(names, s.kinds[i].Name)
		}
		run := s.kindIn(prefix+s.t.Kind, names)
		if s.t.Attempt != "" && limit > 0 {
			run += " AND COALESCE(" + prefix + s.t.Attempt + ", 0) < " + strconv.Itoa(limit)
		}
		runs = append(runs, run)
	}
	if len(runs) == 1 {
		return runs[0]
	}
	return "(" + strings.Join(runs, " OR ") + ")"
}

// kindSep separates the kinds of the list a claim looks a row's kind up in where the database
// would build a temporary index for an IN list (kindIn).
const kindSep = ","

// kindIn is the predicate of a value of column (prefixed) among names: column IN ('…', …).
// Where the database builds a temporary index of an IN list of more than two values at every
// run (dialect.Caps.InListTempIndex: SQLite) it is instead a search of the column's value, kindSep
// on each side, in one literal of the names, each with kindSep on each side, and the value
// holds no kindSep: that finds the value only where it equals one of the names, since no name
// holds kindSep either (a list of which one does is an IN list). It compares as = does under
// SQLite's default collation, byte for byte, and is NULL where the column is, as IN is.
func (s SQL) kindIn(column string, names []string) string {
	if !s.c.InListTempIndex || len(names) <= 2 || slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, kindSep) }) {
		lits := make([]string, len(names))
		for i, n := range names {
			lits[i] = s.c.Literal(n)
		}
		return column + " IN (" + strings.Join(lits, ", ") + ")"
	}
	list := s.c.Literal(kindSep + strings.Join(names, kindSep) + kindSep)
	sep := s.c.Literal(kindSep)
	return "(instr(" + list + ", " + sep + " || " + column + " || " + sep + ") > 0 AND instr(" + column + ", " + sep + ") = 0)"
}

// Order is the claim order, its columns prefixed as Columns prefixes them: priority,
// retry_after, id, each where the table has it. A row never delayed (retry_after NULL) comes
// before a delayed one that is due: said with NULLS FIRST where the database sorts NULL last.
func (s SQL) Order(alias string) string {
	prefix := dotted(alias)
	var cols []string
	if s.t.Priority != "" {
		cols = append(cols, prefix+s.t.Priority)
	}
	if s.t.RetryAfter != "" {
		col := prefix + s.t.RetryAfter
		if s.c.NullsLast {
			col += " NULLS FIRST"
		}
		cols = append(cols, col)
	}
	return strings.Join(append(cols, prefix+s.t.ID), ", ")
}

// Insert publishes rows rows in one statement. Each row binds, in order: its id (unless the
// table's id is generated), payload, group, kind, priority, headers, retry_after, created_at, unique_key, group and limit_key, each
// where the table has the column, then the value of each of own, the application's own columns (quoted)
// that every row of the statement sets. A table whose only column is its generated id, and no
// own column, binds nothing: each row is the value that has the database assign the id
// (dialect.Caps.IDOnlyValue).
func (s SQL) Insert(rows int, own []string) string {
	return s.insert(s.Params(), own, make([][]bool, rows))
}

// InsertValues is how many values a row of Insert binds with own columns of its own.
func (s SQL) InsertValues(own int) int { return len(s.insertRoles()) + own }

// insertRoles are the role columns a row of Insert binds, in order.
func (s SQL) insertRoles() []string {
	var cols []string
	if !s.t.IDGenerated {
		cols = append(cols, s.t.ID)
	}
	for _, c := range []string{s.t.Payload, s.t.Queue, s.t.Kind, s.t.Priority, s.t.Headers, s.t.RetryAfter, s.t.CreatedAt, s.t.UniqueKey, s.t.GroupKey, s.t.LimitKey} {
		if c != "" {
			cols = append(cols, c)
		}
	}
	return cols
}

// InsertNotifying is Insert that also notifies a channel (Notifying), bound after the rows.
func (s SQL) InsertNotifying(rows int, own []string) string {
	p := s.Params()
	insert := s.insert(p, own, make([][]bool, rows))
	return Notifying(insert, p.param())
}

// InsertSparse publishes a row for each of sets in one statement, as Insert does, but for the
// own columns a row leaves out: row i binds own[j] where sets[i][j] is true, and writes DEFAULT
// for it otherwise, so that it takes the column's default as a row of an INSERT that left the
// column out would. Only where VALUES take DEFAULT (dialect.Caps.ValuesDefault).
func (s SQL) InsertSparse(own []string, sets [][]bool) string {
	return s.insert(s.Params(), own, sets)
}

// insert is the INSERT of a row for each of sets, numbering its parameters by p: a nil set binds
// every own column (see InsertSparse).
func (s SQL) insert(p *Params, own []string, sets [][]bool) string {
	cols := s.insertRoles()
	roles := len(cols)
	cols = append(cols, own...)
	row := func(set []bool) string {
		vs := make([]string, len(cols))
		for i := range vs {
			if i < roles || set == nil || set[i-roles] {
				vs[i] = p.param()
			} else {
				vs[i] = "DEFAULT"
			}
		}
		return "(" + strings.Join(vs, ", ") + ")"
	}
	if len(cols) == 0 {
		cols = []string{s.t.ID}
		row = func([]bool) string { return "(" + s.c.IDOnlyValue + ")" }
	}
	values := make([]string, len(sets))
	for i, set := range sets {
		values[i] = row(set)
	}
	return "INSERT INTO " + s.t.Name + " (" + strings.Join(cols, ", ") + ") VALUES " + strings.Join(values, ", ")
}

// InsertID publishes one row, bound as Insert binds a row, and hands back the id the database
// gave it: by RETURNING where the database has it (Caps.Returning), otherwise by the driver's
// LastInsertId, which MySQL and MariaDB report for the row of a one-row INSERT. Where the id is
// not generated the row carries it, and InsertID is Insert's.
func (s SQL) InsertID(own []string) string {
	if s.c.Returning && s.t.IDGenerated {
		return s.Insert(1, own) + " RETURNING " + s.t.ID
	}
	return s.Insert(1, own)
}

func dotted(alias string) string {
	if alias == "" {
		return ""
	}
	return alias + "."
}

// and joins cond to the predicate due, which is "1 = 1" where the table has no column that
// makes a row due.
func and(due, cond string) string {
	if due == "1 = 1" {
		return cond
	}
	return due + " AND " + cond
}
