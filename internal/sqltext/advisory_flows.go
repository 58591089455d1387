package sqltext

import (
	"strconv"
	"strings"
)

// The advisory form's FIFO groups, concurrency limits and rate limits (issue 26). A group is
// held by a session lock of its own, named from the table, the queue and the group key
// (GroupLockPrefix), taken on the row's session before the row's key and released with it; a
// limit by one of its max_in_work slot locks (LimitSlotKey); a start by a rate's start slot,
// taken by a compare-and-set in autocommit (Rates.TakeSlot) once the row's key is held. The
// lock names start with "inbox:", which a key template must not render (docs/groups.md).

// GroupLockPrefix is the text every group lock name of job table table starts with; the queue,
// a colon and the group key follow.
func GroupLockPrefix(table string) string { return "inbox:group:" + table + ":" }

// LimitSlotKey is the name of slot slot of the limit of job table table, queue, scope and key.
func LimitSlotKey(table, queue, scope, key string, slot int) string {
	return "inbox:limit:" + table + ":" + queue + ":" + scope + ":" + key + ":" + strconv.Itoa(slot)
}

// Flows returns the builder of a claim that takes more locks than the row's: its candidates
// also return the row's group lock name (NULL for a row of no group, or where the table has no
// groups), its kind and its limit key (empty text where the table lacks the column), and the
// claim takes no lock in its read (LockFirst is empty).
func (a Advisory) Flows() Advisory {
	a.flows = true
	return a
}

// Grouped returns the builder over a table with FIFO groups (inbox.Table.GroupKey), whose group
// locks are named prefix (GroupLockPrefix, with no quote, backslash or NUL byte), the row's
// queue, a colon and its group key. Its candidates are the heads of their groups (the lowest id
// of the queue and group neither processed, dead nor cancelled), passing over groups whose lock
// is held elsewhere, decided before the LIMIT; with paused, also groups paused in GroupsTable.
// It implies Flows.
func (a Advisory) Grouped(prefix string, paused bool) Advisory {
	s, t := a.s, a.s.t
	queue := "''"
	if t.Queue != "" {
		queue = "COALESCE(CAST(" + t.Name + "." + t.Queue + " AS " + s.c.TextType + "), '')"
	}
	pieces := []string{"'" + prefix + "'", queue, "':'", "CAST(" + t.Name + "." + t.GroupKey + " AS " + s.c.TextType + ")"}
	name := "CONCAT(" + strings.Join(pieces, ", ") + ")"
	if s.c.ConcatOperator {
		name = strings.Join(pieces, " || ")
	}
	// A NULL group key makes the name NULL with || ; CONCAT does too (MySQL, MariaDB).
	a.group, a.paused, a.flows = "("+name+")", paused, true
	return a
}

// flowSelect is the candidates' select list's tail where the claim takes more locks: the group
// lock name, the kind and the limit key, as inbox_group, inbox_kind and inbox_limit_key.
func (a Advisory) flowSelect() string {
	if !a.flows {
		return ""
	}
	t := a.s.t
	group := "CAST(NULL AS " + a.s.c.TextType + ")"
	if a.group != "" {
		group = a.group
	}
	text := func(col string) string {
		if col == "" {
			return "''"
		}
		return "COALESCE(CAST(" + t.Name + "." + col + " AS " + a.s.c.TextType + "), '')"
	}
	return ", " + group + " AS inbox_group, " + text(t.Kind) + " AS inbox_kind, " + text(t.LimitKey) + " AS inbox_limit_key"
}

// flowColumns is flowSelect's columns as an outer select names them, each prefixed.
func (a Advisory) flowColumns(prefix string) string {
	if !a.flows {
		return ""
	}
	return ", " + prefix + "inbox_group, " + prefix + "inbox_kind, " + prefix + "inbox_limit_key"
}

// groupHead is the candidates' predicate of a row of no group, or the head of its group that is
// not paused. It binds, where the builder honours pauses, the table's name, then the queue.
func (a Advisory) groupHead(p *Params) string {
	g := a.s.t.Name + "." + a.s.t.GroupKey
	pred := a.s.isGroupHead()
	if a.paused {
		pred += " AND NOT EXISTS (SELECT 1 FROM " + GroupsTable + " inbox_hold WHERE inbox_hold.table_name = " + p.Next(ArgTable) +
			" AND inbox_hold.queue = " + p.Next(ArgQueue) + " AND inbox_hold.group_key = " + g + " AND inbox_hold.paused_at IS NOT NULL)"
	}
	return "(" + g + " IS NULL OR (" + pred + "))"
}

// Head re-checks, on a session that holds the row's group lock and its key, that the row is
// still the head of its group and its group not paused: a statement that starts after the locks
// are held, so it sees every settlement the group's last holder committed before releasing it.
// It returns a row where the row is still the head, none otherwise. It binds the id, then
// (where the builder honours pauses) the table's name and the queue. Empty without groups.
func (a Advisory) Head() Statement {
	if a.group == "" {
		return Statement{}
	}
	t := a.s.t
	p := a.s.Params()
	return p.statement("SELECT 1 FROM " + t.Name + " WHERE " + t.Name + "." + t.ID + " = " + p.Next(ArgID) + " AND " + a.groupHead(p))
}

// OfQueue reads the limits of a claim's queue: the scope, the key and max_in_work of each. The
// advisory form reads them at each claim, so that a limit changed at run time holds from the
// next claim. It binds the job table's name, then the queue (where the table has a queue
// column).
func (w Limits) OfQueue() Statement {
	p := w.s.Params()
	return p.statement("SELECT scope, limit_key, max_in_work FROM " + w.s.t.Limits + " WHERE table_name = " + p.Next(ArgTable) +
		" AND queue = " + w.s.Rates().claimQueue(p))
}
