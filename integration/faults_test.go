package integration

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/internal/schema"
	"github.com/sqlinbox/inbox/outcome"
)

// faultRun is what a fault test records: the rows its handler had in work or in settlement
// when a fault struck, which are the only rows a fault may deliver twice.
type faultRun struct {
	mu       sync.Mutex
	handling map[int64]bool
	settling map[int64]bool
	faulted  map[int64]bool
	faults   map[string]int
	handled  map[int64]int
}

func newFaultRun() *faultRun {
	return &faultRun{
		handling: map[int64]bool{}, settling: map[int64]bool{}, faulted: map[int64]bool{},
		faults: map[string]int{}, handled: map[int64]int{},
	}
}

// struck records a fault at phase: every row in work or in settlement may come back.
func (r *faultRun) struck(phase string, ids ...int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faults[phase]++
	for _, id := range ids {
		r.faulted[id] = true
	}
	for id := range r.handling {
		r.faulted[id] = true
	}
	for id := range r.settling {
		r.faulted[id] = true
	}
}

// fault records that a fault struck row id.
func (r *faultRun) fault(id int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.faulted[id] = true
}

// handle records that d's handler runs, until the returned done is called.
func (r *faultRun) handle(d *inbox.Delivery) (done func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.handling[d.ID] = true
	r.handled[d.ID]++
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.handling, d.ID)
	}
}

// checkSettledOnce fails the test unless the audit table records one settlement of each row of
// tbl, and no row was delivered more than once unless a fault struck it.
func (r *faultRun) checkSettledOnce(t *testing.T, c cell, admin *sql.DB, tbl inbox.Table, audit string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	settled := c.sideCounts(t, admin, audit)
	for _, id := range c.ids(t, admin, tbl, "") {
		if n := settled[id]; n != 1 {
			t.Errorf("row %d settled %d times, want once", id, n)
		}
		if r.handled[id] > 1 && !r.faulted[id] {
			t.Errorf("row %d delivered %d times though no fault struck it", id, r.handled[id])
		}
	}
}

// faultTable creates the test's table on admin, with the side table its handlers write to and
// the audit table its trigger records each settlement in, and publishes rows rows to queue q.
func faultTable(t *testing.T, c cell, admin *sql.DB, rows int) (tbl inbox.Table, side, audit string) {
	t.Helper()
	tbl = fullTable(tableName(t))
	c.b.createTable(t, admin, tbl)
	side, audit = tbl.Name+"_side", tbl.Name+"_audit"
	c.createSide(t, admin, side)
	c.createAudit(t, admin, tbl, audit)
	c.publish(t, admin, tbl, messages("q", rows)...)
	return tbl, side, audit
}

// form wraps f so that the run knows which rows are in settlement.
func (r *faultRun) form(f inbox.Form) *faultForm { return &faultForm{phasedForm{inner: f}, r} }

type faultForm struct {
	phasedForm
	r *faultRun
}

func (f *faultForm) Settle(ctx context.Context, d *inbox.Delivery, o outcome.Outcome) error {
	f.r.mu.Lock()
	f.r.settling[d.ID] = true
	f.r.mu.Unlock()
	defer func() {
		f.r.mu.Lock()
		delete(f.r.settling, d.ID)
		f.r.mu.Unlock()
	}()
	err := f.phasedForm.Settle(ctx, d, o)
	if err != nil {
		// Only a fault fails a settlement here: the row comes back by the form's rule.
		f.r.fault(d.ID)
	}
	return err
}

// killSession ends a server session from another connection and waits until it is gone:
// pg_terminate_backend on Postgres, KILL CONNECTION on MySQL and MariaDB.
func (c cell) killSession(ctx context.Context, admin *sql.DB, id int64) error {
	var kill, gone string
	switch c.b.name {
	case "postgres":
		kill = fmt.Sprintf("SELECT pg_terminate_backend(%d)", id)
		gone = "SELECT COUNT(*) FROM pg_stat_activity WHERE pid = $1"
	default:
		kill = fmt.Sprintf("KILL CONNECTION %d", id)
		gone = "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?"
	}
	if _, err := admin.ExecContext(ctx, kill); err != nil && !strings.Contains(err.Error(), "Unknown thread") {
		return fmt.Errorf("killing session %d: %w", id, err)
	}
	for range 100 {
		var n int
		if err := admin.QueryRowContext(ctx, gone, id).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("session %d still there a second after it was killed", id)
}

// TestFaultsKilledConnections kills the consumer's server connections under it, from the
// server's side (pg_terminate_backend, KILL CONNECTION): the connection a claim is about to use,
// every connection while handlers run, and the connection a settlement is about to use. The
// consumer logs, carries on by itself, and in the end every row is settled exactly once; only
// rows in work or in settlement when a fault struck are delivered again (and, in
// transactional mode, their side effects still land once).
func TestFaultsKilledConnections(t *testing.T) {
	var tests []subtest
	for _, c := range cells(t) {
		if c.b.name == "sqlite" {
			continue // no server connections to kill: see TestFaultsSQLiteBusy
		}
		for _, transactional := range []bool{true, false} {
			tests = append(tests, subtest{c.name() + "-" + txMode(transactional), func(t *testing.T) {
				faultKilledConnections(t, c, transactional)
			}})
		}
	}
	runConcurrently(t, 4, tests)
}

func faultKilledConnections(t *testing.T, c cell, transactional bool) {
	const rows = 40
	dsn := c.dsn(t)
	admin := c.openDSN(t, dsn, 4)
	tbl, side, audit := faultTable(t, c, admin, rows)

	run := newFaultRun()
	var (
		claims, settles, handlers atomic.Int64
		pool                      *hooks
	)
	// The audit trigger is this test's instrument, not the library's. A KILL that lands while a
	// MariaDB session opens the table and parses the trigger has once left the server's cached
	// table with the trigger marked unparseable ("Trigger … has an error in its body") and its
	// audit table "doesn't exist", for every session after, so that no settlement could commit
	// again. Flushing the two tables after each kill makes the server read them afresh. It
	// runs aside: FLUSH waits for the transactions that have the table open, one of which may be
	// the very settlement the kill is about to fail.
	var flushes sync.WaitGroup
	t.Cleanup(flushes.Wait)
	flush := func() {
		if c.b.name == "postgres" {
			return
		}
		flushes.Add(1)
		go func() {
			defer flushes.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := admin.ExecContext(ctx, "FLUSH TABLES "+c.q(t, tbl.Name)+", "+c.q(t, audit)); err != nil {
				t.Logf("FLUSH TABLES after a kill: %v", err)
			}
		}()
	}
	kill := func(ev hookEvent, phase string) {
		if err := c.killSession(context.Background(), admin, ev.conn.session); err != nil {
			t.Errorf("%s fault: %v", phase, err)
		}
		flush()
		run.struck(phase, ev.phase.id)
	}
	on := func(ev hookEvent) {
		if ev.after || ev.what == "rollback" {
			return
		}
		switch ev.phase.name {
		case "claim":
			if n := claims.Add(1); n == 3 || n == 11 {
				kill(ev, "claim")
			}
		case "settle":
			if n := settles.Add(1); n == 4 || n == 13 {
				kill(ev, "settle")
			}
		}
	}
	db, pool, err := hookedDB(c.b, dsn, on)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { db.Close() })

	insert := "INSERT INTO " + c.q(t, side) + " (job_id, attempt) VALUES (" + c.ph(1) + ", " + c.ph(2) + ")"
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		defer run.handle(d)()
		if n := handlers.Add(1); n == 6 || n == 17 {
			for _, s := range pool.sessions() {
				if err := c.killSession(ctx, admin, s); err != nil {
					t.Errorf("handler fault: %v", err)
				}
			}
			flush()
			run.struck("handler", d.ID)
		}
		time.Sleep(2 * time.Millisecond)
		if _, err := writerOf(d, db).ExecContext(ctx, insert, d.ID, d.Attempt); err != nil {
			// The connection under the delivery's transaction may be the one just killed.
			run.fault(d.ID)
			return outcome.Retry()
		}
		return outcome.Ack()
	})
	logs := &faultLog{t: t}
	stop := runConsumer(t, db, run.form(c.newForm(t, tbl)), h, &inbox.Config{
		Queue: "q", Workers: 3, Transactional: transactional, Logger: logs.Logger(slog.LevelInfo),
	})
	waitDrained(t, c, admin, tbl)
	stop()

	if !logs.Contains("level=ERROR") && !logs.Contains("level=WARN") {
		t.Error("the consumer logged nothing about the killed connections")
	}
	run.checkSettledOnce(t, c, admin, tbl, audit)
	run.mu.Lock()
	defer run.mu.Unlock()
	t.Logf("faults: %v; rows struck: %d", run.faults, len(run.faulted))
	for _, phase := range []string{"claim", "handler", "settle"} {
		if run.faults[phase] == 0 {
			t.Errorf("no %s fault was injected", phase)
		}
	}
	effects := c.sideCounts(t, admin, side)
	for _, id := range c.ids(t, admin, tbl, "") {
		e := effects[id]
		switch {
		case e == 0:
			t.Errorf("row %d settled without its side effect", id)
		case e > 1 && (transactional || !run.faulted[id]):
			t.Errorf("row %d: side effect written %d times (struck by a fault: %v)", id, e, run.faulted[id])
		}
	}
}

