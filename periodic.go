package inbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/conflict"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqlitewriter"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Schedule is when a periodic job runs: Next returns its first tick after t, a later time. An
// Every is one; so is robfig/cron's Schedule (cron.ParseStandard("0 2 * * *")), or any type
// with the method. Ticks are kept to the microsecond, in t's location.
type Schedule interface {
	Next(t time.Time) time.Time
}

// Every returns the schedule of a tick every d, at the multiples of d counted from the zero
// time (time.Time.Truncate's): every process computes the same ticks, whenever it started.
// Every(time.Minute) ticks at each whole minute, Every(time.Hour) at each hour, UTC.
func Every(d time.Duration) Schedule { return every(d) }

type every time.Duration

// Next returns the first multiple of the interval after t; an interval of zero or less does not
// advance, which PeriodicJob's registration refuses.
func (e every) Next(t time.Time) time.Time {
	d := time.Duration(e)
	if d <= 0 {
		return t
	}
	return t.Truncate(d).Add(d)
}

// Misfire is what a schedule does with the ticks it missed: those due while no process ran it,
// found from the last tick kept in the database when a process runs it again. A tick counts as
// missed once it is late by half the time to the tick after it, or by a minute where that is
// longer; a tick less late is on time, and gets its job whatever the policy.
type Misfire struct{ keep int } // the missed ticks kept, less one: the zero value keeps one

var (
	// MisfireRunOnce publishes one job for the ticks missed, the latest's. The default.
	MisfireRunOnce = Misfire{}
	// MisfireSkip publishes none: the schedule goes on at its next tick.
	MisfireSkip = Misfire{keep: -1}
)

// MisfireBackfill publishes a job for each of the latest n ticks missed (for all of them where
// fewer were missed), oldest first, in one transaction: at most 1,000. MisfireBackfill(1) is
// MisfireRunOnce and MisfireBackfill(0) is MisfireSkip.
func MisfireBackfill(n int) Misfire { return Misfire{keep: n - 1} }

// maxBackfill bounds a backfill, whose jobs are published in one transaction.
const maxBackfill = maxBatchRows

// PeriodicJob is a schedule and the job each of its ticks publishes.
type PeriodicJob struct {
	// Name is the schedule's name, its key in the ticks table: at most 191 characters, unique
	// in a Periodic. Every process that runs the schedule gives it the same name.
	Name string
	// Schedule gives the ticks: Every(d), or any Schedule.
	Schedule Schedule
	// Message returns the job of the tick at tick: a Message, or Job(args) of a kind. It must
	// not fail; a Message that does not publish (Job's arguments that do not encode) fails the
	// tick, which is logged and tried again.
	Message func(tick time.Time) Message
	// Misfire is what the schedule does with the ticks it missed. Default MisfireRunOnce.
	Misfire Misfire
	// NoOverlap skips a tick while the job of the schedule's last published tick is live:
	// queued or in work (neither processed nor dead, and its row still there). The tick is
	// taken, and gets no job. A backfill under NoOverlap publishes the latest tick's job alone.
	NoOverlap bool
}

// PeriodicConfig is a Periodic's settings. A nil *PeriodicConfig takes every default.
type PeriodicConfig struct {
	// Logger receives the failures of ticks, which are tried again, and a schedule's stop.
	// Default slog.Default().
	Logger *slog.Logger
}

// Periodic publishes the jobs of periodic schedules into one table, with no leader: run one in
// every process (beside its consumers), and each tick of each schedule publishes exactly one
// job across them all. A tick is taken by a compare-and-set of the schedule's last tick in the
// ticks table (TicksTable), in the transaction that publishes its job: the row's update locks it
// until that transaction ends, so two processes that take a tick at once publish one job, and a
// tick whose publish fails is taken by nobody and tried again. The ticks table must exist
// (inbox schema -schedules prints it); it is needed only where schedules run.
//
// Ticks are read on each process's clock: a process whose clock runs ahead takes a tick early
// by as much, still once.
type Periodic struct {
	db    *sql.DB
	d     dialect.Dialect
	t     Table
	clock Clock // a Delay of a tick's job counts from its now; nil: this host's
	log   *slog.Logger

	mu      sync.Mutex
	jobs    []*scheduled
	running bool
}

