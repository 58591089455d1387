package sqltext

import (
	"strconv"
	"strings"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/outcome"
)

// KeyPart is one piece of an advisory key template: literal text, or a column whose value the
// key renders.
type KeyPart struct {
	// Text is literal text, written into the statement as a string literal: it must hold no
	// quote, backslash or NUL byte (the advisory form refuses a template that does).
	Text string
	// Column is a column's quoted name; a NULL value renders as empty text.
	Column string
}

// Advisory builds the advisory form's statements: a session lock on each row's key, in the
// database's family of session locks (dialect.Caps.Locks), held on a pinned connection while
// the handler runs; the settlements run on that connection and name their rows by id only.
//
// Where the database sets durability per statement (dialect.Caps.UnflushedCommit: Postgres),
// the take commits without waiting for the disk: a server crash may forget the attempt it
// counted, and the row is then delivered again with that attempt uncounted, which at-least-once
// delivery allows. The settlements wait for it, unless the builder is Unflushed.
type Advisory struct {
	s         SQL
	key       string // the key of the row in scope, as a text expression
	unflushed bool   // the settlements too carry Caps.UnflushedCommit
	// group is the name of the row in scope's group lock, as a text expression (NULL for a row
	// of no group); empty where the table has no groups (Grouped).
	group  string
	paused bool // claims pass over groups paused in GroupsTable (Grouped)
	flows  bool // candidates also return the group lock, the kind and the limit key (Flows)
}

// Advisory returns the advisory form's statements over the table, locking each row on the key
// the parts render. It panics on a database without session locks, where the form does not
// run.
func (s SQL) Advisory(key []KeyPart) Advisory {
	if s.c.Locks == dialect.NoSessionLocks {
		panic("sqltext: the advisory form's statements on a database without session locks")
	}
	pieces := make([]string, len(key))
	for i, p := range key {
		if p.Column == "" {
			pieces[i] = "'" + p.Text + "'"
			continue
		}
		pieces[i] = "COALESCE(CAST(" + p.Column + " AS " + s.c.TextType + "), '')"
	}
	if s.c.ConcatOperator {
		return Advisory{s: s, key: strings.Join(pieces, " || ")}
	}
	return Advisory{s: s, key: "CONCAT(" + strings.Join(pieces, ", ") + ")"}
}

// Unflushed returns the builder whose settlements, like its take, commit without waiting for the
// disk where the database sets durability per statement (dialect.Caps.UnflushedCommit);
// elsewhere it builds what a builds. A form settles with it only where losing the settlement in
// a server crash costs no more than a second delivery, and never inside the handler's
// transaction, whose writes are the user's.
func (a Advisory) Unflushed() Advisory {
	a.unflushed = true
	return a
}

// KeyCheck renders the key over no rows: it prepares only where the table has every column
// the key names. It binds nothing.
func (a Advisory) KeyCheck() string {
	return "SELECT " + a.key + " FROM " + a.s.t.Name + " WHERE 1 = 0"
}

// Candidates lists the id and key of due rows in claim order, passing over keys held elsewhere,
// up to a limit. It binds Due's arguments, then the limit.
//
// Where the builder takes more locks (Flows), it is CandidatesNotFull(0, 0).
//
// With hashed locks the probe (pg_try_advisory_xact_lock_shared) takes a shared lock on each key
// it looks at until the statement ends: in the WHERE of the scan it would run on every due row
// before the sort and exhaust the lock table on a large backlog, so it runs behind the sort
// (OFFSET 0 keeps the subquery apart), only on the rows pulled until the limit is met.
func (a Advisory) Candidates() Statement { return a.CandidatesNotFull(0, 0) }

