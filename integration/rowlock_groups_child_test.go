package integration

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// The environment that turns the test binary into a child consumer of the row lock form's
// group and limit tests: the backend's name, its DSN, the table, and the description ("groups").
const (
	rowlockFlowChildEnv = "INBOX_ROWLOCK_FLOW_CHILD"
	rowlockFlowDSNEnv   = "INBOX_ROWLOCK_FLOW_DSN"
	rowlockFlowTableEnv = "INBOX_ROWLOCK_FLOW_TABLE"
	rowlockFlowKindEnv  = "INBOX_ROWLOCK_FLOW_KIND"
)

// rlRun is one run a child's handler reported: its row, its group (or limit key), which child
// ran it, and when it started and ended (end zero: the child was killed during it).
type rlRun struct {
	id         int64
	key        string
	child      int
	start, end time.Time
}

// rlChildren runs n children of test (named by its -test.run pattern) over tbl, each a row lock
// consumer of 4 workers whose handler says when it starts and ends each row, and collects
// their reports. kill SIGKILLs child i and returns when it was killed; the runs it had open end
// then.
type rlChildren struct {
	t     *testing.T
	cmds  []*exec.Cmd
	mu    sync.Mutex
	runs  map[[2]int64]*rlRun // by child and row: the run in progress
	done  []rlRun
	dead  map[int]time.Time
	ready sync.WaitGroup
}

func startRLChildren(t *testing.T, b backend, test, kind string, tbl inbox.Table, n int) *rlChildren {
	c := &rlChildren{t: t, runs: map[[2]int64]*rlRun{}, dead: map[int]time.Time{}}
	for i := range n {
		cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.timeout=3m")
		cmd.Env = append(os.Environ(), rowlockFlowChildEnv+"="+b.name, rowlockFlowDSNEnv+"="+b.dsn, rowlockFlowTableEnv+"="+tbl.Name, rowlockFlowKindEnv+"="+kind)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		c.cmds = append(c.cmds, cmd)
		c.ready.Add(1)
		go c.read(i, out)
	}
	c.ready.Wait()
	return c
}

// read takes child i's lines: "ready", "start <id> <key> <ns>", "end <id> <key> <ns>".
func (c *rlChildren) read(i int, out interface{ Read([]byte) (int, error) }) {
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 1 && f[0] == "ready" {
			c.ready.Done()
			continue
		}
		if len(f) != 4 {
			continue
		}
		id, _ := strconv.ParseInt(f[1], 10, 64)
		ns, _ := strconv.ParseInt(f[3], 10, 64)
		key := f[2]
		if key == "-" {
			key = ""
		}
		at := time.Unix(0, ns)
		c.mu.Lock()
		switch f[0] {
		case "start":
			c.runs[[2]int64{int64(i), id}] = &rlRun{id: id, key: key, child: i, start: at}
		case "end":
			if r := c.runs[[2]int64{int64(i), id}]; r != nil {
				r.end = at
				c.done = append(c.done, *r)
				delete(c.runs, [2]int64{int64(i), id})
			}
		}
		c.mu.Unlock()
	}
}

// holding is how many runs child i has in progress.
func (c *rlChildren) holding(i int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k := range c.runs {
		if k[0] == int64(i) {
			n++
		}
	}
	return n
}

// completed is how many runs have ended.
func (c *rlChildren) completed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.done)
}

// kill SIGKILLs child i once it holds a row, and returns how many runs it cut short.
func (c *rlChildren) kill(i int) int {
	waitFor(c.t, 20*time.Second, "the child to hold a row", func() bool { return c.holding(i) > 0 })
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.cmds[i].Process.Kill(); err != nil { // SIGKILL: no deferred rollback runs
		c.t.Fatal(err)
	}
	at := time.Now()
	c.dead[i] = at
	cut := 0
	for k, r := range c.runs {
		if k[0] == int64(i) {
			r.end = at // its row lock goes no later than its process
			c.done = append(c.done, *r)
			delete(c.runs, k)
			cut++
		}
	}
	return cut
}

