package lease

import (
	"strings"

	"github.com/sqlinbox/inbox/internal/stmt"
)

// statements is the SQL of one binding. The arguments of each, in order:
//
//	claim        Postgres: due…, now, limit, token;
//	             MySQL, MariaDB, SQLite (the SELECT): due…, now, limit
//	stamp(n)     MySQL, MariaDB, SQLite: token, n ids
//	extend       new token, id, token
//	ack          DELETE: id, token; with processed_at: now, id, token
//	retry        id, token (also Release)
//	retryAfter   due time, last error (where the table has the column), id, token
//	dead         now, last error (where the table has the column), id, token
//	…In(n)       as above, with n ids in the place of the id
//
// where due… are stmt.Table.DueArgs (now, queue, each where the table has the column).
type statements struct {
	claim      string
	stamp      func(n int) string // nil on Postgres, whose claim stamps as it picks
	extend     string
	ack        string
	retry      string
	retryAfter string // empty where the table has no retry_after column
	dead       string // empty where the table has no dead_at column

	// The same statements over a batch's n ids, where a single row's take one: the id
	// arguments are n ids (id IN (…)).
	extendIn, ackIn, retryIn, retryAfterIn, deadIn func(n int) string

	// ackPairs and retryPairs settle n rows of different holders in one statement and return
	// the ids they changed (Postgres and SQLite; nil elsewhere). Arguments: now (the ack with
	// processed_at only), then an id and its token per row.
	ackPairs, retryPairs func(n int) string

	// returning ends a batch's settlement so that it returns the ids it changed (Postgres and
	// SQLite; empty elsewhere).
	returning string
	// heldIn locks those of n ids whose row still holds the token and returns their ids (MySQL
	// and MariaDB, whose settlements cannot return them). Arguments: n ids, token.
	heldIn func(n int) string
}

// build writes the statements for table st with lease column col (quoted).
func build(st *stmt.Table, col string) statements {
	q := st.Q
	var s statements
	if st.D.Name() == "postgres" {
		s.claim = postgresClaim(st, col)
	} else {
		s.claim = pickClaim(st, col)
		s.stamp = func(n int) string {
			p := st.Params()
			token := p.Next()
			ids := make([]string, n)
			for i := range ids {
				ids[i] = p.Next()
			}
			return "UPDATE " + q.Name + " SET " + col + " = " + token + stampAttempt(st) +
				" WHERE " + q.ID + " IN (" + strings.Join(ids, ", ") + ")"
		}
	}

	s.extendIn = func(n int) string {
		p := st.Params()
		return "UPDATE " + q.Name + " SET " + col + " = " + p.Next() + guard(st, p, col, n)
	}
	s.ackIn = func(n int) string {
		p := st.Params()
		if q.ProcessedAt != "" {
			return "UPDATE " + q.Name + " SET " + q.ProcessedAt + " = " + p.Next() + ", " + col + " = NULL" + guard(st, p, col, n)
		}
		return "DELETE FROM " + q.Name + guard(st, p, col, n)
	}
	s.retryIn = func(n int) string {
		return "UPDATE " + q.Name + " SET " + col + " = NULL" + guard(st, st.Params(), col, n)
	}
	if q.RetryAfter != "" {
		s.retryAfterIn = func(n int) string {
			p := st.Params()
			return "UPDATE " + q.Name + " SET " + stamped(st, p, q.RetryAfter) + ", " + col + " = NULL" + guard(st, p, col, n)
		}
		s.retryAfter = s.retryAfterIn(0)
	}
	if q.DeadAt != "" {
		s.deadIn = func(n int) string {
			p := st.Params()
			return "UPDATE " + q.Name + " SET " + stamped(st, p, q.DeadAt) + ", " + col + " = NULL" + guard(st, p, col, n)
		}
		s.dead = s.deadIn(0)
	}
	s.extend, s.ack, s.retry = s.extendIn(0), s.ackIn(0), s.retryIn(0)
	if st.D.Name() != "postgres" && st.D.Name() != "sqlite" {
		s.heldIn = func(n int) string {
			return "SELECT " + q.ID + " FROM " + q.Name + guard(st, st.Params(), col, n) + " FOR UPDATE"
		}
	} else {
		s.returning = " RETURNING " + q.ID
		s.ackPairs = func(n int) string {
			p := st.Params()
			if q.ProcessedAt != "" {
				return "UPDATE " + q.Name + " SET " + q.ProcessedAt + " = " + p.Next() + ", " + col + " = NULL" + pairs(st, p, col, n)
			}
			return "DELETE FROM " + q.Name + pairs(st, p, col, n)
		}
		s.retryPairs = func(n int) string {
			return "UPDATE " + q.Name + " SET " + col + " = NULL" + pairs(st, st.Params(), col, n)
		}
	}
	return s
}

