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
	"github.com/sqlinbox/inbox/dialect"
)

// The child of TestPeriodicProcesses learns its database and table from these.
const (
	periodicChild  = "INBOX_PERIODIC_CHILD" // the backend's name
	periodicDriver = "INBOX_PERIODIC_DRIVER"
	periodicDSN    = "INBOX_PERIODIC_DSN"
	periodicTable  = "INBOX_PERIODIC_TABLE"
)

// periodicSchedules are the child's schedules, each a tick a second, one per misfire policy.
var periodicSchedules = []struct {
	name     string
	misfire  inbox.Misfire
	backfill int // the missed ticks the policy publishes, at most
}{
	{"skip", inbox.MisfireSkip, 0},
	{"once", inbox.MisfireRunOnce, 1},
	{"backfill3", inbox.MisfireBackfill(3), 3},
}

// periodicCreate creates tbl and its ticks table on db.
func periodicCreate(t *testing.T, b backend, db *sql.DB) inbox.Table {
	t.Helper()
	tbl := b.newTable(t, db, fullTable)
	create, err := inbox.TicksSchema(b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	ticks := b.q(t, inbox.TicksTable(tbl.Name))
	mustExec(t, db, "DROP TABLE IF EXISTS "+ticks)
	mustExec(t, db, create)
	t.Cleanup(func() { db.Exec("DROP TABLE IF EXISTS " + ticks) })
	return tbl
}

// TestPeriodicProcesses runs schedules of a tick a second in 4 child processes for 30 s,
// SIGKILLing one of them every 2 to 3 s (a few milliseconds after a tick, when the processes are
// taking it) and starting it again: each schedule's jobs are one per second of the run, every
// tick once, none missing. Then every process is killed for 10 s, and two started again: each
// schedule publishes the ticks it missed by its misfire policy (skip none, run once one,
// backfill 3 the latest three), and goes on.
func TestPeriodicProcesses(t *testing.T) {
	if name := os.Getenv(periodicChild); name != "" {
		periodicRun(t, name)
		return
	}
	skipShort(t, "30 s of schedules in child processes per database")
	for _, b := range backends(t, true) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			dsn := b.testDSN(t)
			db := b.openDSN(t, dsn, 4)
			tbl := periodicCreate(t, b, db)
			run := &periodicChildren{t: t, b: b, dsn: dsn, table: tbl.Name}
			defer run.killAll()

			start := time.Now()
			for range 4 {
				run.start()
			}
			for i := 0; time.Since(start) < 30*time.Second-2500*time.Millisecond; i++ {
				// A few milliseconds after a tick, while the processes take it.
				next := time.Now().Truncate(time.Second).Add(2*time.Second + 5*time.Millisecond)
				time.Sleep(time.Until(next))
				run.kill(i % 4)
				time.Sleep(300 * time.Millisecond)
				run.start()
			}
			time.Sleep(time.Until(start.Add(30 * time.Second)))
			run.killAll()
			end := time.Now()

			lasts := periodicCheckRun(t, b, db, tbl, end.Sub(start))
			t.Logf("%d processes killed and started again in %s", run.killed, end.Sub(start).Round(time.Millisecond))

			// The outage: 10 s, ending 0.6 s after a tick, so that the tick before the restart
			// is late by more than half a second (missed) and the one after it is on time.
			up := end.Add(10 * time.Second).Truncate(time.Second).Add(600 * time.Millisecond)
			time.Sleep(time.Until(up))
			started := run.start()
			if second := run.start(); second.Before(started) {
				started = second
			}
			time.Sleep(time.Until(started.Add(2500 * time.Millisecond)))
			run.killAll()

			periodicCheckOutage(t, b, db, tbl, lasts, started, up.Sub(end))
		})
	}
}

