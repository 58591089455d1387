package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/outcome"
)

// TestClusterGalera starts a three-node MariaDB Galera cluster (Debian's galera-4 provider) and
// finds out what each form does there: first the engine's own facts the forms stand on, then a
// refusal of the row lock and advisory forms at Open, then a drain of every way of consuming
// with the lease form (single or batch, transactional or not) with one consumer on each node,
// then the lease form with handlers that conflict across nodes, then the lease form's groups,
// limits, rates and pauses with a consumer on each node, and last a node killed under load.
// docs/clusters.md has the figures and what follows from them.
func TestClusterGalera(t *testing.T) {
	g := galeraCluster(t, 3)
	b := backendNamed("mariadb", g.nodes[0].dsn)
	c := cell{b: b}
	// The test's own reads wait until the node has applied every commit before them.
	admin := c.openDSN(t, g.nodes[0].dsn+"&wsrep_sync_wait=1", 4)
	var pools []*sql.DB
	for _, n := range g.nodes {
		pools = append(pools, c.openDSN(t, n.dsn, 8))
	}
	t.Run("facts", func(t *testing.T) { galeraFacts(t, c, g, admin, pools) })

	var table collector[string]
	record := func(where string, w clusterWay, got drainCounts) {
		table.add(fmt.Sprintf("%-10s %-20s %s", where, w, got))
	}
	t.Run("refused", func(t *testing.T) {
		// Row locks and GET_LOCK are local to a node: the row lock and advisory forms would hand
		// one row to consumers on two nodes at once (measured before Open refused them: see
		// docs/clusters.md), so Open refuses them on a Galera node, naming the lease form.
		for _, w := range clusterWays("rowlock", "advisory") {
			if w.batch > 0 || w.transactional {
				continue // the refusal comes at Open, before any of these matter
			}
			tbl := fullTable(tableName(t) + "_" + w.form)
			b.createTable(t, admin, tbl)
			g.applied(t, tbl.Name)
			f := cell{b: b, form: w.form}.newForm(t, tbl)
			_, err := f.Open(context.Background(), pools[1], inbox.Binding{Name: "q"})
			if !errors.Is(err, inbox.ErrDialect) || !strings.Contains(err.Error(), "lease form") {
				t.Errorf("the %s form's Open on a Galera node: %v; want ErrDialect naming the lease form", w.form, err)
			}
		}
	})
	t.Run("drain", func(t *testing.T) {
		var tests []subtest
		for _, w := range clusterWays("lease") {
			tests = append(tests, subtest{w.String(), func(t *testing.T) {
				got := g.drain(t, b, admin, pools, w)
				record("3 nodes", w, got)
				// The lease form's token is a write: two claims of one row on two nodes
				// conflict at commit (certification, 1213) and one of them fails, so no row is
				// in work twice at once and each settles once. Outside transactional mode a
				// guarded settlement that fails certification runs again, so each row is
				// handled once; in transactional mode the Ack's COMMIT that fails
				// certification rolls the handler's writes back, and the row is handled
				// again, its side effects landing once all the same.
				twice := got.twice > 0 && !w.transactional
				if got.lost > 0 || twice || got.overlapped > 0 || got.dupSettled > 0 || got.dupEffects > 0 || got.noEffect > 0 {
					t.Errorf("the lease form on three nodes: %s; want every row settled and written once, and handled once outside transactional mode", got)
				}
			}})
		}
		runConcurrently(t, 3, tests)
	})
	t.Run("conflicting handlers", func(t *testing.T) {
		// The lease form's handlers write one hot row through the delivery's transaction from
		// three nodes: their commits conflict, and a node applying another's commit aborts its
		// own transaction (1213). Each row's handler retries its row on a failed write.
		var tests []subtest
		for _, w := range []clusterWay{{form: "lease", transactional: true}, {form: "lease", batch: 8, transactional: true}} {
			tests = append(tests, subtest{w.String(), func(t *testing.T) {
				got := galeraHotRow(t, g, b, admin, pools, w)
				record("hot row", w, got)
				if got.lost > 0 || got.dupSettled > 0 || got.noEffect > 0 {
					t.Errorf("the lease form with conflicting handlers: %s; want every row settled once, with its side effect", got)
				}
				if w.batch == 0 && got.dupEffects > 0 {
					t.Errorf("the lease form with conflicting handlers: %s; want each side effect once", got)
				}
				// A batch shares one transaction: once a conflict has aborted it, the server
				// runs the rest of the batch's writes in autocommit, and they land although the
				// batch rolls back and its rows are delivered again (docs/clusters.md). The
				// drain counts them until the lent transaction refuses statements after InnoDB
				// has ended it.
			}})
		}
		runConcurrently(t, 2, tests)
	})
	t.Run("features", func(t *testing.T) {
		// The lease form's groups, limits, rates and pauses, a consumer on each node.
		for _, line := range galeraFeatures(t, g, b, admin) {
			table.add(line)
		}
	})
	t.Run("node killed", func(t *testing.T) {
		start := time.Now()
		defer func() { t.Logf("node killed: %v", time.Since(start).Round(100*time.Millisecond)) }()
		var tests []subtest
		for _, w := range []clusterWay{{form: "lease", transactional: true}, {form: "lease", batch: 8, transactional: true}} {
			tests = append(tests, subtest{w.String(), func(t *testing.T) {
				got := galeraNodeKilled(t, g, b, admin, pools, w)
				record("node kill", w, got)
			}})
		}
		runConcurrently(t, 2, tests)
	})
	t.Log("Galera, 3 nodes, 3 consumers of 3 workers, 200 rows (hot row: 100; node kill: 600 and more):\n" + strings.Join(table.all(), "\n"))
}