// waitDrained waits until every row of tbl is processed, for as long as rows keep settling.
func waitDrained(t *testing.T, c cell, db *sql.DB, tbl inbox.Table) {
	t.Helper()
	unprocessed := c.q(t, tbl.ProcessedAt) + " IS NULL"
	left, progress := len(c.ids(t, db, tbl, unprocessed)), time.Now()
	for left > 0 {
		if time.Since(progress) > c.returnBound(crashReturnSlack)+5*time.Second {
			t.Fatalf("%d rows left unprocessed, none settled for %v", left, time.Since(progress).Round(time.Second))
		}
		time.Sleep(50 * time.Millisecond)
		if n := len(c.ids(t, db, tbl, unprocessed)); n < left {
			left, progress = n, time.Now()
		}
	}
}

// TestFaultsSQLiteBusy runs the lease form on SQLite while a second writer holds the write lock
// (BEGIN IMMEDIATE) for a second at a time: before the first claim, while a handler runs, and
// just before a settlement's statement. The consumer's pool waits 200 ms for the lock, so its
// statements fail with SQLITE_BUSY; it logs, carries on, and every row settles exactly once,
// only the rows whose settlement failed coming back (when their lease runs out).
//
// It runs outside transactional mode only: there a handler's transaction takes the write lock
// with its first write and keeps it until its Ack commits, so no second writer can come between
// the handler and the settlement.
func TestFaultsSQLiteBusy(t *testing.T) {
	c := cell{b: backendNamed("sqlite", ""), form: "lease", crashCounts: true}
	const rows = 30
	path := filepath.Join(t.TempDir(), "inbox.db")
	admin := c.openDSN(t, SQLiteDSN(path), 4)
	tbl, side, audit := faultTable(t, c, admin, rows)

	// block holds the write lock for hold from a connection of its own, and returns once it
	// holds it.
	block := func(hold time.Duration) {
		t.Helper()
		conn, err := admin.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
			conn.Close()
			t.Errorf("BEGIN IMMEDIATE: %v", err)
			return
		}
		go func() {
			time.Sleep(hold)
			conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
		}()
	}
	run := newFaultRun()
	var settles, handlers atomic.Int64
	on := func(ev hookEvent) {
		if ev.after || ev.phase.name != "settle" {
			return
		}
		if settles.Add(1) == 12 {
			block(time.Second)
			run.struck("settle", ev.phase.id)
		}
	}
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(200)"
	db, _, err := hookedDB(c.b, dsn, on)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(8)
	t.Cleanup(func() { db.Close() })

	insert := "INSERT INTO " + c.q(t, side) + " (job_id, attempt) VALUES (?, ?)"
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		defer run.handle(d)()
		if _, err := db.ExecContext(ctx, insert, d.ID, d.Attempt); err != nil {
			run.fault(d.ID)
			return outcome.Retry()
		}
		if handlers.Add(1) == 5 {
			block(time.Second)
			run.struck("handler", d.ID)
		}
		return outcome.Ack()
	})

	// Longer than the lease form's own retries of a busy statement (five, within about a
	// second at this busy timeout), so that the claim fails and the consumer logs it.
	block(3 * time.Second)
	run.struck("claim")
	logs := &faultLog{t: t}
	stop := runConsumer(t, db, run.form(c.newForm(t, tbl)), h, &inbox.Config{Queue: "q", Workers: 3, Logger: logs.Logger(slog.LevelInfo)})
	waitDrained(t, c, admin, tbl)
	stop()

	for _, want := range []string{"claim failed", "claims succeed again", "SQLITE_BUSY"} {
		if !logs.Contains(want) {
			t.Errorf("the consumer's log does not mention %q", want)
		}
	}
	run.checkSettledOnce(t, c, admin, tbl, audit)
}

