package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/outcome"
)

// The advisory form's FIFO groups, concurrency limits and rate limits (issue 26), on Postgres
// and MariaDB (MySQL's named locks are MariaDB's), with several consumers on pools of their own
// and child processes killed (SIGKILL) while they hold rows.

// flowBackends are the databases the advisory form's groups, limits and rates are tested on.
func flowBackends(t *testing.T) []backend { return onlyBackends(t, "postgres", "mariadb") }

// advisoryConsumers builds n consumers of tbl by the advisory form, each on a pool of its own.
func advisoryConsumers(t *testing.T, b backend, dbs []*sql.DB, tbl inbox.Table, workers int, h inbox.Handler) []*inbox.Consumer {
	var cs []*inbox.Consumer
	for _, db := range dbs {
		f := advisory.New(b.dialect.(advisory.Dialect), tbl, nil)
		cs = append(cs, inbox.NewConsumer(db, f, h, &inbox.Config{Queue: "q", Workers: workers, PollInterval: 20 * time.Millisecond, Logger: testLogger(t)}))
	}
	return cs
}

// groupSampler counts the runs in work of each group, and the most of one group it ever saw,
// sampled every 5 ms.
type groupSampler struct {
	mu   sync.Mutex
	now  map[string]int
	most int
}

func (s *groupSampler) add(g string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.now[g] += n
}

func (s *groupSampler) sample() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := 0
	for g, n := range s.now {
		if g != "" {
			m = max(m, n)
		}
	}
	return m
}

// TestAdvisoryGroupsExclusionAndOrder: three consumers by the advisory form, each on its own pool,
// of 4 workers, drain 8 groups of 15 rows and 10 rows of no group: within a group the handlers'
// runs never overlap (recorded, and sampled every 5 ms) and go in id order; every row runs once.
// The head of g-0 fails twice with a retry after 200 ms: no other row of g-0 runs before it
// succeeds, while the other groups go on.
func TestAdvisoryGroupsExclusionAndOrder(t *testing.T) {
	const consumers, groups, each, ungrouped = 3, 8, 15, 10
	forEachBackend(t, flowBackends(t), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, consumers, 8)
		tbl := b.newGroupTable(t, dbs[0])
		b.enqueue(t, dbs[0], tbl, groupMessages(groups, each, ungrouped)...)
		var head int64
		must(t, "reading g-0's head", dbs[0].QueryRow("SELECT MIN("+b.q(t, tbl.ID)+") FROM "+b.q(t, tbl.Name)+" WHERE "+b.q(t, tbl.GroupKey)+" = 'g-0'").Scan(&head))
		var runs collector[groupRun]
		s := &groupSampler{now: map[string]int{}}
		var mu sync.Mutex
		failed := 0
		var headDone time.Time
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			r := groupRun{id: d.ID, group: groupOf(d), start: time.Now()}
			s.add(r.group, 1)
			time.Sleep(3 * time.Millisecond)
			s.add(r.group, -1)
			r.end = time.Now()
			if d.ID == head {
				mu.Lock()
				defer mu.Unlock()
				if failed < 2 {
					failed++
					return outcome.RetryAfter(200 * time.Millisecond)
				}
				headDone = r.end
			}
			runs.add(r)
			return outcome.Ack()
		})
		stop := sampled(s.sample)
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", advisoryConsumers(t, b, dbs, tbl, 4, h)...)
		if most := stop(); most > 1 {
			t.Errorf("the sampler saw %d rows of one group in work at once", most)
		}
		all := runs.all()
		if len(all) != groups*each+ungrouped {
			t.Errorf("%d runs, want %d (each row once)", len(all), groups*each+ungrouped)
		}
		checkGroupRuns(t, all)
		othersBefore := 0
		for _, r := range all {
			if r.group == "g-0" && r.id != head && r.start.Before(headDone) {
				t.Errorf("row %d of g-0 started at %v, before its failing head %d succeeded at %v", r.id, r.start, head, headDone)
			}
			if r.group != "g-0" && r.end.Before(headDone) {
				othersBefore++
			}
		}
		if othersBefore < (groups-1)*each/2 {
			t.Errorf("only %d rows of the other groups ran while g-0's head was retried: a blocked group held the others back", othersBefore)
		}
	})
}

