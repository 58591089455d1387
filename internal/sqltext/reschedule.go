package sqltext

import "strings"

// Reschedule builds the statements that move one queued row to a new run time by its id
// (inbox.Client.Reschedule): a queued row is pending (neither processed nor dead) and held by no
// consumer, neither by a lease running ahead nor, where the database has row locks, by a
// transaction's lock. None of them waits for a lock: Lock skips a locked row, State reads without
// locking, and Change runs after Lock in its transaction, or alone on a database of one writer
// (SQLite), whose statements hold no row.
type Reschedule struct {
	s     SQL
	lease string // the lease form's column, quoted; empty for a table without one
}

// Reschedule returns the builder of the reschedule's statements; lease is the lease form's
// column, quoted, or empty.
func (s SQL) Reschedule(lease string) Reschedule { return Reschedule{s: s, lease: lease} }

// queued are the conditions of a queued row: pending, and no lease ahead (bound now).
func (r Reschedule) queued(p *Params) []string { return r.s.queued(p, r.lease) }

// queued are the conditions of a queued row of the table, one a publish or an operator may
// change: pending (neither processed, dead nor cancelled) and, where lease names the lease
// form's column, no lease ahead (bound now).
func (s SQL) queued(p *Params, lease string) []string {
	t := s.t
	var conds []string
	for _, c := range []string{t.ProcessedAt, t.DeadAt, t.CancelledAt} {
		if c != "" {
			conds = append(conds, c+" IS NULL")
		}
	}
	if lease != "" {
		conds = append(conds, "("+lease+" IS NULL OR "+lease+" < "+p.Next(ArgNow)+")")
	}
	return conds
}

// Lock locks the row of the id bound where it is queued and no transaction holds it (SKIP
// LOCKED), and reads its id: no row where it is not. For the databases with row locks
// (Caps.SkipLocked). It binds, in order: the id, now (where the table has a lease column).
func (r Reschedule) Lock() Statement {
	t := r.s.t
	p := r.s.Params()
	conds := append([]string{t.ID + " = " + p.Next(ArgID)}, r.queued(p)...)
	return p.statement("SELECT " + t.ID + " FROM " + t.Name + " WHERE " + strings.Join(conds, " AND ") + " FOR UPDATE SKIP LOCKED")
}

// Change sets the retry_after of the row of the id bound, where it is queued. It binds, in
// order: the run time (NULL: due at once), the id, now (where the table has a lease column).
func (r Reschedule) Change() Statement {
	t := r.s.t
	p := r.s.Params()
	head := "UPDATE " + t.Name + " SET " + t.RetryAfter + " = " + p.Next(ArgAt)
	conds := append([]string{t.ID + " = " + p.Next(ArgID)}, r.queued(p)...)
	return p.statement(head + " WHERE " + strings.Join(conds, " AND "))
}

// State reads, without a lock, whether the row of the id bound is settled: 1 where it is
// processed, dead or cancelled, 0 otherwise (0 too where the table keeps none of them); no row
// where there is none of that id. It binds the id.
func (r Reschedule) State() Statement {
	t := r.s.t
	p := r.s.Params()
	var settled []string
	for _, c := range []string{t.ProcessedAt, t.DeadAt, t.CancelledAt} {
		if c != "" {
			settled = append(settled, c+" IS NOT NULL")
		}
	}
	state := "0"
	if len(settled) > 0 {
		state = "CASE WHEN " + strings.Join(settled, " OR ") + " THEN 1 ELSE 0 END"
	}
	return p.statement("SELECT " + state + " FROM " + t.Name + " WHERE " + t.ID + " = " + p.Next(ArgID))
}
