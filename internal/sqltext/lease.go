package sqltext

import (
	"strconv"

	"github.com/sqlinbox/inbox/outcome"
)

// Lease builds the lease form's statements: a claim writes an expiry (the token) into the lease
// column and commits; every later statement of the holder is guarded by that token
// (ByIDAndToken, ByIDsAndToken, ByPairs).
//
// Where the database sets durability per statement (dialect.Caps.UnflushedCommit: Postgres),
// the claim and the extension commit without waiting for the disk: a server crash may forget
// them, and the row is then claimable again (a lost claim) or returns when the older lease runs
// out (a lost extension), a second delivery at worst, which at-least-once delivery allows. The
// settlements wait for it, unless the builder is Unflushed.
type Lease struct {
	s         SQL
	col       string
	unflushed bool // the settlements too carry Caps.UnflushedCommit
	// stayBlocked and roundRobin are the FIFO groups' options (StayBlocked, RoundRobin).
	stayBlocked, roundRobin bool
}

// Lease returns the lease form's statements over the table, with lease column column (quoted).
func (s SQL) Lease(column string) Lease { return Lease{s: s, col: column} }

// Unflushed returns the builder whose settlements, like its claim and extension, commit without
// waiting for the disk where the database sets durability per statement
// (dialect.Caps.UnflushedCommit); elsewhere it builds what l builds. A form settles with it only
// where losing the settlement in a server crash costs no more than a second delivery, and never
// inside the handler's transaction, whose writes are the user's.
func (l Lease) Unflushed() Lease {
	l.unflushed = true
	return l
}

// Claim is the claim of at most n due rows no lease holds, in claim order.
//
// Where an UPDATE joins a WITH query (dialect.Caps.UpdateFrom) it is the whole claim, one
// statement that picks the rows (SKIP LOCKED), stamps them with the token, counts their
// attempt, and returns the Columns in claim order (the outer SELECT restores the order, which
// UPDATE … RETURNING does not keep). Its LIMIT is n, in its text: Postgres estimates a bound
// LIMIT at a tenth of the table, and with that estimate the generic plan of the prepared claim
// costs more than a custom one, so the server would plan every execution again; with the
// limit in the text it plans the statement once and keeps that plan, at the price of one
// prepared statement per claim size. It binds Due's arguments, now (a lease that ran out is
// free), then the token.
//
// Elsewhere it is the claim's pick, which Stamp follows in the same transaction: a SELECT of
// the Columns, locking them (SKIP LOCKED) where the database has row locks; with one writer
// (SQLite) no other claim can take the rows between the two. It binds Due's arguments, now,
// then the limit, and n is not used: MySQL and MariaDB optimise a prepared statement at every
// execution anyway, and SQLite's claim runs by its text. (On SQLite one UPDATE … WHERE id IN
// (SELECT …) RETURNING would do both, but SQLite builds temporary tables for the subquery and
// the RETURNING at every run, which cost a single-row claim more than twice what the SELECT and
// the UPDATE by id do.)
//
// Where the table has groups (Table.GroupKey) a row is claimed only where groupFree says it may be,
// a predicate of the pick, before its LIMIT. Where the database has UPDATE … FROM the claim
// also takes each picked row's group (takeInOne) and stamps only the rows of no group and those
// whose group it took; in the usual order its pick reads only a window of the first rows in
// claim order (windowPick), so that a claim short of rows does not read the whole backlog, and
// the form follows a short claim with ClaimHeads. It binds, after free's now (in the usual order:
// after Due's arguments and now for the window, then again for the row), the groups' table
// name, the queue and now (groupFree), the table name and the queue again where it spreads
// claims across groups (claimOrder), then the table name, the queue, the token and now (the
// take), then the token.
// Elsewhere (and on Postgres where the table has limits or rates: !ClaimsInOne) the pick
// reads, after the Columns, each row's group, its hold's holder and token
// (groupRead: the table name and the queue twice, bound before Due's arguments), and the form
// takes each group by TakeHeld or TakeFree before Stamp stamps the rows whose group it took; the
// pick binds groupFree's arguments (and claimOrder's) after now and before the limit.
//
// Where the description names a limits table (Table.Limits) the claim is the pick and Stamp on
// every database, Postgres included (ClaimsInOne): the pick skips rows one of whose limits is full
// (limitFree, before its LIMIT; it binds the table's name, the queue where the table has a
// queue column, then now, after groupFree's), reads each row's limit key after the Columns
// (limitRead), and the form takes a slot of each of a row's limits (ReadSlots, TakeSlot,
// NewSlot) before Stamp stamps the rows that took all of theirs.
//
// Where the description names a rates table, Claim is the pick on every database (ClaimsInOne),
// with the rates' predicate (Rates.free) after groupFree's, binding its arguments before
// claimOrder's and the limit; the form takes a slot of each rate a picked row needs
// (Rates.FreeSlots, TakeSlot) before Stamp.
func (l Lease) Claim(n int) Statement {
	s, t := l.s, l.s.t
	p := s.Params()
	if !l.ClaimsInOne() {
		cols := s.Columns("")
		if s.HasGroups() {
			cols += l.groupRead(p)
		}
		cols += l.limitRead()
		due := s.Due(p, "")
		where := due + " AND " + l.free(p.Next(ArgNow)) + l.andGroupFree(p) + l.andLimitFree(p) + l.andRatesFree(p)
		return p.statement("SELECT " + cols + " FROM " + t.Name + " WHERE " + where +
			" ORDER BY " + l.claimOrder(p) + " LIMIT " + p.Next(ArgLimit) + l.skipLocked())
	}
	unflushed := ""
	if cond := l.s.unflushedIf(true); cond != "" {
		unflushed = " AND " + cond
	}
	var pick string
	if s.HasGroups() && !l.roundRobin {
		pick = l.windowPick(p, n, unflushed)
	} else {
		pick = "SELECT " + t.ID
		if s.HasGroups() {
			pick += ", " + t.Name + "." + t.GroupKey
		}
		pick += " FROM " + t.Name + " WHERE " + s.Due(p, "") + " AND " + l.free(p.Next(ArgNow)) + unflushed + l.andGroupFree(p) +
			" ORDER BY " + l.claimOrder(p) + " LIMIT " + strconv.Itoa(n) + l.skipLocked()
	}
	return l.claimOf(p, "WITH inbox_lease_pick AS ("+pick+"), ")
}

