package ui

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/sqlinbox/inbox/admin"
)

// countWait is how long a page waits for the overview's first count: a small table's page
// shows its counts at once, a large table's page does not wait for them (it says they are
// being counted, and refreshes).
const countWait = 150 * time.Millisecond

// countPause is how many times as long as the last count took a new one waits, at least: the
// counts keep a connection busy a fifth of the time at most, however large the table.
const countPause = 4

// counts keeps the overview's counts: admin.Stats, one statement that reads the whole table,
// run in the background when a page asks for counts older than every (or countPause times as
// long as the last count took), at most one at a time, each under timeout. No goroutine
// outlives its count.
type counts struct {
	stats   func(context.Context) ([]admin.Stats, error)
	every   time.Duration
	timeout time.Duration

	mu      sync.Mutex
	last    countsRead
	running chan struct{} // closed when the running count ends; nil when none runs
}

// countsRead is one count: the counts, or its error and the counts before, when it ended and
// how long it took.
type countsRead struct {
	Stats   []admin.Stats
	StatsAt time.Time     // when Stats were counted; zero before a count succeeded
	Took    time.Duration // how long counting Stats took
	Err     error         // the last count's error
	At      time.Time     // when the last count ended; zero before the first did
}

// read returns the last count, starting a new one when it is older than every; before the
// first count ends it waits for it up to countWait (or ctx's end).
func (c *counts) read(ctx context.Context) countsRead {
	c.mu.Lock()
	if c.running == nil && time.Since(c.last.At) >= max(c.every, countPause*c.last.Took) {
		c.running = make(chan struct{})
		go c.count(c.running)
	}
	last, running := c.last, c.running
	c.mu.Unlock()
	if !last.At.IsZero() || running == nil {
		return last
	}
	select {
	case <-running:
	case <-time.After(countWait):
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

func (c *counts) count(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	start := time.Now()
	stats, err := c.stats(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	read := countsRead{Stats: stats, StatsAt: now, Took: now.Sub(start), Err: err, At: now}
	if err != nil {
		// The page shows the error beside the counts before, and dates them.
		read.Stats, read.StatsAt, read.Took = c.last.Stats, c.last.StatsAt, c.last.Took
	}
	c.last = read
	c.running = nil
	close(done)
}

// lastStats are the last counts, without starting a count.
func (c *counts) lastStats() []admin.Stats { return c.lastRead().Stats }

// lastRead is the last count, without starting one.
func (c *counts) lastRead() countsRead {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// setPaused marks queue paused or not in the last counts, as a pause or a resume from the page
// left it, until the next count reads it.
func (c *counts) setPaused(queue string, paused bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stats := slices.Clone(c.last.Stats)
	for i := range stats {
		if stats[i].Queue == queue {
			stats[i].Paused = paused
		}
	}
	c.last.Stats = stats
}