// TestAdvisoryGroupsPaused: a group paused (admin.PauseGroup, on a description with no lease
// column, as an advisory table has) is not claimed by the advisory form while the others drain,
// and admin.Groups shows it paused, held by no row; resumed, it drains.
func TestAdvisoryGroupsPaused(t *testing.T) {
	forEachBackend(t, flowBackends(t), func(t *testing.T, b backend) {
		db := b.open(t, 8)
		tbl := b.newGroupTable(t, db)
		tbl.LockedUntil = "" // the advisory form's description names no lease column
		b.enqueue(t, db, tbl, groupMessages(3, 5, 0)...)
		a, err := admin.New(db, b.dialect, tbl)
		must(t, "admin.New", err)
		ctx := context.Background()
		must(t, "PauseGroup", a.PauseGroup(ctx, "q", "g-1"))
		gs, err := a.Groups(ctx, 10)
		must(t, "Groups", err)
		for _, g := range gs {
			if paused := !g.PausedSince.IsZero(); paused != (g.Key == "g-1") || g.HeldBy != 0 {
				t.Errorf("admin.Groups: %+v; want only g-1 paused, and no holder", g)
			}
		}
		var runs collector[groupRun]
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			runs.add(groupRun{id: d.ID, group: groupOf(d), start: time.Now(), end: time.Now()})
			return outcome.Ack()
		})
		cs := advisoryConsumers(t, b, []*sql.DB{db}, tbl, 4, h)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- cs[0].Run(runCtx) }()
		waitFor(t, 30*time.Second, "the other groups drained", func() bool {
			return b.countRows(t, db, tbl, b.q(t, tbl.ProcessedAt)+" IS NULL") == 5
		})
		time.Sleep(200 * time.Millisecond)
		for _, r := range runs.all() {
			if r.group == "g-1" {
				t.Errorf("row %d of the paused group g-1 ran", r.id)
			}
		}
		must(t, "ResumeGroup", a.ResumeGroup(ctx, "q", "g-1"))
		waitFor(t, 30*time.Second, "the resumed group drained", func() bool {
			return b.countRows(t, db, tbl, b.q(t, tbl.ProcessedAt)+" IS NULL") == 0
		})
		cancel()
		<-done
	})
}

// TestAdvisoryLimitsPerQueue: three advisory consumers of 4 workers each, on pools of their own,
// drain 60 rows of a queue limited to 3 in work, then to 1 (changed while they run): the runs,
// recorded and sampled every 5 ms, never number more than the limit, and reach it.
func TestAdvisoryLimitsPerQueue(t *testing.T) {
	const consumers, workers, rows, limit = 3, 4, 60, 3
	forEachBackend(t, flowBackends(t), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, consumers, 8)
		tbl := b.newLimitTable(t, dbs[0])
		b.setLimit(t, dbs[0], tbl, inbox.LimitPerQueue, "", limit)
		b.enqueue(t, dbs[0], tbl, limitMessages(rows, "a", "")...)
		h := &recorder{pause: 15 * time.Millisecond, press: press{want: limit}}
		stop := sampled(h.inWork)
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", advisoryConsumers(t, b, dbs, tbl, workers, h)...)
		if most := stop(); most > limit {
			t.Errorf("the sampler saw %d rows in work at once, over the limit of %d", most, limit)
		}
		all := h.runs.all()
		if len(all) != rows {
			t.Errorf("%d runs, want %d (each row once)", len(all), rows)
		}
		if most, at := mostAtOnce(all, func(run) bool { return true }); most != limit {
			t.Errorf("at most %d rows in work at once (at %v), want exactly the limit of %d", most, at, limit)
		}

		// Lowered at run time: read at each claim.
		b.setLimit(t, dbs[0], tbl, inbox.LimitPerQueue, "", 1)
		b.enqueue(t, dbs[0], tbl, limitMessages(20, "a", "")...)
		h2 := &recorder{pause: 10 * time.Millisecond}
		stop = sampled(h2.inWork)
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed under the lowered limit", advisoryConsumers(t, b, dbs, tbl, workers, h2)...)
		if most := stop(); most > 1 {
			t.Errorf("the sampler saw %d rows in work at once, over the lowered limit of 1", most)
		}
	})
}

