package sqltext

import (
	"strconv"
	"strings"

	"github.com/sqlinbox/inbox/dialect"
)

// GroupsTable is the table of FIFO group holds (inbox.Table.GroupKey): one row per job table,
// queue and group key that a claim has held (or an operator paused), naming the row that took
// it (holder_id) and the token that claim wrote (holder_token), and the time the group was
// paused (paused_at, NULL while it is not). A group is held while its holder's lease runs
// ahead, and only then (or, where its groups stay blocked, while its holder is dead): the hold
// has no expiry of its own, so every extension, settlement and expiry of the holder's lease
// extends, releases or ends the group's hold in the same statement, without writing to this
// table. A claim takes a hold by a compare-and-set of the row it read (TakeHeld) or, where
// there was none, by an INSERT (TakeFree).
const GroupsTable = "inbox_groups"

// CreateGroups is the statement that creates GroupsTable on c's database, if it is not there.
// Its primary key fits MySQL's and MariaDB's 3,072-byte key in utf8mb4, and its names and keys
// compare byte for byte (KeyText): "A" and "a" are two groups.
func CreateGroups(c *dialect.Caps) string {
	name, text, token := "TEXT", "TEXT", timeType(c)
	if c.Catalog == dialect.MySQLCatalog {
		name, text = KeyText(c, 64), KeyText(c, 191)
	}
	return "CREATE TABLE IF NOT EXISTS " + GroupsTable + " (table_name " + name + " NOT NULL, queue " + text +
		" NOT NULL, group_key " + text + " NOT NULL, holder_id BIGINT NOT NULL, holder_token " + token +
		" NOT NULL, paused_at " + token + " NULL, PRIMARY KEY (table_name, queue, group_key))"
}

// AddGroupsPaused is the statement that adds the paused_at column to a GroupsTable created
// before groups could be paused.
func AddGroupsPaused(c *dialect.Caps) string {
	return "ALTER TABLE " + GroupsTable + " ADD paused_at " + timeType(c) + " NULL"
}

// timeType is the type of a token on c's database: a timestamp to the microsecond.
func timeType(c *dialect.Caps) string {
	switch c.Catalog {
	case dialect.MySQLCatalog:
		return "DATETIME(6)"
	case dialect.SQLiteCatalog:
		return "TEXT"
	}
	return "TIMESTAMPTZ"
}

// CheckGroups reads nothing from GroupsTable and fails where it or one of its columns is
// missing.
func CheckGroups() Statement {
	return Statement{SQL: "SELECT table_name, queue, group_key, holder_id, holder_token, paused_at FROM " + GroupsTable + " WHERE 1 = 0"}
}

// HasGroups reports whether the table has a FIFO group column.
func (s SQL) HasGroups() bool { return s.t.GroupKey != "" }

// groupFree is the predicate, after the claim's Due and free predicates, of a row a claim may
// take in a table with groups: of no group, or the head of its group (isGroupHead) whose group
// is neither held nor paused (groupHeld). Being in the claim's WHERE, it is decided before the LIMIT. It
// binds the table's name, the queue, then now.
func (l Lease) groupFree(p *Params) string {
	g := l.s.t.Name + "." + l.s.t.GroupKey
	return "(" + g + " IS NULL OR (" + l.s.isGroupHead() + " AND NOT EXISTS (" + l.groupHeld(p, g) + ")))"
}

// isGroupHead is the predicate of a row that heads its group: its id is the lowest of its queue
// and group neither processed, dead nor cancelled, whatever its due time or hold (a head waiting
// for its retry blocks its group), read as the first entry of the group index
// (schema.GroupIndex) by ORDER BY id LIMIT 1, which MariaDB reads as one entry where it would
// scan the group's pending rows for a MIN. Every form's claim over groups takes only heads.
func (s SQL) isGroupHead() string {
	t := s.t
	head := []string{"inbox_head." + t.GroupKey + " = " + t.Name + "." + t.GroupKey}
	if t.Queue != "" {
		head = append(head, "inbox_head."+t.Queue+" = "+t.Name+"."+t.Queue)
	}
	for _, c := range []string{t.ProcessedAt, t.DeadAt, t.CancelledAt} {
		if c != "" {
			head = append(head, "inbox_head."+c+" IS NULL")
		}
	}
	return t.Name + "." + t.ID + " = (SELECT inbox_head." + t.ID + " FROM " + t.Name + " inbox_head WHERE " + strings.Join(head, " AND ") +
		" ORDER BY inbox_head." + t.ID + " LIMIT 1)"
}