// all returns every run, ended or cut short, sorted by start.
func (c *rlChildren) all() []rlRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.done)
	slices.SortFunc(out, func(a, b rlRun) int { return a.start.Compare(b.start) })
	return out
}

// rowlockFlowChild is the child: a row lock consumer of the table the environment names, at its
// backend's default level, whose handler prints when it starts and ends each row and sleeps
// 5 ms between (20 ms for the rows of the late-committed groups, l-…); it runs until the parent kills it, or for two minutes.
func rowlockFlowChild() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "rowlock flow child:", err)
		os.Exit(2)
	}
	name := os.Getenv(rowlockFlowChildEnv)
	d, driver := rowlock.Dialect(dialect.Postgres[isolation.Default]{}), "pgx"
	switch name {
	case "mysql":
		d, driver = dialect.MySQL[isolation.Default]{}, "mysql"
	case "mariadb":
		d, driver = dialect.MariaDB[isolation.Default]{}, "mysql"
	}
	db, err := sql.Open(driver, os.Getenv(rowlockFlowDSNEnv))
	if err != nil {
		fail(err)
	}
	db.SetMaxOpenConns(8)
	tbl := groupTable(os.Getenv(rowlockFlowTableEnv))
	out := &lineWriter{w: os.Stdout}
	key := func(d *inbox.Delivery) string {
		if g := groupOf(d); g != "" {
			return g
		}
		return "-"
	}
	if os.Getenv(rowlockFlowKindEnv) == "limits" {
		tbl = limitTable(os.Getenv(rowlockFlowTableEnv))
		key = func(d *inbox.Delivery) string { return runOf(d).kind }
	}
	h := inbox.HandlerFunc(func(ctx context.Context, dl *inbox.Delivery) outcome.Outcome {
		out.printf("start %d %s %d", dl.ID, key(dl), time.Now().UnixNano())
		pause := 5 * time.Millisecond
		switch {
		case strings.HasPrefix(key(dl), "l-"):
			pause = 20 * time.Millisecond // long enough for a lower id of its group to commit meanwhile
		case os.Getenv(rowlockFlowKindEnv) == "limits":
			pause = 30 * time.Millisecond // long enough for the limit to fill, a claim being slower
		}
		time.Sleep(pause)
		out.printf("end %d %s %d", dl.ID, key(dl), time.Now().UnixNano())
		return outcome.Ack()
	})
	cons := inbox.NewConsumer(db, rowlock.New(d, tbl), h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: 5 * time.Millisecond})
	out.printf("ready")
	go func() {
		if err := cons.Run(context.Background()); err != nil {
			fail(err)
		}
	}()
	time.Sleep(2 * time.Minute)
	fail(fmt.Errorf("not killed within two minutes"))
}