// TestFaultsKilledAtOpen kills the connection the consumer's startup is about to prepare a
// statement on, as a database restarting under a starting consumer would. The table is there;
// the failure is the connection's, so Run must log it and try again, not give up with
// ErrSchema, and then consume.
func TestFaultsKilledAtOpen(t *testing.T) {
	var tests []subtest
	for _, c := range cells(t) {
		if c.b.name == "sqlite" {
			continue
		}
		tests = append(tests, subtest{c.name(), func(t *testing.T) {
			dsn := c.dsn(t)
			admin := c.openDSN(t, dsn, 4)
			tbl := c.b.newTable(t, admin, fullTable)
			c.publish(t, admin, tbl, inbox.Message{Queue: "q"})
			var once sync.Once
			on := func(ev hookEvent) {
				if ev.phase.name == "open" && ev.what == "prepare" {
					once.Do(func() {
						if err := c.killSession(context.Background(), admin, ev.conn.session); err != nil {
							t.Error(err)
						}
					})
				}
			}
			db, _, err := hookedDB(c.b, dsn, on)
			if err != nil {
				t.Fatal(err)
			}
			db.SetMaxOpenConns(8)
			t.Cleanup(func() { db.Close() })
			handled := make(chan int64, 1)
			h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
				handled <- d.ID
				return outcome.Ack()
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				done <- inbox.NewConsumer(db, &phasedForm{inner: c.newForm(t, tbl)}, h, &inbox.Config{
					Queue: "q", PollInterval: cellPoll, Logger: testLogger(t),
				}).Run(ctx)
			}()
			select {
			case err := <-done:
				t.Fatalf("Run gave up when its connection was killed during startup: %v", err)
			case <-handled:
			case <-time.After(20 * time.Second):
				t.Fatal("the row was not handled within 20 s")
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}})
	}
	runConcurrently(t, 4, tests)
}

// privateServer is a database server this test starts for itself, on a port of its own and
// in a directory of its own, so that it can stop and restart it without touching the servers
// other tests share.
type privateServer struct {
	name  string // "postgres" or "mariadb"
	dsn   string
	dir   string
	port  int
	start func() error
	crash func() error // stops the server at once, as a power cut would (no clean shutdown)

	// opening counts the consumers that are to run through the crash and have not handled a
	// row yet (TestFaultsServerRestart): restartOnce waits for them, so that every one of them
	// is past Open and claiming when the server goes down.
	opening   sync.WaitGroup
	once      sync.Once
	restarted chan struct{} // closed once the server is back after restartOnce
}

// restartOnce crashes the server, leaves it down for a second and starts it again; only the
// first call does, once no consumer counted in s.opening is still opening, and every call
// returns once the server is back.
func (s *privateServer) restartOnce(t *testing.T) {
	s.once.Do(func() {
		defer close(s.restarted)
		s.opening.Wait()
		if err := s.crash(); err != nil {
			t.Errorf("crashing the private %s: %v", s.name, err)
		}
		time.Sleep(time.Second)
		if err := s.start(); err != nil {
			t.Errorf("starting the private %s again: %v", s.name, err)
		}
	})
	<-s.restarted
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// privatePostgres initialises and starts a Postgres cluster as the postgres system user (the
// server refuses to run as root). It skips the test where that cannot be done here.
func privatePostgres(t *testing.T) *privateServer {
	skipShort(t, "a private Postgres server")
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 || os.Geteuid() != 0 {
		t.Skip("a private Postgres needs root and the Debian postgresql package (/usr/lib/postgresql/*/bin)")
	}
	bin := filepath.Dir(bins[len(bins)-1])
	uid, gid := systemUser(t, "postgres")
	dir := ownedTempDir(t, "inbox-pg-", uid, gid)
	data := filepath.Join(dir, "data")
	if err := asPostgres(filepath.Join(bin, "initdb"), "-D", data, "-A", "trust", "-U", "postgres", "-N"); err != nil {
		t.Fatal(err)
	}
	s := &privateServer{name: "postgres", dir: dir, port: freePort(t), restarted: make(chan struct{})}
	s.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", s.port)
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60", s.port, dir)
	s.start = func() error {
		return asPostgres(filepath.Join(bin, "pg_ctl"), "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start")
	}
	s.crash = func() error {
		return asPostgres(filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.crash() })
	return s
}

// privateMariaDB installs a data directory and runs mariadbd on it as a child process.
func privateMariaDB(t *testing.T) *privateServer {
	skipShort(t, "a private MariaDB server")
	install, err1 := exec.LookPath("mariadb-install-db")
	server, err2 := exec.LookPath("mariadbd")
	if err2 != nil {
		server, err2 = exec.LookPath("/usr/sbin/mariadbd")
	}
	if err1 != nil || err2 != nil || os.Geteuid() != 0 {
		t.Skip("a private MariaDB needs root and the mariadb-server package (mariadb-install-db, mariadbd)")
	}
	dir, err := os.MkdirTemp("", "inbox-mariadb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	if out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v: %s", err, out)
	}
	s := &privateServer{name: "mariadb", dir: dir, port: freePort(t), restarted: make(chan struct{})}
	s.dsn = fmt.Sprintf("root@tcp(127.0.0.1:%d)/test?timeout=2s", s.port)
	var (
		mu   sync.Mutex
		proc *exec.Cmd
	)
	s.start = func() error {
		cmd := exec.Command(server, "--no-defaults", "--datadir="+data, "--user=root",
			fmt.Sprintf("--port=%d", s.port), "--bind-address=127.0.0.1", "--socket="+filepath.Join(dir, "sock"),
			"--skip-log-bin", "--innodb-buffer-pool-size=32M", "--max-connections=60")
		log, err := os.OpenFile(filepath.Join(dir, "log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		cmd.Stdout, cmd.Stderr = log, log
		if err := cmd.Start(); err != nil {
			return err
		}
		mu.Lock()
		proc = cmd
		mu.Unlock()
		root := fmt.Sprintf("root@tcp(127.0.0.1:%d)/?timeout=1s", s.port)
		for range 300 {
			db, _ := sql.Open("mysql", root)
			_, err = db.Exec("CREATE DATABASE IF NOT EXISTS test")
			db.Close()
			if err == nil {
				return nil
			}
			time.Sleep(100 * time.Millisecond)
		}
		return fmt.Errorf("the private MariaDB did not answer within 30 s: %v", err)
	}
	s.crash = func() error {
		mu.Lock()
		defer mu.Unlock()
		if proc == nil {
			return nil
		}
		proc.Process.Kill() // SIGKILL: InnoDB recovers at the next start
		proc.Wait()
		proc = nil
		return nil
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.crash() })
	return s
}

// TestFaultsServerRestart crashes a private database server (Postgres: an immediate stop;
// MariaDB: SIGKILL) while consumers of each form run on it in transactional mode, and starts
// it again a second later. Each consumer logs the failures, carries on by itself once the
// server is back, and every row is settled exactly once with its side effect exactly once.
//
// On Postgres a consumer of each form outside transactional mode with Config.UnflushedAcks runs
// through the same crash: the lease form's claims, extensions and acks, the advisory form's
// takes and acks and the row lock form's acks (with their claims) commit without waiting for
// the disk, so the crash may forget some of them. No row is lost (the table drains, every row's
// side effect written), and the rows delivered again are counted in the log. The servers the
// other tests share are never restarted.
func TestFaultsServerRestart(t *testing.T) {
	for name, start := range map[string]func(*testing.T) *privateServer{"postgres": privatePostgres, "mariadb": privateMariaDB} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := start(t)
			b := backendNamed(s.name, s.dsn)
			type run struct {
				name          string
				c             cell
				unflushedAcks bool
			}
			var runs []run
			for _, form := range []string{"rowlock", "lease", "advisory"} {
				runs = append(runs, run{form, cell{b: b, form: form, transactional: true}, false})
			}
			if name == "postgres" {
				for _, form := range []string{"rowlock", "lease", "advisory"} {
					runs = append(runs, run{form + "-unflushed-acks", cell{b: b, form: form}, true})
				}
			}
			var wg sync.WaitGroup
			s.opening.Add(len(runs))
			for _, r := range runs {
				wg.Add(1)
				go t.Run(r.name, func(t *testing.T) {
					defer wg.Done()
					restartCell(t, r.c, s, r.unflushedAcks)
				})
			}
			wg.Wait()
		})
	}
}