// groupHeld is the query of group g's hold (g an expression) where it keeps the group from a
// claim: the group is paused, or its holder's lease runs ahead of now, or, where the builder
// keeps groups blocked (StayBlocked), its holder is dead. The holder is read by a scalar
// subquery on its primary key, once per hold of the table and queue, so that the check costs
// in groups, not rows: with a join to the holders instead, Postgres hashed the held groups
// once per claim by a merge join that read the whole primary key (10,000 rows: 6 to 11 ms a
// claim, against 0.7 to 1.6 ms so). It binds the table's name, the queue, then now.
func (l Lease) groupHeld(p *Params, g string) string {
	t := l.s.t
	key := l.holdKey(p, "inbox_hold", g)
	busy := "inbox_holder." + l.col + " >= " + p.Next(ArgNow)
	if l.stayBlocked {
		busy += " OR inbox_holder." + t.DeadAt + " IS NOT NULL"
	}
	holder := "(SELECT " + busy + " FROM " + t.Name + " inbox_holder WHERE inbox_holder." + t.ID + " = inbox_hold.holder_id)"
	return "SELECT 1 FROM " + GroupsTable + " inbox_hold WHERE " + key + " AND (inbox_hold.paused_at IS NOT NULL OR " + holder + ")"
}

// pickWindow is how many of the first rows in claim order that no lease holds the pick of a
// claim of n rows over groups reads (windowPick): enough that a claim finds its rows there while
// few groups are held, few enough that one that does not costs little.
func pickWindow(n int) int { return 4*n + 32 }

// windowPick is Claim's pick over groups on Postgres (ClaimsInOne) in the usual order: the id
// and the group of the first n rows in claim order that may be claimed (groupFree) among the
// first pickWindow(n) rows in claim order that are due and free. The window bounds what a claim
// reads where fewer than n rows may be claimed (every free head's group held): without it the
// pick read the whole backlog, a probe of its group's head per row. A row that may be claimed
// outside the window comes after every row in it, so a pick of n rows is the first n; a short
// one is followed by ClaimHeads, which reads past the window. The window's row is read again,
// locked (SKIP LOCKED), with the Due and free predicates, which the lock checks again on a row
// changed since the statement's snapshot. unflushed turns the statement's durability off. It
// binds Due's arguments and now for the window, the same for the row, then groupFree's.
func (l Lease) windowPick(p *Params, n int, unflushed string) string {
	s, t := l.s, l.s.t
	cols := l.pickColumns()
	// Qualified, since the pick joins the table to a window of its own columns.
	window := "(SELECT " + cols + " FROM " + t.Name + " WHERE " + s.Due(p, t.Name) + " AND " + l.free(p.Next(ArgNow)) + " ORDER BY " + s.Order(t.Name) +
		" LIMIT " + strconv.Itoa(pickWindow(n)) + ") inbox_window"
	return "SELECT " + t.Name + "." + t.ID + ", " + t.Name + "." + t.GroupKey + " FROM " + window + " JOIN " + t.Name + " ON " + t.Name + "." + t.ID + " = inbox_window." + t.ID +
		" WHERE " + s.Due(p, t.Name) + " AND " + l.free(p.Next(ArgNow)) + unflushed + l.andGroupFree(p) + " ORDER BY " + s.Order("inbox_window") +
		" LIMIT " + strconv.Itoa(n) + " FOR UPDATE OF " + t.Name + " SKIP LOCKED"
}

