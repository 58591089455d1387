package sqltext

import "strings"

// Admin builds the statements that read and repair a table from outside a consumer: its
// statistics, the listing of its dead rows, their requeue and purge, and the purge of processed
// rows. A dead row (dead_at set) and a processed row (processed_at set) are never claimed, so
// none of these statements touches a row a consumer holds. The statements that change rows
// name their rows by id, so that each changes a bounded number: a caller picks the ids first
// (Pick), a bounded page in id order.
type Admin struct {
	s     SQL
	lease string // the lease form's column, quoted; empty for a table without one
}

// Admin returns the builder of the table's operating statements; lease is the lease form's
// column, quoted, or empty.
func (s SQL) Admin(lease string) Admin { return Admin{s: s, lease: lease} }

// Stats counts the table's rows by state, per queue (one row in all when the table has no
// group), in queue order. Its columns, in order: the queue (empty without a group); the rows due
// now; delayed (retry_after ahead); in work (the lease column ahead; 0 without one); retrying
// (due or delayed, attempt above 0; 0 without an attempt column); dead; processed; the
// earliest time a due row has been due since, its retry_after or else its created_at (NULL
// without a due row that has one); the due rows with neither (without the columns, every due
// row). A row is pending when it is neither processed nor dead, and only
// pending rows are due, delayed, in work or retrying. It binds now, nows times.
func (a Admin) Stats() (query string, nows int) {
	t := a.s.t
	p := a.s.Params()
	now := func() string { nows++; return p.Next() }
	var pending []string
	for _, c := range []string{t.ProcessedAt, t.DeadAt} {
		if c != "" {
			pending = append(pending, c+" IS NULL")
		}
	}
	when := func(conds ...string) string {
		all := append(append([]string{}, pending...), conds...)
		if len(all) == 0 {
			return "1 = 1"
		}
		return strings.Join(all, " AND ")
	}
	free := func() []string {
		if a.lease == "" {
			return nil
		}
		return []string{"(" + a.lease + " IS NULL OR " + a.lease + " < " + now() + ")"}
	}
	count := func(cond string) string { return "COUNT(CASE WHEN " + cond + " THEN 1 END)" }
	group := "''"
	if t.Queue != "" {
		group = t.Queue
	}
	cols := []string{group}
	if t.RetryAfter != "" {
		cols = append(cols,
			count(when(append(free(), "("+t.RetryAfter+" IS NULL OR "+t.RetryAfter+" <= "+now()+")")...)),
			count(when(append(free(), t.RetryAfter+" > "+now())...)))
	} else {
		cols = append(cols, count(when(free()...)), "0")
	}
	if a.lease != "" {
		cols = append(cols, count(when(a.lease+" >= "+now())))
	} else {
		cols = append(cols, "0")
	}
	if t.Attempt != "" {
		cols = append(cols, count(when(append(free(), t.Attempt+" > 0")...)))
	} else {
		cols = append(cols, "0")
	}
	for _, c := range []string{t.DeadAt, t.ProcessedAt} {
		switch {
		case c == "":
			cols = append(cols, "0")
		case c == t.ProcessedAt && t.DeadAt != "":
			cols = append(cols, count(c+" IS NOT NULL AND "+t.DeadAt+" IS NULL"))
		default:
			cols = append(cols, count(c+" IS NOT NULL"))
		}
	}
	switch {
	case t.RetryAfter != "" && t.CreatedAt != "":
		cols = append(cols,
			"MIN(CASE WHEN "+when(append(free(), "("+t.RetryAfter+" IS NULL OR "+t.RetryAfter+" <= "+now()+")")...)+
				" THEN COALESCE("+t.RetryAfter+", "+t.CreatedAt+") END)",
			count(when(append(free(), t.RetryAfter+" IS NULL AND "+t.CreatedAt+" IS NULL")...)))
	case t.RetryAfter != "":
		cols = append(cols,
			"MIN(CASE WHEN "+when(append(free(), t.RetryAfter+" <= "+now())...)+" THEN "+t.RetryAfter+" END)",
			count(when(append(free(), t.RetryAfter+" IS NULL")...)))
	case t.CreatedAt != "":
		cols = append(cols,
			"MIN(CASE WHEN "+when(free()...)+" THEN "+t.CreatedAt+" END)",
			count(when(append(free(), t.CreatedAt+" IS NULL")...)))
	default:
		cols = append(cols, "NULL", count(when(free()...)))
	}
	query = "SELECT " + strings.Join(cols, ", ") + " FROM " + t.Name
	if t.Queue != "" {
		query += " GROUP BY " + t.Queue + " ORDER BY " + t.Queue
	}
	return query, nows
}