// restartCell runs one consumer through the restart, in transactional mode where the cell says,
// with Config.UnflushedAcks as asked. The consumers share one server and one restart: the first
// of them to have handled ten rows crashes it, once, when every one of them has handled a row.
// A consumer still opening when the server went down would fail its Open, not a claim, and
// log neither of the claim's messages the test looks for.
func restartCell(t *testing.T, c cell, s *privateServer, unflushedAcks bool) {
	var opened sync.Once
	open := func() { opened.Do(s.opening.Done) }
	defer open() // a cell that fails before it handles a row holds no other back
	const rows = 60
	admin := c.openDSN(t, s.dsn, 4)
	tbl := c.b.newTable(t, admin, fullTable)
	side, audit := tbl.Name+"_side", tbl.Name+"_audit"
	c.createSide(t, admin, side)
	c.createAudit(t, admin, tbl, audit)
	msgs := make([]inbox.Message, rows)
	for i := range msgs {
		msgs[i] = inbox.Message{Queue: "q"}
	}
	c.publish(t, admin, tbl, msgs...)

	db := c.openDSN(t, s.dsn, 8)
	insert := "INSERT INTO " + c.q(t, side) + " (job_id, attempt) VALUES (" + c.ph(1) + ", " + c.ph(2) + ")"
	var handled atomic.Int64
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		open()
		if handled.Add(1) == 10 {
			s.restartOnce(t)
		}
		time.Sleep(20 * time.Millisecond)
		ex := inbox.Tx(db)
		if d.Tx != nil {
			ex = d.Tx
		}
		if _, err := ex.ExecContext(ctx, insert, d.ID, d.Attempt); err != nil {
			return outcome.Retry()
		}
		return outcome.Ack()
	})
	logs := &faultLog{t: t}
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{
		Queue: "q", Workers: 3, Transactional: c.transactional, UnflushedAcks: unflushedAcks, PollInterval: 100 * time.Millisecond,
		Logger: logs.Logger(slog.LevelInfo),
	})
	<-s.restarted
	waitDrained(t, c, admin, tbl)
	stop()
	for _, want := range []string{"claim failed", "claims succeed again"} {
		if !logs.Contains(want) {
			t.Errorf("the consumer's log through the server's crash does not mention %q", want)
		}
	}
	settled := c.sideCounts(t, admin, audit)
	effects := c.sideCounts(t, admin, side)
	var twice []int64
	for _, id := range c.ids(t, admin, tbl, "") {
		switch {
		case c.transactional && (settled[id] != 1 || effects[id] != 1):
			t.Errorf("row %d: settled %d times, side effect written %d times; want once each", id, settled[id], effects[id])
		case settled[id] < 1 || effects[id] < 1:
			t.Errorf("row %d: settled %d times, side effect written %d times; want at least once each", id, settled[id], effects[id])
		case effects[id] > 1:
			twice = append(twice, id)
		}
	}
	if !c.transactional {
		t.Logf("%d of %d rows handled more than once through the crash: %v", len(twice), rows, twice)
	}
}

// faultSQLiteLease is the lease cell on SQLite with a table of one row of queue q and the side
// table its handler writes to.
func faultSQLiteLease(t *testing.T) (c cell, db *sql.DB, tbl inbox.Table, side string) {
	t.Helper()
	c = cell{b: backendNamed("sqlite", ""), form: "lease"}
	db, tbl = c.b.openTable(t, 8, fullTable)
	side = tbl.Name + "_side"
	c.createSide(t, db, side)
	c.publish(t, db, tbl, inbox.Message{Queue: "q"})
	return c, db, tbl, side
}

// TestFaultsSQLiteLeaseExtendInTransaction: on SQLite in transactional mode a handler that has
// written through its transaction holds the database's one write lock until its Ack commits. A
// lease extension that falls due meanwhile must neither wait out the busy timeout on that lock
// (stalling the settlement, and every other writer, behind it) nor fail and put the lease at
// risk.
func TestFaultsSQLiteLeaseExtendInTransaction(t *testing.T) {
	c, db, tbl, side := faultSQLiteLease(t)
	var returned atomic.Int64
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		if _, err := d.Tx.ExecContext(ctx, "INSERT INTO "+c.q(t, side)+" (job_id, attempt) VALUES (?, ?)", d.ID, d.Attempt); err != nil {
			t.Errorf("writing through the delivery's transaction: %v", err)
		}
		time.Sleep(cellLease * 3 / 4) // past the extension due at half the lease
		returned.Store(time.Now().UnixNano())
		return outcome.Ack()
	})
	logs := &faultLog{t: t}
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q", Transactional: true, Logger: logs.Logger(slog.LevelInfo)})
	waitFor(t, 30*time.Second, "the row to settle", func() bool {
		return len(c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) == 1
	})
	settled := time.Now()
	stop()
	if logs.Contains("extending a hold failed") {
		t.Error("the lease extension failed while the delivery's own transaction held the write lock")
	}
	if wait := settled.Sub(time.Unix(0, returned.Load())); wait > cellLease {
		t.Errorf("the Ack settled %v after the handler returned: the settlement waited behind the extension", wait.Round(time.Millisecond))
	}
}