// TestAdvisoryLimitsPerKindAndKey: a limit of 2 on kind a and of 1 on key k, under three
// consumers: the runs of kind a never number more than 2 at once, those of key k more than 1,
// and rows of kind b (no limit) run beside them.
func TestAdvisoryLimitsPerKindAndKey(t *testing.T) {
	forEachBackend(t, flowBackends(t), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl := b.newLimitTable(t, dbs[0])
		b.setLimit(t, dbs[0], tbl, inbox.LimitPerKind, "a", 2)
		b.setLimit(t, dbs[0], tbl, inbox.LimitPerKey, "k", 1)
		b.enqueue(t, dbs[0], tbl, append(append(limitMessages(20, "a", ""), limitMessages(20, "b", "k")...), limitMessages(20, "b", "")...)...)
		h := &recorder{pause: 10 * time.Millisecond}
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", advisoryConsumers(t, b, dbs, tbl, 4, h)...)
		all := h.runs.all()
		if most, at := mostAtOnce(all, func(r run) bool { return r.kind == "a" }); most > 2 {
			t.Errorf("%d rows of kind a in work at once at %v, over its limit of 2", most, at)
		}
		if most, at := mostAtOnce(all, func(r run) bool { return r.key == "k" }); most > 1 {
			t.Errorf("%d rows of key k in work at once at %v, over its limit of 1", most, at)
		}
		if most, _ := mostAtOnce(all, func(r run) bool { return r.kind == "b" && r.key == "" }); most < 2 {
			t.Errorf("at most %d rows of no limit in work at once: the limits held them back", most)
		}
	})
}

// TestAdvisoryFullLimitHoldsBackNoOther: 1,100 rows of key k (limit 1, 100 ms each) lead the
// queue, 10 rows of no key follow, and one advisory consumer of 8 workers claims them: every row
// of no key has started before the eleventh row of k starts, although each claim's first
// candidates are all k's. More rows of k lead than a claim ever read past a full limit (256,
// reading on eight times as many candidates each time) before its candidates left the rows of a
// limit found full out in SQL: the rows of no key waited until k was nearly drained,
// pg-boss#871's bug, a full key starving the queue. The test stops once the rows of no key ran
// or k ran 20 rows, whichever comes first, rather than drain k at 10 rows a second.
func TestAdvisoryFullLimitHoldsBackNoOther(t *testing.T) {
	forEachBackend(t, flowBackends(t), func(t *testing.T, b backend) {
		checkFullLimitHoldsBackNoOther(t, b, func(dbs []*sql.DB, tbl inbox.Table, h *recorder) *inbox.Consumer {
			return advisoryConsumers(t, b, dbs, tbl, 8, h)[0]
		})
	})
}

// TestAdvisoryRates: a queue rate of 5 starts per 400 ms, three advisory consumers of 4 workers
// drain 25 rows: no window of 400 ms holds more than 5 starts (each start's time bounded by its
// claim's call, wrapped), and every row runs once.
func TestAdvisoryRates(t *testing.T) {
	const rows, starts, per = 25, 5, 400 * time.Millisecond
	forEachBackend(t, flowBackends(t), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl, client := b.newRateTable(t, dbs[0])
		must(t, "SetRate", client.SetRate(context.Background(), inbox.Rate{Queue: "q", Starts: starts, Per: per}))
		b.enqueue(t, dbs[0], tbl, kindMessages("q", "a", rows)...)
		var claims collector[claimSpan]
		var ran collector[int64]
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			ran.add(d.ID)
			return outcome.Ack()
		})
		var cs []*inbox.Consumer
		for _, db := range dbs {
			f := &spanForm{Form: advisory.New(b.dialect.(advisory.Dialect), tbl, nil), spans: &claims}
			cs = append(cs, inbox.NewConsumer(db, f, h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: 20 * time.Millisecond, Logger: testLogger(t)}))
		}
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", cs...)
		if n := len(ran.all()); n != rows {
			t.Errorf("%d runs, want %d", n, rows)
		}
		all := claims.all()
		if len(all) != rows {
			t.Errorf("%d claimed rows, want %d", len(all), rows)
		}
		checkSpans(t, all, starts, per)
	})
}