// stamped is the SET assignment of a time to col, then of the last error where the table keeps
// it: the head of a retry after and of a fail.
func stamped(st *stmt.Table, p *stmt.Params, col string) string {
	set := col + " = " + p.Next()
	if st.Q.LastError != "" {
		set += ", " + st.Q.LastError + " = " + p.Next()
	}
	return set
}

// pairs is the WHERE clause of a statement settling n rows, each under its own token, and the
// RETURNING clause that tells which it changed.
func pairs(st *stmt.Table, p *stmt.Params, col string, n int) string {
	or := make([]string, n)
	for i := range or {
		or[i] = "(" + st.Q.ID + " = " + p.Next() + " AND " + col + " = " + p.Next() + ")"
	}
	return " WHERE " + strings.Join(or, " OR ") + " RETURNING " + st.Q.ID
}

// guard is the WHERE clause of every statement a holder runs: its row (n = 0) or its batch's n
// rows, while its token holds.
func guard(st *stmt.Table, p *stmt.Params, col string, n int) string {
	if n == 0 {
		return " WHERE " + st.Q.ID + " = " + p.Next() + " AND " + col + " = " + p.Next()
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = p.Next()
	}
	return " WHERE " + st.Q.ID + " IN (" + strings.Join(ids, ", ") + ") AND " + col + " = " + p.Next()
}

// stampAttempt is the SET clause's tail that counts the attempt, where the table counts them.
func stampAttempt(st *stmt.Table) string {
	if st.Q.Attempt == "" {
		return ""
	}
	return ", " + stmt.NextAttempt(st.Q.Attempt)
}

// free is the predicate of a row no lease holds: never leased, released, or run out.
func free(col, now string) string {
	return "(" + col + " IS NULL OR " + col + " < " + now + ")"
}

// postgresClaim picks the rows with SKIP LOCKED, stamps them, and returns them in claim order,
// in one statement. The outer SELECT restores the order, which UPDATE … RETURNING does not
// keep.
func postgresClaim(st *stmt.Table, col string) string {
	q := st.Q
	p := st.Params()
	due := st.Due(p, "")
	pick := "SELECT " + q.ID + " FROM " + q.Name + " WHERE " + due + " AND " + free(col, p.Next()) +
		" ORDER BY " + st.Order("") + " LIMIT " + p.Next() + " FOR UPDATE SKIP LOCKED"
	returning := st.Columns(q.Name)
	for _, c := range []string{q.Priority, q.RetryAfter} {
		if c != "" {
			returning += ", " + q.Name + "." + c
		}
	}
	stamp := "UPDATE " + q.Name + " SET " + col + " = " + p.Next() + stampAttempt(st) +
		" FROM inbox_lease_pick WHERE " + q.Name + "." + q.ID + " = inbox_lease_pick." + q.ID +
		" RETURNING " + returning
	return "WITH inbox_lease_pick AS (" + pick + "), inbox_lease_claimed AS (" + stamp + ") SELECT " +
		st.Columns("") + " FROM inbox_lease_claimed ORDER BY " + st.Order("")
}

// pickClaim is the SELECT of the claim on MySQL, MariaDB and SQLite, which the stamp follows in
// the same transaction to write the lease. On MySQL and MariaDB it locks the rows it returns,
// skipping rows other claims hold; SQLite runs one writer at a time, so no other claim can take
// the rows between the two. (On SQLite one UPDATE … WHERE id IN (SELECT …) RETURNING would do
// both, but SQLite builds temporary tables for the subquery and the RETURNING at every run,
// which cost a single-row claim more than twice what the SELECT and the UPDATE by id do.)
func pickClaim(st *stmt.Table, col string) string {
	p := st.Params()
	due := st.Due(p, "")
	pick := "SELECT " + st.Columns("") + " FROM " + st.Q.Name + " WHERE " + due + " AND " + free(col, p.Next()) +
		" ORDER BY " + st.Order("") + " LIMIT " + p.Next()
	if st.D.Name() == "sqlite" {
		return pick
	}
	return pick + " FOR UPDATE SKIP LOCKED"
}
