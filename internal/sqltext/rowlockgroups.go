package sqltext

import (
	"strconv"

	"github.com/sqlinbox/inbox/dialect"
)

// FIFO groups in the row lock form (inbox.Table.GroupKey). A group is held by a row lock on its
// row of GroupsTable, taken FOR UPDATE SKIP LOCKED in the claim's own transaction (LockGroup),
// so that the hold lives exactly as long as the lock on the claimed row: the settlement's
// commit, a rollback, and the end of a crashed process's session release both together. The
// claim takes only the head of a group (groupHead), so that a busy, blocked or paused group is
// passed over before the LIMIT; the group's lock, not the head's id, is what excludes a second
// row of the group in work, since ids are allocated before their rows commit. The form writes
// holder 0 and the time of the hold row's insertion in the row's holder columns, which the lease
// form's holds fill: a row lock names no holder in the table.

// ClaimSkipping is Claim over a table of FIFO groups that passes over the rows of skip ids
// (a row whose group another claim's transaction holds though the row is its group's head in
// the claim's snapshot: see the form). The row's group key follows the Columns in its select
// list. It binds Due's arguments, the table's name and the queue (groupHead), then the skipped
// ids. Only for a table with groups.
func (r RowLock) ClaimSkipping(n, skip int) Statement {
	s, p := r.s, r.s.Params()
	t := s.t
	where := s.Due(p, "") + " AND " + r.groupHead(p)
	if skip > 0 {
		where += " AND " + t.Name + "." + t.ID + " NOT IN (" + p.listOf(ArgID, skip) + ")"
	}
	return p.statement("SELECT " + s.Columns("") + ", " + t.Name + "." + t.GroupKey + " FROM " + t.Name + " WHERE " + where +
		" ORDER BY " + s.Order("") + " LIMIT " + strconv.Itoa(n) + " FOR UPDATE SKIP LOCKED")
}

// groupHead is the predicate of a row of no group, or of the head of its group (the lowest id
// of its queue and group neither processed, dead nor cancelled, whatever its due time: a head
// waiting for its retry blocks its group) whose group is not paused. It binds the table's name,
// then the queue.
func (r RowLock) groupHead(p *Params) string {
	g := r.s.t.Name + "." + r.s.t.GroupKey
	paused := "SELECT 1 FROM " + GroupsTable + " inbox_hold WHERE " + groupKeyOf(p, "inbox_hold", g) + " AND inbox_hold.paused_at IS NOT NULL"
	return "(" + g + " IS NULL OR (" + r.s.isGroupHead() + " AND NOT EXISTS (" + paused + ")))"
}

// groupKeyOf is the predicate of alias's hold of group g (an expression) of this table and
// queue. It binds the table's name, then the queue.
func groupKeyOf(p *Params, alias, g string) string {
	return alias + ".table_name = " + p.Next(ArgTable) + " AND " + alias + ".queue = " + p.Next(ArgQueue) + " AND " + alias + ".group_key = " + g
}

// LockGroup takes, in the claim's transaction, the hold of one group: its row of GroupsTable,
// locked FOR UPDATE SKIP LOCKED, read with its paused_at. No row: another transaction holds the
// group, or it has no hold row yet (GroupSeen tells which). It binds the table's name, the
// queue, then the group.
func (r RowLock) LockGroup() Statement {
	p := r.s.Params()
	return p.statement("SELECT paused_at FROM " + GroupsTable + " WHERE " + groupKeyIs(p, GroupsTable) + " FOR UPDATE SKIP LOCKED")
}

// GroupSeen reads, without a lock and so without waiting, whether a group has its row in
// GroupsTable: after LockGroup found none, one row means another transaction holds it. It binds
// the table's name, the queue, then the group.
func (r RowLock) GroupSeen() Statement {
	p := r.s.Params()
	return p.statement("SELECT 1 FROM " + GroupsTable + " WHERE " + groupKeyIs(p, GroupsTable))
}

