package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/outcome"
)

// TestClusterPgBouncer runs the forms through PgBouncer (the Debian package) in front of a
// private Postgres: every way of consuming in session pooling, and in transaction pooling
// first what PgBouncer does to prepared statements and session advisory locks, then what the
// forms do there, as they prepare their statements and with Config.UnpreparedStatements.
// docs/clusters.md has the figures and what follows from them.
func TestClusterPgBouncer(t *testing.T) {
	pg := privatePostgres(t)
	var table collector[string]
	record := func(mode string, w clusterWay, got drainCounts) {
		table.add(fmt.Sprintf("%-13s %-20s %s", mode, w, got))
	}
	t.Run("session", func(t *testing.T) {
		// Session pooling pins a server connection to each client connection for its life,
		// idle ones included: the pool must have room for every connection of every consumer's
		// pool, or the consumers wait for each other's idle connections.
		pgb := startPgBouncer(t, pg, "session", 30)
		b := backendNamed("postgres", pgb.dsn("postgres", ""))
		c := cell{b: b}
		admin := c.openDSN(t, pg.dsn, 4)
		var tests []subtest
		for _, w := range clusterWays() {
			tests = append(tests, subtest{w.String(), func(t *testing.T) {
				pools := []*sql.DB{c.openDSN(t, b.dsn, 4), c.openDSN(t, b.dsn, 4), c.openDSN(t, b.dsn, 4)}
				got := drain(t, b, admin, pools, w, 200, 2, 10*time.Second)
				record("session", w, got)
				if got.twice > 0 || got.overlapped > 0 || got.dupSettled > 0 || got.dupEffects > 0 || got.noEffect > 0 || got.logged > 0 {
					t.Errorf("the %s form through PgBouncer in session pooling: %s; want every row handled, settled and written once, and nothing logged", w.form, got)
				}
			}})
		}
		runConcurrently(t, 2, tests)
	})
	t.Run("transaction", func(t *testing.T) {
		// Transaction pooling hands each transaction (and each statement outside one) the next
		// free server connection. Each row lock delivery holds a transaction, and so a server
		// connection, while its handler runs, and a handler that writes outside it needs one
		// more: with fewer server connections than that across every consumer, the consumers
		// wait on each other for good, silently. 12 covers the 3 consumers of 2 workers of one
		// drain, so the drains run one at a time.
		pgb := startPgBouncer(t, pg, "transaction", 12)
		t.Run("facts", func(t *testing.T) { pgbouncerFacts(t, pg, pgb) })
		// Unprepared statements need pgx's exec mode (or simple_protocol) too: its default
		// prepares and caches each per client connection.
		dsn := pgb.dsn("postgres", "default_query_exec_mode=exec")
		b := backendNamed("postgres", dsn)
		c := cell{b: b}
		admin := c.openDSN(t, pg.dsn, 4)
		t.Run("prepared", func(t *testing.T) {
			// The forms prepare their statements (database/sql's Prepare, a named statement on
			// the server connection it ran on): PgBouncer before 1.21 does not carry them to
			// the other server connections. Every error that meets it names the pooler and the
			// settings; an Open that meets it ends Run (ErrDialect); and a row handled twice is
			// one whose settlement (or extension) failed so, and is named in the log.
			var tests []subtest
			for _, w := range []clusterWay{{form: "rowlock", transactional: true}, {form: "lease", transactional: true}, {form: "advisory", transactional: true}} {
				tests = append(tests, subtest{w.String(), func(t *testing.T) {
					pools := []*sql.DB{c.openDSN(t, dsn, 4), c.openDSN(t, dsn, 4), c.openDSN(t, dsn, 4)}
					s := newDrain(t, b, admin, 200)
					got := s.run(t, pools, w, 2, 10*time.Second, 5*time.Second)
					record("tx prepared", w, got)
					if w.form != "advisory" && (got.dupSettled > 0 || got.dupEffects > 0) {
						t.Errorf("the %s form through transaction pooling, its statements failing: %s; want no row settled or written twice", w.form, got)
					}
					if got.failed != "" && poolerRemedies(got.failed, false) != 1 {
						t.Errorf("Run through transaction pooling, its statements prepared: %s; want the pooler, inbox.Config.UnpreparedStatements and default_query_exec_mode=exec named once", got.failed)
					}
					log := s.logs.String()
					for _, line := range strings.Split(log, "\n") {
						if lost := strings.Count(line, "(SQLSTATE 42P05)") + strings.Count(line, "(SQLSTATE 26000)"); poolerRemedies(line, false) < lost {
							t.Errorf("logged without the remedy: %s", line)
							break
						}
					}
					if w.form == "advisory" {
						return // its session locks do not hold here: rows run twice at once
					}
					s.rec.mu.Lock()
					defer s.rec.mu.Unlock()
					named := loggedIDs(log)
					for id, n := range s.rec.starts {
						if n > 1 && !named[id] {
							t.Errorf("row %d was handled %d times, and no failure of its settlement or extension was logged", id, n)
						}
					}
				}})
			}
			runConcurrently(t, 1, tests)
		})
		t.Run("pgx default", func(t *testing.T) {
			// pgx's default mode (cache_statement) prepares each statement itself, named by its
			// text (stmtcache_…), on whatever server connection the pooler gave it; a client that
			// lands on a server connection where another client prepared the same statement
			// meets 42P05. Through one server connection another client has used, the first
			// statement of Open (the server's version) meets it every time. Run returns at once
			// with ErrDialect naming the pooler, the setting and pgx's DSN option, with the
			// setting on or off, rather than trying Open again for as long as it runs.
			single := pgb.dsn("single", "")
			neighbour := c.openDSN(t, single, 1)
			for _, w := range []clusterWay{{form: "rowlock"}, {form: "lease"}, {form: "advisory"}, {form: "rowlock", unprepared: true}, {form: "lease", unprepared: true}} {
				name := w.String()
				if w.unprepared {
					name += "-unprepared"
				}
				t.Run(name, func(t *testing.T) {
					var version string
					if err := neighbour.QueryRow("SHOW server_version_num").Scan(&version); err != nil {
						t.Fatal(err)
					}
					var log inboxtest.Log
					h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
					cons := clusterConsumer(t, b, c.openDSN(t, single, 4), w, inbox.Table{Name: "pgbouncer_pgx_default", ID: "id", Payload: "payload"}, 0, h, &inbox.Config{Logger: log.Logger(slog.LevelWarn)})
					// A Run that tries Open again logs so, and is stopped there.
					ctx, cancel := context.WithCancel(context.Background())
					defer cancel()
					go func() {
						for ctx.Err() == nil && !log.Contains("trying again") {
							time.Sleep(10 * time.Millisecond)
						}
						cancel()
					}()
					err := cons.Run(ctx)
					if ctx.Err() != nil {
						t.Fatalf("Run tried Open again, and returned %v once stopped:\n%s", err, log.String())
					}
					if !errors.Is(err, inbox.ErrDialect) || poolerRemedies(err.Error(), w.unprepared) != 1 {
						t.Errorf("Run through transaction pooling with pgx's default mode: %v; want ErrDialect naming the pooler, inbox.Config.UnpreparedStatements (set: %v) and default_query_exec_mode=exec", err, w.unprepared)
					}
				})
			}
		})
		t.Run("unprepared", func(t *testing.T) {
			// The same forms with Config.UnpreparedStatements: the row lock and lease forms
			// prepare nothing and keep their promises; the advisory form is refused, since its
			// session locks do not hold here (pgbouncerFacts).
			var tests []subtest
			for _, w := range clusterWays("rowlock", "lease") {
				w.unprepared = true
				tests = append(tests, subtest{w.String(), func(t *testing.T) {
					pools := []*sql.DB{c.openDSN(t, dsn, 4), c.openDSN(t, dsn, 4), c.openDSN(t, dsn, 4)}
					got := drainUntil(t, b, admin, pools, w, 200, 2, 10*time.Second, 10*time.Second)
					record("tx unprepared", w, got)
					if got.lost > 0 || got.failed != "" || got.twice > 0 || got.overlapped > 0 || got.dupSettled > 0 || got.dupEffects > 0 || got.noEffect > 0 || got.logged > 0 {
						t.Errorf("the %s form through transaction pooling with UnpreparedStatements: %s; want every row handled, settled and written once, and nothing logged", w.form, got)
					}
				}})
			}
			runConcurrently(t, 1, tests)
			t.Run("features", func(t *testing.T) {
				// The lease form's groups, limits, rates and pauses, with the setting.
				for _, line := range pgbouncerFeatures(t, b, dsn) {
					table.add(line)
				}
			})
			t.Run("advisory refused", func(t *testing.T) {
				w := clusterWay{form: "advisory", unprepared: true}
				h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
				cons := clusterConsumer(t, b, c.openDSN(t, dsn, 4), w, inbox.Table{Name: "pgbouncer_refused", ID: "id", Payload: "payload"}, 0, h, &inbox.Config{})
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := cons.Run(ctx); !errors.Is(err, inbox.ErrDialect) || !strings.Contains(err.Error(), "UnpreparedStatements") {
					t.Errorf("the advisory form's Run with UnpreparedStatements: %v, want ErrDialect naming the setting", err)
				}
			})
		})
	})
	t.Log("PgBouncer, 3 consumers of 2 workers, 200 rows:\n" + strings.Join(table.all(), "\n"))
}

