package integration

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
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

// crashPoints are where a child is killed: inside a claim (before or after one of its
// statements or its commit), inside the handler, after the handler's write but before the
// settlement, and inside the settlement (before or after one of its statements or its commit).
var crashPoints = []string{"claim", "handler", "written", "settle"}

// crashPlan is how hard the matrix runs: CI's short run, or the long one that make reliability
// runs (INBOX_RELIABILITY=long).
type crashPlan struct {
	kills    int // children killed per cell and mode
	parallel int // children alive at once per cell
	batch    int // rows published for each child
}

func crashPlanFromEnv() crashPlan {
	if os.Getenv("INBOX_RELIABILITY") == "long" {
		return crashPlan{kills: 100, parallel: 3, batch: 20}
	}
	return crashPlan{kills: 4, parallel: 2, batch: 20}
}

// crashReturnSlack is what the return bound allows beyond the form's promise for a loaded
// machine (-race, other tests on the same servers).
const crashReturnSlack = 2 * time.Second

// crashChildWait is how long a child may take to start, and then to reach its kill point. It
// bounds the harness, not the form: a child stuck there is a broken test, and its kill (with
// the rows it held) is left out. A passing child takes seconds even on a loaded machine, so
// the bound costs only a stuck one.
const crashChildWait = 2 * time.Minute

// crashResult is one line of the matrix's table.
type crashResult struct {
	kills        int
	points       map[string]int // kills by point
	rows         int
	redeliveries int           // deliveries beyond each row's first
	maxReturn    time.Duration // the longest a killed child's row took to be delivered again
	bound        time.Duration // the form's bound on that, with slack
	late         int           // rows back later than bound
	dupSettled   int           // settlements beyond one per row
	dupEffects   int           // side effects beyond one per row, in transactional mode
	repeats      int           // side effects written again outside it, which the form allows
	noEffect     int           // rows settled without their side effect
	lost         int           // rows never settled
}