// claimSpan bounds the time a row's start slot was taken: its claim's call began and returned.
type claimSpan struct{ begin, end time.Time }

// spanForm records, for each row a claim returns, the claim's span.
type spanForm struct {
	inbox.Form
	spans *collector[claimSpan]
}

func (f *spanForm) Claim(ctx context.Context, n int) ([]*inbox.Delivery, error) {
	begin := time.Now()
	ds, err := f.Form.Claim(ctx, n)
	end := time.Now()
	for range ds {
		f.spans.add(claimSpan{begin, end})
	}
	return ds, err
}

// checkSpans fails where n+1 starts certainly fell within one window of per: the latest end
// of n+1 consecutive spans (by begin) minus the earliest begin is under per.
func checkSpans(t *testing.T, spans []claimSpan, n int, per time.Duration) {
	t.Helper()
	slices.SortFunc(spans, func(a, b claimSpan) int { return a.begin.Compare(b.begin) })
	for i := 0; i+n < len(spans); i++ {
		last := spans[i].end
		for _, s := range spans[i : i+n+1] {
			if s.end.After(last) {
				last = s.end
			}
		}
		if d := last.Sub(spans[i].begin); d < per {
			t.Errorf("%d starts within %v (claims from %v), want at most %d per %v", n+1, d, spans[i].begin, n, per)
			return
		}
	}
}

// TestAdvisoryGroupsLateCommitOfALowerID: a transaction publishes row N of group g and stays
// open; another publishes N+1 and commits. The advisory form claims N+1 (N is not committed);
// once N commits it is its group's head, yet no claim takes it, on this form or another, while
// N+1 is in work: the group's lock is held, whatever the ids. After N+1 settles, N runs. Without
// the group's lock (ids compared alone) N would go into work beside N+1.
func TestAdvisoryGroupsLateCommitOfALowerID(t *testing.T) {
	forEachBackend(t, flowBackends(t), func(t *testing.T, b backend) {
		db := b.open(t, 8)
		tbl := b.newGroupTable(t, db)
		ctx := context.Background()
		late, err := db.BeginTx(ctx, nil)
		must(t, "Begin", err)
		defer late.Rollback()
		n, err := inbox.EnqueueTxResults(ctx, late, b.dialect, tbl, inbox.Message{Queue: "q", GroupKey: "g", Payload: []byte("g/N")})
		must(t, "EnqueueTx", err)
		next, err := inbox.EnqueueIDs(ctx, db, b.dialect, tbl, inbox.Message{Queue: "q", GroupKey: "g", Payload: []byte("g/N+1")})
		must(t, "Enqueue", err)
		if next[0] <= n[0].ID {
			t.Fatalf("ids %d then %d: the test needs the later publish to take the higher id", n[0].ID, next[0])
		}
		f := openForm(t, advisory.New(b.dialect.(advisory.Dialect), tbl, nil), db, inbox.Binding{Name: "q"})
		defer f.Close()
		other := openForm(t, advisory.New(b.dialect.(advisory.Dialect), tbl, nil), db, inbox.Binding{Name: "q"})
		defer other.Close()
		ds := claim(t, f, 4)
		if len(ds) != 1 || ds[0].ID != next[0] {
			t.Fatalf("claimed %v, want row %d alone (row %d is not committed)", deliveryIDs(ds), next[0], n[0].ID)
		}
		must(t, "Commit", late.Commit())
		if again := claim(t, other, 4); len(again) != 0 {
			t.Fatalf("claimed %v while row %d of the same group is in work: two rows of one group at once", deliveryIDs(again), next[0])
		}
		if batch, err := other.ClaimBatch(ctx, 4); err != nil || len(batch) != 0 {
			t.Fatalf("a batch claimed %v (%v) while row %d of the same group is in work", deliveryIDs(batch), err, next[0])
		}
		settle(t, f, ds[0], outcome.Ack())
		if after := claim(t, other, 4); len(after) != 1 || after[0].ID != n[0].ID {
			t.Fatalf("after row %d settled claimed %v, want row %d", next[0], deliveryIDs(after), n[0].ID)
		} else {
			settle(t, other, after[0], outcome.Ack())
		}
	})
}

