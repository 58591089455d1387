package main

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"time"

	"github.com/maragudk/goqite"

	"github.com/sqlinbox/inbox/bench/harness"
)

// goqiteQueue drains a goqite queue. Its fastest reasonable settings: w goroutines, each
// receiving and deleting one message at a time through the queue's own Receive and Delete
// (goqite's jobs runner waits a poll interval before every receive, which caps it far lower),
// an empty receive while messages remain in other hands waiting a millisecond; the pool its
// documentation recommends (-sqlite-pool, default 1).
type goqiteQueue struct {
	db *sql.DB
	q  *goqite.Queue
}

func newGoqite(ctx context.Context, path string, pool int) (contender, error) {
	db, err := sql.Open("sqlite", harness.SQLiteDSN(path))
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(pool)
	if err := goqite.Setup(ctx, db); err != nil {
		db.Close()
		return nil, err
	}
	return &goqiteQueue{db: db, q: goqite.New(goqite.NewOpts{DB: db, Name: "bench"})}, nil
}

func (g *goqiteQueue) name() string { return "goqite" }
func (g *goqiteQueue) ours() bool   { return false }
func (g *goqiteQueue) batch() int   { return 1 }
func (g *goqiteQueue) close()       { g.db.Close() }

func (g *goqiteQueue) prefill(ctx context.Context, n int) error {
	if _, err := g.db.ExecContext(ctx, "DELETE FROM goqite"); err != nil {
		return err
	}
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for seq := 1; seq <= n; seq++ {
		if err := g.q.SendTx(ctx, tx, goqite.Message{Body: harness.Payload(seq)}); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func (g *goqiteQueue) drain(ctx context.Context, n, w int) (time.Duration, error) {
	var (
		handled  atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
	)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for handled.Load() < int64(n) && runCtx.Err() == nil {
				m, err := g.q.Receive(runCtx)
				if err == nil && m == nil {
					time.Sleep(time.Millisecond)
					continue
				}
				if err == nil {
					err = g.q.Delete(runCtx, m.ID)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = err; cancel() })
					return
				}
				handled.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return 0, firstErr
	}
	var left int64
	if err := g.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM goqite").Scan(&left); err != nil {
		return 0, err
	}
	if err := harness.Check("goqite", left, handled.Load(), int64(n)); err != nil {
		return 0, err
	}
	return elapsed, nil
}