// TestCrashMatrix starts consumer child processes on every cell, in transactional mode and
// outside it, kills each with SIGKILL at a chosen point while a consumer in this process (and
// the other children) keep draining, and checks the table afterwards: every row settled exactly
// once (a trigger records each settlement in an audit table, inside the settling transaction),
// in transactional mode every side effect exactly once, the killed children's rows back within
// the form's bound, and attempts counted on a crash exactly where the form says so.
func TestCrashMatrix(t *testing.T) {
	if os.Getenv(crashSpecEnv) != "" {
		crashChild(t)
		return
	}
	plan := crashPlanFromEnv()
	runs := matrix(t, []bool{true, false}, txMode, func(t *testing.T, c cell, transactional bool) crashResult {
		return crashCell(t, c, transactional, plan)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "crash matrix: %d kills per cell and mode, points claim/handler/written/settle\n", plan.kills)
	fmt.Fprintf(&b, "%-18s %-5s %5s %-11s %5s %7s %9s %7s %4s %8s %8s %8s %4s\n",
		"cell", "mode", "kills", "c/h/w/s", "rows", "redeliv", "maxreturn", "bound", "late", "dupsettl", "dupeffct", "noeffect", "lost")
	for _, run := range runs {
		r := run.r
		effects := strconv.Itoa(r.dupEffects)
		if run.variant == "plain" {
			effects = fmt.Sprintf("(%d)", r.repeats)
		}
		fmt.Fprintf(&b, "%-18s %-5s %5d %-11s %5d %7d %9s %7s %4d %8d %8s %8d %4d\n",
			run.cell, run.variant, r.kills,
			fmt.Sprintf("%d/%d/%d/%d", r.points["claim"], r.points["handler"], r.points["written"], r.points["settle"]),
			r.rows, r.redeliveries, r.maxReturn.Round(time.Millisecond), r.bound, r.late, r.dupSettled, effects, r.noEffect, r.lost)
	}
	b.WriteString("dupeffct in plain mode (in parentheses): side effects written again after a kill between the write and the settlement, which only transactional mode prevents\n")
	t.Log("\n" + b.String())
}

// crashDelivery is one handler start, in any process.
type crashDelivery struct {
	id      int64
	attempt int
	at      time.Time
	who     int // 0: this process's consumer; n: the n-th child
}

// crashKill is one child killed.
type crashKill struct {
	who   int
	at    time.Time
	point string
}

type crashLog struct {
	mu         sync.Mutex
	deliveries []crashDelivery
	settled    map[int]map[int64]bool // by child
	kills      []crashKill
}

func (l *crashLog) deliver(d crashDelivery) {
	l.mu.Lock()
	l.deliveries = append(l.deliveries, d)
	l.mu.Unlock()
}

// crashCell runs the matrix on one cell in one mode.
func crashCell(t *testing.T, c cell, transactional bool, plan crashPlan) crashResult {
	dsn := c.dsn(t)
	db := c.openDSN(t, dsn, 6)
	tbl := c.b.newTable(t, db, fullTable)
	side, audit := tbl.Name+"_side", tbl.Name+"_audit"
	c.createSide(t, db, side)
	c.createAudit(t, db, tbl, audit)

	log := &crashLog{settled: map[int]map[int64]bool{}}
	insert := "INSERT INTO " + c.q(t, side) + " (job_id, attempt) VALUES (" + c.ph(1) + ", " + c.ph(2) + ")"
	survivor := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		log.deliver(crashDelivery{id: d.ID, attempt: d.Attempt, at: time.Now()})
		time.Sleep(time.Duration(5+rand.IntN(10)) * time.Millisecond)
		if _, err := writerOf(d, db).ExecContext(ctx, insert, d.ID, d.Attempt); err != nil {
			t.Logf("row %d: writing the side effect: %v", d.ID, err)
			return outcome.Retry()
		}
		return outcome.Ack()
	})
	stopSurvivor := runConsumer(t, db, c.newForm(t, tbl), survivor,
		&inbox.Config{Queue: "q", Workers: 2, Transactional: transactional})

	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 0))
	specs := make([]crashSpec, plan.kills)
	for i := range specs {
		point := crashPoints[i%len(crashPoints)]
		if plan.kills > len(crashPoints) {
			point = crashPoints[rng.IntN(len(crashPoints))]
		}
		specs[i] = crashSpec{
			Backend: c.b.name, Form: c.form, DSN: dsn, Table: tbl.Name, Side: side,
			Transactional: transactional, Point: point, Nth: 1 + rng.IntN(4), After: rng.IntN(2) == 0,
		}
	}
	t.Logf("seed %d", seed)

	atMost(plan.parallel, len(specs), func(i int) { crashOne(t, c, db, tbl, i+1, specs[i], plan.batch, log) })

	// Every row must settle: the survivor drains what the children left, taking their rows as
	// they come back. Waiting ends when no row has settled for far longer than the form's
	// bound: a row still unsettled then is counted lost.
	unprocessed := c.q(t, tbl.ProcessedAt) + " IS NULL"
	left, progress := len(c.ids(t, db, tbl, unprocessed)), time.Now()
	for left > 0 && time.Since(progress) < c.returnBound(crashReturnSlack)+20*time.Second {
		time.Sleep(50 * time.Millisecond)
		if n := len(c.ids(t, db, tbl, unprocessed)); n < left {
			left, progress = n, time.Now()
		}
	}
	stopSurvivor()
	return crashVerdict(t, c, db, tbl, side, audit, transactional, log)
}

