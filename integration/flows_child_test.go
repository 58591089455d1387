package integration

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// The child processes of the flows' kill matrix (TestFlowsSurviveSIGKILL): each a consumer by
// one form of one table with groups or a limit, telling the parent on stdout when each run
// starts and ends.

// The child processes of TestFlowsSurviveSIGKILL read what to consume from these.
const (
	flowChildEnv = "INBOX_FLOW_CHILD" // the backend's name
	flowDSNEnv   = "INBOX_FLOW_DSN"
	flowTableEnv = "INBOX_FLOW_TABLE"
	flowKindEnv  = "INBOX_FLOW_KIND" // "groups" or "limits"
	flowFormEnv  = "INBOX_FLOW_FORM" // flowForm's name
)

// flowChildWorkers are each child's workers: the proof asks for 4 processes × 8.
const flowChildWorkers = 8

// checkGroupRunsAllowingKilled is checkGroupRuns where a row a killed child held runs again (it
// was not settled): within a group no two runs overlap, and a row's first runs go in id order.
func checkGroupRunsAllowingKilled(t testing.TB, runs []groupRun) {
	t.Helper()
	byGroup := map[string][]groupRun{}
	for _, r := range runs {
		byGroup[r.group] = append(byGroup[r.group], r)
	}
	for g, rs := range byGroup {
		slices.SortFunc(rs, func(a, b groupRun) int { return a.start.Compare(b.start) })
		for i := 1; i < len(rs); i++ {
			if rs[i].start.Before(rs[i-1].end) {
				t.Errorf("group %s: row %d started at %v, before row %d ended at %v: two rows of one group in work at once", g, rs[i].id, rs[i].start, rs[i-1].id, rs[i-1].end)
			}
			if rs[i].id < rs[i-1].id {
				t.Errorf("group %s: row %d ran after row %d: not in id order", g, rs[i].id, rs[i-1].id)
			}
		}
	}
}

// flowRun is a run a child reported: its row, its group, its start and end.
type flowRun struct {
	id         int64
	group      string
	start, end time.Time
}

// flowChild is a child process of TestFlowsSurviveSIGKILL and its runs started and not
// ended.
type flowChild struct {
	cmd    *exec.Cmd
	read   chan struct{} // closed once the child's output is read to its end
	mu     sync.Mutex
	starts map[int64]flowRun
	killed time.Time
}

// startFormChild starts a child consuming tbl by the form flowForm names (kind: "groups" or
// "limits"), whose ended runs go to runs.
func startFormChild(t *testing.T, form string, b backend, dsn string, tbl inbox.Table, kind string, runs *collector[flowRun]) *flowChild {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFlowsSurviveSIGKILL$", "-test.count=1", "-test.timeout=3m")
	cmd.Env = append(os.Environ(), flowChildEnv+"="+b.name, flowDSNEnv+"="+dsn, flowTableEnv+"="+tbl.Name, flowKindEnv+"="+kind, flowFormEnv+"="+form)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &flowChild{cmd: cmd, read: make(chan struct{}), starts: map[int64]flowRun{}}
	t.Cleanup(func() { c.kill(t) })
	go func() {
		defer close(c.read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) != 4 {
				continue
			}
			id, _ := strconv.ParseInt(f[1], 10, 64)
			ns, _ := strconv.ParseInt(f[3], 10, 64)
			c.mu.Lock()
			switch f[0] {
			case "start":
				c.starts[id] = flowRun{id: id, group: strings.TrimPrefix(f[2], "="), start: time.Unix(0, ns)}
			case "end":
				r := c.starts[id]
				r.end = time.Unix(0, ns)
				runs.add(r)
				delete(c.starts, id)
			}
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *flowChild) holding() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.starts) > 0
}

// kill kills the child and returns once what it wrote before it died is read: a run it ended,
// and reported, just before is an ended run, not an open one.
func (c *flowChild) kill(t *testing.T) {
	c.mu.Lock()
	if !c.killed.IsZero() {
		c.mu.Unlock()
		return
	}
	// The child's open runs end when the kill is sent: the process dies at the signal, and its
	// locks go only once the server has seen its sessions end, later still, whereas Wait may
	// return after another process has taken the rows (a loaded machine).
	c.killed = time.Now()
	if err := c.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Error(err)
	}
	c.mu.Unlock()
	<-c.read // Wait closes the pipe, and must wait for the reads
	c.cmd.Wait()
}

// open are the child's runs started and not ended, ending at its kill.
func (c *flowChild) open() []flowRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []flowRun
	for _, r := range c.starts {
		r.end = c.killed
		out = append(out, r)
	}
	return out
}

// runFlowChild is the child: a consumer of flowChildWorkers workers, by the form flowFormEnv
// names, whose handlers print when each run starts and ends ("start id =group unixnano"),
// running 15 ms, until it is killed.
func runFlowChild() {
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, "flow child:", err)
		os.Exit(2)
	}
	b := backendNamed(os.Getenv(flowChildEnv), os.Getenv(flowDSNEnv))
	db, err := sql.Open(b.driver, b.dsn)
	if err != nil {
		fail(err)
	}
	db.SetMaxOpenConns(flowChildWorkers + 2) // a delivery of the row lock and advisory forms holds one
	tbl := limitTable(os.Getenv(flowTableEnv))
	if os.Getenv(flowKindEnv) == "groups" {
		tbl = groupTable(os.Getenv(flowTableEnv))
	}
	var out sync.Mutex
	say := func(what string, d *inbox.Delivery) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf("%s %d =%s %d\n", what, d.ID, groupOf(d), time.Now().UnixNano())
	}
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		say("start", d)
		time.Sleep(15 * time.Millisecond)
		say("end", d)
		return outcome.Ack()
	})
	cons := inbox.NewConsumer(db, flowForm(os.Getenv(flowFormEnv), b, tbl), h,
		&inbox.Config{Queue: "q", Workers: flowChildWorkers, PollInterval: 20 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err := cons.Run(context.Background()); err != nil {
		fail(err)
	}
	fail(errors.New("the consumer stopped before the parent killed the process"))
}