// scheduled is a schedule registered with a Periodic.
type scheduled struct {
	PeriodicJob
	where string // the schedule, as an error's where
}

// NewPeriodic returns the runner of schedules that publish into table t on db, whose database
// d speaks. Register its schedules with Add, then Run it.
func NewPeriodic(db *sql.DB, d dialect.Dialect, t Table, cfg *PeriodicConfig) *Periodic {
	p := &Periodic{db: db, d: d, t: t, log: slog.Default()}
	if cfg != nil && cfg.Logger != nil {
		p.log = cfg.Logger
	}
	return p
}

// NewPeriodic returns the runner of schedules that publish into the client's table (see the
// function NewPeriodic), a Delay of their jobs counted on the client's clock (WithClock).
func (c *Client[D]) NewPeriodic(cfg *PeriodicConfig) *Periodic {
	p := NewPeriodic(c.db, c.d, c.t, cfg)
	p.clock = c.clock
	return p
}

// TicksTable is the name of the ticks table of the job table named table: its name and
// "_ticks".
func TicksTable(table string) string { return table + "_ticks" }

// maxScheduleName is the longest schedule name, in characters: the ticks table's key on MySQL
// and MariaDB is a VARCHAR(191).
const maxScheduleName = 191

// Add registers j. It refuses, with an error that says why, a name that is empty, longer than
// 191 characters or registered already; a nil Schedule or Message; a Misfire below
// MisfireSkip or a backfill above 1,000; a schedule whose Next does not advance from now and
// from its next tick (an interval of zero or less, a cron that never fires again); and any
// schedule once Run has started. A schedule whose Next stops advancing later is stopped by Run,
// which logs why at ERROR; the ticks it took stay taken, and no tick is lost or taken twice.
func (p *Periodic) Add(j PeriodicJob) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := &scheduled{PeriodicJob: j, where: scheduleWhere(p.t.Name, j.Name)}
	switch {
	case p.running:
		return sentinel.Errorf(nil, s.where, "Add after Run: register every schedule before Run")
	case j.Name == "":
		return sentinel.Errorf(nil, sentinel.Table(p.t.Name), "a periodic job without a Name: name each schedule, the same in every process")
	case utf8.RuneCountInString(j.Name) > maxScheduleName:
		return sentinel.Errorf(nil, s.where, "the name has %d characters, and the ticks table's name column holds %d: shorten it", utf8.RuneCountInString(j.Name), maxScheduleName)
	case j.Schedule == nil || isNil(j.Schedule):
		return sentinel.Errorf(nil, s.where, "the Schedule is nil: give it inbox.Every(d) or a cron schedule")
	case j.Message == nil:
		return sentinel.Errorf(nil, s.where, "the Message func is nil: give the func that returns each tick's job")
	case j.Misfire.keep < MisfireSkip.keep || j.Misfire.keep+1 > maxBackfill:
		return sentinel.Errorf(nil, s.where, "MisfireBackfill(%d): backfill between 0 and %d ticks", j.Misfire.keep+1, maxBackfill)
	}
	for _, o := range p.jobs {
		if o.Name == j.Name {
			return sentinel.Errorf(nil, s.where, "the name is registered already: give each schedule its own")
		}
	}
	first, err := s.next(time.Now().Truncate(time.Microsecond))
	if err == nil {
		_, err = s.next(first)
	}
	if err != nil {
		return err
	}
	p.jobs = append(p.jobs, s)
	return nil
}

// scheduleWhere names a schedule of a table, as an error's where.
func scheduleWhere(table, name string) string {
	return sentinel.Table(table) + ", schedule " + strconv.Quote(name)
}

// errStopped marks a schedule whose Next does not advance: Run stops it.
var errStopped = errors.New("the schedule stops")

