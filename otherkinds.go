package inbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// otherKind is a kind of job whose rows wait in a consumer's queue and that the consumer does
// not run: its name (empty for rows of no kind), its pending rows, and how long the oldest of
// them that is due has been due (negative where that is unknown or none is due).
type otherKind struct {
	kind   string
	rows   int64
	oldest time.Duration
}

// findOtherKinds returns the search a consumer of kinds makes for the kinds of job in its queue
// that it does not run, passing over those it was given (the kinds reported already); nil
// where the consumer runs no kinds or the plan gives no table to search.
func (c *Consumer) findOtherKinds(plan Plan) (func(ctx context.Context, reported []string) ([]otherKind, error), error) {
	if c.kinds == nil || plan.Dialect == nil || plan.Described.Kind == "" {
		return nil, nil
	}
	q, err := plan.Described.Quote(plan.Dialect)
	if err != nil {
		return nil, err
	}
	s := sqltext.New(plan.Dialect.Caps(), sqltext.Table(q))
	clock := c.cfg.Clock
	if clock == nil {
		clock = hostClock{}
	}
	runs := c.kinds.Names()
	return func(ctx context.Context, reported []string) ([]otherKind, error) {
		now := clock.Now()
		kinds := append(append([]string(nil), runs...), reported...)
		st := s.OtherKinds(len(kinds))
		args := st.Bind(nil, &sqltext.Values{Now: plan.Dialect.Time(now), Queue: c.cfg.Queue, Kinds: kinds})
		rows, err := c.db.QueryContext(ctx, st.SQL, args...)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var out []otherKind
		for rows.Next() {
			var k otherKind
			var since any
			if err := rows.Scan(&k.kind, &k.rows, &since); err != nil {
				return nil, err
			}
			k.oldest = -1
			if t, err := dialect.ScannedTime(since); since != nil && err == nil {
				k.oldest = max(now.Sub(t), 0)
			}
			out = append(out, k)
		}
		return out, rows.Err()
	}, nil
}

// watchOtherKinds searches a queue with find for rows of kinds its consumer does not run, at
// once and then every `every` until ctx ends, and logs each such kind once a run, at WARN, with
// its rows and the wait of its oldest due row: no claim of the consumer takes them, and unless
// another consumer runs the kind they wait for ever. A kind logged is not searched for again.
func watchOtherKinds(ctx context.Context, find func(context.Context, []string) ([]otherKind, error), log *slog.Logger, every time.Duration) {
	var reported []string
	searchEvery(ctx, every, log, "rows of kinds this consumer does not run", func(ctx context.Context) error {
		found, err := find(ctx, reported)
		if err != nil {
			return err
		}
		for _, k := range found {
			oldest := any(k.oldest)
			if k.oldest < 0 {
				oldest = "unknown"
			}
			log.Warn("inbox: rows of a kind this consumer does not run wait in its queue: none of its claims takes them, so unless another consumer's inbox.Kinds registers the kind they wait there (said once per kind)",
				"kind", k.kind, "rows", k.rows, "oldest_due", oldest)
			reported = append(reported, k.kind)
		}
		return nil
	})
}
