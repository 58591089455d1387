package advisory

import (
	"strings"

	"github.com/sqlinbox/inbox/internal/stmt"
)

// statements is the SQL of the form over one table, for one dialect.
type statements struct {
	// keyCheck renders the key over no rows: it prepares only where the table has every column
	// the template names.
	keyCheck string
	// candidates lists due rows in claim order with their key, passing over keys held elsewhere.
	// Arguments: Due's, then the limit.
	candidates string
	// lock tries the key's lock without waiting, unlock releases it; both take the key and
	// answer whether the server did it.
	lock, unlock string
	// take re-checks, after the lock is held, that the row is still due with the same key and
	// counts the attempt. Arguments: id, key, then Due's. Where takeReturns is set it returns the
	// row's columns; otherwise it is an UPDATE, and read (argument: id) reads them after it.
	take        string
	takeReturns bool
	read        string
	// ack settles an Ack or a Drop (argument: id, after the processed_at stamp where the table
	// has that column).
	ack string
	// retryAfter sets retry_after (arguments: time, the last error where the table has the
	// column, id); empty where the table has no such column. dead stamps dead_at, binding as
	// retryAfter does; empty where the table has no such column.
	retryAfter, dead string

	// t and postgres write the statements of a batch, whose length depends on the batch's size
	// (unlockMany, ackMany, stampMany).
	t        *stmt.Table
	postgres bool
}

// buildStatements writes the form's SQL for table t and the key template's parts.
func buildStatements(t *stmt.Table, postgres bool, parts []keyPart) statements {
	q := t.Q
	key := keySQL(postgres, parts)
	s := statements{t: t, postgres: postgres}
	s.keyCheck = "SELECT " + key + " FROM " + q.Name + " WHERE 1 = 0"

	p := t.Params()
	if postgres {
		// The probe takes a shared lock on each key it looks at until the statement ends. In the
		// WHERE of the scan it would run on every due row before the sort and exhaust the lock
		// table on a large backlog; behind the sort (OFFSET 0 keeps the subquery apart) it runs
		// only on the rows pulled until the limit is met, in claim order.
		s.candidates = "SELECT c." + q.ID + ", c.inbox_key FROM (SELECT " + q.ID + ", " + key + " AS inbox_key FROM " + q.Name +
			" WHERE " + t.Due(p, "") + " ORDER BY " + t.Order("") + " OFFSET 0) c" +
			" WHERE pg_try_advisory_xact_lock_shared(hashtextextended(c.inbox_key, 0)) LIMIT " + p.Next()
		s.lock = "SELECT pg_try_advisory_lock(hashtextextended($1, 0))"
		s.unlock = "SELECT pg_advisory_unlock(hashtextextended($1, 0))"
	} else {
		s.candidates = "SELECT " + q.ID + ", " + key + " FROM " + q.Name +
			" WHERE " + and(t.Due(p, ""), "IS_USED_LOCK("+mysqlLockName("CONCAT(DATABASE(), '.', "+key+")")+") IS NULL") +
			" ORDER BY " + t.Order("") + " LIMIT " + p.Next()
		const named = " FROM (SELECT CONCAT(DATABASE(), '.', ?) AS n) AS k"
		s.lock = "SELECT GET_LOCK(" + mysqlLockName("n") + ", 0)" + named
		s.unlock = "SELECT RELEASE_LOCK(" + mysqlLockName("n") + ")" + named
	}

	p = t.Params()
	where := " WHERE " + q.ID + " = " + p.Next() + " AND (" + key + ") = " + p.Next()
	if due := t.Due(p, ""); due != "1 = 1" {
		where += " AND " + due
	}
	switch {
	case q.Attempt != "" && postgres:
		s.take = "UPDATE " + q.Name + " SET " + stmt.NextAttempt(q.Attempt) + where + " RETURNING " + t.Columns("")
		s.takeReturns = true
	case q.Attempt != "":
		s.take = "UPDATE " + q.Name + " SET " + stmt.NextAttempt(q.Attempt) + where
		s.read = "SELECT " + t.Columns("") + " FROM " + q.Name + " WHERE " + q.ID + " = " + t.Params().Next()
	default:
		s.take = "SELECT " + t.Columns("") + " FROM " + q.Name + where
		s.takeReturns = true
	}

	p = t.Params()
	if q.ProcessedAt != "" {
		s.ack = "UPDATE " + q.Name + " SET " + q.ProcessedAt + " = " + p.Next() + " WHERE " + q.ID + " = " + p.Next()
	} else {
		s.ack = "DELETE FROM " + q.Name + " WHERE " + q.ID + " = " + p.Next()
	}
	if q.RetryAfter != "" {
		s.retryAfter = s.stampMany(q.RetryAfter, 0)
	}
	if q.DeadAt != "" {
		s.dead = s.stampMany(q.DeadAt, 0)
	}
	return s
}