// AddGroup inserts a group's row in GroupsTable, where it has none, in a statement of its own
// that commits at once, outside any claim's transaction: holder 0 (a row lock names no holder)
// and the database's clock as its token. On Postgres ON CONFLICT DO NOTHING, which does not
// wait for a transaction that locks the existing row; on MySQL and MariaDB a plain INSERT, whose
// duplicate key on PRIMARY means the row is there (an upsert would wait for the lock a claim
// holds on it). It binds the table's name, the queue, then the group.
func (r RowLock) AddGroup() Statement {
	p := r.s.Params()
	now := databaseNow(r.s.c)
	insert := "INSERT INTO " + GroupsTable + " (table_name, queue, group_key, holder_id, holder_token) VALUES (" +
		p.Next(ArgTable) + ", " + p.Next(ArgQueue) + ", " + p.Next(ArgGroup) + ", 0, " + now + ")"
	if r.s.c.Catalog != dialect.MySQLCatalog {
		insert += " ON CONFLICT DO NOTHING"
	}
	return p.statement(insert)
}

// PickPage is how many rows a page of Candidates reads.
const PickPage = 64

// Candidates reads, without locking, the page-th page (from 0) of PickPage rows a claim over
// a table of FIFO groups may take, in claim order: each row's id, then its group (NULL: none),
// of rows Due and of no group or the head of a group not paused, the rows in work among them.
// It is the first step of the claim where a locking read keeps the lock of every row it
// examined and passed over (MySQL and MariaDB, at read committed too, where the row is passed
// over by a subquery), which would hold back other groups' heads for as long as the claim's
// row is in work: the claim then locks the candidates one by one, each by its id (LockRow),
// then its group (LockGroup). It binds Due's arguments, the table's name, then the queue.
//
// Over a table without groups (one with concurrency limits or rates) it reads NULL for the group
// and binds Due's arguments alone. Where the description names a rates table the rows of a queue,
// kind or limit key over its rate are left out before the LIMIT (Rates.free, binding for each
// rate the table's name, the queue and now in Unix microseconds), by the read's snapshot: a
// start taken since is found by the take of the start slot, after the row's lock. A group whose
// head is over its rate is passed over whole: the head is the group's lowest id still to run,
// whatever its rates, so the group's next row is no head either.
//
// After the group it reads each row's kind and limit key (NULL where the table has no such
// column or no rates table), which tell the claim, before it locks anything, that a rate it
// has found full this claim holds the row back.
//
// The rows of fullKinds kinds and of fullKeys limit keys, those under the kind's and the key's
// limits the claim found full (a full limit is only found by a slot refused: a row lock is not
// to be read), are left out before the LIMIT, binding after the rest the kinds' names
// (ArgFullKind), then the keys (ArgFullKey): however many rows of a full limit lead the queue,
// the rows behind them are read (pg-boss#871 starved them). A count is ignored where the table
// has no such column, whose rows no limit of that scope counts.
func (r RowLock) Candidates(page, fullKinds, fullKeys int) Statement {
	s, p := r.s, r.s.Params()
	t := s.t
	group, where := "NULL", s.Due(p, "")
	if s.HasGroups() {
		group, where = t.Name+"."+t.GroupKey, where+" AND "+r.groupHead(p)
	}
	rated, kind, key := r.rated(p)
	where += rated
	where += notFull(p, t, fullKinds, fullKeys)
	return p.statement("SELECT " + t.Name + "." + t.ID + ", " + group + ", " + kind + ", " + key + " FROM " + t.Name + " WHERE " + where +
		" ORDER BY " + s.Order("") + " LIMIT " + strconv.Itoa(PickPage) + " OFFSET " + strconv.Itoa(page*PickPage))
}

// rated is, where the description names a rates table, the predicate (" AND …" to follow a
// WHERE) that passes over the rows of a queue, kind or key over its rate, binding the rates'
// arguments, and the row's kind and limit key columns to read; otherwise no predicate, and NULL
// for both.
func (r RowLock) rated(p *Params) (pred, kind, key string) {
	s, t := r.s, r.s.t
	kind, key = "NULL", "NULL"
	if !s.HasRates() {
		return "", kind, key
	}
	if t.Kind != "" {
		kind = t.Name + "." + t.Kind
	}
	if t.LimitKey != "" {
		key = t.Name + "." + t.LimitKey
	}
	return " AND " + s.Rates().free(p), kind, key
}

