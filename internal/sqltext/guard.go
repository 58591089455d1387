package sqltext

import (
	"strings"

	"github.com/sqlinbox/inbox/outcome"
)

// Guard is how a form's statement names the rows it changes, and what must still hold for it to
// change them: its own row by id, a batch's rows by an id list, and in the lease form each
// under the lease token its holder wrote. A form takes the guards that fit how it holds a row:
// the row lock and advisory forms hold theirs by a lock, so they name rows by id only; the
// lease form holds by the token, so each of its guards checks one.
type Guard struct {
	ids   int  // the id list's length; 0: one row, by id = ?
	token bool // and the lease column holds the holder's token
	pairs bool // ids rows, each under a token of its own, RETURNING the ids changed
}

// ByID names one row: WHERE id = ?. It binds the id.
func ByID() Guard { return Guard{} }

// ByIDs names n rows: WHERE id IN (…). It binds n ids (a list padded by repeating its last id
// changes nothing: IN ignores repeats).
func ByIDs(n int) Guard { return Guard{ids: n} }

// ByIDAndToken names one row while its lease holds: WHERE id = ? AND lease = ?. It binds the id,
// then the token.
func ByIDAndToken() Guard { return Guard{token: true} }

// ByIDsAndToken names n rows sharing one lease (a batch's) while it holds:
// WHERE id IN (…) AND lease = ?. It binds n ids, then the token.
func ByIDsAndToken(n int) Guard { return Guard{ids: n, token: true} }

// ByPairs names n rows of different holders, each while its own lease holds, and returns the ids
// of those it changed: WHERE (id = ? AND lease = ?) OR … RETURNING id. It binds an id and its
// token per row. It needs dialect.Caps.Returning.
func ByPairs(n int) Guard { return Guard{ids: n, token: true, pairs: true} }

// where is g's WHERE clause (and RETURNING, for pairs) with the next parameters of p; lease is
// the quoted lease column, empty for a form without one. It panics on a guard the form cannot
// take: a token without a lease column, a lease statement without its token, pairs without
// RETURNING. Those are the form's mistakes, never the user's.
func (s SQL) where(g Guard, p *Params, lease string) string { return s.whereAnd(g, p, lease, "") }

// whereAnd is where with cond, a condition that binds nothing, ANDed to g's condition where cond
// is not empty.
func (s SQL) whereAnd(g Guard, p *Params, lease, cond string) string {
	switch {
	case g.token && lease == "":
		panic("sqltext: a token guard on a form that holds its rows without a lease column")
	case !g.token && lease != "":
		panic("sqltext: a lease statement guarded without its token would change rows the holder lost")
	case g.pairs && !s.c.Returning:
		panic("sqltext: a settlement by pairs needs RETURNING, which the database lacks")
	}
	id := s.t.ID
	also := ""
	if cond != "" {
		also = " AND " + cond
	}
	switch {
	case g.pairs:
		or := make([]string, g.ids)
		for i := range or {
			or[i] = "(" + id + " = " + p.Next(ArgID) + " AND " + lease + " = " + p.Next(ArgToken) + ")"
		}
		pairs := strings.Join(or, " OR ")
		if cond != "" {
			pairs = "(" + pairs + ")"
		}
		return " WHERE " + pairs + also + " RETURNING " + id
	case g.ids == 0 && g.token:
		return " WHERE " + id + " = " + p.Next(ArgID) + " AND " + lease + " = " + p.Next(ArgToken) + also
	case g.ids == 0:
		return " WHERE " + id + " = " + p.Next(ArgID) + also
	case g.token:
		return " WHERE " + id + " IN (" + p.listOf(ArgID, g.ids) + ") AND " + lease + " = " + p.Next(ArgToken) + also
	}
	return " WHERE " + id + " IN (" + p.listOf(ArgID, g.ids) + ")" + also
}