// poolerRemedies counts how many times msg, an error or a line logged, names a pooler in
// transaction mode and what avoids its lost prepared statements: PgBouncer,
// inbox.Config.UnpreparedStatements (saying it is set, where unprepared) and pgx's
// default_query_exec_mode=exec. A line may name it more than once: it logs an error joined of
// two failed statements (a settlement and the back-off after it), each naming it.
func poolerRemedies(msg string, unprepared bool) int {
	if strings.Contains(msg, "UnpreparedStatements is set") != unprepared {
		return 0
	}
	n := -1
	for _, want := range []string{"pooler in transaction mode", "PgBouncer", "inbox.Config.UnpreparedStatements", "default_query_exec_mode=exec"} {
		if c := strings.Count(msg, want); n < 0 || c < n {
			n = c
		}
	}
	return n
}

// loggedIDs returns the rows named in log's lines (ids=[…], as the consumer logs the rows a
// failure concerns).
func loggedIDs(log string) map[int64]bool {
	named := map[int64]bool{}
	for _, m := range regexp.MustCompile(`ids=\[([0-9 ]*)\]`).FindAllStringSubmatch(log, -1) {
		for _, f := range strings.Fields(m[1]) {
			if id, err := strconv.ParseInt(f, 10, 64); err == nil {
				named[id] = true
			}
		}
	}
	return named
}