// TestFaultsSQLiteLeaseExtendInterrupted: on SQLite in transactional mode the lease extension
// runs inside the delivery's transaction. When another writer holds the write lock past the
// extension's deadline, the extension is interrupted, and SQLite ends the whole transaction
// with it. The handler's writes after that must still roll back with a Drop: they may never
// land outside the delivery's transaction.
func TestFaultsSQLiteLeaseExtendInterrupted(t *testing.T) {
	c, db, tbl, side := faultSQLiteLease(t)

	started, released := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		once.Do(func() { close(started) })
		<-released
		if _, err := d.Tx.ExecContext(ctx, "INSERT INTO "+c.q(t, side)+" (job_id, attempt) VALUES (?, ?)", d.ID, d.Attempt); err != nil {
			t.Logf("writing through the delivery's transaction: %v", err)
		}
		return outcome.Drop()
	})
	logs := &faultLog{t: t}
	stop := runConsumer(t, db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q", Transactional: true, Logger: logs.Logger(slog.LevelInfo)})
	<-started
	// Another writer holds the lock across the extension due at half the lease, and past the
	// extension's deadline of another half lease.
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(cellLease * 3 / 2)
	conn.ExecContext(context.Background(), "ROLLBACK")
	conn.Close()
	close(released)
	waitFor(t, 30*time.Second, "the row to settle", func() bool {
		return len(c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) == 1
	})
	stop()
	if n := c.sideCounts(t, db, side)[c.ids(t, db, tbl, "")[0]]; n != 0 {
		t.Errorf("the handler's write landed %d times though its delivery was dropped, which rolls it back", n)
	}
}

// killLoopPlan is how hard the kill loop runs: CI's short run, or the one make reliability runs
// (INBOX_RELIABILITY=long).
type killLoopPlan struct {
	long  bool          // INBOX_RELIABILITY=long
	rows  int           // published before the consumers start
	kills time.Duration // how long the kills go on on a quiet machine: kills/every rounds, every apart or more
	every time.Duration // between two rounds of kills
}

func killLoopPlanFromEnv() killLoopPlan {
	if os.Getenv("INBOX_RELIABILITY") == "long" {
		return killLoopPlan{long: true, rows: 5000, kills: 20 * time.Second, every: 200 * time.Millisecond}
	}
	return killLoopPlan{rows: 300, kills: 2 * time.Second, every: 200 * time.Millisecond}
}

// killLoopStall is how long the drain after the kills may go without a row settling before the
// rows left are counted stranded. A stranded row is held by a transaction that nothing will end
// and never settles, however long the wait; a row that is merely slow (a loaded machine under
// -race, a server rolling back a killed session's work) settles late. A passing run waits only
// until its last row settles, so the bound costs a failing run alone: 30 s, six times the 5 s
// that failed under load.
const killLoopStall = 30 * time.Second

// killLoopResult is one line of the kill loop's table.
type killLoopResult struct {
	run      killLoopRun
	rows     int
	rounds   int           // rounds of kills
	killed   int           // sessions killed (SQLite: connections severed)
	left     int           // rows unsettled when the kills stopped
	drained  time.Duration // from the end of the kills until the last row settled
	stranded int           // rows unsettled when the drain stalled
	leaked   int           // once the consumers stopped: server transactions open on any session the pools ever opened, and connections still out of the pools
	unended  int           // sessions found in a transaction after a COMMIT or ROLLBACK that succeeded, or handed out of the pool so
	lost     int           // rows settled without a delivery
	twice    int           // rows delivered more than once
	errors   int           // ERROR and WARN lines the consumers logged
}

// killLoopRun is one run of the kill loop on a cell: single rows or batches, on a table with its
// claim index or without one.
type killLoopRun struct {
	batch int // rows a claim takes; 0 claims single rows (inbox.NewConsumer)
	// index: the table has the claim index admin.Schema creates (schema.ClaimIndex). Without it
	// the table has its primary key alone, which does not serve the claim: on MySQL and MariaDB
	// a claim then reads and locks every due row it does not skip, so that a transaction left
	// open on a pooled connection holds nearly the whole queue and strands it, where with the
	// index it would hold only the rows it claimed (issue 22, defect 1).
	index bool
}

// unit names how the run claims: "single" or "batch16".
func (r killLoopRun) unit() string {
	if r.batch > 0 {
		return fmt.Sprintf("batch%d", r.batch)
	}
	return "single"
}

// indexed says whether the run's table has its claim index: "yes" or "no".
func (r killLoopRun) indexed() string {
	if r.index {
		return "yes"
	}
	return "no"
}

func (r killLoopRun) String() string {
	if r.index {
		return r.unit() + "-index"
	}
	return r.unit() + "-noindex"
}

// short reports whether CI's short run takes r on c: every cell with its claim index, and
// without it the MySQL and MariaDB cells, where a claim that cannot walk an index locks every
// due row it reads (on Postgres and SQLite it locks only the rows it returns). The long run
// takes every run.
func (r killLoopRun) short(c cell) bool {
	return r.index || c.b.name == "mysql" || c.b.name == "mariadb"
}