// TestGaleraNotDetected: the shared servers are no Galera nodes, and dialect.CheckGalera lets
// every form run on them.
func TestGaleraNotDetected(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db := b.open(t, 2)
		nodes, err := dialect.Galera(context.Background(), b.dialect, db)
		if err != nil || nodes != 0 {
			t.Errorf("dialect.Galera: %d nodes, %v; want 0", nodes, err)
		}
		for _, form := range []dialect.Form{dialect.RowLockForm, dialect.LeaseForm, dialect.AdvisoryForm} {
			if err := dialect.CheckGalera(context.Background(), b.dialect, db, form); err != nil {
				t.Errorf("CheckGalera, %s form: %v", form, err)
			}
		}
	})
}

// galeraFacts proves what the forms stand on in a Galera cluster, on the engine alone.
func galeraFacts(t *testing.T, c cell, g *galera, admin *sql.DB, pools []*sql.DB) {
	ctx := context.Background()
	name := tableName(t)
	rows, side := c.q(t, name), c.q(t, name+"_side")
	mustExec(t, admin, "CREATE TABLE "+rows+" (id BIGINT PRIMARY KEY, v INT NOT NULL)")
	mustExec(t, admin, "CREATE TABLE "+side+" (id BIGINT PRIMARY KEY AUTO_INCREMENT, v INT NOT NULL)")
	t.Cleanup(func() { admin.Exec("DROP TABLE IF EXISTS " + rows + ", " + side) })
	mustExec(t, admin, "INSERT INTO "+rows+" (id, v) VALUES (1, 0), (2, 0)")
	g.applied(t, name+"_side")

	t.Run("detected", func(t *testing.T) {
		var on int
		if err := pools[1].QueryRow("SELECT @@wsrep_on").Scan(&on); err != nil || on != 1 {
			t.Errorf("@@wsrep_on = %d (%v), want 1", on, err)
		}
		nodes, err := dialect.Galera(ctx, c.b.dialect, pools[1])
		if err != nil || nodes != 3 {
			t.Errorf("dialect.Galera: %d nodes, %v; want 3", nodes, err)
		}
		for _, form := range []dialect.Form{dialect.RowLockForm, dialect.LeaseForm, dialect.AdvisoryForm} {
			err := dialect.CheckGalera(ctx, c.b.dialect, pools[1], form)
			switch {
			case form == dialect.LeaseForm && err != nil:
				t.Errorf("CheckGalera refuses the lease form: %v", err)
			case form != dialect.LeaseForm && !errors.Is(err, inbox.ErrDialect):
				t.Errorf("CheckGalera on the %s form: %v, want an error wrapping inbox.ErrDialect", form, err)
			case err != nil:
				t.Logf("CheckGalera, %s form: %v", form, err)
			}
		}
	})
	t.Run("GET_LOCK is a node's own", func(t *testing.T) {
		var got1, got2 int
		if err := pin(t, pools[0]).QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got1); err != nil || got1 != 1 {
			t.Fatalf("GET_LOCK on node 1: %d, %v", got1, err)
		}
		if err := pin(t, pools[1]).QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got2); err != nil {
			t.Fatal(err)
		}
		if got2 != 1 {
			t.Errorf("GET_LOCK on node 2 of a name node 1 holds: %d, want 1 (each node has its own locks)", got2)
		}
	})
	t.Run("SKIP LOCKED does not skip a row another node locks", func(t *testing.T) {
		pick := "SELECT id FROM " + rows + " ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED"
		var id1, id2 int64
		tx1 := begin(t, pools[0])
		if err := tx1.QueryRow(pick).Scan(&id1); err != nil {
			t.Fatal(err)
		}
		tx2 := begin(t, pools[1])
		if err := tx2.QueryRow(pick).Scan(&id2); err != nil {
			t.Fatal(err)
		}
		if id2 != id1 {
			t.Errorf("node 2's SKIP LOCKED select took row %d while node 1 locked row %d; want the same row (each node has its own locks)", id2, id1)
		}
	})
	t.Run("a replicated commit aborts a local transaction, and its statements after that run in autocommit", func(t *testing.T) {
		// Node 2's transaction locks row 2; node 1 updates the row and commits first. Node 2
		// applying that write aborts its own transaction (a brute-force abort): the next
		// statement fails with 1213, and the server runs the ones after it in autocommit.
		tx2 := begin(t, pools[1])
		if _, err := tx2.Exec("UPDATE " + rows + " SET v = 2 WHERE id = 2"); err != nil {
			t.Fatal(err)
		}
		mustExec(t, pools[0], "UPDATE "+rows+" SET v = 1 WHERE id = 2")
		node2 := c.openDSN(t, g.nodes[1].dsn+"&wsrep_sync_wait=1", 1)
		if v := count(t, node2, "SELECT v FROM "+rows+" WHERE id = 2"); v != 1 {
			t.Fatalf("node 2 reads v = %d after node 1's commit, want 1", v)
		}
		insert := "INSERT INTO " + side + " (v) VALUES (?)"
		if _, err := tx2.Exec(insert, 1); err == nil || !strings.Contains(err.Error(), "1213") {
			t.Fatalf("node 2's first statement after the abort: %v, want error 1213", err)
		}
		if _, err := tx2.Exec(insert, 2); err != nil {
			t.Logf("node 2's second statement after the abort: %v", err)
		}
		tx2.Rollback()
		if n := count(t, admin, "SELECT COUNT(*) FROM "+side+" WHERE v = 2"); n != 1 {
			t.Errorf("the second statement after the abort left %d rows once its transaction was rolled back, want 1 (it ran in autocommit)", n)
		}
	})
}

