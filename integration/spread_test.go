package integration

import (
	"database/sql"
	"log/slog"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
)

// spread is where a scenario of the lease form's features (groups, limits, rates, pauses) runs:
// the pools its consumers run on, each as a process of its own would have (pools of the shared
// server's database, the nodes of a Galera cluster, clients of PgBouncer), the pool it sets up,
// publishes and reads on, and what the consumers' settings must say there. The feature tests
// run their scenarios on the shared servers (localSpread), the cluster tests on theirs.
type spread struct {
	b             backend
	admin         *sql.DB
	pools         []*sql.DB
	unprepared    bool // Config.UnpreparedStatements, for a pooler in transaction mode
	transactional bool // Config.Transactional: each row settles in its handler's transaction
	// applied, where set, waits until every pool's server has applied the commits made so far
	// on admin, table's creation among them: a Galera node applies another's DDL a moment
	// after it returns, and a consumer opened on it at once may find no table.
	applied func(t *testing.T, table string)
	// logs, where set, takes the consumers' warnings and errors (and passes them to the
	// test's log), for a cluster test to count what its consumers met.
	logs *faultLog
}

// localSpread is n pools of pool connections on one database of b, the first of them the
// admin's too, as the feature tests have always run.
func localSpread(t *testing.T, b backend, n, pool int) spread {
	dbs := b.openDBs(t, n, pool)
	return spread{b: b, admin: dbs[0], pools: dbs}
}

// ready waits, where the spread needs it, until every pool's server has table.
func (s spread) ready(t *testing.T, table string) {
	t.Helper()
	if s.applied != nil {
		s.applied(t, table)
	}
}

// config is cfg with the spread's settings.
func (s spread) config(cfg *inbox.Config) *inbox.Config {
	cfg.UnpreparedStatements, cfg.Transactional = s.unprepared, s.transactional
	if s.logs != nil {
		cfg.Logger = s.logs.Logger(slog.LevelWarn)
	}
	return cfg
}

// consumers builds a lease consumer of tbl on each of the spread's pools, of workers workers,
// polling every poll, handing rows to h.
func (s spread) consumers(t *testing.T, tbl inbox.Table, workers int, poll time.Duration, h inbox.Handler) []*inbox.Consumer {
	var cs []*inbox.Consumer
	for _, db := range s.pools {
		cs = append(cs, inbox.NewConsumer(db, lease.New(s.b.dialect, tbl, nil), h, s.config(&inbox.Config{Queue: "q", Workers: workers, PollInterval: poll, Logger: testLogger(t)})))
	}
	return cs
}
