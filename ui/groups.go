package ui

import (
	"errors"
	"net/http"
	"time"

	"github.com/sqlinbox/inbox/admin"
)

// groupsRead is how many groups the groups page reads at most, by queue and key: a table with
// more shows the first, and says so.
const groupsRead = 500

// groupsPage lists the table's FIFO groups with rows pending (admin.Groups), of one queue or of
// every queue, or only those a failing head blocks.
type groupsPage struct {
	view
	Queue   string   // the queue listed, as its form names it; empty: every queue
	Queues  []string // the queues the last count saw, for the queue field's suggestions
	Blocked bool     // only the blocked groups
	Groups  []groupLine
	Read    int  // the groups read, blocked or not
	Capped  bool // groupsRead groups were read: there may be more
	Now     time.Time
}

// groupLine is a group as the page shows it.
type groupLine struct {
	admin.Group
	Shown   string // its queue as shown
	Blocked bool
}

func (h *handler) groups(w http.ResponseWriter, r *http.Request) {
	if !h.caps.Groups {
		h.fail(w, r, http.StatusNotFound, errors.New("this table has no FIFO groups: its description names no group column (inbox.Table.GroupKey, inbox ui -group-key)"))
		return
	}
	q := r.URL.Query()
	p := groupsPage{view: h.view(w, r, "groups"), Queue: q.Get("queue"), Blocked: q.Get("blocked") != "", Now: time.Now()}
	for _, s := range h.counts.lastStats() {
		p.Queues = append(p.Queues, shownQueue(s.Queue))
	}
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	var list []admin.Group
	var err error
	switch {
	case p.Queue != "" && h.caps.Queues:
		queue := p.Queue
		if queue == emptyQueue {
			queue = ""
		}
		list, err = h.a.QueueGroups(ctx, queue, groupsRead)
	default:
		p.Queue = ""
		list, err = h.a.Groups(ctx, groupsRead)
	}
	if err != nil {
		h.fail(w, r, h.statusOf(err), err)
		return
	}
	p.Read, p.Capped = len(list), len(list) == groupsRead
	for _, g := range list {
		blocked := g.Blocked(p.Now)
		if p.Blocked && !blocked {
			continue
		}
		p.Groups = append(p.Groups, groupLine{Group: g, Shown: shownQueue(g.Queue), Blocked: blocked})
	}
	h.render(w, http.StatusOK, "groups", p)
}