// pgbouncerFacts proves what PgBouncer's transaction pooling does to what the forms stand on.
func pgbouncerFacts(t *testing.T, pg *privateServer, pgb *pgbouncer) {
	ctx := context.Background()
	open := func(t *testing.T, dsn string) *sql.DB {
		return cell{b: backendNamed("postgres", dsn)}.openDSN(t, dsn, 4)
	}
	t.Run("prepared statements", func(t *testing.T) {
		// A prepares a statement, which lands on a server connection; B's transaction then
		// holds that one (PgBouncer hands out the last idle one first), so A's next statement
		// runs on the other.
		db := open(t, pgb.dsn("pair", ""))
		a, b := pin(t, db), pin(t, db)
		stmt, err := a.PrepareContext(ctx, "SELECT $1::int + 1")
		if err != nil {
			t.Fatal(err)
		}
		defer stmt.Close()
		tx, err := b.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		if _, err := tx.Exec("SELECT 1"); err != nil {
			t.Fatal(err)
		}
		var n int
		err = stmt.QueryRowContext(ctx, 1).Scan(&n)
		carries := atLeastVersion(pgb.version, 1, 21)
		t.Logf("PgBouncer %s (carries prepared statements: %v): a prepared statement run on another server connection: %v", pgb.version, carries, err)
		switch {
		case carries && err != nil:
			t.Errorf("PgBouncer %s with max_prepared_statements: %v, want the statement to run", pgb.version, err)
		case !carries && (err == nil || !strings.Contains(err.Error(), "does not exist")):
			t.Errorf("PgBouncer %s: a statement prepared on one server connection and run on another: %v, want \"prepared statement … does not exist\"", pgb.version, err)
		}
	})
	t.Run("statements by text", func(t *testing.T) {
		// pgx's default mode prepares and caches every statement with arguments per client
		// connection, and so clashes on the shared server connections; exec mode sends each as
		// an unnamed statement, which transaction pooling carries.
		for _, mode := range []string{"cache_statement", "exec", "simple_protocol"} {
			db := open(t, pgb.dsn("postgres", "default_query_exec_mode="+mode))
			db.SetMaxOpenConns(12)
			var failed atomic.Int64
			var first atomic.Value
			var wg sync.WaitGroup
			for g := range 12 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 30 {
						var n int
						if err := db.QueryRowContext(ctx, "SELECT $1::int + $2::int", g, i).Scan(&n); err != nil {
							failed.Add(1)
							first.CompareAndSwap(nil, err.Error())
						}
					}
				}()
			}
			wg.Wait()
			t.Logf("default_query_exec_mode=%s: %d of 360 statements failed (%v)", mode, failed.Load(), first.Load())
			if mode != "cache_statement" && failed.Load() > 0 {
				t.Errorf("default_query_exec_mode=%s through transaction pooling: %d of 360 statements failed: %v", mode, failed.Load(), first.Load())
			}
		}
	})
	t.Run("session advisory locks", func(t *testing.T) {
		// With one server connection, two clients share one server session: a session lock
		// taken by A is A's and B's at once, and it outlives A.
		db := open(t, pgb.dsn("single", "default_query_exec_mode=exec"))
		key := time.Now().UnixNano()
		a, b := pin(t, db), pin(t, db)
		var gotA, gotB bool
		if err := a.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&gotA); err != nil || !gotA {
			t.Fatalf("A's pg_try_advisory_lock: %v, %v", gotA, err)
		}
		if err := b.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&gotB); err != nil {
			t.Fatal(err)
		}
		if !gotB {
			t.Error("B could not take the session lock A holds: the server session was not shared")
		}
		a.Close()
		b.Close()
		direct := open(t, pg.dsn)
		var free bool
		if err := direct.QueryRow("SELECT pg_try_advisory_lock($1)", key).Scan(&free); err != nil {
			t.Fatal(err)
		}
		if free {
			t.Error("the lock was free once A and B had closed their connections; want it still held by PgBouncer's server connection")
		}
	})
}