// notFull is the predicate, " AND …" to follow a WHERE (empty where there is none), that leaves
// out the rows of fullKinds kinds and fullKeys limit keys, binding the kinds' names (ArgFullKind),
// then the keys (ArgFullKey). A count is ignored where t has no such column, whose rows no
// limit of that scope counts; a row whose kind or key is NULL is counted by no such limit.
func notFull(p *Params, t Table, fullKinds, fullKeys int) string {
	var pred string
	if fullKinds > 0 && t.Kind != "" {
		pred += " AND (" + t.Name + "." + t.Kind + " IS NULL OR " + t.Name + "." + t.Kind + " NOT IN (" + p.listOf(ArgFullKind, fullKinds) + "))"
	}
	if fullKeys > 0 && t.LimitKey != "" {
		pred += " AND (" + t.Name + "." + t.LimitKey + " IS NULL OR " + t.Name + "." + t.LimitKey + " NOT IN (" + p.listOf(ArgFullKey, fullKeys) + "))"
	}
	return pred
}

// candidateWindow is how many of the first rows in claim order a claim of n rows reads in
// WindowCandidates: past the rows in work at the front of the queue (a row lock cannot be seen
// without taking it, so they are among the candidates) and enough heads to find n free groups
// while few are held, few enough that a claim that does not costs little.
func candidateWindow(n int) int { return 4*n + PickPage }

// WindowCandidates is Candidates' first read: the same candidates (id, group, kind and limit
// key, in claim order) among the first candidateWindow(n) rows in claim order that are Due and
// pass Candidates' predicates but the group's (rates, full limits), rather than a page of
// PickPage candidates over the whole backlog. Where few rows of the backlog are heads (few
// groups, many rows each), a page of candidates reads rows until it has PickPage heads, which
// is the whole backlog, a probe of its group's head per row; the window reads what it needs
// for a claim of n rows. A candidate outside the window comes after every row in it, so a
// claim that takes n rows from the window takes the first n it would take from the pages; one
// that does not reads the pages (Candidates), which pass over what the window found busy. It
// binds Due's arguments, the rates' and the full limits' (as Candidates), then the table's name
// and the queue (groupHead). Only for a table with groups.
func (r RowLock) WindowCandidates(n, fullKinds, fullKeys int) Statement {
	s, p := r.s, r.s.Params()
	t := s.t
	where := s.Due(p, "")
	rated, kind, key := r.rated(p)
	where += rated
	where += notFull(p, t, fullKinds, fullKeys)
	window := "(SELECT " + t.Name + "." + t.ID + " FROM " + t.Name + " WHERE " + where + " ORDER BY " + s.Order("") +
		" LIMIT " + strconv.Itoa(candidateWindow(n)) + ") inbox_window"
	return p.statement("SELECT " + t.Name + "." + t.ID + ", " + t.Name + "." + t.GroupKey + ", " + kind + ", " + key + " FROM " + window +
		" JOIN " + t.Name + " ON " + t.Name + "." + t.ID + " = inbox_window." + t.ID + " WHERE " + r.groupHead(p) + " ORDER BY " + s.Order(t.Name))
}

// LockRow locks one row that Candidates read, by its id, where it is still due, passing over
// it where another transaction holds it, and reads its Columns. It binds the id, then Due's
// arguments.
func (r RowLock) LockRow() Statement {
	s, p := r.s, r.s.Params()
	t := s.t
	return p.statement("SELECT " + s.Columns("") + " FROM " + t.Name + " WHERE " + t.Name + "." + t.ID + " = " + p.Next(ArgID) + " AND " + s.Due(p, "") + " FOR UPDATE SKIP LOCKED")
}