// TestAdvisoryGroupsExclusionUnderLateCommits: four producers publish rows of four groups, each in
// a transaction that waits a little before it commits, so that ids commit out of order, while
// three advisory consumers of 4 workers (one claiming in batches) drain them: within a group the
// handlers' runs never overlap (recorded, and sampled every 5 ms), and every row runs once.
func TestAdvisoryGroupsExclusionUnderLateCommits(t *testing.T) {
	const producers, each, consumers = 4, 30, 3
	forEachBackend(t, flowBackends(t), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, consumers, 8)
		tbl := b.newGroupTable(t, dbs[0])
		var runs collector[groupRun]
		s := &groupSampler{now: map[string]int{}}
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			r := groupRun{id: d.ID, group: groupOf(d), start: time.Now()}
			s.add(r.group, 1)
			time.Sleep(5 * time.Millisecond)
			s.add(r.group, -1)
			r.end = time.Now()
			runs.add(r)
			return outcome.Ack()
		})
		stop := sampled(s.sample)
		var stops []func()
		for i, db := range dbs {
			cfg := &inbox.Config{Queue: "q", Workers: 4, PollInterval: 20 * time.Millisecond, Logger: testLogger(t)}
			f := advisory.New(b.dialect.(advisory.Dialect), tbl, nil)
			if i == 0 {
				// A batch holds every row's group at once, and runs them one after the other.
				bh := inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
					os := make([]outcome.Outcome, len(ds))
					for i, d := range ds {
						os[i] = h(ctx, d)
					}
					return os
				})
				stops = append(stops, startConsumer(t, inbox.NewBatchConsumer(db, f, 4, bh, cfg)))
				continue
			}
			stops = append(stops, startConsumer(t, inbox.NewConsumer(db, f, h, cfg)))
		}
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				for i := range each {
					g := fmt.Sprintf("g-%d", (p+i)%4)
					tx, err := dbs[0].Begin()
					if err != nil {
						t.Error(err)
						return
					}
					if err := inbox.EnqueueTx(context.Background(), tx, b.dialect, tbl, inbox.Message{Queue: "q", GroupKey: g, Payload: []byte(g + "/" + fmt.Sprint(p, i))}); err != nil {
						tx.Rollback()
						t.Error(err)
						return
					}
					time.Sleep(time.Duration((p*7+i*3)%5) * 4 * time.Millisecond)
					if err := tx.Commit(); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		waitFor(t, time.Minute, "every row processed", func() bool {
			return b.countRows(t, dbs[0], tbl, b.q(t, tbl.ProcessedAt)+" IS NULL") == 0
		})
		for _, stop := range stops {
			stop()
		}
		if most := stop(); most > 1 {
			t.Errorf("the sampler saw %d rows of one group in work at once", most)
		}
		all := runs.all()
		if len(all) != producers*each {
			t.Errorf("%d runs, want %d (each row once)", len(all), producers*each)
		}
		// Order is not asserted: a row that commits late behind a higher id of its group runs
		// after it (docs/groups.md).
		byGroup := map[string][]groupRun{}
		for _, r := range all {
			byGroup[r.group] = append(byGroup[r.group], r)
		}
		for g, rs := range byGroup {
			slices.SortFunc(rs, func(a, b groupRun) int { return a.start.Compare(b.start) })
			for i := 1; i < len(rs); i++ {
				if rs[i].start.Before(rs[i-1].end) {
					t.Errorf("group %s: row %d started before row %d ended: two rows of one group in work at once", g, rs[i].id, rs[i-1].id)
				}
			}
		}
	})
}