// CandidatesNotFull is Candidates leaving out, before the LIMIT, the rows of fullKinds kinds and
// fullKeys limit keys, those of the limits a claim found full (a limit's slots are locks, which
// no statement reads): however many rows of a full limit lead the queue, the rows behind them
// are read. It binds, after Due's arguments and those of the groups' and rates' predicates, the
// kinds' names (ArgFullKind), the keys (ArgFullKey), then the limit. The counts are ignored
// where the builder takes no more locks than the row's (no Flows), as where the table lacks the
// column.
func (a Advisory) CandidatesNotFull(fullKinds, fullKeys int) Statement {
	s, t := a.s, a.s.t
	p := s.Params()
	due := s.Due(p, "")
	if a.group != "" {
		due = and(due, a.groupHead(p))
	}
	if a.flows && s.HasRates() {
		// Before the LIMIT, as the lease form's claim: a kind over its rate never fills the
		// candidates in the place of others.
		due = and(due, s.Rates().free(p))
	}
	if a.flows {
		due += notFull(p, t, fullKinds, fullKeys)
	}
	if s.c.Locks == dialect.HashedLocks {
		probe := "pg_try_advisory_xact_lock_shared(hashtextextended(c.inbox_key, 0))"
		if a.group != "" {
			// The group's probe first: a row of a group held elsewhere is passed over before
			// its own key is probed.
			probe = "(c.inbox_group IS NULL OR pg_try_advisory_xact_lock_shared(hashtextextended(c.inbox_group, 0))) AND " + probe
		}
		return p.statement("SELECT c." + t.ID + ", c.inbox_key" + a.flowColumns("c.") + " FROM (SELECT " + t.ID + ", " + a.key + " AS inbox_key" + a.flowSelect() + " FROM " + t.Name +
			" WHERE " + due + " ORDER BY " + s.Order("") + " OFFSET 0) c" +
			" WHERE " + probe + " LIMIT " + p.Next(ArgLimit))
	}
	free := "IS_USED_LOCK(" + a.lockName("CONCAT(DATABASE(), '.', "+a.key+")") + ") IS NULL"
	if a.group != "" {
		free = "(" + a.group + " IS NULL OR IS_USED_LOCK(" + a.lockName("CONCAT(DATABASE(), '.', "+a.group+")") + ") IS NULL) AND " + free
	}
	return p.statement("SELECT " + t.ID + ", " + a.key + a.flowSelect() + " FROM " + t.Name +
		" WHERE " + and(due, free) +
		" ORDER BY " + s.Order("") + " LIMIT " + p.Next(ArgLimit))
}

// LockFirst takes, on the session that runs it, the lock of the first due row's key in claim
// order whose lock is free, passing over keys held elsewhere, and returns that row's id and key;
// no row where every due row's key is held. It binds Due's arguments. Empty where session locks
// are named (MySQL, MariaDB): those servers promise nothing about how many rows a function in a
// WHERE is evaluated on, so a lock taken there could be one the session does not know it holds.
// Empty too where the claim takes more locks than the row's (Flows: a group's, a limit's slots),
// which it takes one by one after a candidate select.
//
// The lock is tried behind the sort (OFFSET 0 keeps the subquery apart, and the LIMIT stops the
// scan), in claim order, so the first row of a key is the one its lock is taken for, and the
// statement takes one lock or none. The statement's snapshot predates the lock: the row may
// have been settled by the key's last holder since, so Take re-checks it in a statement of its
// own.
func (a Advisory) LockFirst() Statement {
	s, t := a.s, a.s.t
	if s.c.Locks != dialect.HashedLocks || a.flows {
		return Statement{}
	}
	p := s.Params()
	return p.statement("SELECT c." + t.ID + ", c.inbox_key FROM (SELECT " + t.ID + ", " + a.key + " AS inbox_key FROM " + t.Name +
		" WHERE " + s.Due(p, "") + " ORDER BY " + s.Order("") + " OFFSET 0) c" +
		" WHERE pg_try_advisory_lock(hashtextextended(c.inbox_key, 0)) LIMIT 1")
}

// Lock tries a key's lock without waiting and answers whether it was taken (true, or 1). It
// binds the key.
func (a Advisory) Lock() Statement {
	p := a.s.Params()
	if a.s.c.Locks == dialect.HashedLocks {
		return p.statement("SELECT pg_try_advisory_lock(hashtextextended(" + p.Next(ArgKey) + ", 0))")
	}
	scoped := a.scoped(p)
	return p.statement("SELECT GET_LOCK(" + a.lockName("n") + ", 0)" + scoped)
}

// Unlock releases a key's lock and answers whether the session held it (true, or 1). It binds
// the key.
func (a Advisory) Unlock() Statement {
	p := a.s.Params()
	if a.s.c.Locks == dialect.HashedLocks {
		return p.statement("SELECT pg_advisory_unlock(hashtextextended(" + p.Next(ArgKey) + ", 0))")
	}
	scoped := a.scoped(p)
	return p.statement("SELECT RELEASE_LOCK(" + a.lockName("n") + ")" + scoped)
}