// unflushedIf is the database's condition that its statement's transaction commits without
// waiting for the disk (dialect.Caps.UnflushedCommit) where asked and the database has one;
// otherwise empty.
func (s SQL) unflushedIf(asked bool) string {
	if !asked {
		return ""
	}
	return s.c.UnflushedCommit
}

// settles is what a form changes in a row as it settles it, beside what the outcome's kind
// changes. Each of acked and stamped is empty or starts with ", ".
type settles struct {
	acked     string // with processed_at, as an Ack or Drop stamps it
	stamped   string // with dead_at or retry_after, as a Fail or RetryAfter stamps it
	retried   string // the SET of a retry or KindNone; empty where it changes nothing
	failAsAck bool   // a Fail on a table without dead_at settles as an Ack; otherwise it is empty
	lease     string // the lease column whose token g checks; empty for a form without one
	unflushed bool   // the statement does not wait for the disk (UnflushedCommit)
}

// settle is a form's settlement of kind k of the rows g names, before f's changes: Ack and Drop
// DELETE, or SET processed_at = ?; Fail SET dead_at = ? and RetryAfter SET retry_after = ?, each
// with last_error = ? where the table has it (see stamp); Cancel SET cancelled_at = ?; a stamp
// that settles the row clears its unique key too (settlementClearsKey); then g's WHERE. It binds
// in that order. It is empty where the table lacks the column the kind stamps, and for a retry that
// changes nothing.
func (s SQL) settle(k outcome.Kind, g Guard, f settles) Statement {
	t, p := s.t, s.Params()
	if k == outcome.KindFail && t.DeadAt == "" && f.failAsAck {
		k = outcome.KindAck
	}
	var head string
	switch k {
	case outcome.KindAck, outcome.KindDrop:
		head = "DELETE FROM " + t.Name
		if t.ProcessedAt != "" {
			head = "UPDATE " + t.Name + " SET " + t.ProcessedAt + " = " + p.Next(ArgAt) + f.acked
		}
	case outcome.KindFail, outcome.KindRetryAfter:
		col := t.DeadAt
		if k == outcome.KindRetryAfter {
			col = t.RetryAfter
		}
		if col == "" {
			return Statement{}
		}
		head = "UPDATE " + t.Name + " SET " + s.stamp(col, p) + f.stamped
	case outcome.KindCancel:
		if t.CancelledAt == "" {
			return Statement{}
		}
		head = "UPDATE " + t.Name + " SET " + t.CancelledAt + " = " + p.Next(ArgAt) + f.stamped
	default:
		if f.retried == "" {
			return Statement{}
		}
		head = "UPDATE " + t.Name + " SET " + f.retried
	}
	if s.settlementClearsKey(k) {
		head += ", " + t.UniqueKey + " = NULL"
	}
	where := s.whereAnd(g, p, f.lease, s.unflushedIf(f.unflushed))
	return p.statement(head + where)
}

// settlementClearsKey reports whether a settlement of kind k, which stamps the row and keeps it,
// clears the row's unique key: an Ack or Drop stamping processed_at and a Fail stamping dead_at,
// where the table has a unique key kept only while the row is queued or in work (no
// UniqueWindow), so that a later publish of the key inserts. A retry keeps the key, a
// settlement that deletes the row takes the key with it, and where the key holds only while the
// row is queued (UniqueWhileQueued) the claim cleared it already. A Cancel stamping cancelled_at
// clears it in every scope, the window's too: a cancelled job frees its key at once.
func (s SQL) settlementClearsKey(k outcome.Kind) bool {
	t := s.t
	if t.UniqueKey != "" && k == outcome.KindCancel {
		return t.CancelledAt != "" // in every scope: a cancelled job holds no key (Cancels.Stamp)
	}
	if t.UniqueKey == "" || t.UniqueWindow > 0 || t.UniqueWhileQueued {
		return false
	}
	switch k {
	case outcome.KindAck, outcome.KindDrop:
		return t.ProcessedAt != ""
	case outcome.KindFail:
		return t.DeadAt != ""
	}
	return false
}