// periodicTicks returns the ticks of schedule name whose jobs are in tbl, in order.
func periodicTicks(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, name string) []time.Time {
	t.Helper()
	rows, err := db.Query("SELECT " + b.q(t, tbl.Payload) + " FROM " + b.q(t, tbl.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ticks []time.Time
	for rows.Next() {
		var p []byte
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		schedule, micros, ok := strings.Cut(string(p), " ")
		if !ok {
			t.Fatalf("payload %q: want a schedule and a tick", p)
		}
		if schedule != name {
			continue
		}
		us, err := strconv.ParseInt(micros, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		ticks = append(ticks, time.UnixMicro(us))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(ticks, time.Time.Compare)
	return ticks
}

// periodicChildren are the child processes of one database's run.
type periodicChildren struct {
	t     *testing.T
	b     backend
	dsn   string
	table string

	mu     sync.Mutex
	live   []*exec.Cmd
	killed int
}

// start starts a child, and returns the time it reported, just before its Run.
func (r *periodicChildren) start() time.Time {
	r.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestPeriodicProcesses$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), periodicChild+"="+r.b.name, periodicDriver+"="+r.b.driver, periodicDSN+"="+r.dsn, periodicTable+"="+r.table)
	out, stderr, err := startPiped(cmd)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.live = append(r.live, cmd)
	r.mu.Unlock()
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		cmd.Process.Kill()
		r.t.Fatalf("a child ended before it ran: %v\n%s", cmd.Wait(), stderr.String())
	}
	started, ok := strings.CutPrefix(lines.Text(), "started ")
	us, err := strconv.ParseInt(started, 10, 64)
	if !ok || err != nil {
		r.t.Fatalf("a child said %q; want started and its clock", lines.Text())
	}
	go func() {
		for lines.Scan() {
		}
	}()
	go func() {
		// A child that ends by itself failed: say why.
		if err := cmd.Wait(); err != nil && !strings.Contains(err.Error(), "killed") {
			r.t.Errorf("a child failed: %v\n%s", err, stderr.String())
		}
	}()
	return time.UnixMicro(us)
}

// kill SIGKILLs the i-th live child.
func (r *periodicChildren) kill(i int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cmd := r.live[i%len(r.live)]
	r.live = slices.Delete(r.live, i%len(r.live), i%len(r.live)+1)
	cmd.Process.Kill()
	r.killed++
}

// killAll SIGKILLs every live child.
func (r *periodicChildren) killAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cmd := range r.live {
		cmd.Process.Kill()
	}
	r.live = nil
}

// periodicRun is the child: it runs the schedules until it is killed, and says when it
// starts them.
func periodicRun(t *testing.T, name string) {
	d, err := dialect.Parse(name, "")
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open(os.Getenv(periodicDriver), os.Getenv(periodicDSN))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(4)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	p := inbox.NewPeriodic(db, d, fullTable(os.Getenv(periodicTable)), &inbox.PeriodicConfig{Logger: log})
	for _, s := range periodicSchedules {
		err := p.Add(inbox.PeriodicJob{Name: s.name, Schedule: inbox.Every(time.Second), Misfire: s.misfire, Message: func(tick time.Time) inbox.Message {
			return inbox.Message{Payload: fmt.Appendf(nil, "%s %d", s.name, tick.UnixMicro())}
		}})
		if err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("started %d\n", time.Now().UnixMicro())
	if err := p.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestPeriodicNoOverlap checks a schedule with NoOverlap: while its last job is queued (or in
// work), its ticks are taken and publish nothing; once the job is processed, the next tick
// publishes again.
func TestPeriodicNoOverlap(t *testing.T) {
	for _, b := range backends(t, true) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			db := b.open(t, 4)
			tbl := periodicCreate(t, b, db)
			p := inbox.NewPeriodic(db, b.dialect, tbl, &inbox.PeriodicConfig{Logger: testLogger(t)})
			err := p.Add(inbox.PeriodicJob{Name: "single", Schedule: inbox.Every(200 * time.Millisecond), NoOverlap: true, Message: func(tick time.Time) inbox.Message {
				return inbox.Message{Payload: fmt.Appendf(nil, "single %d", tick.UnixMicro())}
			}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- p.Run(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Error(err)
				}
			}()
			count := func() int { return len(periodicTicks(t, b, db, tbl, "single")) }
			waitFor(t, 5*time.Second, "the first tick's job", func() bool { return count() == 1 })
			time.Sleep(time.Second) // five ticks, taken while the job is queued
			if n := count(); n != 1 {
				t.Fatalf("%d jobs while the first was queued; want 1", n)
			}
			var last, job int64
			ticks := b.q(t, inbox.TicksTable(tbl.Name))
			if err := db.QueryRow("SELECT last_tick, job_id FROM "+ticks+" WHERE name = 'single'").Scan(&last, &job); err != nil {
				t.Fatal(err)
			}
			if first := periodicTicks(t, b, db, tbl, "single")[0]; last <= first.UnixMicro() {
				t.Errorf("the last tick taken is %s, the first job's; want the ticks since taken", time.UnixMicro(last).Format(time.StampMilli))
			}
			mustExec(t, db, "UPDATE "+b.q(t, tbl.Name)+" SET "+b.q(t, tbl.ProcessedAt)+" = CURRENT_TIMESTAMP WHERE "+b.q(t, tbl.ID)+" = "+strconv.FormatInt(job, 10))
			waitFor(t, 5*time.Second, "a tick's job after the first was processed", func() bool { return count() == 2 })
		})
	}
}

// TestPeriodicNeedsTicksTable checks that Run refuses a table without its ticks table, with
// an error that gives the statement that creates it.
func TestPeriodicNeedsTicksTable(t *testing.T) {
	for _, b := range backends(t, true) {
		t.Run(b.name, func(t *testing.T) {
			db, tbl := b.openTable(t, 4, fullTable)
			p := inbox.NewPeriodic(db, b.dialect, tbl, nil)
			if err := p.Add(inbox.PeriodicJob{Name: "a", Schedule: inbox.Every(time.Second), Message: func(time.Time) inbox.Message { return inbox.Message{} }}); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := p.Run(ctx)
			create, _ := inbox.TicksSchema(b.dialect, tbl)
			if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), create) {
				t.Errorf("Run = %v; want ErrSchema with %s", err, create)
			}
		})
	}
}