// crashOne publishes a batch, starts child who with spec, waits until it stops at its point and
// kills it with SIGKILL.
func crashOne(t *testing.T, c cell, db *sql.DB, tbl inbox.Table, who int, spec crashSpec, batch int, log *crashLog) {
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Error(err)
		return
	}
	child := exec.Command(os.Args[0], "-test.run=^TestCrashMatrix$", "-test.count=1")
	child.Env = append(os.Environ(), crashSpecEnv+"="+string(raw))
	out, stderr, err := startPiped(child)
	if err != nil {
		t.Error(err)
		return
	}
	ready := make(chan struct{})
	stopped := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 1 && f[0] == "ready":
				close(ready)
			case len(f) == 4 && f[0] == "handle":
				id, _ := strconv.ParseInt(f[1], 10, 64)
				attempt, _ := strconv.Atoi(f[2])
				ns, _ := strconv.ParseInt(f[3], 10, 64)
				log.deliver(crashDelivery{id: id, attempt: attempt, at: time.Unix(0, ns), who: who})
			case len(f) == 2 && f[0] == "settled":
				id, _ := strconv.ParseInt(f[1], 10, 64)
				log.mu.Lock()
				if log.settled[who] == nil {
					log.settled[who] = map[int64]bool{}
				}
				log.settled[who][id] = true
				log.mu.Unlock()
			case len(f) >= 2 && f[0] == "at":
				stopped <- sc.Text()
			}
		}
	}()
	kill := func() time.Time {
		at := time.Now()
		child.Process.Kill() // SIGKILL: no deferred rollback, no unlock, no goodbye to the server
		child.Wait()
		<-scanned
		return at
	}
	select {
	case <-ready:
	case <-time.After(crashChildWait):
		kill()
		t.Errorf("child %d did not start within %v: %s", who, crashChildWait, stderr.String())
		return
	}
	// A batch goes in while the child may already be stopped inside a claim: on SQLite that
	// claim holds the write lock, and the INSERT waits for the kill.
	var (
		publishing sync.WaitGroup
		pubMu      sync.Mutex
		pubErrs    []error
	)
	publish := func() {
		publishing.Go(func() {
			msgs := make([]inbox.Message, batch)
			for i := range msgs {
				msgs[i] = inbox.Message{Queue: "q"}
			}
			if err := inbox.Enqueue(context.Background(), db, c.b.dialect, tbl, msgs...); err != nil {
				pubMu.Lock()
				pubErrs = append(pubErrs, err)
				pubMu.Unlock()
			}
		})
	}
	publish()
	// The other consumers drain the same queue, and on a loaded machine they may take every row
	// of the batch before the child has reached the Nth event of its point (a slow start, its
	// claims waiting on SQLite's write lock). So while the child runs, another batch goes in
	// every few seconds: it always has rows to reach its point with. Every row is checked at
	// the end all the same.
	topUp := time.NewTicker(3 * time.Second)
	deadline := time.After(crashChildWait)
wait:
	for {
		select {
		case <-stopped:
			at := kill()
			log.mu.Lock()
			log.kills = append(log.kills, crashKill{who: who, at: at, point: spec.Point})
			log.mu.Unlock()
			break wait
		case <-topUp.C:
			publish()
		case <-deadline:
			kill()
			t.Errorf("child %d (%+v) did not reach its kill point within %v: %s", who, spec, crashChildWait, stderr.String())
			break wait
		}
	}
	topUp.Stop()
	publishing.Wait()
	for _, err := range pubErrs {
		t.Errorf("publishing child %d's rows: %v", who, err)
	}
	if strings.Contains(stderr.String(), "DATA RACE") || strings.Contains(stderr.String(), "panic:") {
		t.Errorf("child %d: %s", who, stderr.String())
	}
}