// pickColumns is the table's id, group, priority and retry_after (where it has them), qualified
// by its name: what the picks over groups read to order the rows they pick.
func (l Lease) pickColumns() string {
	t := l.s.t
	cols := []string{t.ID, t.GroupKey}
	for _, c := range []string{t.Priority, t.RetryAfter} {
		if c != "" {
			cols = append(cols, c)
		}
	}
	return t.Name + "." + strings.Join(cols, ", "+t.Name+".")
}

// headsPick is ClaimHeads's pick: the CTEs that end in inbox_lease_pick, the id and the group of
// the first n rows in claim order that may be claimed, read among the heads of every group
// (inbox_lease_heads, a skip scan of the group index at a probe per group, whatever the
// backlog) and the rows of no group (inbox_lease_loose), each locked (SKIP LOCKED) and checked
// as Claim's pick checks its rows. unflushed turns the statement's durability off. It binds the
// heads' queue (groupHeads), Due's arguments and now, and groupFree's, then Due's and now again.
func (l Lease) headsPick(p *Params, n int, unflushed string) string {
	s, t := l.s, l.s.t
	limit := strconv.Itoa(n)
	cols := l.pickColumns()
	found := l.groupHeads(p)
	heads := "SELECT " + cols + " FROM " + t.Name + " WHERE " + t.Name + "." + t.ID + " IN (SELECT inbox_id FROM inbox_lease_heads) AND " + s.Due(p, t.Name) +
		" AND " + l.free(p.Next(ArgNow)) + unflushed + l.andGroupFree(p) + " ORDER BY " + s.Order(t.Name) + " LIMIT " + limit + l.skipLocked()
	loose := "SELECT " + cols + " FROM " + t.Name + " WHERE " + t.Name + "." + t.GroupKey + " IS NULL AND " + s.Due(p, t.Name) + " AND " + l.free(p.Next(ArgNow)) +
		" ORDER BY " + s.Order(t.Name) + " LIMIT " + limit + l.skipLocked()
	return found + ", inbox_lease_free AS (" + heads + "), inbox_lease_loose AS (" + loose + "), inbox_lease_pick AS (SELECT inbox_any." + t.ID + ", inbox_any." + t.GroupKey +
		" FROM (SELECT * FROM inbox_lease_free UNION ALL SELECT * FROM inbox_lease_loose) inbox_any ORDER BY " + s.Order("inbox_any") + " LIMIT " + limit + ")"
}

// groupHeads is headsPick's CTE inbox_lease_heads: the key and the id of each group's head
// (isGroupHead's), inbox_key and inbox_id, read by a skip scan of the group index
// (schema.GroupIndex): its first pending entry, then, group after group, the first pending entry
// of a greater key. It binds the queue twice, where the table has a queue column.
func (l Lease) groupHeads(p *Params) string {
	t := l.s.t
	g, id := t.Name+"."+t.GroupKey, t.Name+"."+t.ID
	pending := func() string {
		var c []string
		if t.Queue != "" {
			c = append(c, t.Name+"."+t.Queue+" = "+p.Next(ArgQueue))
		}
		for _, col := range []string{t.ProcessedAt, t.DeadAt, t.CancelledAt} {
			if col != "" {
				c = append(c, t.Name+"."+col+" IS NULL")
			}
		}
		return strings.Join(append(c, ""), " AND ")
	}
	order := " ORDER BY " + g + ", " + id + " LIMIT 1"
	seed := "SELECT " + g + " AS inbox_key, " + id + " AS inbox_id FROM " + t.Name + " WHERE " + pending() + g + " IS NOT NULL" + order
	step := "SELECT inbox_next.inbox_key, inbox_next.inbox_id FROM inbox_lease_heads, LATERAL (SELECT " + g + " AS inbox_key, " + id + " AS inbox_id FROM " + t.Name +
		" WHERE " + pending() + g + " > inbox_lease_heads.inbox_key" + order + ") inbox_next"
	return "inbox_lease_heads AS ((" + seed + ") UNION ALL " + step + ")"
}

// StayBlocked returns the builder whose claims keep a group blocked while its hold names a dead
// row (dead_at set): the head that died in work stays its group's holder, until an operator
// requeues it, deletes it or unblocks the group (Admin.UnblockGroup). It needs a table with
// groups and a dead_at column (the form refuses the option at Open without them).
func (l Lease) StayBlocked() Lease {
	l.stayBlocked = true
	return l
}