// periodicCheckRun checks each schedule's jobs after a run of d: one a second, each tick once,
// none missing. It returns each schedule's last tick.
func periodicCheckRun(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, d time.Duration) map[string]time.Time {
	t.Helper()
	lasts := map[string]time.Time{}
	for _, s := range periodicSchedules {
		ticks := periodicTicks(t, b, db, tbl, s.name)
		if len(ticks) < 29 || len(ticks) > 31 {
			t.Errorf("%s: %d jobs in %s of 4 processes; want 30 ±1", s.name, len(ticks), d.Round(time.Millisecond))
		}
		for i := 1; i < len(ticks); i++ {
			if ticks[i].Sub(ticks[i-1]) != time.Second {
				t.Errorf("%s: tick %s follows %s: want each second's tick once", s.name, ticks[i].Format(time.StampMilli), ticks[i-1].Format(time.StampMilli))
			}
		}
		if len(ticks) > 0 {
			lasts[s.name] = ticks[len(ticks)-1]
		}
	}
	return lasts
}

// periodicCheckOutage checks each schedule's jobs after an outage of d since its last tick
// before it, lasts, and a restart at started: the missed ticks its policy publishes (the latest
// ones), the ticks on time since, and no tick twice.
func periodicCheckOutage(t *testing.T, b backend, db *sql.DB, tbl inbox.Table, lasts map[string]time.Time, started time.Time, d time.Duration) {
	t.Helper()
	missedBefore := started.Add(-500 * time.Millisecond) // a tick earlier than this was missed
	for _, s := range periodicSchedules {
		ticks := periodicTicks(t, b, db, tbl, s.name)
		var backfilled, after []time.Time
		for _, tick := range ticks {
			switch {
			case !tick.After(lasts[s.name]):
			case tick.Before(missedBefore):
				backfilled = append(backfilled, tick)
			default:
				after = append(after, tick)
			}
		}
		missed := int(missedBefore.Sub(lasts[s.name]) / time.Second)
		want := min(s.backfill, missed)
		if len(backfilled) != want {
			t.Errorf("%s after a %s outage (%d ticks missed): %d missed ticks published %v; want %d", s.name, d.Round(time.Millisecond), missed, len(backfilled), backfilled, want)
		}
		for i := 1; i < len(backfilled); i++ {
			if backfilled[i].Sub(backfilled[i-1]) != time.Second {
				t.Errorf("%s: backfilled %v: want the latest ticks missed", s.name, backfilled)
			}
		}
		if len(backfilled) > 0 && missedBefore.Sub(backfilled[len(backfilled)-1]) > time.Second {
			t.Errorf("%s: backfilled %v: want the latest ticks missed, before %s", s.name, backfilled, missedBefore.Format(time.StampMilli))
		}
		if len(after) < 2 {
			t.Errorf("%s: %d ticks published in the 2.5 s after the restart; want them on time", s.name, len(after))
		}
		if dup := len(ticks) - len(slices.Compact(slices.Clone(ticks))); dup > 0 {
			t.Errorf("%s: %d ticks published twice", s.name, dup)
		}
	}
}