// ClaimHeads is the claim of at most n rows over groups where Claim came back short, in one
// statement (Postgres: ClaimsInOne, and the table has groups and is claimed in the usual order):
// Claim's pick reads the first rows in claim order only (windowPick), and this one picks among
// every group's head and the rows of no group (headsPick); the take and the stamp are Claim's.
// It binds as Claim does, its pick binding the heads' queue, Due's arguments and now, and
// groupFree's. Empty where Claim picks among every row.
func (l Lease) ClaimHeads(n int) Statement {
	if !l.ClaimsHeads() {
		return Statement{}
	}
	p := l.s.Params()
	unflushed := ""
	if cond := l.s.unflushedIf(true); cond != "" {
		unflushed = " AND " + cond
	}
	return l.claimOf(p, "WITH RECURSIVE "+l.headsPick(p, n, unflushed)+", ")
}

// ClaimsHeads reports whether a claim that comes back short is followed by ClaimHeads: on
// Postgres (ClaimsInOne), over groups claimed in the usual order.
func (l Lease) ClaimsHeads() bool { return l.ClaimsInOne() && l.s.HasGroups() && !l.roundRobin }

// claimOf is the claim in one statement over the CTEs ctes, which end in inbox_lease_pick (the
// id, and the group where the table has groups, of each row picked): the take of the groups
// (takeInOne), the stamp, and the rows stamped in claim order.
func (l Lease) claimOf(p *Params, ctes string) Statement {
	s, t := l.s, l.s.t
	taken := ""
	if s.HasGroups() {
		ctes += l.takeInOne(p) + ", "
		taken = " AND (inbox_lease_pick." + t.GroupKey + " IS NULL OR inbox_lease_pick." + t.ID + " IN (SELECT holder_id FROM inbox_group_take))"
	}
	returning := s.Columns(t.Name)
	for _, c := range []string{t.Priority, t.RetryAfter} {
		if c != "" {
			returning += ", " + t.Name + "." + c
		}
	}
	stamp := "UPDATE " + t.Name + " SET " + l.col + " = " + p.Next(ArgLease) + attemptCounted(t, ", ") + l.claimClearsKey() +
		" FROM inbox_lease_pick WHERE " + t.Name + "." + t.ID + " = inbox_lease_pick." + t.ID + taken +
		" RETURNING " + returning
	return p.statement(ctes + "inbox_lease_claimed AS (" + stamp + ") SELECT " +
		s.Columns("") + " FROM inbox_lease_claimed ORDER BY " + s.Order(""))
}

// andGroupFree is " AND " and groupFree where the table has groups; empty otherwise.
func (l Lease) andGroupFree(p *Params) string {
	if !l.s.HasGroups() {
		return ""
	}
	return " AND " + l.groupFree(p)
}