// RoundRobin returns the builder whose claims spread across groups: a claim orders the rows it
// may take by priority (where the table has the column), then by their group's last hold, its
// holder's token (the expiry the last claim of the group wrote, so the group claimed longest ago
// first; a row of no group, and a group never held, have none and come first), then by
// retry_after and id. It reads every due row of the queue that a claim may take, to sort them,
// where the usual order stops at the first n in the claim index. It changes nothing in a table
// without groups.
func (l Lease) RoundRobin() Lease {
	l.roundRobin = true
	return l
}

// claimOrder is the pick's ORDER BY: the claim order (SQL.Order), or, where the builder spreads
// claims across groups (RoundRobin), that order with the group's last hold after the priority.
// The round robin's key binds the table's name, then the queue.
func (l Lease) claimOrder(p *Params) string {
	s, t := l.s, l.s.t
	order := s.Order("")
	if !l.roundRobin || !s.HasGroups() {
		return order
	}
	last := "(SELECT inbox_last.holder_token FROM " + GroupsTable + " inbox_last WHERE " + l.holdKey(p, "inbox_last", t.Name+"."+t.GroupKey) + ")"
	if s.c.NullsLast {
		last += " NULLS FIRST"
	}
	if t.Priority == "" {
		return last + ", " + order
	}
	return t.Priority + ", " + last + ", " + strings.TrimPrefix(order, t.Priority+", ")
}

// holdsItsGroup is the predicate of a row of the table that holds its group, or is of no group:
// its group's hold names it. It binds the table's name, then the queue.
func (l Lease) holdsItsGroup(p *Params) string {
	t := l.s.t
	g := t.Name + "." + t.GroupKey
	return "(" + g + " IS NULL OR EXISTS (SELECT 1 FROM " + GroupsTable + " inbox_hold WHERE " + l.holdKey(p, "inbox_hold", g) +
		" AND inbox_hold.holder_id = " + t.Name + "." + t.ID + "))"
}

// holdKey is the predicate of alias's hold of group g (an expression) of this table and queue.
// It binds the table's name, then the queue.
func (l Lease) holdKey(p *Params, alias, g string) string {
	return alias + ".table_name = " + p.Next(ArgTable) + " AND " + alias + ".queue = " + p.Next(ArgQueue) + " AND " + alias + ".group_key = " + g
}

// groupRead is the select list's tail, after Columns, of a pick where the database has no UPDATE
// … FROM: the row's group, then its group's hold as the pick's statement read it, its holder
// and its token (NULL where the group has no hold row), for TakeHeld to compare. It binds the
// table's name and the queue twice.
func (l Lease) groupRead(p *Params) string {
	t := l.s.t
	g := t.Name + "." + t.GroupKey
	hold := func(col string) string {
		return "(SELECT inbox_hold." + col + " FROM " + GroupsTable + " inbox_hold WHERE " + l.holdKey(p, "inbox_hold", g) + ")"
	}
	return ", " + g + ", " + hold("holder_id") + ", " + hold("holder_token")
}

// TakeHeld takes the hold of a group that has a hold row for the claimed row, where the hold is
// still what the pick read (its holder and token) and the group is not paused: the
// compare-and-set of a claim where the database has no UPDATE … FROM. One row changed: the
// claim holds the group; none: another claim took it since the pick read it, or a pause
// committed since, and the row is not claimed. The pick read the holder's lease
// in the same statement as the hold, so a hold unchanged since is free. It binds the row's id,
// the claim's token, the table's name, the queue, the group, the holder read, then the token
// read. Empty where the table has no group column.
func (l Lease) TakeHeld() Statement {
	if !l.s.HasGroups() {
		return Statement{}
	}
	p := l.s.Params()
	set := "UPDATE " + GroupsTable + " SET holder_id = " + p.Next(ArgID) + ", holder_token = " + p.Next(ArgLease)
	where := "table_name = " + p.Next(ArgTable) + " AND queue = " + p.Next(ArgQueue) + " AND group_key = " + p.Next(ArgGroup) +
		" AND holder_id = " + p.Next(ArgHolder) + " AND holder_token = " + p.Next(ArgToken) + " AND paused_at IS NULL"
	return p.statement(set + " WHERE " + where)
}

