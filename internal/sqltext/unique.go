package sqltext

import "strings"

// Unique builds the statements of a publish whose message carries a unique key that another row
// may hold (inbox.Message.UniqueKey), all run in the publish's transaction, the caller's own
// where it gave one. The table's unique index on the key column is what excludes a second row;
// these statements only tell the publisher which row holds the key, and change that row where
// the message asks for it and the row is queued and held by no consumer. None of them waits for
// a row in work: the holder's read locks no row (or, on MySQL and MariaDB, only the unique
// index's record: Caps.HolderLock), and Pick skips a row a transaction locks (SKIP LOCKED) or a
// lease holds.
type Unique struct {
	s     SQL
	lease string // the lease form's column, quoted; empty for a table without one
}

// HasUniqueKey reports whether the table has a unique key column.
func (s SQL) HasUniqueKey() bool { return s.t.UniqueKey != "" }

// Unique returns the builder of the unique key's statements; lease is the lease form's column,
// quoted, or empty. It needs the table's unique key column.
func (s SQL) Unique(lease string) Unique { return Unique{s: s, lease: lease} }

// Insert publishes one row, bound as Insert binds a row (its unique key among them), where no
// other row holds its key: ON CONFLICT (key) DO NOTHING RETURNING id where the database has it
// (Caps.UpsertNothing), which returns the new row's id or no row; elsewhere the plain INSERT,
// which fails with a duplicate-key error on the key's index (the id is the driver's
// LastInsertId).
func (u Unique) Insert(own []string) string {
	if !u.s.c.UpsertNothing {
		return u.s.Insert(1, own)
	}
	return u.s.Insert(1, own) + " ON CONFLICT (" + u.s.t.UniqueKey + ") DO NOTHING RETURNING " + u.s.t.ID
}

// Holder reads the id of the row that holds the unique key bound, with the database's locking
// clause (Caps.HolderLock): no row where none does (it settled, or its key expired, since the
// INSERT found it). It reads the key's index alone, which holds the id too. It binds the key.
func (u Unique) Holder() Statement {
	t, p := u.s.t, u.s.Params()
	return p.statement("SELECT " + t.ID + " FROM " + t.Name + " WHERE " + t.UniqueKey + " = " + p.Next(ArgUniqueKey) + u.s.c.HolderLock)
}

// queued are the conditions of a holder a publish may change: pending and no lease ahead
// (bound now).
func (u Unique) queued(p *Params) []string { return u.s.queued(p, u.lease) }

// expired is the condition of a holder settled before the time bound (the publish's now less the
// table's UniqueWindow): processed or dead before it.
func (u Unique) expired(p *Params) string {
	t := u.s.t
	var or []string
	for _, c := range []string{t.ProcessedAt, t.DeadAt} {
		if c != "" {
			or = append(or, c+" < "+p.Next(ArgSettledBefore))
		}
	}
	return "(" + strings.Join(or, " OR ") + ")"
}

// PickQueued locks the holder of the id bound where it is queued and no transaction holds it
// (SKIP LOCKED), and reads its id: no row where it is not; the replace's and the throttle's first
// statement where the database has row locks (Caps.SkipLocked). It binds the id, then now where
// the table has a lease column.
func (u Unique) PickQueued() Statement {
	t, p := u.s.t, u.s.Params()
	conds := append([]string{t.ID + " = " + p.Next(ArgID)}, u.queued(p)...)
	return p.statement("SELECT " + t.ID + " FROM " + t.Name + " WHERE " + strings.Join(conds, " AND ") + " FOR UPDATE SKIP LOCKED")
}

// Replace writes the message's payload and run time (retry_after: NULL where it is due at once)
// into the holder of the id bound where it is queued, each where the table has the column; empty
// where it has neither. It binds the payload, the run time, the id, then now where the table has
// a lease column.
func (u Unique) Replace() Statement {
	t, p := u.s.t, u.s.Params()
	var sets []string
	if t.Payload != "" {
		sets = append(sets, t.Payload+" = "+p.Next(ArgPayload))
	}
	if t.RetryAfter != "" {
		sets = append(sets, t.RetryAfter+" = "+p.Next(ArgAt))
	}
	if len(sets) == 0 {
		return Statement{}
	}
	conds := append([]string{t.ID + " = " + p.Next(ArgID)}, u.queued(p)...)
	return p.statement("UPDATE " + t.Name + " SET " + strings.Join(sets, ", ") + " WHERE " + strings.Join(conds, " AND "))
}

// Throttle moves the holder of the id bound to the message's run time where the holder is queued
// and runs later (retry_after after it), so that the earlier of the two is kept; a holder never
// delayed (retry_after NULL) is due already and keeps its time. It binds the run time as
// retry_after takes it (NULL where it is due at once), the id, now where the table has a lease
// column, then the run time to compare (the publish's now where it is due at once). It needs the
// table's retry_after column; empty without it.
func (u Unique) Throttle() Statement {
	t, p := u.s.t, u.s.Params()
	if t.RetryAfter == "" {
		return Statement{}
	}
	head := "UPDATE " + t.Name + " SET " + t.RetryAfter + " = " + p.Next(ArgAt)
	conds := append([]string{t.ID + " = " + p.Next(ArgID)}, u.queued(p)...)
	conds = append(conds, t.RetryAfter+" > "+p.Next(ArgRunAt))
	return p.statement(head + " WHERE " + strings.Join(conds, " AND "))
}

// PickExpired locks the holder of the id bound where it settled before the time bound (its key
// has expired: UniqueWindow) and no transaction holds it (SKIP LOCKED), and reads its id; where
// the database has row locks. It binds the id, then the time once per settlement column. Empty
// where the table keeps no settled row (neither processed_at nor dead_at).
func (u Unique) PickExpired() Statement {
	t, p := u.s.t, u.s.Params()
	if t.ProcessedAt == "" && t.DeadAt == "" {
		return Statement{}
	}
	where := t.ID + " = " + p.Next(ArgID) + " AND " + u.expired(p)
	return p.statement("SELECT " + t.ID + " FROM " + t.Name + " WHERE " + where + " FOR UPDATE SKIP LOCKED")
}

// Expire clears the unique key of the holder of the id bound where it settled before the time
// bound, so that the publish's INSERT, run again, takes the key. It binds as PickExpired does,
// and is empty where it is.
func (u Unique) Expire() Statement {
	t, p := u.s.t, u.s.Params()
	if t.ProcessedAt == "" && t.DeadAt == "" {
		return Statement{}
	}
	where := t.ID + " = " + p.Next(ArgID) + " AND " + u.expired(p)
	return p.statement("UPDATE " + t.Name + " SET " + t.UniqueKey + " = NULL WHERE " + where)
}