// TestKillLoop kills every server session of two consumers' pools (pg_terminate_backend,
// KILL CONNECTION) every 200 ms while the consumers, four workers each, drain the table, on
// every cell, claiming single rows and batches of 16, on a table with its claim index and on
// one without. When the kills stop, the consumers must settle every row they have not yet: a
// row still unsettled once no row has settled for killLoopStall is stranded. Then the consumers
// stop, and a transaction still open on a session of their pools is leaked. Throughout, the
// session of every COMMIT and ROLLBACK that succeeds, and of every connection the pool hands out
// again, is asked at once whether it is in a transaction (unended): a transaction left open that
// the next round of kills, or the connection's next transaction, would end shows there. No row may be stranded, no transaction
// unended or leaked, and no row lost (settled without ever reaching a handler); rows delivered
// twice are counted, as the forms allow them after a fault.
//
// SQLite has no server sessions: there the test severs every connection of the two pools
// instead (hooks.sever), which ends its session at its next call, rolling back what it has
// open, and fails that call and every later one, as a killed connection would.
func TestKillLoop(t *testing.T) {
	plan := killLoopPlanFromEnv()
	var runs []killLoopRun
	for _, batch := range []int{0, 16} {
		for _, index := range []bool{true, false} {
			runs = append(runs, killLoopRun{batch: batch, index: index})
		}
	}
	found := matrix(t, runs, killLoopRun.String, func(t *testing.T, c cell, run killLoopRun) killLoopResult {
		if !plan.long && !run.short(c) {
			t.Skip("CI's short run leaves the tables without a claim index to MySQL and MariaDB; INBOX_RELIABILITY=long takes every run")
		}
		return killLoopCell(t, c, run, plan)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "kill loop: every session of 2 consumers × 4 workers killed in %d rounds every %v or more (SQLite: connections severed), %d rows\n", int(plan.kills/plan.every), plan.every, plan.rows)
	fmt.Fprintf(&b, "%-18s %-7s %-5s %5s %6s %6s %5s %8s %8s %7s %6s %4s %5s %6s\n",
		"cell", "unit", "index", "rows", "rounds", "killed", "left", "drained", "stranded", "unended", "leaked", "lost", "twice", "logged")
	for _, f := range found {
		r := f.r
		fmt.Fprintf(&b, "%-18s %-7s %-5s %5d %6d %6d %5d %8s %8d %7d %6d %4d %5d %6d\n",
			f.cell, r.run.unit(), r.run.indexed(), r.rows, r.rounds, r.killed, r.left, r.drained.Round(10*time.Millisecond), r.stranded, r.unended, r.leaked, r.lost, r.twice, r.errors)
	}
	b.WriteString("index: the table has its claim index, or its primary key alone; left: unsettled when the kills stopped; drained: from then until the last row settled;\n")
	b.WriteString("stranded: unsettled once no row settled for " + killLoopStall.String() + "; unended: sessions in a transaction after a COMMIT or ROLLBACK that succeeded, or when the pool handed them out;\n")
	b.WriteString("leaked: once the consumers stopped, server transactions still open on any session the pools ever opened, and connections still out of the pools;\n")
	b.WriteString("twice: rows delivered more than once\n")
	t.Log("\n" + b.String())
}

// killLoopCell runs the kill loop on one cell as run says.
func killLoopCell(t *testing.T, c cell, run killLoopRun, plan killLoopPlan) killLoopResult {
	dsn := c.dsn(t)
	admin := c.openDSN(t, dsn, 2)
	tbl := c.b.newTable(t, admin, fullTable)
	c.setClaimIndex(t, admin, tbl, run.index)
	batch := run.batch
	c.publish(t, admin, tbl, messages("q", plan.rows)...)

	// The handlers take long enough that the drain, unhindered, would last most of the kills,
	// but a fraction of the time between two rounds of kills, so that deliveries settle between
	// them.
	const consumers, workers = 2, 4
	units := plan.rows
	if batch > 0 {
		units = (plan.rows + batch - 1) / batch
	}
	pace := min(plan.kills*4/5*consumers*workers/time.Duration(units), plan.every/4)

	var (
		mu         sync.Mutex
		deliveries = map[int64]int{}
	)
	deliver := func(ds ...*inbox.Delivery) {
		mu.Lock()
		for _, d := range ds {
			deliveries[d.ID]++
		}
		mu.Unlock()
		time.Sleep(pace)
	}
	logs := &inboxtest.Log{}
	var (
		pools   []*hooks
		dbs     []*sql.DB
		stops   []func()
		unended collector[string]
	)
	// Right after each COMMIT or ROLLBACK the server answered, before database/sql has the
	// connection back, and whenever database/sql hands a pooled connection out again, its
	// session must be out of any transaction: a transaction left open that the next round of
	// kills, or the connection's next transaction, would end shows here all the same.
	ended := func(ev hookEvent) {
		var when string
		switch {
		case ev.after && (ev.what == "commit" || ev.what == "rollback"):
			when = "after its " + strings.ToUpper(ev.what)
		case ev.what == "reuse":
			when = "when the pool handed it out again"
		default:
			return
		}
		if in, err := c.inTransaction(ev.conn.inner); err == nil && in {
			unended.add(fmt.Sprintf("session %d: in a transaction %s", ev.conn.session, when))
		}
	}
	for range consumers {
		db, h, err := hookedDB(c.b, dsn, ended)
		if err != nil {
			t.Fatal(err)
		}
		db.SetMaxOpenConns(workers + 2)
		db.SetMaxIdleConns(workers + 2)
		t.Cleanup(func() { db.Close() })
		pools, dbs = append(pools, h), append(dbs, db)
		cfg := &inbox.Config{
			Queue: "q", Workers: workers, PollInterval: cellPoll,
			Logger: logs.Logger(slog.LevelWarn),
		}
		var cons *inbox.Consumer
		if batch > 0 {
			cons = inbox.NewBatchConsumer(db, batchForm(t, c.newForm(t, tbl)), batch,
				inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
					deliver(ds...)
					return repeated(outcome.Ack(), len(ds))
				}), cfg)
		} else {
			cons = inbox.NewConsumer(db, c.newForm(t, tbl), inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
				deliver(d)
				return outcome.Ack()
			}), cfg)
		}
		stops = append(stops, startConsumer(t, cons))
	}

	r := killLoopResult{run: run, rows: plan.rows}
	// Rounds are counted rather than timed: on a loaded machine a round of kills takes longer
	// than plan.every, and a timed loop would run fewer of them.
	tick := time.NewTicker(plan.every)
	for rounds := int(plan.kills / plan.every); r.rounds < rounds; {
		<-tick.C
		r.rounds++
		for _, h := range pools {
			if c.b.name == "sqlite" {
				r.killed += h.sever()
			} else {
				r.killed += c.killSessions(t, admin, h.sessions())
			}
		}
	}
	tick.Stop()

	unprocessed := c.q(t, tbl.ProcessedAt) + " IS NULL"
	unsettled := func() int {
		return count(t, admin, "SELECT COUNT(*) FROM "+c.q(t, tbl.Name)+" WHERE "+unprocessed)
	}
	stopped := time.Now()
	r.left = unsettled()
	left, progress := r.left, stopped
	for left > 0 && time.Since(progress) < killLoopStall {
		time.Sleep(50 * time.Millisecond)
		if n := unsettled(); n < left {
			left, progress = n, time.Now()
		}
	}
	r.drained, r.stranded = progress.Sub(stopped), left
	if left > 0 {
		var sessions []int64
		for _, h := range pools {
			sessions = append(sessions, h.everOpened()...)
		}
		open := c.openTransactions(t, admin, sessions)
		if len(open) == 0 {
			open = []string{"(none)"}
		}
		t.Errorf("%d rows stranded: still unsettled %v after the kills stopped, none settled for %v (%s); the server's open transactions of the consumers' sessions:\n%s",
			left, time.Since(stopped).Round(time.Second), killLoopStall, c.notDue(t, admin, tbl), strings.Join(open, "\n"))
		t.Logf("the consumers' last log lines:\n%s", lastLines(logs.String(), 10))
	}

	// Stopped, the consumers hold nothing: a transaction still open on a session of their pools
	// was left there by a claim, settlement or release that ended it in Go only. The sessions
	// asked are every one the pools ever opened, so that a session the pool closed on its side
	// and the server kept counts too; and no connection may still be out of its pool, where a
	// *sql.Conn nothing will close would keep its session, and whatever it has open, until the
	// process exits.
	for _, stop := range stops {
		stop()
	}
	if c.b.name == "mysql" || c.b.name == "mariadb" {
		// information_schema.innodb_trx shows a cache that InnoDB refreshes every 100 ms.
		time.Sleep(time.Second)
	}
	var sessions []int64
	for i, h := range pools {
		sessions = append(sessions, h.everOpened()...)
		if s := dbs[i].Stats(); s.InUse > 0 {
			r.leaked += s.InUse
			t.Errorf("consumer %d: %d connections still out of the pool after Run returned (sessions the pool has open: %v)", i+1, s.InUse, h.sessions())
		}
	}
	if found := unended.all(); len(found) > 0 {
		r.unended = len(found)
		t.Errorf("%d times a session was in a transaction after a COMMIT or ROLLBACK that succeeded, or when the pool handed it out; the first:\n%s", len(found), strings.Join(found[:min(len(found), 10)], "\n"))
	}
	if open := c.openTransactions(t, admin, sessions); len(open) > 0 {
		r.leaked += len(open)
		t.Errorf("%d server transactions open on the pools' idle connections after the consumers stopped:\n%s", len(open), strings.Join(open, "\n"))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range c.ids(t, admin, tbl, "NOT ("+unprocessed+")") {
		if deliveries[id] == 0 {
			r.lost++
		}
	}
	if r.lost > 0 {
		t.Errorf("%d rows settled without ever reaching a handler", r.lost)
	}
	for _, n := range deliveries {
		if n > 1 {
			r.twice++
		}
	}
	r.errors = logs.Lines()
	return r
}