// drain is the cluster tests' drain of 200 rows by one consumer of 3 workers per pool, which
// starts the consumers once every node has the drain's tables.
func (g *galera) drain(t *testing.T, b backend, admin *sql.DB, pools []*sql.DB, w clusterWay) drainCounts {
	t.Helper()
	s := newDrain(t, b, admin, 200)
	g.applied(t, s.audit)
	got := s.run(t, pools, w, 3, 10*time.Second, 30*time.Second)
	if got.lost > 0 || got.failed != "" {
		t.Errorf("the drain did not complete: %s", got)
	}
	return got
}

// applied waits until every node has applied the commits made so far in the cluster, the
// creation of table among them. A node applies another's DDL a moment after that one returns:
// a consumer opened on it at once may find no table and give up (ErrSchema).
func (g *galera) applied(t *testing.T, table string) {
	t.Helper()
	q, _ := dialect.MariaDB[isolation.Default]{}.Quote(table)
	for i, n := range g.nodes {
		db, err := sql.Open("mysql", n.dsn+"&wsrep_sync_wait=1")
		if err != nil {
			t.Fatal(err)
		}
		_, err = db.Exec("SELECT 1 FROM " + q + " LIMIT 0")
		db.Close()
		if err != nil {
			t.Fatalf("galera node %d does not read %s: %v", i+1, table, err)
		}
	}
}