// mysqlLockName is the GET_LOCK name of scoped, the key prefixed with the database's name (so
// that tables of two databases on one server do not share locks): scoped itself, or its SHA-1
// (40 hex digits) when it is longer than the 64 characters MySQL allows a lock name.
func mysqlLockName(scoped string) string {
	return "IF(CHAR_LENGTH(" + scoped + ") > 64, SHA1(" + scoped + "), " + scoped + ")"
}

// and joins a condition to the predicate due, which is "1 = 1" where a table has no column
// that makes a row due.
func and(due, cond string) string {
	if due == "1 = 1" {
		return cond
	}
	return due + " AND " + cond
}

// named lists the statements Open prepares, by the name its errors give them.
func (s statements) named() [][2]string {
	out := [][2]string{{"candidates", s.candidates}, {"lock", s.lock}, {"unlock", s.unlock}, {"take", s.take}}
	if s.read != "" {
		out = append(out, [2]string{"read", s.read})
	}
	out = append(out, [2]string{"ack", s.ack})
	if s.retryAfter != "" {
		out = append(out, [2]string{"retry after", s.retryAfter})
	}
	if s.dead != "" {
		out = append(out, [2]string{"fail", s.dead})
	}
	return out
}

// unlockMany releases n keys (n arguments, one key each), each once, and answers how many
// releases the server confirmed.
func (s statements) unlockMany(n int) string {
	rows := make([]string, n)
	if s.postgres {
		p := s.t.Params()
		for i := range rows {
			rows[i] = "(CAST(" + p.Next() + " AS TEXT))"
		}
		return "SELECT COUNT(*) FROM (VALUES " + strings.Join(rows, ", ") + ") AS k(v) WHERE pg_advisory_unlock(hashtextextended(k.v, 0))"
	}
	for i := range rows {
		rows[i] = "SELECT CONCAT(DATABASE(), '.', ?) AS n"
	}
	return "SELECT COUNT(*) FROM (" + strings.Join(rows, " UNION ALL ") + ") AS k WHERE RELEASE_LOCK(" + mysqlLockName("n") + ") = 1"
}

// ackMany settles n rows as Ack or Drop (arguments: the processed_at stamp where the table has
// that column, then the n ids).
func (s statements) ackMany(n int) string {
	q, p := s.t.Q, s.t.Params()
	if q.ProcessedAt != "" {
		return "UPDATE " + q.Name + " SET " + q.ProcessedAt + " = " + p.Next() + " WHERE " + idIn(q.ID, p, n)
	}
	return "DELETE FROM " + q.Name + " WHERE " + idIn(q.ID, p, n)
}

// stampMany stamps col (retry_after or dead_at, quoted) on n rows, and the last error where the
// table has the column (arguments: time, the last error, then the n ids); n = 0 is one row,
// by id = ?.
func (s statements) stampMany(col string, n int) string {
	q, p := s.t.Q, s.t.Params()
	set := col + " = " + p.Next()
	if q.LastError != "" {
		set += ", " + q.LastError + " = " + p.Next()
	}
	if n == 0 {
		return "UPDATE " + q.Name + " SET " + set + " WHERE " + q.ID + " = " + p.Next()
	}
	return "UPDATE " + q.Name + " SET " + set + " WHERE " + idIn(q.ID, p, n)
}

// idIn is "id IN (…)" over the next n parameters of p.
func idIn(id string, p *stmt.Params, n int) string {
	ps := make([]string, n)
	for i := range ps {
		ps[i] = p.Next()
	}
	return id + " IN (" + strings.Join(ps, ", ") + ")"
}
