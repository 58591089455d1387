package ui

import (
	"net/http"
	"slices"
	"time"

	"github.com/sqlinbox/inbox/admin"
)

// count counts, into p, the rows its action takes before it runs: the selected ids; or, for
// every match of a filter of a state and a queue that the queues' counts tell, from those
// counts, dated; or, for another filter, in windows of countWindow ids from the highest down,
// until the count reaches countCap, or has read every id, or has taken countBudget: then it is
// a lower bound, and p says down to which id it counted. A filter with a lowest id is counted
// in one statement.
func (h *handler) count(r *http.Request, p *actPage, sel admin.Selection) error {
	ctx, cancel := h.queryCtx(r)
	defer cancel()
	defer func() { p.Capped = p.Count >= countCap }()
	if p.Scope != "matching" || p.Filter.FromID != 0 {
		n, err := h.a.Count(ctx, p.Action, sel, countCap)
		p.Count = n
		return err
	}
	if n, at, ok := h.counted(p.Action, p.Filter); ok {
		p.Count, p.CountedAt = n, at
		return nil
	}
	lowest, top, _, err := h.ids(ctx, p.Filter)
	if err != nil {
		return err
	}
	start := time.Now()
	size, last := int64(scanSpan), time.Duration(0)
	for top >= lowest && p.Count < countCap {
		if time.Since(start)+2*last > countBudget {
			p.CountedFrom = top + 1
			return nil
		}
		window := p.Filter
		window.FromID, window.ToID = max(lowest, top-size+1), top
		began := time.Now()
		n, err := h.a.Count(ctx, p.Action, admin.Matching(window), countCap-p.Count)
		if err != nil {
			return err
		}
		p.Count += n
		top, size, last = window.FromID-1, 2*size, time.Since(began)
	}
	return nil
}

// counted is the count of the rows act takes among those f matches, from the queues' counts
// (the last admin.Stats) and when they were read, where they tell it: f names a state, at
// most a queue and no kind, and act takes every row of that state that no consumer holds (a
// cancel takes those held too: the rows in work).
func (h *handler) counted(act admin.Action, f admin.Filter) (int64, time.Time, bool) {
	if f.ToID != 0 || f.OlderThan != 0 || unindexed(f) || len(f.Queues) > 1 || len(f.Kinds) > 0 {
		return 0, time.Time{}, false
	}
	of := map[admin.Action][]admin.State{
		admin.Requeue:  {admin.Dead},
		admin.RetryNow: {admin.Delayed},
		admin.Delete:   {admin.Due, admin.Delayed, admin.Dead, admin.Processed},
		admin.Cancel:   {admin.Due, admin.Delayed, admin.InWork},
	}
	if !slices.Contains(of[act], f.State) {
		return 0, time.Time{}, false
	}
	read := h.counts.lastRead()
	if read.StatsAt.IsZero() {
		return 0, time.Time{}, false
	}
	var n int64
	for _, s := range read.Stats {
		if len(f.Queues) == 1 && s.Queue != f.Queues[0] {
			continue
		}
		n += map[admin.State]int64{admin.Due: s.Due, admin.Delayed: s.Delayed, admin.InWork: s.InWork, admin.Dead: s.Dead, admin.Processed: s.Processed}[f.State]
	}
	return n, read.StatsAt, true
}