// Stamp writes the token into the n rows a pick read, counts their attempt, and clears their unique
// key where it holds only while a row is queued (claimClearsKey): the second
// statement of a claim where the database has no UPDATE … FROM; empty where Claim stamps
// itself. It binds the token, then n ids.
func (l Lease) Stamp(n int) Statement {
	if l.ClaimsInOne() {
		return Statement{}
	}
	t, p := l.s.t, l.s.Params()
	token := p.Next(ArgLease)
	return p.statement("UPDATE " + t.Name + " SET " + l.col + " = " + token + attemptCounted(t, ", ") + l.claimClearsKey() +
		" WHERE " + t.ID + " IN (" + p.listOf(ArgID, n) + ")")
}

// Extend writes a new token into the rows g names (ByIDAndToken, or ByIDsAndToken for a
// batch) while the old one holds. It binds the new token, then g's id or ids and the old token.
func (l Lease) Extend(g Guard) Statement {
	t, p := l.s.t, l.s.Params()
	set := "UPDATE " + t.Name + " SET " + l.col + " = " + p.Next(ArgLease)
	where := l.s.whereAnd(g, p, l.col, l.s.unflushedIf(true))
	if l.s.HasGroups() {
		where += " AND " + l.holdsItsGroup(p)
	}
	return p.statement(set + where + l.andLeaseRuns(p))
}

// Settle applies an outcome of kind k to the rows g names while their lease holds, clearing it:
//
//	Ack, Drop          DELETE, or SET processed_at = ?, lease = NULL; binds the time first
//	                   where it stamps
//	Retry, none        SET lease = NULL (also a release: the claim counted the attempt)
//	RetryAfter         SET retry_after = ? (and last_error = ?), lease = NULL; binds the time
//	                   first, then the last error where the table has the column
//	Fail               SET dead_at = ? (and last_error = ?), lease = NULL, binding as
//	                   RetryAfter does
//
// then g's arguments: ByIDAndToken for a row, ByIDsAndToken for a batch, ByPairs for the rows of
// several holders at once (it returns the ids it changed). It is empty for a RetryAfter on a
// table without a retry_after column, which the form settles as a retry, and for a Fail on a
// table without a dead_at column, which it settles as a Drop. It waits for the disk unless the
// builder is Unflushed.
func (l Lease) Settle(k outcome.Kind, g Guard) Statement {
	released := l.col + " = NULL"
	return l.s.settle(k, g, settles{acked: ", " + released, stamped: ", " + released, retried: released, lease: l.col, unflushed: l.unflushed})
}

// SettleReturning is Settle over a batch's n rows (ByIDsAndToken(n)) that returns the ids it
// changed: the batch's settlement where the database has RETURNING (dialect.Caps.Returning), so
// that it tells which rows were still held. It binds as Settle does, and is empty where Settle
// is. It panics where the database has no RETURNING.
func (l Lease) SettleReturning(k outcome.Kind, n int) Statement {
	if !l.s.c.Returning {
		panic("sqltext: a settlement returning its ids needs RETURNING, which the database lacks")
	}
	settle := l.Settle(k, ByIDsAndToken(n))
	if settle.Empty() {
		return Statement{}
	}
	settle.SQL += " RETURNING " + l.s.t.ID
	return settle
}

// Held locks those of n rows whose lease still holds the token and returns their ids:
// SELECT id … WHERE id IN (…) AND lease = ? FOR UPDATE. Where the database has no RETURNING
// (MySQL, MariaDB), a batch's settlement that changed fewer rows than it names is run again, in
// a transaction, over the rows this finds. It binds n ids, then the token. It is empty where the
// database has RETURNING, whose settlements return the ids they changed (SettleReturning).
func (l Lease) Held(n int) Statement {
	if l.s.c.Returning {
		return Statement{}
	}
	t, p := l.s.t, l.s.Params()
	return p.statement("SELECT " + t.ID + " FROM " + t.Name + l.s.where(ByIDsAndToken(n), p, l.col) + " FOR UPDATE")
}

// claimClearsKey is the SET assignment, after ", ", that clears a claimed row's unique key where
// the key holds only while the row is queued (Table.UniqueWhileQueued): the claim commits at
// once, so from then on a publish of the key inserts a new row. Empty otherwise.
func (l Lease) claimClearsKey() string {
	if l.s.t.UniqueKey == "" || !l.s.t.UniqueWhileQueued {
		return ""
	}
	return ", " + l.s.t.UniqueKey + " = NULL"
}

// free is the predicate of a row no lease holds: never leased, released, or run out by now.
func (l Lease) free(now string) string {
	return "(" + l.col + " IS NULL OR " + l.col + " < " + now + ")"
}

// skipLocked is the claim's locking clause, where the database has row locks.
func (l Lease) skipLocked() string {
	if !l.s.c.SkipLocked {
		return ""
	}
	return " FOR UPDATE SKIP LOCKED"
}