// pin is a connection of db's own, closed when the test ends.
func pin(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// begin opens a transaction on db, rolled back when the test ends.
func begin(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return tx
}

// galeraNodeKilled drains a table in way w with one consumer per node and kills the third node
// (SIGKILL) once 30 rows were handled, starting it again a second later. The consumers of the
// other nodes carry on meanwhile; the third node's consumer logs its failures and, once its
// node has rejoined, consumes again (the test publishes rows until it has handled some). No row
// is lost, and in transactional mode each row settles once with its side effect once.
func galeraNodeKilled(t *testing.T, g *galera, b backend, admin *sql.DB, pools []*sql.DB, w clusterWay) drainCounts {
	const victim = 2
	s := newDrain(t, b, admin, 600)
	g.applied(t, s.tbl.Name)
	victimLog := &faultLog{t: t}
	var (
		once      sync.Once
		restarted = make(chan struct{})
		during    int // rows the other nodes' consumers started while the victim was down
	)
	survivors := func() int { return s.rec.handledBy(0) + s.rec.handledBy(1) }
	var stops []func() error
	for i, db := range pools {
		logger := s.logger()
		if i == victim {
			logger = victimLog.Logger(slog.LevelWarn)
		}
		h := s.handler(t, i, db, 10*time.Millisecond)
		inner := h
		h = inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			if s.rec.total() >= 30 {
				once.Do(func() {
					go func() {
						defer close(restarted)
						before, start := survivors(), time.Now()
						g.nodes[victim].restartOnce(t)
						during = survivors() - before
						t.Logf("the third node was killed and back, synced, within %v", time.Since(start).Round(100*time.Millisecond))
					}()
				})
			}
			return inner.Handle(ctx, d)
		})
		cons := clusterConsumer(t, b, db, w, s.tbl, 2*time.Second, h, &inbox.Config{Queue: "q", Workers: 2, Logger: logger})
		stops = append(stops, runCluster(t, cons))
	}
	select {
	case <-restarted:
	case <-time.After(2 * time.Minute):
		t.Fatal("the third node did not come back within two minutes")
	}
	if during == 0 {
		t.Error("the consumers of the other nodes handled no row while the third node was down")
	}
	// The victim's consumer must consume again: publish until it has.
	back, returned := s.rec.handledBy(victim), time.Now()
	deadline := time.Now().Add(60 * time.Second)
	for s.rec.handledBy(victim) == back {
		if time.Now().After(deadline) {
			t.Fatal("the third node's consumer handled no row within 60 s of its node's return")
		}
		// Right after a node rejoins, a write on another node can fail (seen once: MariaDB's
		// error 1064, "Unknown trigger has an error in its body: 'Query was empty'", on a table
		// with no trigger). Enqueue is all or nothing, and the loop publishes again.
		if err := inbox.Enqueue(context.Background(), s.admin, s.b.dialect, s.tbl, messages("q", 50)...); err != nil {
			t.Logf("publishing while the third node is back: %v; publishing again", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("the third node's consumer handled a row %v after its node was back", time.Since(returned).Round(100*time.Millisecond))
	s.wait(t, 30*time.Second)
	for _, stop := range stops {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	got := s.counts(t)
	t.Logf("the other nodes' consumers handled %d rows while the third node was down; its consumer handled %d after it rejoined",
		during, s.rec.handledBy(victim)-back)
	if !victimLog.Contains("claim failed") {
		t.Error("the third node's consumer logged no failed claim while its node was down")
	}
	if got.lost > 0 {
		t.Errorf("%d rows never settled", got.lost)
	}
	if w.transactional && (got.dupSettled > 0 || got.dupEffects > 0 || got.noEffect > 0) {
		t.Errorf("in transactional mode through a node's crash: %s; want every row settled and written once", got)
	}
	return got
}

// galeraHotRow drains a table in way w with one consumer per node, whose handler adds one to a
// row every handler writes, then writes the row's side effect, both through the delivery's
// transaction, retrying its row when either fails.
func galeraHotRow(t *testing.T, g *galera, b backend, admin *sql.DB, pools []*sql.DB, w clusterWay) drainCounts {
	c := cell{b: b}
	s := newDrain(t, b, admin, 100)
	hot := c.q(t, s.tbl.Name+"_hot")
	mustExec(t, admin, "CREATE TABLE "+hot+" (id INT PRIMARY KEY, n INT NOT NULL)")
	t.Cleanup(func() { admin.Exec("DROP TABLE IF EXISTS " + hot) })
	mustExec(t, admin, "INSERT INTO "+hot+" (id, n) VALUES (1, 0)")
	g.applied(t, s.tbl.Name+"_hot")
	var stops []func() error
	for i, db := range pools {
		inner := s.handler(t, i, db, 0)
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			if _, err := d.Tx.ExecContext(ctx, "UPDATE "+hot+" SET n = n + 1 WHERE id = 1"); err != nil {
				return outcome.Retry()
			}
			return inner.Handle(ctx, d)
		})
		cons := clusterConsumer(t, b, db, w, s.tbl, 2*time.Second, h, &inbox.Config{Queue: "q", Workers: 2, Logger: s.logger()})
		stops = append(stops, runCluster(t, cons))
	}
	s.wait(t, 30*time.Second)
	for _, stop := range stops {
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	return s.counts(t)
}