// TakeFree takes the hold of a group that had no hold row when the pick read it: an INSERT, which
// fails with a duplicate key (MySQL's and MariaDB's 1062 on the PRIMARY key) where another claim
// inserted one since, or on Postgres (where the claim takes groups this way only with limits or
// rates, !ClaimsInOne) changes no row (ON CONFLICT DO NOTHING: a failed statement would end the
// transaction); the row is then not claimed. It binds the table's name, the queue, the
// group, the row's id, then the claim's token. Empty where the table has no group column.
func (l Lease) TakeFree() Statement {
	if !l.s.HasGroups() {
		return Statement{}
	}
	p := l.s.Params()
	insert := "INSERT INTO " + GroupsTable + " (table_name, queue, group_key, holder_id, holder_token) VALUES (" +
		p.Next(ArgTable) + ", " + p.Next(ArgQueue) + ", " + p.Next(ArgGroup) + ", " + p.Next(ArgID) + ", " + p.Next(ArgLease) + ")"
	if l.s.c.Catalog == dialect.PostgresCatalog {
		insert += " ON CONFLICT DO NOTHING"
	}
	return p.statement(insert)
}

// takeInOne is the claim's CTE, after inbox_lease_pick, that takes the hold of each picked row's
// group where the database has UPDATE … FROM (Postgres): an INSERT of a hold per group, in group
// order, whose ON CONFLICT takes an existing hold only where the latest hold (which the conflict
// locks and reads) is still the one the statement's snapshot shows, and the snapshot shows its
// holder's lease run out or released (and, where groups stay blocked, its holder alive), and the
// latest hold is not paused. A hold another claim took after the snapshot differs
// from it, so a commit the snapshot does not see never hands a group out twice; a hold that one
// released after the snapshot looks held, and waits for the next claim. It returns the ids of
// the rows whose group it took. It binds the table's name, the queue, the claim's token, then
// now.
func (l Lease) takeInOne(p *Params) string {
	t := l.s.t
	pick := "inbox_lease_pick."
	insert := "INSERT INTO " + GroupsTable + " AS inbox_hold (table_name, queue, group_key, holder_id, holder_token) SELECT " +
		p.Next(ArgTable) + ", " + p.Next(ArgQueue) + ", " + pick + t.GroupKey + ", " + pick + t.ID + ", CAST(" + p.Next(ArgLease) + " AS " + timeType(l.s.c) + ")" +
		" FROM inbox_lease_pick WHERE " + pick + t.GroupKey + " IS NOT NULL ORDER BY " + pick + t.GroupKey
	// Both reads are scalar subqueries on a primary key, so that each costs a probe per group
	// taken: as EXISTS and NOT EXISTS, Postgres hashed them once per claim, by a scan of every
	// hold and of the whole table for the rows in work.
	same := "(SELECT inbox_seen.holder_id = inbox_hold.holder_id AND inbox_seen.holder_token = inbox_hold.holder_token FROM " + GroupsTable +
		" inbox_seen WHERE inbox_seen.table_name = inbox_hold.table_name AND inbox_seen.queue = inbox_hold.queue AND inbox_seen.group_key = inbox_hold.group_key)"
	busy := t.Name + "." + l.col + " >= " + p.Next(ArgNow)
	if l.stayBlocked {
		busy += " OR " + t.Name + "." + t.DeadAt + " IS NOT NULL"
	}
	busy = "(SELECT " + busy + " FROM " + t.Name + " WHERE " + t.Name + "." + t.ID + " = inbox_hold.holder_id) IS NOT TRUE"
	return "inbox_group_take AS (" + insert + " ON CONFLICT (table_name, queue, group_key) DO UPDATE SET holder_id = EXCLUDED.holder_id, holder_token = EXCLUDED.holder_token" +
		" WHERE " + same + " AND " + busy + " AND inbox_hold.paused_at IS NULL RETURNING inbox_hold.holder_id)"
}