// TestAdvisoryFlowsMissingTables: an advisory consumer whose description names a limits or rates
// table the database lacks fails at Open with ErrSchema naming the statement that creates it; a
// grouped table without inbox_groups opens (the lock is the hold; pauses need the table).
func TestAdvisoryFlowsMissingTables(t *testing.T) {
	forEachBackend(t, flowBackends(t), func(t *testing.T, b backend) {
		db := b.open(t, 4)
		ctx := context.Background()
		tbl := b.newLimitTable(t, db)
		tbl.Limits = "inbox_limits_missing"
		_, err := advisory.New(b.dialect.(advisory.Dialect), tbl, nil).Open(ctx, db, inbox.Binding{Name: "q"})
		if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), "CREATE TABLE IF NOT EXISTS "+b.q(t, "inbox_limits_missing")) || !strings.HasPrefix(err.Error(), "inbox: ") {
			t.Errorf("Open without its limits table = %v, want ErrSchema naming its CREATE TABLE", err)
		}
		rt, _ := b.newRateTable(t, db)
		rt.Rates = "inbox_rates_missing"
		_, err = advisory.New(b.dialect.(advisory.Dialect), rt, nil).Open(ctx, db, inbox.Binding{Name: "q"})
		if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), "CREATE TABLE IF NOT EXISTS "+b.q(t, "inbox_rates_missing")) {
			t.Errorf("Open without its rates table = %v, want ErrSchema naming its CREATE TABLE", err)
		}
		gt := b.newTable(t, db, groupTable)
		mustExec(t, db, "ALTER TABLE "+b.q(t, gt.Name)+" ADD "+b.q(t, gt.GroupKey)+" VARCHAR(191) NULL")
		f := advisory.New(b.dialect.(advisory.Dialect), gt, nil)
		if _, err := f.Open(ctx, db, inbox.Binding{Name: "q"}); err != nil {
			t.Errorf("Open of a grouped table: %v", err)
		} else {
			f.Close()
		}
	})
}

// TestAdvisoryGroupsWithLimitsAndRates: a grouped table under a queue limit of 2 and a rate of 6
// starts per 300 ms, three advisory consumers of 4 workers: no two runs of a group overlap, never
// more than 2 rows run at once, and no 7 starts fall within 300 ms.
func TestAdvisoryGroupsWithLimitsAndRates(t *testing.T) {
	const starts, per = 6, 300 * time.Millisecond
	forEachBackend(t, flowBackends(t), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl := b.newLimitTable(t, dbs[0])
		tbl.GroupKey = "group_key"
		mustExec(t, dbs[0], "ALTER TABLE "+b.q(t, tbl.Name)+" ADD "+b.q(t, tbl.GroupKey)+" VARCHAR(191) NULL")
		b.setLimit(t, dbs[0], tbl, inbox.LimitPerQueue, "", 2)
		tbl.Rates = inbox.RatesTable
		st, err := inbox.RatesSchema(b.dialect, tbl)
		must(t, "RatesSchema", err)
		ratesCreate.Lock()
		mustExec(t, dbs[0], st)
		ratesCreate.Unlock()
		t.Cleanup(func() {
			dbs[0].Exec("DELETE FROM "+inbox.RatesTable+" WHERE table_name = "+b.placeholders(1), tbl.Name)
		})
		client, err := inbox.NewClient(dbs[0], b.dialect, tbl)
		must(t, "NewClient", err)
		must(t, "SetRate", client.SetRate(context.Background(), inbox.Rate{Queue: "q", Starts: starts, Per: per}))
		var msgs []inbox.Message
		for i := range 40 {
			g := fmt.Sprintf("g-%d", i%5)
			msgs = append(msgs, inbox.Message{Queue: "q", Kind: "a", GroupKey: g, Payload: []byte(g + "/" + strconv.Itoa(i))})
		}
		b.enqueue(t, dbs[0], tbl, msgs...)
		var runs collector[groupRun]
		var mu sync.Mutex
		now := 0
		inWork := func() int { mu.Lock(); defer mu.Unlock(); return now }
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			r := groupRun{id: d.ID, group: groupOf(d), start: time.Now()}
			mu.Lock()
			now++
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			now--
			mu.Unlock()
			r.end = time.Now()
			runs.add(r)
			return outcome.Ack()
		})
		stop := sampled(inWork)
		var claims collector[claimSpan]
		var cs []*inbox.Consumer
		for _, db := range dbs {
			f := &spanForm{Form: advisory.New(b.dialect.(advisory.Dialect), tbl, nil), spans: &claims}
			cs = append(cs, inbox.NewConsumer(db, f, h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: 20 * time.Millisecond, Logger: testLogger(t)}))
		}
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", cs...)
		checkSpans(t, claims.all(), starts, per)
		if most := stop(); most > 2 {
			t.Errorf("the sampler saw %d rows in work at once, over the limit of 2", most)
		}
		all := runs.all()
		if len(all) != len(msgs) {
			t.Errorf("%d runs, want %d", len(all), len(msgs))
		}
		checkGroupRuns(t, all)
		var lr []run
		for _, r := range all {
			lr = append(lr, run{id: r.id, start: r.start, end: r.end})
		}
		if most, at := mostAtOnce(lr, func(run) bool { return true }); most > 2 {
			t.Errorf("%d rows in work at once at %v, over the limit of 2", most, at)
		}
	})
}