// next returns the schedule's tick after t, to the microsecond, or an error where it is not
// later than t.
func (s *scheduled) next(t time.Time) (time.Time, error) {
	n := s.Schedule.Next(t).Truncate(time.Microsecond)
	switch {
	case n.IsZero():
		return time.Time{}, sentinel.Errorf(nil, s.where, "Next(%s) returned the zero time, no later tick: %w", t.Format(time.RFC3339Nano), errStopped)
	case !n.After(t):
		return time.Time{}, sentinel.Errorf(nil, s.where, "Next(%s) returned %s, which is not later: a schedule's ticks must advance: %w", t.Format(time.RFC3339Nano), n.Format(time.RFC3339Nano), errStopped)
	}
	return n, nil
}

// Run publishes the jobs of the registered schedules' ticks until ctx is done, and returns
// nil then. It first checks the ticks table: where it or one of its columns is missing, Run
// fails with an error wrapping ErrSchema that gives the statement that creates it. A database
// that cannot be reached is logged and tried again each second, as is a tick whose transaction
// failed (the tick stays untaken, for this process or another). A Periodic runs once.
func (p *Periodic) Run(ctx context.Context) error {
	p.mu.Lock()
	if p.running {
		p.mu.Unlock()
		return sentinel.Errorf(nil, sentinel.Table(p.t.Name), "the Periodic runs already: a Periodic runs once")
	}
	p.running = true
	jobs := p.jobs
	p.mu.Unlock()
	k, err := ticksOf(p.d, p.t)
	if err != nil {
		return err
	}
	if err := p.check(ctx, k); err != nil || ctx.Err() != nil {
		return err
	}
	var wg sync.WaitGroup
	for _, s := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.loop(ctx, k, s)
		}()
	}
	<-ctx.Done() // the schedules that stopped leave the others running
	wg.Wait()
	return nil
}

// ticksOf is the builder of the statements of t's ticks table on d.
func ticksOf(d dialect.Dialect, t Table) (sqltext.Ticks, error) {
	q, err := t.Quote(d)
	if err != nil {
		return sqltext.Ticks{}, err
	}
	name, err := d.Quote(TicksTable(t.Name))
	if err != nil {
		return sqltext.Ticks{}, sentinel.Errorf(ErrSchema, sentinel.Table(t.Name), "its ticks table's name: %v (name the table shorter)", err)
	}
	return sqltext.New(d.Caps(), sqltext.Table(q)).Ticks(name), nil
}

// TicksSchema returns the CREATE TABLE of the ticks table of t on d's database, which a
// Periodic of t needs.
func TicksSchema(d dialect.Dialect, t Table) (string, error) {
	k, err := ticksOf(d, t)
	if err != nil {
		return "", err
	}
	return k.Create(), nil
}

// retryPause is how long a schedule waits after a failure before it tries again.
const retryPause = time.Second

// check reads no row from the ticks table, trying again while the database cannot be reached.
func (p *Periodic) check(ctx context.Context, k sqltext.Ticks) error {
	for {
		rows, err := p.db.QueryContext(ctx, k.Probe().SQL)
		if err == nil {
			err = rows.Close()
		}
		switch {
		case err == nil || ctx.Err() != nil:
			return nil
		case !dialect.ConnectionFailed(err):
			return sentinel.Errorf(ErrSchema, sentinel.Table(TicksTable(p.t.Name)), "the ticks table of the schedules of table %q: %v: create it (inbox schema -schedules prints it): %s", p.t.Name, err, k.Create())
		}
		p.log.Error("inbox: reading the ticks table failed; trying again", "table", p.t.Name, "err", err, "in", retryPause)
		if !sleep(ctx, retryPause) {
			return nil
		}
	}
}

