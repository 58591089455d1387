package ui

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/sqlinbox/inbox/admin"
)

// groupsRead is how many groups the groups page reads at most, by key: a queue with more shows
// the first, and says so.
const groupsRead = 500

// groupsPage lists the FIFO groups with rows pending of one queue (admin.QueueGroups), or only
// those a failing head blocks.
type groupsPage struct {
	view
	// Queue is the queue listed, as its form names it: the one asked, or else the first the
	// queues' counts name. Empty for a table without a queue column, or before the first count
	// ended: then the groups of every queue are listed (admin.Groups).
	Queue   string
	Tabs    []queueTab // the queues the last count saw, as links
	Blocked bool       // only the blocked groups
	Groups  []groupLine
	Read    int  // the groups read, blocked or not
	Capped  bool // groupsRead groups were read: there may be more
	Now     time.Time
}

// queueTab is a queue the groups page lists, as a link.
type queueTab struct {
	Queue   string
	Query   template.URL
	Current bool
}

// groupLine is a group as the page shows it.
type groupLine struct {
	admin.Group
	Shown   string // its queue as shown
	Blocked bool
}

// groups lists one queue's groups at a time: a queue's are found by the group index's range
// (queue, group key), where those of every queue would be found by reading every pending row of
// no group as well.
func (h *handler) groups(w http.ResponseWriter, r *http.Request) {
	if !h.caps.Groups {
		h.fail(w, r, http.StatusNotFound, errors.New("this table has no FIFO groups: its description names no group column (inbox.Table.GroupKey, inbox ui -group-key)"))
		return
	}
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	q := r.URL.Query()
	p := groupsPage{view: h.view(w, r, "groups"), Queue: q.Get("queue"), Blocked: q.Get("blocked") != "", Now: time.Now()}
	if h.caps.Queues {
		for _, s := range h.counts.read(ctx).Stats {
			shown := shownQueue(s.Queue)
			if p.Queue == "" {
				p.Queue = shown
			}
			v := url.Values{"queue": {shown}}
			if p.Blocked {
				v.Set("blocked", "1")
			}
			p.Tabs = append(p.Tabs, queueTab{Queue: shown, Query: queryOf(v), Current: shown == p.Queue})
		}
	} else {
		p.Queue = ""
	}
	var list []admin.Group
	var err error
	switch p.Queue {
	case "":
		list, err = h.a.Groups(ctx, groupsRead)
	case emptyQueue:
		list, err = h.a.QueueGroups(ctx, "", groupsRead)
	default:
		list, err = h.a.QueueGroups(ctx, p.Queue, groupsRead)
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