// TestRowlockGroupsAcrossProcesses: three child processes, each a row lock consumer of 4
// workers on its own pool, drain 8 groups of 20 rows published in one commit, 10 rows of no
// group, and 2 groups of 40 rows that four producers publish meanwhile, each row in a
// transaction that waits a little before it commits, so that ids commit out of order; one
// child is SIGKILLed while it holds rows. Within every group the runs (a killed one ending at
// the kill) never overlap; within the groups published in one commit they go in id order,
// each row once, but for the rows the killed child held, which run again after the kill.
func TestRowlockGroupsAcrossProcesses(t *testing.T) {
	if os.Getenv(rowlockFlowChildEnv) != "" {
		rowlockFlowChild()
		return
	}
	const groups, each, ungrouped, producers, late = 8, 20, 10, 4, 20
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		db := b.open(t, 8)
		tbl := b.newGroupTable(t, db)
		b.enqueue(t, db, tbl, groupMessages(groups, each, ungrouped)...)
		kids := startRLChildren(t, b, "TestRowlockGroupsAcrossProcesses", "groups", tbl, 3)
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				for i := range late {
					g := fmt.Sprintf("l-%d", (i/3)%2) // the producers publish to one group at a time
					tx, err := db.Begin()
					if err != nil {
						t.Error(err)
						return
					}
					if err := inbox.EnqueueTx(context.Background(), tx, b.dialect, tbl, inbox.Message{Queue: "q", GroupKey: g, Payload: []byte(g + "/" + fmt.Sprint(p, i))}); err != nil {
						tx.Rollback()
						t.Error(err)
						return
					}
					time.Sleep(time.Duration((p*7+i*3)%5) * 15 * time.Millisecond)
					if err := tx.Commit(); err != nil {
						t.Error(err)
						return
					}
					// Slower than the group drains, so that claims meet the commits' disorder.
					time.Sleep(time.Duration(100-(p*7+i*3)%5*15) * time.Millisecond)
				}
			})
		}
		waitFor(t, 30*time.Second, "some rows run", func() bool { return kids.completed() >= 30 })
		cut := kids.kill(0)
		t.Logf("killed child 0 holding %d rows", cut)
		wg.Wait()
		waitFor(t, time.Minute, "every row processed", func() bool {
			return b.countRows(t, db, tbl, b.q(t, tbl.ProcessedAt)+" IS NULL") == 0
		})
		runs := kids.all()
		checkRLGroups(t, runs, kids.dead)
		lateRuns := 0
		for _, r := range runs {
			if strings.HasPrefix(r.key, "l-") {
				lateRuns++
			}
		}
		t.Logf("%d runs of the late-committed groups", lateRuns)
		total := groups*each + ungrouped + producers*late
		checkRLOnce(t, runs, kids.dead, total)
	})
}

// rlAgainAfterKill reports whether r, a run of the row prev ran, is that row run again after the
// kill of prev's child: prev's settlement never committed (the child printed its end, or not,
// before the kill).
func rlAgainAfterKill(prev, r rlRun, dead map[int]time.Time) bool {
	at, ok := dead[prev.child]
	return ok && prev.id == r.id && !prev.start.After(at) && r.start.After(at)
}

// checkRLGroups fails unless, within each group, the runs never overlap, and, within the
// groups published in one commit (g-…), go in id order, a row cut short by a kill (dead: the
// kill times by child) running again after it.
func checkRLGroups(t *testing.T, runs []rlRun, dead map[int]time.Time) {
	t.Helper()
	byGroup := map[string][]rlRun{}
	for _, r := range runs {
		if r.key != "" {
			byGroup[r.key] = append(byGroup[r.key], r)
		}
	}
	for g, rs := range byGroup {
		for i := 1; i < len(rs); i++ {
			prev, r := rs[i-1], rs[i]
			if r.start.Before(prev.end) {
				t.Errorf("group %s: row %d (child %d) started at %v, before row %d (child %d) ended at %v: two rows of one group in work at once",
					g, r.id, r.child, r.start.Format("15:04:05.000000"), prev.id, prev.child, prev.end.Format("15:04:05.000000"))
			}
			killed := prev.id == r.id && rlAgainAfterKill(prev, r, dead)
			if strings.HasPrefix(g, "g-") && r.id <= prev.id && !killed {
				t.Errorf("group %s: row %d ran after row %d: not in id order", g, r.id, prev.id)
			}
		}
	}
}

// checkRLOnce fails unless total rows ran, each once, but for a row the killed child was
// running (or had run, its settlement not committed) at the kill, which runs again after it.
func checkRLOnce(t *testing.T, runs []rlRun, dead map[int]time.Time, total int) {
	t.Helper()
	byID := map[int64][]rlRun{}
	for _, r := range runs {
		byID[r.id] = append(byID[r.id], r)
	}
	if len(byID) != total {
		t.Errorf("%d rows ran, want %d", len(byID), total)
	}
	again := 0
	for id, rs := range byID {
		for i := 1; i < len(rs); i++ {
			if !rlAgainAfterKill(rs[i-1], rs[i], dead) {
				t.Errorf("row %d ran %d times, not for a kill", id, len(rs))
			}
			again++
		}
	}
	t.Logf("%d runs of %d rows, %d of them again after the kill", len(runs), total, again)
}