// sleep waits d, and reports false when ctx ends first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// loop takes the schedule's ticks as they fall due, until ctx ends or the schedule stops.
func (p *Periodic) loop(ctx context.Context, k sqltext.Ticks, s *scheduled) {
	for ctx.Err() == nil {
		wait, err := p.step(ctx, k, s, time.Now())
		switch {
		case errors.Is(err, errStopped):
			p.log.Error("inbox: a schedule stopped: its Next does not advance; its ticks taken stay taken, and it takes no more until the process restarts with a schedule that advances", "schedule", s.Name, "table", p.t.Name, "err", err)
			return
		case err != nil && ctx.Err() == nil:
			p.log.Error("inbox: taking a schedule's tick failed; trying again", "schedule", s.Name, "table", p.t.Name, "err", err, "in", retryPause)
			wait = retryPause
		}
		if wait > 0 && !sleep(ctx, wait) {
			return
		}
	}
}

// record is a schedule's row of the ticks table, its ticks in microseconds since the epoch.
type record struct {
	last, next, job int64
}

// step reads the schedule's record and takes its due ticks, if any, as of now. It returns how
// long to wait before the next step: until the next tick, or none after a take (won or lost),
// which the next step reads back.
func (p *Periodic) step(ctx context.Context, k sqltext.Ticks, s *scheduled, now time.Time) (time.Duration, error) {
	var r record
	err := p.db.QueryRowContext(ctx, k.Read().SQL, s.Name).Scan(&r.last, &r.next, &r.job)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, p.add(ctx, k, s, now)
	}
	if err != nil {
		return 0, sentinel.Errorf(nil, s.where, "reading its last tick: %w", err)
	}
	var first time.Time
	switch {
	case r.last != 0:
		if first, err = s.next(time.UnixMicro(r.last)); err != nil {
			return 0, err
		}
	case r.next != 0:
		first = time.UnixMicro(r.next) // planned when the schedule was added
	default:
		if first, err = s.next(now.Truncate(time.Microsecond)); err != nil {
			return 0, err
		}
	}
	plan, err := s.plan(first, now)
	if err != nil {
		return 0, err
	}
	if plan.latest.IsZero() {
		return plan.next.Sub(now), nil
	}
	// A deadlock or a serialization failure rolled the take back: take it again at once, not
	// a retryPause later, when the tick may count as missed.
	return 0, conflict.Retry(ctx, p.d, func() error { return p.take(ctx, k, s, r, plan) })
}

// add writes the schedule's first row, its first tick planned at the next after now. Where
// another process wrote it first, the INSERT fails on the key, and the row is there to read.
func (p *Periodic) add(ctx context.Context, k sqltext.Ticks, s *scheduled, now time.Time) error {
	first, err := s.next(now.Truncate(time.Microsecond))
	if err != nil {
		return err
	}
	_, err = p.db.ExecContext(ctx, k.Add().SQL, s.Name, first.UnixMicro())
	if err == nil {
		return nil
	}
	var r record
	if p.db.QueryRowContext(ctx, k.Read().SQL, s.Name).Scan(&r.last, &r.next, &r.job) == nil {
		return nil // another process added it
	}
	return sentinel.Errorf(nil, s.where, "adding its row to the ticks table: %w", err)
}

// tickPlan is what a take does: which ticks it records and which get a job.
type tickPlan struct {
	latest  time.Time   // the latest tick due, recorded as the last; zero: none is due
	next    time.Time   // the first tick after now, recorded as the next
	enqueue []time.Time // the ticks that get a job, oldest first
}

// maxGrace bounds how late a tick may be and still be on time (see Misfire).
const maxGrace = time.Minute

// maxWalk bounds the ticks a plan walks one by one from the first untaken tick: past it, the
// plan jumps to a few ticks before now (a schedule down for a long time, with frequent ticks).
const maxWalk = 1 << 20

