package harness

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/vgarvardt/gue/v5"
	"github.com/vgarvardt/gue/v5/adapter/pgxv5"
)

// gueDDL is the table and index gue needs (gue ships them as SQL, not as a Go call).
var gueDDL = []string{`CREATE TABLE IF NOT EXISTS gue_jobs (
  job_id      TEXT        NOT NULL PRIMARY KEY,
  priority    SMALLINT    NOT NULL,
  run_at      TIMESTAMPTZ NOT NULL,
  job_type    TEXT        NOT NULL,
  args        BYTEA       NOT NULL,
  error_count INTEGER     NOT NULL DEFAULT 0,
  last_error  TEXT,
  queue       TEXT        NOT NULL,
  created_at  TIMESTAMPTZ NOT NULL,
  updated_at  TIMESTAMPTZ NOT NULL
)`, `CREATE INDEX IF NOT EXISTS idx_gue_jobs_selector ON gue_jobs (queue, run_at, priority)`}

// GueClient creates gue's table and index where pool's search path puts them, unless they are
// there, and returns a gue client on pool; on an error the caller still owns pool.
func GueClient(ctx context.Context, pool *pgxpool.Pool) (*gue.Client, error) {
	for _, ddl := range gueDDL {
		if _, err := pool.Exec(ctx, ddl); err != nil {
			return nil, err
		}
	}
	return gue.NewClient(pgxv5.NewConnPool(pool))
}