// notDue says how many of tbl's unsettled rows are not due yet, backed off by a failure
// (retry_after ahead of the host's clock, which writes it), and when the last falls due: rows
// that wait so are not held by anyone.
func (c cell) notDue(t *testing.T, db *sql.DB, tbl inbox.Table) string {
	t.Helper()
	var (
		due  any
		n    int
		last time.Time
	)
	now := time.Now()
	forRows(t, db, "SELECT "+c.q(t, tbl.RetryAfter)+" FROM "+c.q(t, tbl.Name)+" WHERE "+c.q(t, tbl.ProcessedAt)+" IS NULL AND "+c.q(t, tbl.RetryAfter)+" IS NOT NULL", nil, func() {
		at, err := dialect.ScannedTime(due)
		if err != nil {
			t.Fatal(err)
		}
		if at.After(now) {
			n++
			if at.After(last) {
				last = at
			}
		}
	}, &due)
	if n == 0 {
		return "none of them backed off"
	}
	return fmt.Sprintf("%d of them backed off, the last due in %v", n, last.Sub(now).Round(100*time.Millisecond))
}

// setClaimIndex gives tbl, as createTable made it, the claim index admin.Schema creates
// (schema.ClaimIndex), or leaves it its primary key alone, as index says.
func (c cell) setClaimIndex(t *testing.T, db *sql.DB, tbl inbox.Table, index bool) {
	t.Helper()
	ix, err := schema.ClaimIndex(c.b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	// createTable gives a MySQL or MariaDB table the claim index, under the same name.
	made := c.b.name == "mysql" || c.b.name == "mariadb"
	switch {
	case index && !made:
		mustExec(t, db, ix.Create)
	case !index && made:
		mustExec(t, db, "DROP INDEX "+c.q(t, ix.Name)+" ON "+c.q(t, tbl.Name))
	}
}

// inTransaction says whether the session of conn, a raw driver connection, is in a
// transaction: on Postgres by the status pgx read in the server's last ReadyForQuery, on MySQL
// and MariaDB by asking @@in_transaction. SQLite has no server session; it answers false.
func (c cell) inTransaction(conn driver.Conn) (bool, error) {
	switch c.b.name {
	case "postgres":
		pc, ok := conn.(interface{ Conn() *pgx.Conn })
		if !ok {
			return false, fmt.Errorf("a Postgres connection of type %T, not pgx's", conn)
		}
		return pc.Conn().PgConn().TxStatus() != 'I', nil
	case "mysql", "mariadb":
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		n, err := queryInt(ctx, conn, "SELECT @@in_transaction")
		return n != 0, err
	}
	return false, nil
}

// killSessions kills the server sessions ids from admin without waiting for them to go, and
// returns how many the server killed (the others were gone already).
func (c cell) killSessions(t *testing.T, admin *sql.DB, ids []int64) int {
	t.Helper()
	if len(ids) == 0 {
		return 0
	}
	ctx := context.Background()
	if c.b.name == "postgres" {
		list := make([]string, len(ids))
		for i, id := range ids {
			list[i] = strconv.FormatInt(id, 10)
		}
		// pg_terminate_backend of a session already gone answers false, with a warning.
		return count(t, admin, "SELECT COUNT(*) FROM unnest(ARRAY["+strings.Join(list, ", ")+"]::int[]) AS pid WHERE pg_terminate_backend(pid)")
	}
	n := 0
	for _, id := range ids {
		_, err := admin.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
		switch {
		case err == nil:
			n++
		case !strings.Contains(err.Error(), "Unknown thread"):
			t.Errorf("KILL CONNECTION %d: %v", id, err)
		}
	}
	return n
}

// openTransactions describes the server transactions open on sessions, one line each (none on
// SQLite, which has no server sessions): on
// MySQL and MariaDB from information_schema.innodb_trx and the process list, on Postgres from
// pg_stat_activity.
func (c cell) openTransactions(t *testing.T, admin *sql.DB, sessions []int64) []string {
	t.Helper()
	if len(sessions) == 0 {
		return nil
	}
	list := make([]string, len(sessions))
	for i, id := range sessions {
		list[i] = strconv.FormatInt(id, 10)
	}
	var query string
	switch c.b.name {
	case "sqlite":
		return nil // no server sessions: SQLite rolls back what a closed connection had open
	case "postgres":
		query = "SELECT CONCAT_WS(' | ', 'pid ' || pid, state, 'since ' || xact_start, LEFT(query, 200)) FROM pg_stat_activity WHERE xact_start IS NOT NULL AND pid IN (" + strings.Join(list, ", ") + ")"
	default:
		query = "SELECT CONCAT_WS(' | ', CONCAT('session ', t.trx_mysql_thread_id), t.trx_state, t.trx_isolation_level, CONCAT('started ', t.trx_started), CONCAT(t.trx_rows_locked, ' rows locked'), CONCAT('command ', p.COMMAND), IFNULL(LEFT(t.trx_query, 200), 'no statement running'))" +
			" FROM information_schema.innodb_trx t LEFT JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id WHERE t.trx_mysql_thread_id IN (" + strings.Join(list, ", ") + ")"
	}
	rows, err := admin.Query(query)
	if err != nil {
		return []string{fmt.Sprintf("(listing the open transactions: %v)", err)}
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return append(out, fmt.Sprintf("(reading the open transactions: %v)", err))
		}
		out = append(out, line)
	}
	return out
}