// plan returns the take of the schedule's ticks due at now, from first, its first untaken tick:
// every due tick is taken, the latest on time gets its job, and of the missed ticks the latest
// its Misfire keeps.
func (s *scheduled) plan(first, now time.Time) (tickPlan, error) {
	if first.After(now) {
		return tickPlan{next: first}, nil
	}
	keep := s.Misfire.keep + 1
	var due []time.Time // the latest keep+1 ticks due
	t := first
	for steps := 1; !t.After(now); steps++ {
		due = append(due, t)
		if len(due) > keep+1 {
			due = due[1:]
		}
		n, err := s.next(t)
		if err != nil {
			return tickPlan{}, err
		}
		if steps == maxWalk {
			// Start again a few ticks before now, where the ticks kept are.
			back := n.Sub(t) * time.Duration(keep+2)
			if j, err := s.next(now.Add(-back)); err == nil && j.After(n) {
				n, due = j, due[:0]
			}
		}
		t = n
	}
	latest := due[len(due)-1]
	missed, onTime := due, []time.Time(nil)
	if now.Sub(latest) < min(t.Sub(latest)/2, maxGrace) {
		missed, onTime = due[:len(due)-1], due[len(due)-1:]
	}
	missed = missed[max(len(missed)-keep, 0):]
	return tickPlan{latest: latest, next: t, enqueue: append(append([]time.Time(nil), missed...), onTime...)}, nil
}

// take takes plan's ticks in one transaction: it moves the schedule's last tick from r's to
// plan's latest, and where it moved it (no other process took them first), publishes the jobs of
// plan's ticks and records the last one's id. Under NoOverlap it publishes one job at most, and
// none while the job r records is live.
func (p *Periodic) take(ctx context.Context, k sqltext.Ticks, s *scheduled, r record, plan tickPlan) (err error) {
	if p.d.Caps().OneWriter {
		w := sqlitewriter.For(p.db)
		w.Lock()
		defer w.Unlock()
	}
	tx, err := dialect.BeginWrite(ctx, p.d, p.db)
	if err != nil {
		return sentinel.Errorf(nil, s.where, "beginning the tick's transaction: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, rollbackIfOpen(tx))
		}
	}()
	res, err := tx.ExecContext(ctx, k.Take().SQL, plan.latest.UnixMicro(), plan.next.UnixMicro(), s.Name, r.last)
	if err != nil {
		return sentinel.Errorf(nil, s.where, "taking the tick at %s: %w", plan.latest.Format(time.RFC3339Nano), err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return errors.Join(err, rollbackIfOpen(tx)) // another process took it
	}
	ticks := plan.enqueue
	if s.NoOverlap && len(ticks) > 0 {
		ticks = ticks[len(ticks)-1:]
		if r.job != 0 {
			var live int
			if err := tx.QueryRowContext(ctx, k.Live().SQL, r.job).Scan(&live); err != nil {
				return sentinel.Errorf(nil, s.where, "reading whether job %d of its last tick is live: %w", r.job, err)
			}
			if live > 0 {
				ticks = nil
			}
		}
	}
	if len(ticks) > 0 {
		if err := p.publish(ctx, tx, k, s, ticks); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return sentinel.Errorf(nil, s.where, "COMMIT of the tick at %s failed: %w; the tick is untaken, unless the connection failed after the COMMIT", plan.latest.Format(time.RFC3339Nano), err)
	}
	if len(ticks) > 0 {
		wake(p.t.Name)
	}
	return nil
}

// publish publishes the jobs of ticks in tx, and records the id of the last.
func (p *Periodic) publish(ctx context.Context, tx dialect.Tx, k sqltext.Ticks, s *scheduled, ticks []time.Time) error {
	msgs := make([]Message, len(ticks))
	for i, t := range ticks {
		msgs[i] = s.Message(t)
	}
	// A job with a unique key that another row holds publishes no row, and the tick records
	// that row as its job (EnqueueTxResults).
	res, err := enqueueTxResults(ctx, tx, p.d, p.t, p.clock, msgs)
	if err != nil {
		return sentinel.At(s.where, err)
	}
	if _, err := tx.ExecContext(ctx, k.SetJob().SQL, res[len(res)-1].ID, s.Name); err != nil {
		return sentinel.Errorf(nil, s.where, "recording the id of its job: %w", err)
	}
	return nil
}

// String names the policy, as the documentation does.
func (m Misfire) String() string {
	switch m.keep {
	case MisfireSkip.keep:
		return "MisfireSkip"
	case MisfireRunOnce.keep:
		return "MisfireRunOnce"
	}
	return fmt.Sprintf("MisfireBackfill(%d)", m.keep+1)
}