// DeadHolder reads the dead row that holds a group (its hold names a row whose dead_at is set),
// where the group's consumers keep groups blocked (Lease.StayBlocked): no row where none does.
// It binds the table's name, the queue, then the group. Empty where the table has no group or
// dead_at column.
func (a Admin) DeadHolder() Statement {
	t := a.s.t
	if t.GroupKey == "" || t.DeadAt == "" {
		return Statement{}
	}
	p := a.s.Params()
	return p.statement("SELECT inbox_hold.holder_id FROM " + GroupsTable + " inbox_hold JOIN " + t.Name + " inbox_holder ON inbox_holder." + t.ID + " = inbox_hold.holder_id AND inbox_holder." + t.DeadAt + " IS NOT NULL" +
		" WHERE " + groupKeyIs(p, "inbox_hold"))
}

// UnblockGroup has a group's hold name no row (holder 0) where it still names the dead row
// DeadHolder read: the group then goes on with its next pending row, and the dead row stays
// dead, to be inspected, requeued (it then rejoins its group at its id's place) or purged. One
// row changed: the group is unblocked; none: the hold changed since (a requeue ran the row, or
// a claim took the group). It binds the table's name, the queue, the group, then the dead row's
// id. Empty where DeadHolder is.
func (a Admin) UnblockGroup() Statement {
	t := a.s.t
	if t.GroupKey == "" || t.DeadAt == "" {
		return Statement{}
	}
	p := a.s.Params()
	return p.statement("UPDATE " + GroupsTable + " SET holder_id = 0 WHERE " + groupKeyIs(p, GroupsTable) + " AND holder_id = " + p.Next(ArgID) +
		" AND EXISTS (SELECT 1 FROM " + t.Name + " inbox_holder WHERE inbox_holder." + t.ID + " = " + GroupsTable + ".holder_id AND inbox_holder." + t.DeadAt + " IS NOT NULL)")
}

// PauseGroup pauses a group: it stamps its hold's paused_at with the database's clock where it
// is not paused yet, or, for a group no claim has held, writes a hold that names no row (holder
// 0) and is paused. From its commit no claim takes the group's head (groupFree), and a claim
// whose pick read the group before the commit does not take it either (TakeHeld and the take of
// Postgres's claim ask that the hold they change is not paused); a row of the group in work
// finishes. It binds the table's name, the queue, then the group.
func (a Admin) PauseGroup() Statement {
	p := a.s.Params()
	now := databaseNow(a.s.c)
	insert := "INSERT INTO " + GroupsTable + " (table_name, queue, group_key, holder_id, holder_token, paused_at) VALUES (" +
		p.Next(ArgTable) + ", " + p.Next(ArgQueue) + ", " + p.Next(ArgGroup) + ", 0, " + now + ", " + now + ")"
	if a.s.c.Catalog == dialect.MySQLCatalog {
		return p.statement(insert + " ON DUPLICATE KEY UPDATE paused_at = COALESCE(paused_at, " + now + ")")
	}
	return p.statement(insert + " ON CONFLICT (table_name, queue, group_key) DO UPDATE SET paused_at = COALESCE(" + GroupsTable + ".paused_at, " + now + ")")
}

// ResumeGroup resumes a group PauseGroup paused: from its commit claims take its head again. A
// group that is not paused is left as it is. It binds the table's name, the queue, then the
// group.
func (a Admin) ResumeGroup() Statement {
	p := a.s.Params()
	return p.statement("UPDATE " + GroupsTable + " SET paused_at = NULL WHERE " + groupKeyIs(p, GroupsTable))
}

// groupKeyIs is the predicate of alias's hold of one group, named by its arguments: it binds the
// table's name, the queue, then the group.
func groupKeyIs(p *Params, alias string) string {
	return alias + ".table_name = " + p.Next(ArgTable) + " AND " + alias + ".queue = " + p.Next(ArgQueue) + " AND " + alias + ".group_key = " + p.Next(ArgGroup)
}