// crashVerdict checks the table, the audit and the side effects after the matrix ran on a
// cell, and fills in its line of the table.
func crashVerdict(t *testing.T, c cell, db *sql.DB, tbl inbox.Table, side, audit string, transactional bool, log *crashLog) crashResult {
	log.mu.Lock()
	defer log.mu.Unlock()
	r := crashResult{kills: len(log.kills), points: map[string]int{}, bound: c.returnBound(crashReturnSlack)}
	for _, k := range log.kills {
		r.points[k.point]++
	}
	all := c.ids(t, db, tbl, "")
	r.rows = len(all)

	unsettled := map[int64]bool{}
	for _, id := range c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NULL") {
		unsettled[id] = true
	}
	settlements := c.sideCounts(t, db, audit)
	effects := c.sideCounts(t, db, side)
	for _, id := range all {
		n := settlements[id]
		switch {
		case unsettled[id] || n == 0:
			r.lost++
			t.Errorf("row %d lost: processed_at unset or no settlement recorded (%d settlements)", id, n)
		case n > 1:
			r.dupSettled += n - 1
			t.Errorf("row %d settled %d times", id, n)
		}
		e := effects[id]
		if e == 0 && !unsettled[id] {
			r.noEffect++
			t.Errorf("row %d settled without its side effect", id)
		}
		if e > 1 {
			if transactional {
				r.dupEffects += e - 1
				t.Errorf("row %d: side effect written %d times in transactional mode", id, e)
			} else {
				r.repeats += e - 1
			}
		}
	}

	// Attempts: in delivery order, each row's attempt stays at 1 where a crash costs none (no
	// handler here retries), and grows with each delivery where it does.
	byID := map[int64][]crashDelivery{}
	for _, d := range log.deliveries {
		byID[d.id] = append(byID[d.id], d)
	}
	for _, ds := range byID {
		r.redeliveries += len(ds) - 1
	}
	for id, ds := range byID {
		slices.SortFunc(ds, func(a, b crashDelivery) int { return a.at.Compare(b.at) })
		for i, d := range ds {
			switch {
			case !c.crashCounts && d.attempt != 1:
				t.Errorf("row %d: delivery %d read attempt %d, want 1 (a crash costs this form no attempt)", id, i+1, d.attempt)
			case c.crashCounts && i > 0 && d.attempt <= ds[i-1].attempt:
				t.Errorf("row %d: delivery %d read attempt %d after attempt %d (a crash counts an attempt in this form)", id, i+1, d.attempt, ds[i-1].attempt)
			}
		}
	}

	// Return: each row a killed child was handling or settling is delivered again (unless the
	// child's settlement had committed) within the form's bound of the kill. Where a crash
	// counts an attempt, the attempt also tells how many claims came in between without
	// reaching a handler: claims of other children killed right after their claim, each of
	// which held the row for the form's bound again. The table's maxreturn is over the rows
	// delivered again directly.
	for _, k := range log.kills {
		held := map[int64]int{} // row: the attempt the killed child held it at
		for _, d := range log.deliveries {
			if d.who == k.who && !log.settled[k.who][d.id] {
				held[d.id] = d.attempt
			}
		}
		for id, attempt := range held {
			var next *crashDelivery
			for i, d := range byID[id] {
				if d.who != k.who && d.at.After(k.at) && (next == nil || d.at.Before(next.at)) {
					next = &byID[id][i]
				}
			}
			if next == nil {
				continue // the child's settlement committed before the kill
			}
			back, hops := next.at.Sub(k.at), 1
			if c.crashCounts {
				hops = max(1, next.attempt-attempt)
			}
			if hops == 1 {
				r.maxReturn = max(r.maxReturn, back)
			}
			if bound := r.bound + time.Duration(hops-1)*c.returnBound(0); back > bound {
				r.late++
				t.Errorf("row %d held by child %d (killed at %s) came back after %v (%d claims later), beyond the form's bound of %v", id, k.who, k.point, back, hops, bound)
			}
		}
	}
	return r
}

// createAudit creates an audit table and a trigger that records, inside the settling
// transaction, every update of tbl that leaves processed_at set: a row settled twice shows as
// two audit rows, and a settlement rolled back leaves none.
func (c cell) createAudit(t *testing.T, db *sql.DB, tbl inbox.Table, audit string) {
	t.Helper()
	c.createSide(t, db, audit)
	qa, qt := c.q(t, audit), c.q(t, tbl.Name)
	id, processed := c.q(t, tbl.ID), c.q(t, tbl.ProcessedAt)
	switch c.b.name {
	case "postgres":
		fn := c.q(t, audit+"_fn")
		mustExec(t, db, "CREATE OR REPLACE FUNCTION "+fn+"() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO "+qa+
			" (job_id, attempt) VALUES (NEW."+id+", 0); RETURN NEW; END $$")
		t.Cleanup(func() { db.Exec("DROP FUNCTION IF EXISTS " + fn + "() CASCADE") })
		mustExec(t, db, "CREATE TRIGGER "+c.q(t, audit+"_tr")+" AFTER UPDATE ON "+qt+
			" FOR EACH ROW WHEN (NEW."+processed+" IS NOT NULL) EXECUTE FUNCTION "+fn+"()")
	case "sqlite":
		mustExec(t, db, "CREATE TRIGGER "+c.q(t, audit+"_tr")+" AFTER UPDATE ON "+qt+
			" FOR EACH ROW WHEN NEW."+processed+" IS NOT NULL BEGIN INSERT INTO "+qa+
			" (job_id, attempt) VALUES (NEW."+id+", 0); END")
	default:
		mustExec(t, db, "CREATE TRIGGER "+c.q(t, audit+"_tr")+" AFTER UPDATE ON "+qt+
			" FOR EACH ROW BEGIN IF NEW."+processed+" IS NOT NULL THEN INSERT INTO "+qa+
			" (job_id, attempt) VALUES (NEW."+id+", 0); END IF; END")
	}
}