// Dead lists dead rows, newest first (dead_at, then id, descending), up to a limit. Its
// columns, in order: id, queue (empty without a group), attempt (0 without the column, or where
// it is NULL), dead_at, last error (empty without the column, or where it is NULL). It binds, in
// order: the queue's name when byQueue; when after, the cursor's dead_at twice and its id (the
// rows after it in that order); the limit.
func (a Admin) Dead(byQueue, after bool) string {
	t := a.s.t
	p := a.s.Params()
	cols := []string{t.ID, "''", "0", t.DeadAt, "''"}
	if t.Queue != "" {
		cols[1] = t.Queue
	}
	if t.Attempt != "" {
		cols[2] = "COALESCE(" + t.Attempt + ", 0)"
	}
	if t.LastError != "" {
		cols[4] = "COALESCE(" + t.LastError + ", '')"
	}
	conds := []string{t.DeadAt + " IS NOT NULL"}
	if byQueue {
		conds = append(conds, t.Queue+" = "+p.Next())
	}
	if after {
		conds = append(conds, "("+t.DeadAt+" < "+p.Next()+" OR "+t.DeadAt+" = "+p.Next()+" AND "+t.ID+" < "+p.Next()+")")
	}
	return "SELECT " + strings.Join(cols, ", ") + " FROM " + t.Name + " WHERE " + strings.Join(conds, " AND ") +
		" ORDER BY " + t.DeadAt + " DESC, " + t.ID + " DESC LIMIT " + p.Next()
}

// Kept is which rows a Pick or a change over ids takes: the dead rows, or the rows processed
// before a time.
type Kept int

const (
	DeadRows Kept = iota
	ProcessedRows
)

// kept is the predicate of the rows k names; it binds the time before which a processed row
// was processed.
func (a Admin) kept(p *Params, k Kept) string {
	if k == ProcessedRows {
		return a.s.t.ProcessedAt + " < " + p.Next()
	}
	return a.s.t.DeadAt + " IS NOT NULL"
}

// Pick reads the ids of up to a limit of the rows k names, in id order, after an id. It binds,
// in order: the time before which a row was processed (ProcessedRows); the queue's name when
// byQueue; the id the page starts after; the limit.
func (a Admin) Pick(k Kept, byQueue bool) string {
	t := a.s.t
	p := a.s.Params()
	conds := []string{a.kept(p, k)}
	if byQueue {
		conds = append(conds, t.Queue+" = "+p.Next())
	}
	conds = append(conds, t.ID+" > "+p.Next())
	return "SELECT " + t.ID + " FROM " + t.Name + " WHERE " + strings.Join(conds, " AND ") + " ORDER BY " + t.ID + " LIMIT " + p.Next()
}

// Requeue puts n dead rows back in the queue by their ids: dead_at and retry_after cleared,
// attempt reset to 0 (each where the table has it), the last error kept. A row no longer dead
// is left alone. It binds the n ids.
func (a Admin) Requeue(n int) string {
	t := a.s.t
	sets := []string{t.DeadAt + " = NULL"}
	if t.RetryAfter != "" {
		sets = append(sets, t.RetryAfter+" = NULL")
	}
	if t.Attempt != "" {
		sets = append(sets, t.Attempt+" = 0")
	}
	p := a.s.Params()
	return "UPDATE " + t.Name + " SET " + strings.Join(sets, ", ") + " WHERE " + t.ID + " IN (" + p.list(n) + ") AND " + a.kept(p, DeadRows)
}

// Purge deletes n of the rows k names by their ids; a row no longer of them is left alone. It
// binds the n ids, then the time before which a row was processed (ProcessedRows).
func (a Admin) Purge(k Kept, n int) string {
	t := a.s.t
	p := a.s.Params()
	return "DELETE FROM " + t.Name + " WHERE " + t.ID + " IN (" + p.list(n) + ") AND " + a.kept(p, k)
}
