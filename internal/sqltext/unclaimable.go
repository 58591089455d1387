package sqltext

import "strconv"

// textTimeGlob matches text in dialect.SQLiteTimeLayout, the layout of a timestamp stored as
// text: SQLite's GLOB pattern.
const textTimeGlob = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]"

// Unclaimable builds the searches for rows of a queue that no claim takes as they stand
// (inbox.Unclaimable). Each is a SELECT of ids over the rows a claim would consider (neither
// processed nor dead, of the queue: the claim index's leading columns), bounded by a LIMIT of
// limit, and each is empty where the table lacks the column it searches.
type Unclaimable struct {
	s     SQL
	limit string
}

// Unclaimable returns the searches over the table, each reading at most limit ids.
func (s SQL) Unclaimable(limit int) Unclaimable {
	return Unclaimable{s, " LIMIT " + strconv.Itoa(limit)}
}

// NullQueue finds the rows whose queue column is NULL, which no consumer's queue matches. It
// binds nothing.
func (u Unclaimable) NullQueue() Statement {
	t := u.s.t
	if t.Queue == "" {
		return Statement{}
	}
	return Statement{SQL: "SELECT " + t.ID + " FROM " + t.Name + " WHERE " + u.pending() + t.Queue + " IS NULL" + u.limit}
}

// FarAhead finds the rows of the queue whose retry_after lies after a time. Where timestamps
// are text (dialect.Caps.TimeLayout) it passes over text not in the layout, which BadLayout
// finds. It binds the queue's name (where the table has a queue column), then the time.
func (u Unclaimable) FarAhead() Statement {
	t, p := u.s.t, u.s.Params()
	if t.RetryAfter == "" {
		return Statement{}
	}
	q := "SELECT " + t.ID + " FROM " + t.Name + " WHERE " + u.pending() + u.ofQueue(p) + t.RetryAfter + " > " + p.Next(ArgHorizon)
	if u.s.c.TimeLayout != "" {
		q += " AND " + t.RetryAfter + " GLOB '" + textTimeGlob + "'"
	}
	return p.statement(q + u.limit)
}

// Exhausted finds the rows of the queue whose attempt column has reached the attempt limit
// (Limited), which no claim takes: rows that had their last delivery and neither settled nor
// died. It binds the queue's name (where the table has a queue column). Empty where the table
// counts no attempts or the builder has no limit.
func (u Unclaimable) Exhausted() Statement {
	t, p := u.s.t, u.s.Params()
	if t.Attempt == "" || u.s.maxAttempts == 0 {
		return Statement{}
	}
	return p.statement("SELECT " + t.ID + " FROM " + t.Name + " WHERE " + u.pending() + u.ofQueue(p) + "COALESCE(" + t.Attempt + ", 0) >= " + strconv.Itoa(u.s.maxAttempts) + u.limit)
}

// BadLayout finds, where timestamps are text (dialect.Caps.TimeLayout: SQLite), the rows of the
// queue whose retry_after is not text in the layout, which compares as text and may never come
// due. It binds the queue's name (where the table has a queue column). Empty elsewhere.
func (u Unclaimable) BadLayout() Statement {
	t, p := u.s.t, u.s.Params()
	if t.RetryAfter == "" || u.s.c.TimeLayout == "" {
		return Statement{}
	}
	return p.statement("SELECT " + t.ID + " FROM " + t.Name + " WHERE " + u.pending() + u.ofQueue(p) + t.RetryAfter + " IS NOT NULL AND (typeof(" + t.RetryAfter +
		") <> 'text' OR " + t.RetryAfter + " NOT GLOB '" + textTimeGlob + "')" + u.limit)
}

// pending is the head of a search's WHERE clause: neither processed nor dead, where the table
// has those columns, each followed by AND.
func (u Unclaimable) pending() string {
	t, w := u.s.t, ""
	if t.ProcessedAt != "" {
		w = t.ProcessedAt + " IS NULL AND "
	}
	if t.DeadAt != "" {
		w += t.DeadAt + " IS NULL AND "
	}
	if t.CancelledAt != "" {
		w += t.CancelledAt + " IS NULL AND "
	}
	return w
}

// ofQueue is the condition on the queue's name, followed by AND, where the table has a queue
// column.
func (u Unclaimable) ofQueue(p *Params) string {
	if u.s.t.Queue == "" {
		return ""
	}
	return u.s.t.Queue + " = " + p.Next(ArgQueue) + " AND "
}

// OtherKinds counts the pending rows of the queue (neither processed nor dead) whose kind is
// none of n kinds, per kind, a NULL kind read as the empty one: the rows a consumer of those
// kinds never claims. Its columns, in order: the kind (empty for none), the rows, and the
// earliest time one of them that is due has been due since, its retry_after or else its
// created_at (NULL where none is due or the table keeps neither). It binds now (where the table
// has a retry_after column), the queue's name (where it has a queue column), then the n kinds.
// It reads every pending row of the queue, as a search that finds nothing does; empty where the
// table has no kind column.
func (s SQL) OtherKinds(n int) Statement {
	t, p := s.t, s.Params()
	if t.Kind == "" {
		return Statement{}
	}
	kind := "COALESCE(" + t.Kind + ", '')"
	var oldest string
	switch {
	case t.RetryAfter != "" && t.CreatedAt != "":
		oldest = "MIN(CASE WHEN " + t.RetryAfter + " IS NULL OR " + t.RetryAfter + " <= " + p.Next(ArgNow) + " THEN COALESCE(" + t.RetryAfter + ", " + t.CreatedAt + ") END)"
	case t.RetryAfter != "":
		oldest = "MIN(CASE WHEN " + t.RetryAfter + " <= " + p.Next(ArgNow) + " THEN " + t.RetryAfter + " END)"
	case t.CreatedAt != "":
		oldest = "MIN(" + t.CreatedAt + ")"
	default:
		oldest = "NULL"
	}
	u := Unclaimable{s: s}
	q := "SELECT " + kind + ", COUNT(*), " + oldest + " FROM " + t.Name + " WHERE " + u.pending() + u.ofQueue(p)
	if n > 0 {
		q += kind + " NOT IN (" + p.listOf(ArgKind, n) + ")"
	} else {
		q += "1 = 1"
	}
	return p.statement(q + " GROUP BY " + kind + " ORDER BY 1")
}