// TestAdvisoryRatesPerKey: key a has a rate of 3 starts per 500 ms and key b of 1, under three
// advisory consumers of 4 workers, with rows of no key beside them: no window of 500 ms holds
// more than a key's rate of its starts (each bounded by its claim's call), the rows of no key
// run faster than either, and every row runs once.
func TestAdvisoryRatesPerKey(t *testing.T) {
	const per = 500 * time.Millisecond
	forEachBackend(t, flowBackends(t), func(t *testing.T, b backend) {
		dbs := b.openDBs(t, 3, 8)
		tbl, client := b.newKeyRateTable(t, dbs[0])
		ctx := context.Background()
		must(t, "SetRate of key a", client.SetRate(ctx, keyRate("a", 3, per)))
		must(t, "SetRate of key b", client.SetRate(ctx, keyRate("b", 1, per)))
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "a", 9)...)
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "b", 3)...)
		b.enqueue(t, dbs[0], tbl, keyMessages("q", "", 20)...)
		byKey := map[string]*collector[claimSpan]{"a": {}, "b": {}, "none": {}}
		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
		var cs []*inbox.Consumer
		for _, db := range dbs {
			f := &keySpanForm{Form: advisory.New(b.dialect.(advisory.Dialect), tbl, nil), spans: byKey}
			cs = append(cs, inbox.NewConsumer(db, f, h, &inbox.Config{Queue: "q", Workers: 4, PollInterval: 20 * time.Millisecond, Logger: testLogger(t)}))
		}
		drainTable(t, b, dbs[0], tbl, time.Minute, "every row processed", cs...)
		checkSpans(t, byKey["a"].all(), 3, per)
		checkSpans(t, byKey["b"].all(), 1, per)
		if n := len(byKey["a"].all()) + len(byKey["b"].all()) + len(byKey["none"].all()); n != 32 {
			t.Errorf("%d rows claimed, want 32", n)
		}
		none := byKey["none"].all()
		slices.SortFunc(none, func(a, b claimSpan) int { return a.end.Compare(b.end) })
		if d := none[len(none)-1].end.Sub(none[0].begin); d > 2*per {
			t.Errorf("the 20 rows of no key took %v: the keys' rates held them back", d)
		}
	})
}

// keySpanForm records each claimed row's claim span by its kind (keyMessages: the key's name).
type keySpanForm struct {
	inbox.Form
	spans map[string]*collector[claimSpan]
}

func (f *keySpanForm) Claim(ctx context.Context, n int) ([]*inbox.Delivery, error) {
	begin := time.Now()
	ds, err := f.Form.Claim(ctx, n)
	end := time.Now()
	for _, d := range ds {
		f.spans[d.Kind].add(claimSpan{begin, end})
	}
	return ds, err
}
