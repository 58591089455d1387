package integration

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// This file starts the servers of the cluster tests as child processes on loopback ports and in
// directories of their own: a MariaDB Galera cluster (galeraCluster), PgBouncer (startPgBouncer)
// and a streaming Postgres standby (postgresStandby, beside privatePostgres). Each is stopped
// and its directory removed when the test ends, however it ends. The servers the other tests
// share are never touched.

// childProcess is a server run as a child of the test in a process group of its own, so that
// kill also ends what the server started (a Galera node's state transfer scripts and rsync
// daemons).
type childProcess struct {
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed once cmd has exited
}

// start runs name with args, its output appended to logPath.
func (p *childProcess) start(logPath, name string, args ...string) error {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		log.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

// exited reports whether the process started last has exited.
func (p *childProcess) exited() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return true
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill ends the process group with SIGKILL, as a power cut would, and waits for the process.
func (p *childProcess) kill() error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd, p.done = nil, nil
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("%s (pid %d) still runs 30 s after SIGKILL", cmd.Path, cmd.Process.Pid)
	}
}

// logTail is the end of a server's log, for a failure message.
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// systemUser looks up a system user the server must run as, skipping the test without it.
func systemUser(t *testing.T, name string) (uid, gid int) {
	u, err := user.Lookup(name)
	if err != nil {
		t.Skipf("the %s system user is missing: %v", name, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

// ownedTempDir is a new directory under the system's temporary directory owned by uid, removed
// when the test ends. (t.TempDir's directories are root's, mode 0700.)
func ownedTempDir(t *testing.T, pattern string, uid, gid int) string {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// galeraProvider is the path of the Galera replication library, "" when galera-4 is not
// installed.
func galeraProvider() string {
	for _, p := range []string{"/usr/lib/galera/libgalera_smm.so", "/usr/lib/libgalera_smm.so", "/usr/lib64/galera-4/libgalera_smm.so"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}

// galera is a MariaDB Galera cluster the test started. Each node is a privateServer: crash
// kills it (SIGKILL), and start has it rejoin the cluster, returning once it is synced.
type galera struct {
	nodes []*privateServer
}

// galeraCluster starts a cluster of n MariaDB nodes on Debian's galera-4 provider: the first
// bootstraps the cluster (--wsrep-new-cluster), the others join it and receive its state by
// rsync (wsrep_sst_method=rsync, the method that needs nothing beyond the mariadb-server
// package's own dependencies). The nodes run as the mysql system user, since rsync's daemon
// run by root would write the state as nobody. It skips the test when galera-4, rsync or the
// MariaDB server is missing, or when the test does not run as root.
func galeraCluster(t *testing.T, n int) *galera {
	skipShort(t, "a Galera cluster")
	provider := galeraProvider()
	server, errServer := exec.LookPath("mariadbd")
	if errServer != nil {
		server, errServer = exec.LookPath("/usr/sbin/mariadbd")
	}
	install, errInstall := exec.LookPath("mariadb-install-db")
	_, errRsync := exec.LookPath("rsync")
	if provider == "" || errServer != nil || errInstall != nil || errRsync != nil || os.Geteuid() != 0 {
		t.Skip("a Galera cluster needs root and the galera-4, rsync and mariadb-server packages")
	}
	uid, gid := systemUser(t, "mysql")
	base := ownedTempDir(t, "inbox-galera-", uid, gid)

	ports := make([]int, n)
	gcomm := make([]int, n)
	peers := make([]string, n)
	for i := range n {
		ports[i], gcomm[i] = freePort(t), freePort(t)
		peers[i] = fmt.Sprintf("127.0.0.1:%d", gcomm[i])
	}
	cluster := "gcomm://" + strings.Join(peers, ",")
	g := &galera{}
	for i := range n {
		dir := filepath.Join(base, fmt.Sprintf("node%d", i+1))
		data := filepath.Join(dir, "data")
		for _, d := range []string{dir, data} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
		if i == 0 {
			if out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--user=mysql",
				"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput(); err != nil {
				t.Fatalf("mariadb-install-db: %v: %s", err, out)
			}
		}
		s := &privateServer{name: "mariadb", dir: dir, port: ports[i], restarted: make(chan struct{})}
		s.dsn = fmt.Sprintf("root@tcp(127.0.0.1:%d)/test?timeout=2s", s.port)
		ist, sst := freePort(t), freePort(t)
		args := []string{
			"--no-defaults", "--datadir=" + data, "--user=mysql",
			fmt.Sprintf("--port=%d", s.port), "--bind-address=127.0.0.1", "--socket=" + filepath.Join(dir, "sock"),
			"--innodb-buffer-pool-size=32M", "--innodb-log-file-size=8M", "--max-connections=100", "--skip-log-bin",
			"--binlog-format=ROW", "--innodb-autoinc-lock-mode=2", "--default-storage-engine=InnoDB",
			"--wsrep-on=ON", "--wsrep-provider=" + provider, "--wsrep-cluster-name=inbox",
			"--wsrep-cluster-address=" + cluster, "--wsrep-node-name=" + fmt.Sprintf("node%d", i+1),
			fmt.Sprintf("--wsrep-node-address=127.0.0.1:%d", gcomm[i]),
			// The group communication's timeouts stay at their defaults: shorter ones (a 2 s
			// evs.suspect_timeout) had the two survivors of a killed node lose their primary
			// component on this loaded 2-core machine, and every commit stalled until they merged.
			fmt.Sprintf("--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:%d;ist.recv_addr=127.0.0.1:%d;gcache.size=32M", gcomm[i], ist),
			"--wsrep-sst-method=rsync", fmt.Sprintf("--wsrep-sst-receive-address=127.0.0.1:%d", sst),
		}
		proc := &childProcess{}
		log := filepath.Join(dir, "log")
		bootstrap := i == 0
		started := false
		s.start = func() error {
			a := args
			if bootstrap {
				a = append(a[:len(a):len(a)], "--wsrep-new-cluster")
				bootstrap = false // a node that restarts rejoins the cluster
			}
			if started {
				// A node killed stays in the others' view until they declare it gone (after
				// evs.suspect_timeout, 5 s); started before that, it is kept out of their view
				// for up to 20 s more.
				if err := galeraEvicted(ports, i); err != nil {
					return fmt.Errorf("galera node %d: %w", i+1, err)
				}
			}
			started = true
			if err := proc.start(log, server, a...); err != nil {
				return err
			}
			if err := galeraSynced(s.port, proc); err != nil {
				return fmt.Errorf("galera node %d: %w\n%s", i+1, err, logTail(log))
			}
			return nil
		}
		s.crash = proc.kill
		t.Cleanup(func() {
			s.crash()
			if t.Failed() {
				t.Logf("galera node %d's log ends:\n%s", i+1, logTail(log))
			}
		})
		g.nodes = append(g.nodes, s)
	}
	if err := g.nodes[0].start(); err != nil {
		t.Fatal(err)
	}
	root, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/", ports[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.Exec("CREATE DATABASE test"); err != nil {
		t.Fatal(err)
	}
	// The joiners take their state from a donor one at a time; each waits for the one before.
	for _, s := range g.nodes[1:] {
		if err := s.start(); err != nil {
			t.Fatal(err)
		}
	}
	return g
}

// galeraEvicted waits until another node than ports[gone] has a view without it (its
// wsrep_cluster_size is less than len(ports)), for at most a minute.
func galeraEvicted(ports []int, gone int) error {
	var dbs []*sql.DB
	for i, p := range ports {
		if i == gone {
			continue
		}
		db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/?timeout=1s", p))
		if err != nil {
			return err
		}
		defer db.Close()
		dbs = append(dbs, db)
	}
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		for _, db := range dbs {
			var size int
			if db.QueryRow("SHOW STATUS LIKE 'wsrep_cluster_size'").Scan(new(string), &size) == nil && size < len(ports) {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("the other nodes did not let the node go within a minute")
}

// galeraSynced waits until the node on port is synced with its cluster (wsrep_ready and
// wsrep_local_state_comment Synced), for at most two minutes, or until proc exits.
func galeraSynced(port int, proc *childProcess) error {
	db, err := sql.Open("mysql", fmt.Sprintf("root@tcp(127.0.0.1:%d)/?timeout=1s", port))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var name, state string
		err = db.QueryRow("SHOW STATUS LIKE 'wsrep_local_state_comment'").Scan(&name, &state)
		if err == nil && state == "Synced" {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("state %s", state)
		}
		if proc.exited() {
			return fmt.Errorf("mariadbd exited before it was synced (%v)", err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not synced within two minutes: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// postgresBin is the directory of the newest installed Postgres server's programs, "" when the
// postgresql package is missing.
func postgresBin() string {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_basebackup")
	if len(bins) == 0 {
		return ""
	}
	return filepath.Dir(bins[len(bins)-1])
}

// asPostgres runs a Postgres program as the postgres system user.
func asPostgres(args ...string) error {
	out, err := exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// postgresStandby makes a streaming standby of primary (a privatePostgres) with pg_basebackup -R
// and starts it on a port of its own, returning once it has replayed everything the primary
// had written. promote turns it into a primary (pg_ctl promote, waiting until it is done).
func postgresStandby(t *testing.T, primary *privateServer) (standby *privateServer, promote func() error) {
	bin := postgresBin()
	if bin == "" {
		t.Skip("a Postgres standby needs the postgresql package (pg_basebackup)")
	}
	data := filepath.Join(primary.dir, "standby")
	if err := asPostgres(filepath.Join(bin, "pg_basebackup"), "-h", "127.0.0.1", "-p", strconv.Itoa(primary.port),
		"-U", "postgres", "-D", data, "-R", "-X", "stream", "-c", "fast"); err != nil {
		t.Fatal(err)
	}
	s := &privateServer{name: "postgres", dir: primary.dir, port: freePort(t), restarted: make(chan struct{})}
	s.dsn = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", s.port)
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60", s.port, primary.dir)
	s.start = func() error {
		return asPostgres(filepath.Join(bin, "pg_ctl"), "-D", data, "-o", opts, "-l", filepath.Join(primary.dir, "standby.log"), "-w", "start")
	}
	s.crash = func() error {
		return asPostgres(filepath.Join(bin, "pg_ctl"), "-D", data, "-m", "immediate", "-w", "stop")
	}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.crash() })
	promote = func() error { return asPostgres(filepath.Join(bin, "pg_ctl"), "-D", data, "-w", "promote") }
	return s, promote
}

// caughtUp waits until standby has replayed the primary's WAL up to its current position.
func caughtUp(t *testing.T, primary, standby *sql.DB) {
	t.Helper()
	var lsn string
	if err := primary.QueryRow("SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the standby to replay "+lsn, func() bool {
		var ok bool
		err := standby.QueryRow("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&ok)
		return err == nil && ok
	})
}

// pgbouncerVersion is the installed PgBouncer's version ("1.18.0"), "" when it is missing.
func pgbouncerVersion() string {
	out, err := exec.Command("pgbouncer", "--version").Output()
	if err != nil {
		return ""
	}
	first, _, _ := strings.Cut(string(out), "\n")
	if v, ok := strings.CutPrefix(strings.TrimSpace(first), "PgBouncer "); ok {
		return v
	}
	return ""
}

// pgbouncer is a PgBouncer the test started, in front of a Postgres server's database
// "postgres", which it serves under three names: "postgres" with pool server connections,
// "pair" with two and "single" with one.
type pgbouncer struct {
	port    int
	version string // "1.18.0"
	mode    string // "session" or "transaction"
}

// dsn is the DSN of database db through PgBouncer, with extra parameters params ("" or
// "name=value&…").
func (p *pgbouncer) dsn(db, params string) string {
	dsn := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=2", p.port, db)
	if params != "" {
		dsn += "&" + params
	}
	return dsn
}

// startPgBouncer runs PgBouncer (as the postgres user: it refuses root) on a port of its own in
// pool mode mode ("session" or "transaction") in front of the Postgres server s. Where the
// installed PgBouncer carries protocol-level prepared statements (1.21 and later),
// max_prepared_statements switches that on. It skips the test when the pgbouncer package is
// missing.
func startPgBouncer(t *testing.T, s *privateServer, mode string, pool int) *pgbouncer {
	version := pgbouncerVersion()
	if version == "" || os.Geteuid() != 0 {
		t.Skip("PgBouncer needs root (to run it as postgres) and the pgbouncer package")
	}
	uid, gid := systemUser(t, "postgres")
	dir := ownedTempDir(t, "inbox-pgbouncer-", uid, gid)
	p := &pgbouncer{port: freePort(t), version: version, mode: mode}
	var conf bytes.Buffer
	conf.WriteString("[databases]\n")
	for name, size := range map[string]int{"postgres": pool, "pair": 2, "single": 1} {
		fmt.Fprintf(&conf, "%s = host=127.0.0.1 port=%d dbname=postgres pool_size=%d\n", name, s.port, size)
	}
	fmt.Fprintf(&conf, "\n[pgbouncer]\nlisten_addr = 127.0.0.1\nlisten_port = %d\nunix_socket_dir =\n", p.port)
	fmt.Fprintf(&conf, "auth_type = trust\nauth_file = %s\n", filepath.Join(dir, "users"))
	fmt.Fprintf(&conf, "pool_mode = %s\nmax_client_conn = 500\n", mode)
	fmt.Fprintf(&conf, "logfile = %s\nadmin_users = postgres\n", filepath.Join(dir, "log"))
	if atLeastVersion(version, 1, 21) {
		conf.WriteString("max_prepared_statements = 200\n")
	}
	for name, text := range map[string]string{"pgbouncer.ini": conf.String(), "users": `"postgres" ""` + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	proc := &childProcess{}
	if err := proc.start(filepath.Join(dir, "stderr"), "pgbouncer", "-u", "postgres", filepath.Join(dir, "pgbouncer.ini")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proc.kill() })
	db, err := sql.Open("pgx", p.dsn("postgres", "default_query_exec_mode=simple_protocol"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := db.ExecContext(ctx, "SELECT 1")
		cancel()
		if err == nil {
			break
		}
		if proc.exited() || time.Now().After(deadline) {
			t.Fatalf("PgBouncer %s did not answer on port %d: %v\n%s%s", version, p.port, err,
				logTail(filepath.Join(dir, "stderr")), logTail(filepath.Join(dir, "log")))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("PgBouncer %s in %s pooling on port %d, %d server connections", version, mode, p.port, pool)
	return p
}

// atLeastVersion reports whether a dotted version ("1.18.0") is at least major.minor.
func atLeastVersion(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	maj, err1 := strconv.Atoi(parts[0])
	mnr, err2 := strconv.Atoi(parts[1])
	if err := errors.Join(err1, err2); err != nil {
		return false
	}
	return maj > major || maj == major && mnr >= minor
}
