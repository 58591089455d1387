package inbox

import (
	"context"
	"log/slog"
	"time"
)

// Unclaimable is one kind of row of a queue that no claim takes as the row stands, and that
// nothing in the library will change: a NULL in the queue column, an attempt at the limit
// (Binding.MaxAttempts) on a row that did not settle, a retry_after more than a century ahead,
// or (SQLite) a retry_after that is not a time in the library's layout. See the package
// documentation on what a claimable row is.
type Unclaimable struct {
	// Why says what keeps the rows from being claimed and what to change.
	Why string
	// Rows is how many such rows the search found; it stops at 1,000.
	Rows int
	// More says the search stopped at its limit: there may be more.
	More bool
	// IDs are the ids of the first few rows found.
	IDs []int64
}

// unclaimableEvery is how long a consumer waits between searches for unclaimable rows;
// unclaimableTimeout bounds each search.
var (
	unclaimableEvery   = 10 * time.Minute
	unclaimableTimeout = 30 * time.Second
)

// searchEvery runs search at once and then every `every` until ctx ends, each run bounded by
// unclaimableTimeout; a failure is logged at WARN (what names the search) and tried again at
// the next turn.
func searchEvery(ctx context.Context, every time.Duration, log *slog.Logger, what string, search func(ctx context.Context) error) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		bounded, cancel := context.WithTimeout(ctx, unclaimableTimeout)
		err := search(bounded)
		cancel()
		timer.Reset(every)
		if err != nil && ctx.Err() == nil {
			log.Warn("inbox: searching the queue for "+what+" failed; trying again later", "err", err, "in", every)
		}
	}
}

// watchUnclaimable searches a queue with find for unclaimable rows at once and then every
// unclaimableEvery until ctx ends, and logs each kind whose count changed since the last search
// that succeeded: a warning for a kind found, a line at info for a kind gone.
func watchUnclaimable(ctx context.Context, find func(context.Context) ([]Unclaimable, error), log *slog.Logger) {
	reported := map[string]int{} // rows of each kind, as last logged
	searchEvery(ctx, unclaimableEvery, log, "rows no claim will take", func(ctx context.Context) error {
		found, err := find(ctx)
		if err != nil {
			return err
		}
		now := map[string]int{}
		for _, u := range found {
			now[u.Why] = u.Rows
			if reported[u.Why] != u.Rows {
				log.Warn("inbox: rows of the queue that no claim will take", "rows", u.Rows, "more", u.More, "ids", u.IDs, "why", u.Why)
			}
		}
		for why := range reported {
			if _, ok := now[why]; !ok {
				log.Info("inbox: no rows of the queue are unclaimable for this reason any more", "why", why)
			}
		}
		reported = now
		return nil
	})
}