// TestFaultsFailedEndDiscardsConnection makes one COMMIT or ROLLBACK of each form fail before it
// reaches the server, on every server cell, as a driver's does when it cannot send it while it
// still takes its connection for a good one (hooks.refuseNext). The server's transaction is
// then still open, holding the row it locked, and database/sql would return its connection to
// the pool, where nothing ends it until the pool closes. The form must discard that connection,
// which ends the session and the transaction with it: within a few seconds another consumer
// claims the row, and no transaction is left open on the pool's sessions.
func TestFaultsFailedEndDiscardsConnection(t *testing.T) {
	refused := errors.New("write: broken pipe (the test kept the statement from the server)")
	cases := []struct {
		name, form    string
		transactional bool
		end           string // "commit" or "rollback": the one refused
		claimFirst    bool   // claim the row before arming the refusal
		run           func(ctx context.Context, f inbox.Form, d *inbox.Delivery) error
	}{
		{"rowlock-settle", "rowlock", false, "commit", true, func(ctx context.Context, f inbox.Form, d *inbox.Delivery) error {
			return f.Settle(ctx, d, outcome.Ack())
		}},
		{"rowlock-release", "rowlock", false, "rollback", true, func(ctx context.Context, f inbox.Form, d *inbox.Delivery) error {
			return f.Release(ctx, d)
		}},
		{"lease-claim", "lease", false, "commit", false, func(ctx context.Context, f inbox.Form, _ *inbox.Delivery) error {
			ds, err := f.Claim(ctx, 1)
			if len(ds) > 0 {
				return fmt.Errorf("the claim whose COMMIT failed returned %d rows", len(ds))
			}
			return err
		}},
		{"lease-tx-settle", "lease", true, "commit", true, func(ctx context.Context, f inbox.Form, d *inbox.Delivery) error {
			return f.Settle(ctx, d, outcome.Ack())
		}},
		{"advisory-tx-settle", "advisory", true, "commit", true, func(ctx context.Context, f inbox.Form, d *inbox.Delivery) error {
			return f.Settle(ctx, d, outcome.Ack())
		}},
		{"advisory-tx-release", "advisory", true, "rollback", true, func(ctx context.Context, f inbox.Form, d *inbox.Delivery) error {
			return f.Release(ctx, d)
		}},
	}
	var tests []subtest
	for _, c := range cells(t) {
		for _, tc := range cases {
			// The lease form claims in a transaction on MySQL and MariaDB only; on Postgres in
			// one statement.
			if c.form != tc.form || c.b.name == "sqlite" || tc.name == "lease-claim" && c.b.name == "postgres" {
				continue
			}
			tests = append(tests, subtest{c.b.name + "-" + tc.name, func(t *testing.T) {
				ctx := context.Background()
				dsn := c.dsn(t)
				admin := c.openDSN(t, dsn, 2)
				tbl := c.b.newTable(t, admin, fullTable)
				c.publish(t, admin, tbl, inbox.Message{Queue: "q"})

				db, pool, err := hookedDB(c.b, dsn, nil)
				if err != nil {
					t.Fatal(err)
				}
				db.SetMaxOpenConns(4)
				t.Cleanup(func() { db.Close() })
				f := c.newForm(t, tbl)
				q := inbox.Binding{Name: "q", Transactional: tc.transactional, Logger: testLogger(t)}
				if _, err := f.Open(ctx, db, q); err != nil {
					t.Fatal(err)
				}
				defer f.Close()
				var d *inbox.Delivery
				if tc.claimFirst {
					ds, err := f.Claim(ctx, 1)
					if err != nil || len(ds) != 1 {
						t.Fatalf("Claim: %d rows, %v; want the row", len(ds), err)
					}
					d = ds[0]
				}
				pool.refuseNext(tc.end, refused)
				err = tc.run(ctx, f, d)
				if pool.refused(tc.end) != nil {
					t.Fatalf("the %s ran no %s", tc.name, tc.end)
				}
				t.Logf("%s: %v", tc.name, err) // a release may well return nil: its row is back

				// Another consumer, on a pool of its own, takes the row once the transaction has
				// ended (on the lease form, once the claim's lease has run out).
				other := c.newForm(t, tbl)
				if _, err := other.Open(ctx, c.openDSN(t, dsn, 4), inbox.Binding{Name: "q", Logger: testLogger(t)}); err != nil {
					t.Fatal(err)
				}
				defer other.Close()
				deadline := time.Now().Add(cellLease + 5*time.Second)
				for {
					claimCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
					ds, err := other.Claim(claimCtx, 1)
					cancel()
					if len(ds) == 1 {
						other.Release(ctx, ds[0])
						break
					}
					if time.Now().After(deadline) {
						time.Sleep(time.Second) // information_schema.innodb_trx is a cache InnoDB refreshes every 100 ms
						t.Fatalf("the row was not claimable %v after the failed %s (last claim: %v); the server's open transactions of the pool's sessions:\n%s",
							cellLease+5*time.Second, tc.end, err, strings.Join(c.openTransactions(t, admin, pool.sessions()), "\n"))
					}
					time.Sleep(100 * time.Millisecond)
				}
				time.Sleep(time.Second)
				if open := c.openTransactions(t, admin, pool.sessions()); len(open) > 0 {
					t.Errorf("transactions still open on the pool's sessions after the failed %s:\n%s", tc.end, strings.Join(open, "\n"))
				}
			}})
		}
	}
	runConcurrently(t, 4, tests)
}
