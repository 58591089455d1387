package sqltext

import (
	"fmt"
	"hash/fnv"
)

// NextDue is the earliest retry_after of the queue's live rows (not processed, not dead) that
// are not due yet, of the kinds claimed (OfKinds), or NULL when none is delayed or the queue is
// paused (Pauses); empty where the table has no retry_after column. It binds, in order: now,
// the queue's name (where the table has a queue column), then the pause's table and queue
// (where the description names a pauses table).
func (s SQL) NextDue() Statement {
	t := s.t
	if t.RetryAfter == "" {
		return Statement{}
	}
	p := s.Params()
	conds := t.RetryAfter + " > " + p.Next(ArgNow)
	if t.CancelledAt != "" {
		conds = t.CancelledAt + " IS NULL AND " + conds
	}
	if t.DeadAt != "" {
		conds = t.DeadAt + " IS NULL AND " + conds
	}
	if t.ProcessedAt != "" {
		conds = t.ProcessedAt + " IS NULL AND " + conds
	}
	if t.Queue != "" {
		conds += " AND " + t.Queue + " = " + p.Next(ArgQueue)
	}
	if len(s.kinds) > 0 && t.Kind != "" {
		conds += " AND " + s.ofKinds("")
	}
	if t.Pauses != "" {
		conds += " AND " + s.Pauses().notPaused(p)
	}
	return p.statement("SELECT MIN(" + t.RetryAfter + ") FROM " + t.Name + " WHERE " + conds)
}

// Notifying is statement stmt that also sends a Postgres notification with an empty payload
// on a channel, bound by parameter param after stmt's own: stmt runs as a WITH query (which
// runs whether or not it is read), so one statement inserts and notifies. The notification is
// delivered when the statement's transaction commits, and not at all on a rollback.
func Notifying(stmt, param string) string {
	return "WITH published AS (" + stmt + ") SELECT pg_notify(" + param + ", '')"
}

// Notify sends a Postgres notification with an empty payload on the channel bound as $1, at
// its transaction's commit: after statements that hand back a value, which Notifying's cannot.
const Notify = "SELECT pg_notify($1, '')"

// DataVersion reads SQLite's data version: a number that changes, on the connection that reads
// it, each time another connection commits a change to the database file.
const DataVersion = "PRAGMA data_version"

// maxChannel is the longest Postgres channel name (NAMEDATALEN less one, in bytes).
const maxChannel = 63

// Channel is the Postgres notification channel of a table named name (unquoted): "inbox." and
// the name, or where that is longer than 63 bytes its first 54 bytes, a dot and 8 hex digits of
// a hash of the whole, so that two long names differ.
func Channel(name string) string {
	c := "inbox." + name
	if len(c) <= maxChannel {
		return c
	}
	h := fnv.New32a()
	h.Write([]byte(c))
	return fmt.Sprintf("%s.%08x", truncate(c, maxChannel-9), h.Sum32())
}

// truncate cuts s to at most n bytes, at a rune's start.
func truncate(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}
