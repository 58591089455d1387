package sqltext

import (
	"strings"

	"github.com/sqlinbox/inbox/dialect"
)

// GroupsTable is the table of FIFO group holds (inbox.Table.GroupKey): one row per job table,
// queue and group key that a claim has held, naming the row that took it (holder_id) and the
// token that claim wrote (holder_token). A group is held while its holder's lease runs ahead,
// and only then: the hold has no expiry of its own, so every extension, settlement and expiry of
// the holder's lease extends, releases or ends the group's hold in the same statement, without
// writing to this table. A claim takes a hold by a compare-and-set of the row it read
// (TakeHeld) or, where there was none, by an INSERT (TakeFree).
const GroupsTable = "inbox_groups"

// CreateGroups is the statement that creates GroupsTable on c's database, if it is not there.
// Its primary key fits MySQL's and MariaDB's 3,072-byte key in utf8mb4.
func CreateGroups(c *dialect.Caps) string {
	name, text, token := "TEXT", "TEXT", timeType(c)
	if c.Catalog == dialect.MySQLCatalog {
		name, text = "VARCHAR(64)", "VARCHAR(191)"
	}
	return "CREATE TABLE IF NOT EXISTS " + GroupsTable + " (table_name " + name + " NOT NULL, queue " + text +
		" NOT NULL, group_key " + text + " NOT NULL, holder_id BIGINT NOT NULL, holder_token " + token +
		" NOT NULL, PRIMARY KEY (table_name, queue, group_key))"
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
	return Statement{SQL: "SELECT table_name, queue, group_key, holder_id, holder_token FROM " + GroupsTable + " WHERE 1 = 0"}
}

// HasGroups reports whether the table has a FIFO group column.
func (s SQL) HasGroups() bool { return s.t.GroupKey != "" }

// groupFree is the predicate, after the claim's Due and free predicates, of a row a claim may
// take in a table with groups: of no group, or the head of its group (the lowest id of its queue
// and group neither processed, dead nor cancelled, whatever its due time or lease: the first
// entry of the group index, schema.GroupIndex, read by ORDER BY id LIMIT 1, which MariaDB reads
// as one entry where it would scan the group's pending rows for a MIN) whose
// group no row holds (the hold's holder has a lease running ahead of now). Being in the claim's
// WHERE, it is decided before the LIMIT. It binds the table's name, the queue, then now.
func (l Lease) groupFree(p *Params) string {
	t := l.s.t
	g := t.Name + "." + t.GroupKey
	head := []string{"inbox_head." + t.GroupKey + " = " + g}
	if t.Queue != "" {
		head = append(head, "inbox_head."+t.Queue+" = "+t.Name+"."+t.Queue)
	}
	for _, c := range []string{t.ProcessedAt, t.DeadAt, t.CancelledAt} {
		if c != "" {
			head = append(head, "inbox_head."+c+" IS NULL")
		}
	}
	held := "SELECT 1 FROM " + GroupsTable + " inbox_hold JOIN " + t.Name + " inbox_holder ON inbox_holder." + t.ID + " = inbox_hold.holder_id" +
		" WHERE " + l.holdKey(p, "inbox_hold", g) + " AND inbox_holder." + l.col + " >= " + p.Next(ArgNow)
	return "(" + g + " IS NULL OR (" + t.Name + "." + t.ID + " = (SELECT inbox_head." + t.ID + " FROM " + t.Name + " inbox_head WHERE " + strings.Join(head, " AND ") +
		" ORDER BY inbox_head." + t.ID + " LIMIT 1) AND NOT EXISTS (" + held + ")))"
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
// still what the pick read (its holder and token): the compare-and-set of a claim where the
// database has no UPDATE … FROM. One row changed: the claim holds the group; none: another claim
// took it since the pick read it, and the row is not claimed. The pick read the holder's lease
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
		" AND holder_id = " + p.Next(ArgHolder) + " AND holder_token = " + p.Next(ArgToken)
	return p.statement(set + " WHERE " + where)
}

// TakeFree takes the hold of a group that had no hold row when the pick read it: an INSERT, which
// fails with a duplicate key (MySQL's and MariaDB's 1062 on the PRIMARY key) where another claim
// inserted one since; the row is then not claimed. It binds the table's name, the queue, the
// group, the row's id, then the claim's token. Empty where the table has no group column.
func (l Lease) TakeFree() Statement {
	if !l.s.HasGroups() {
		return Statement{}
	}
	p := l.s.Params()
	return p.statement("INSERT INTO " + GroupsTable + " (table_name, queue, group_key, holder_id, holder_token) VALUES (" +
		p.Next(ArgTable) + ", " + p.Next(ArgQueue) + ", " + p.Next(ArgGroup) + ", " + p.Next(ArgID) + ", " + p.Next(ArgLease) + ")")
}

// takeInOne is the claim's CTE, after inbox_lease_pick, that takes the hold of each picked row's
// group where the database has UPDATE … FROM (Postgres): an INSERT of a hold per group, in group
// order, whose ON CONFLICT takes an existing hold only where the latest hold (which the conflict
// locks and reads) is still the one the statement's snapshot shows, and the snapshot shows its
// holder's lease run out or released. A hold another claim took after the snapshot differs
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
	same := "SELECT 1 FROM " + GroupsTable + " inbox_seen WHERE inbox_seen.table_name = inbox_hold.table_name AND inbox_seen.queue = inbox_hold.queue" +
		" AND inbox_seen.group_key = inbox_hold.group_key AND inbox_seen.holder_id = inbox_hold.holder_id AND inbox_seen.holder_token = inbox_hold.holder_token"
	busy := "SELECT 1 FROM " + t.Name + " WHERE " + t.Name + "." + t.ID + " = inbox_hold.holder_id AND " + t.Name + "." + l.col + " >= " + p.Next(ArgNow)
	return "inbox_group_take AS (" + insert + " ON CONFLICT (table_name, queue, group_key) DO UPDATE SET holder_id = EXCLUDED.holder_id, holder_token = EXCLUDED.holder_token" +
		" WHERE EXISTS (" + same + ") AND NOT EXISTS (" + busy + ") RETURNING inbox_hold.holder_id)"
}