// UnlockMany releases n keys' locks, each once, and answers how many releases the server
// confirmed. It binds the n keys.
func (a Advisory) UnlockMany(n int) Statement {
	p := a.s.Params()
	rows := make([]string, n)
	if a.s.c.Locks == dialect.HashedLocks {
		for i := range rows {
			rows[i] = "(CAST(" + p.Next(ArgKey) + " AS " + a.s.c.TextType + "))"
		}
		return p.statement("SELECT COUNT(*) FROM (VALUES " + strings.Join(rows, ", ") + ") AS k(v) WHERE pg_advisory_unlock(hashtextextended(k.v, 0))")
	}
	for i := range rows {
		rows[i] = "SELECT CONCAT(DATABASE(), '.', " + p.Next(ArgKey) + ") AS n"
	}
	return p.statement("SELECT COUNT(*) FROM (" + strings.Join(rows, " UNION ALL ") + ") AS k WHERE RELEASE_LOCK(" + a.lockName("n") + ") = 1")
}

// Take re-checks, in a statement that starts after the key's lock is held, that the row is still
// due with the same key, and counts its attempt. Where the table counts attempts it is an
// UPDATE, which returns the row's Columns where the database has RETURNING and is followed by
// Read elsewhere, and which commits without waiting for the disk where the database has
// dialect.Caps.UnflushedCommit; without an attempt column it is a SELECT of the Columns, which
// writes nothing to wait for. It binds the id, the key, then Due's arguments.
func (a Advisory) Take() Statement {
	s, t := a.s, a.s.t
	p := s.Params()
	where := " WHERE " + t.ID + " = " + p.Next(ArgID) + " AND (" + a.key + ") = " + p.Next(ArgKey)
	if due := s.Due(p, ""); due != "1 = 1" {
		where += " AND " + due
	}
	if t.Attempt == "" {
		return p.statement("SELECT " + s.Columns("") + " FROM " + t.Name + where)
	}
	if cond := s.unflushedIf(true); cond != "" {
		where += " AND " + cond
	}
	if s.c.Returning {
		return p.statement("UPDATE " + t.Name + " SET " + attemptCounted(t, "") + where + " RETURNING " + s.Columns(""))
	}
	return p.statement("UPDATE " + t.Name + " SET " + attemptCounted(t, "") + where)
}

// Read reads the Columns of the row a Take changed, where the Take returns nothing; empty where
// it returns the row. It binds the id.
func (a Advisory) Read() Statement {
	s, t := a.s, a.s.t
	if t.Attempt == "" || s.c.Returning {
		return Statement{}
	}
	p := s.Params()
	return p.statement("SELECT " + s.Columns("") + " FROM " + t.Name + " WHERE " + t.ID + " = " + p.Next(ArgID))
}

// Settle applies an outcome of kind k to the rows g names (ByID, or ByIDs for a batch), on the
// connection that holds their keys:
//
//	Ack, Drop          DELETE, or SET processed_at = ?; binds the time first where it stamps
//	RetryAfter         SET retry_after = ? (and last_error = ?); binds the time first, then the
//	                   last error where the table has the column
//	Fail               SET dead_at = ? (and last_error = ?), binding as RetryAfter does; as
//	                   Ack on a table without a dead_at column
//
// then g's ids. It is empty for a retry (the take counted the attempt, and releasing the key
// hands the row back) and for a RetryAfter on a table without a retry_after column, which the
// form settles as a retry. It waits for the disk unless the builder is Unflushed.
func (a Advisory) Settle(k outcome.Kind, g Guard) Statement {
	return a.s.settle(k, g, settles{failAsAck: true, unflushed: a.unflushed})
}

// lockName is the named lock of the database-scoped key expression scoped: itself, or its SHA-1
// (40 hex digits) when it is longer than a lock name may be.
func (a Advisory) lockName(scoped string) string {
	return "IF(CHAR_LENGTH(" + scoped + ") > " + strconv.Itoa(a.s.c.LockNameMaxChars) + ", SHA1(" + scoped + "), " + scoped + ")"
}

// scoped is the FROM clause that names a bound key n, prefixed with the database's name (named
// locks span the server, and tables of two databases must not share them).
func (Advisory) scoped(p *Params) string {
	return " FROM (SELECT CONCAT(DATABASE(), '.', " + p.Next(ArgKey) + ") AS n) AS k"
}
