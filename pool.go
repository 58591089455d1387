package inbox

import (
	"database/sql"
	"time"
)

// poolLook is how often the consumer looks at its pool, and poolWaitLimit how long every
// connection must have been in use, with requests waiting for one, before it says so.
const (
	poolLook      = time.Second
	poolWaitLimit = 5 * time.Second
)

// watchPool looks at the pool every poolLook until stop is closed, and logs a warning once per
// episode (see poolWatch) that lasts poolWaitLimit, and the end of an episode it warned of.
// database/sql counts a wait when it begins, so a wait that never ends still shows.
func (r *run) watchPool(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	ticker := time.NewTicker(poolLook)
	defer ticker.Stop()
	var w poolWatch
	prev := r.c.db.Stats()
	for {
		select {
		case <-stop:
			return
		case now := <-ticker.C:
			s := r.c.db.Stats()
			switch say, lasted := w.look(now, prev, s); say {
			case poolStarved:
				r.log.Warn("inbox: every connection of the pool has been in use for "+lasted.Round(time.Second).String()+" with requests waiting for one: raise db.SetMaxOpenConns (max_open_conns) to the connections the consumer holds (consumer_holds) plus every one its handlers and the rest of the application take from db at once (a handler that holds a query open while it runs another takes two)",
					"max_open_conns", s.MaxOpenConnections, "in_use", s.InUse, "waits", s.WaitCount-w.base, "consumer_holds", r.holds())
			case poolEased:
				r.log.Info("inbox: the pool has a connection to spare again", "after", lasted.Round(time.Second))
			}
			prev = s
		}
	}
}

// holds is how many pooled connections the consumer may hold at once: one per delivery in work
// where deliveries hold one, or one for its statements, and the form's own.
func (r *run) holds() int {
	n := 1
	if r.plan.HoldsConnection {
		n = len(r.slots)
	}
	if r.plan.OwnConnection {
		n++
	}
	return n
}

// poolWatch follows the episodes in which the pool has no connection to spare and requests wait
// for one: each begins at a look that finds the pool full and a wait begun since the look
// before, and ends at the first look that finds a connection to spare.
type poolWatch struct {
	since  time.Time // the first look of the episode; zero between episodes
	base   int64     // the pool's WaitCount at the look before the episode
	warned bool
}

type poolLookout int

const (
	poolFine    poolLookout = iota
	poolStarved             // the episode has lasted poolWaitLimit with waits: warn, once
	poolEased               // an episode that was warned of has ended
)

// look takes the pool's stats s at now, prev being the stats of the look before, and returns
// what to say and how long the episode has lasted.
func (w *poolWatch) look(now time.Time, prev, s sql.DBStats) (poolLookout, time.Duration) {
	if s.MaxOpenConnections <= 0 || s.InUse < s.MaxOpenConnections {
		lasted, eased := now.Sub(w.since), w.warned
		w.since, w.warned = time.Time{}, false
		if eased {
			return poolEased, lasted
		}
		return poolFine, 0
	}
	if w.since.IsZero() {
		if s.WaitCount == prev.WaitCount {
			return poolFine, 0 // full, and no request has begun to wait
		}
		w.since, w.base = now, prev.WaitCount
	}
	lasted := now.Sub(w.since)
	if !w.warned && lasted >= poolWaitLimit {
		w.warned = true
		return poolStarved, lasted
	}
	return poolFine, lasted
}
