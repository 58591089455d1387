package inbox

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqlitewriter"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// Retention's defaults, taken by a zero field.
const (
	// DefaultRetentionBatch is how many rows one statement of a pass deletes at most.
	DefaultRetentionBatch = 1000
	// DefaultRetentionInterval is how often each consumer tries to start a pass; passes over
	// one table, by whichever consumer, start at least this far apart.
	DefaultRetentionInterval = time.Minute
	// DefaultRetentionBudget is how long a pass starts new batches for; the sweeper lease runs
	// for twice the budget from each batch's start, so that a sweeper that stops (a crash, a cut
	// connection) hands over within that.
	DefaultRetentionBudget = 10 * time.Second
)

// Retention deletes the table's settled rows once they are old: processed rows (Table's
// ProcessedAt stamped) older than ProcessedAge, dead rows (DeadAt stamped) older than DeadAge
// and cancelled rows (CancelledAt stamped, Cancel) older than CancelledAge. Set it as Config.Retention; nil, the default, deletes nothing.
//
// Guarantees. It deletes only rows whose stamp lies before the consumer's clock (Config.Clock)
// less the age: never a row queued, in work (a settlement stamps a row as its hold ends, so no
// form holds a stamped row), or younger than the age. It never waits for a row another
// transaction holds: on Postgres, MySQL and MariaDB the rows a batch deletes are picked with
// FOR UPDATE SKIP LOCKED (a row lock form handler holds its row's lock for as long as it runs,
// and a waiting DELETE would hold the sweep, and on InnoDB the locks it already took, as long);
// on SQLite there are no row locks. Each statement deletes at most BatchSize rows, lowest ids
// first, and a pass starts no batch after Budget.
//
// One consumer at a time sweeps a table, whichever it is: every consumer with Retention set
// tries every Interval to take the table's sweeper lease, a row of the table inbox_sweeps (which
// `inbox schema -retention` prints and creates; Run fails with ErrSchema naming its CREATE
// TABLE where it is missing). The lease is taken by a compare-and-set UPDATE on the database's
// clock, so hosts whose clocks disagree still agree on its holder; the holder renews it before
// each batch, and runs each batch under a deadline on its own monotonic clock, measured from
// before the renewal was sent, so that it stops before the database deems the lease run out.
// A pass that deleted everything it could leaves the lease running for Interval, so passes start
// at least Interval apart whichever consumer runs them; one its budget cut short frees it. A
// sweeper that stops mid-pass (its context done, its process killed) leaves the lease to run
// out, within twice Budget, and another consumer sweeps next. Two sweeps side by side would
// still be correct (each deletes only expired rows): the lease bounds the load, not what is
// deleted.
//
// Each pass is logged with the rows it deleted (INFO where it deleted some, DEBUG where none),
// and told to Config.Observer where it is also a RetentionObserver.
type Retention struct {
	// ProcessedAge is the age past which a processed row is deleted. Zero keeps processed rows.
	// It needs the table's ProcessedAt column.
	ProcessedAge time.Duration
	// DeadAge is the age past which a dead row is deleted. Zero keeps dead rows. It needs the
	// table's DeadAt column.
	DeadAge time.Duration
	// CancelledAge is the age past which a cancelled row (Cancel) is deleted. Zero keeps
	// cancelled rows. It needs the table's CancelledAt column. A processed row stamped
	// cancelled_at (asked to be cancelled after it succeeded) keeps to ProcessedAge.
	CancelledAge time.Duration
	// BatchSize is how many rows one statement deletes at most. Default DefaultRetentionBatch.
	BatchSize int
	// Interval is how often a consumer tries to start a pass. Default DefaultRetentionInterval.
	Interval time.Duration
	// Budget is how long a pass starts new batches for. Default DefaultRetentionBudget.
	Budget time.Duration
}

// RetentionObserver is told of each retention pass a consumer made (Retention): an Observer
// that also has this method is told through it.
type RetentionObserver interface {
	Swept(ctx context.Context, s Sweep)
}

// Sweep is a retention pass, as RetentionObserver.Swept reports it: from the moment the
// consumer held the table's sweeper lease to the moment it let it go or stopped.
type Sweep struct {
	Table  string // the table's name (Plan.Table)
	Holder string // the sweeper's name in inbox_sweeps: host, process and a random part
	// Began and Ended bound the pass on this host's clock: Began after the lease was taken,
	// Ended before it was let go.
	Began, Ended time.Time
	// Deleted is how many rows the pass deleted, in Batches statements.
	Deleted int64
	Batches int
	// More says the budget ended the pass with rows left to delete.
	More bool
	// Err is what stopped the pass early: a failed statement, the lease lost, the context done.
	Err error
}

// shorter reports whether age, where it is set, is shorter than window, where that is set.
func shorter(age, window time.Duration) bool { return age > 0 && window > 0 && age < window }

// retention returns the consumer's retention with its defaults, and refuses one the table
// cannot serve or that deletes nothing; nil where retention is off.
func (c *Consumer) retention(t Table) (*Retention, error) {
	r := c.cfg.Retention
	if r == nil {
		return nil, nil
	}
	if err := refuseRetention(*r, t); err != nil {
		return nil, err
	}
	out := *r
	if out.BatchSize == 0 {
		out.BatchSize = DefaultRetentionBatch
	}
	if out.Interval == 0 {
		out.Interval = DefaultRetentionInterval
	}
	if out.Budget == 0 {
		out.Budget = DefaultRetentionBudget
	}
	return &out, nil
}

// refuseRetention refuses a Retention that cannot work: a negative field or no age at all
// (badRetention), or an age the table cannot serve (retentionNeeds).
func refuseRetention(r Retention, t Table) error {
	if err := badRetention(r, t); err != nil {
		return err
	}
	return retentionNeeds(r, t)
}

// badRetention refuses a negative field, and a Retention that deletes nothing.
func badRetention(r Retention, t Table) error {
	where := sentinel.Table(t.Name)
	switch {
	case r.ProcessedAge < 0 || r.DeadAge < 0 || r.CancelledAge < 0:
		return sentinel.Errorf(nil, where, "inbox.Retention: ProcessedAge %v, DeadAge %v, CancelledAge %v: an age is not negative (zero keeps those rows)", r.ProcessedAge, r.DeadAge, r.CancelledAge)
	case r.BatchSize < 0 || r.Interval < 0 || r.Budget < 0:
		return sentinel.Errorf(nil, where, "inbox.Retention: BatchSize %d, Interval %v, Budget %v: none is negative (zero takes the default)", r.BatchSize, r.Interval, r.Budget)
	case r.ProcessedAge == 0 && r.DeadAge == 0 && r.CancelledAge == 0:
		return sentinel.Errorf(nil, where, "inbox.Retention deletes nothing: set ProcessedAge, DeadAge or CancelledAge, or leave Config.Retention nil")
	}
	return nil
}

// retentionNeeds refuses an age whose column the table lacks (ErrSchema), and one shorter than
// the table's unique key window.
func retentionNeeds(r Retention, t Table) error {
	where := sentinel.Table(t.Name)
	switch {
	case r.ProcessedAge > 0 && t.ProcessedAt == "":
		return sentinel.Errorf(ErrSchema, where, "inbox.Retention.ProcessedAge needs the ProcessedAt column, which the description lacks (an ack deletes the row): name it in inbox.Table.ProcessedAt, or leave ProcessedAge zero")
	case r.CancelledAge > 0 && t.CancelledAt == "":
		return sentinel.Errorf(ErrSchema, where, "inbox.Retention.CancelledAge needs the CancelledAt column, which the description lacks: name it in inbox.Table.CancelledAt, or leave CancelledAge zero")
	case r.DeadAge > 0 && t.DeadAt == "":
		return sentinel.Errorf(ErrSchema, where, "inbox.Retention.DeadAge needs the DeadAt column, which the description lacks (a dying row is dropped): name it in inbox.Table.DeadAt, or leave DeadAge zero")
	case shorter(r.ProcessedAge, t.UniqueWindow) || shorter(r.DeadAge, t.UniqueWindow):
		return sentinel.Errorf(nil, where, "inbox.Retention: ProcessedAge %v, DeadAge %v: an age shorter than the table's UniqueWindow (%v) would delete a settled row, and free its unique key, before the window ends: give ages of at least the window", r.ProcessedAge, r.DeadAge, t.UniqueWindow)
	}
	return nil
}

// checkRetention checks, where retention is on, the consumer's Retention against plan's table
// and the sweeper lease's table against the database: a missing inbox_sweeps, or one whose
// columns differ, fails with ErrSchema naming the statement that creates it. A connection that
// fails is the connection's error, for Run to try again.
func (c *Consumer) checkRetention(ctx context.Context, plan Plan) error {
	r, err := c.retention(plan.Described)
	if r == nil || err != nil {
		return err
	}
	caps := plan.Dialect.Caps()
	w := sqltext.SweepLease(caps)
	rows, err := c.db.QueryContext(ctx, w.Check().SQL)
	if err == nil {
		err = rows.Close()
	}
	if err == nil {
		return nil
	}
	where := sentinel.Table(plan.Table)
	if ctx.Err() != nil || dialect.ConnectionFailed(err) {
		return sentinel.Errorf(nil, where, "checking the sweeper lease's table %s: %w", sqltext.SweepsTable, err)
	}
	if pingErr := c.db.PingContext(ctx); pingErr != nil {
		return sentinel.Errorf(nil, where, "checking the sweeper lease's table %s: the server answers no connection: %w", sqltext.SweepsTable, errors.Join(err, pingErr))
	}
	return sentinel.Errorf(ErrSchema, where, "inbox.Retention needs the sweeper lease's table %s, which the database refuses (%v): create it with `inbox schema -retention -apply`, or run: %s", sqltext.SweepsTable, err, sqltext.CreateSweeps(caps))
}

// sweeper deletes a table's expired rows in passes under the table's sweeper lease
// (Retention).
type sweeper struct {
	db     *sql.DB
	caps   *dialect.Caps
	time   func(time.Time) any // the dialect's bound form of a time
	clock  Clock
	cfg    Retention
	table  string // the table's name, the lease's key
	holder string
	log    *slog.Logger
	obs    RetentionObserver

	w       sqltext.Sweeps
	s       sqltext.SQL
	expiry  sqltext.Expiry
	ensured bool // the table's lease row was written this run
}

// sweeper returns the run's sweeper, nil where retention is off.
func (r *run) sweeper() *sweeper {
	cfg, err := r.c.retention(r.plan.Described)
	if cfg == nil || err != nil { // checked at Run's start (checkRetention)
		return nil
	}
	q, err := r.plan.Described.Quote(r.plan.Dialect)
	if err != nil {
		return nil // the form quoted it at Open
	}
	caps := r.plan.Dialect.Caps()
	s := &sweeper{
		db: r.c.db, caps: caps, time: r.plan.Dialect.Time, clock: r.c.cfg.Clock, cfg: *cfg,
		table: r.plan.Table, holder: sweeperName(), log: r.log,
		w: sqltext.SweepLease(caps), s: sqltext.New(caps, sqltext.Table(q)),
		expiry: sqltext.Expiry{Processed: cfg.ProcessedAge > 0, Dead: cfg.DeadAge > 0, Cancelled: cfg.CancelledAge > 0},
	}
	if s.clock == nil {
		s.clock = hostClock{}
	}
	s.obs, _ = r.c.cfg.Observer.(RetentionObserver)
	return s
}

// sweeperName names a sweeper in inbox_sweeps: its host and process, and a random part that
// tells the consumers of one process apart.
func sweeperName() string {
	host, _ := os.Hostname()
	b := make([]byte, 6)
	rand.Read(b)
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b))
}

// run tries a pass every Interval (each wait drawn from half the interval up to it, so that
// consumers started together spread their tries) until ctx is done.
func (s *sweeper) run(ctx context.Context) {
	for {
		half := s.cfg.Interval / 2
		select {
		case <-ctx.Done():
			return
		case <-time.After(half + mrand.N(s.cfg.Interval-half+1)):
		}
		s.pass(ctx)
	}
}

// lease is how long the sweeper lease runs past each take and renewal.
func (s *sweeper) lease() time.Duration { return 2 * s.cfg.Budget }

// pass takes the table's lease, if it has run out, and deletes expired rows in batches until
// none is left, the budget ends, or a statement fails; then it lets the lease go (see
// Retention). It reports whether it held the lease.
func (s *sweeper) pass(ctx context.Context) bool {
	sent := time.Now()
	taken, err := s.takeLease(ctx)
	if err != nil && ctx.Err() == nil {
		s.log.Warn("inbox: retention: taking the sweeper lease failed; trying again at the next interval", "err", err, "in", s.cfg.Interval)
	}
	if err != nil {
		return false
	}
	if !taken {
		return false
	}
	sw := Sweep{Table: s.table, Holder: s.holder, Began: time.Now()}
	leaseEnd, budgetEnd := sent.Add(s.lease()), sw.Began.Add(s.cfg.Budget)
	for {
		batchSent := time.Now()
		n, err := s.batch(ctx, leaseEnd)
		sw.Deleted += n
		sw.Batches++
		if err != nil {
			sw.Err = fmt.Errorf("deleting batch %d (after %v): %w", sw.Batches, time.Since(batchSent).Round(time.Millisecond), err)
			break
		}
		if n < int64(s.cfg.BatchSize) {
			break
		}
		if !time.Now().Before(budgetEnd) {
			sw.More = true
			break
		}
		sent = time.Now()
		if err := s.renew(ctx); err != nil {
			sw.Err = fmt.Errorf("renewing the sweeper lease: %w", err)
			break
		}
		leaseEnd = sent.Add(s.lease())
	}
	sw.Ended = time.Now()
	if sw.Err == nil {
		rest := s.cfg.Interval
		if sw.More {
			rest = 0
		}
		sw.Err = s.exec(ctx, s.w.Leave(), &sqltext.Values{For: rest.Microseconds(), Table: s.table, Holder: s.holder})
	}
	s.report(ctx, sw)
	return true
}

// takeLease writes the table's lease row where there is none yet, then takes the lease where it
// has run out.
func (s *sweeper) takeLease(ctx context.Context) (bool, error) {
	if !s.ensured {
		if err := s.exec(ctx, s.w.Ensure(), &sqltext.Values{Table: s.table}); err != nil {
			return false, err
		}
		s.ensured = true
	}
	n, err := s.changed(ctx, s.w.Take(), &sqltext.Values{Holder: s.holder, For: s.lease().Microseconds(), Table: s.table})
	return n == 1, err
}

// errSweepLeaseLost is a pass's error when its renewal found the lease taken or run out.
var errSweepLeaseLost = errors.New("the sweeper lease ran out or another consumer took it; that consumer sweeps")

func (s *sweeper) renew(ctx context.Context) error {
	n, err := s.changed(ctx, s.w.Renew(), &sqltext.Values{For: s.lease().Microseconds(), Table: s.table, Holder: s.holder})
	if err == nil && n != 1 {
		err = errSweepLeaseLost
	}
	return err
}

// batch deletes one batch of expired rows, its statements cut off at leaseEnd.
func (s *sweeper) batch(ctx context.Context, leaseEnd time.Time) (int64, error) {
	ctx, cancel := context.WithDeadline(ctx, leaseEnd)
	defer cancel()
	now := s.clock.Now()
	v := &sqltext.Values{ProcessedBefore: s.time(now.Add(-s.cfg.ProcessedAge)), DeadBefore: s.time(now.Add(-s.cfg.DeadAge)),
		CancelledBefore: s.time(now.Add(-s.cfg.CancelledAge))}
	if st := s.s.Purge(s.expiry, s.cfg.BatchSize); !st.Empty() {
		return s.changed(ctx, st, v)
	}
	return s.pickAndDelete(ctx, v)
}

// pickAndDelete is a batch where the DELETE cannot read its own table (MySQL, MariaDB): it
// locks the batch's rows, passing over those other transactions hold, and deletes them one
// statement per id (sqltext.SQL.PurgeID says why), in one transaction at READ COMMITTED, which
// keeps no lock on a row the pick read and passed. The transaction runs on a pinned connection
// that is discarded when anything in it fails, as the forms' transactions are (dialect.Tx):
// given back to the pool after a failed COMMIT or ROLLBACK, its session could keep the
// transaction open, and with it the locks of its pick.
func (s *sweeper) pickAndDelete(ctx context.Context, v *sqltext.Values) (int64, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	tx, err := conn.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		dialect.Discard(conn)
		return 0, err
	}
	n, err := s.deleteExpired(ctx, tx, v)
	if err == nil {
		err = tx.Commit()
	}
	if err != nil {
		tx.Rollback()
		dialect.Discard(conn)
		return 0, err
	}
	return n, conn.Close()
}

// deleteExpired locks up to a batch of expired rows in tx and deletes them, one statement per id.
func (s *sweeper) deleteExpired(ctx context.Context, tx *sql.Tx, v *sqltext.Values) (int64, error) {
	pick := s.s.PurgePick(s.expiry, s.cfg.BatchSize)
	rows, err := tx.QueryContext(ctx, pick.SQL, pick.Bind(nil, v)...)
	if err != nil {
		return 0, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, err
		}
		ids = append(ids, id)
	}
	if err := rows.Close(); err != nil || len(ids) == 0 {
		return 0, err
	}
	del, err := tx.PrepareContext(ctx, s.s.PurgeID().SQL)
	if err != nil {
		return 0, err
	}
	defer del.Close()
	var n int64
	for _, id := range ids {
		res, err := del.ExecContext(ctx, id)
		if err != nil {
			return 0, err
		}
		k, err := res.RowsAffected()
		if err != nil {
			return 0, err
		}
		n += k
	}
	return n, nil
}

func (s *sweeper) exec(ctx context.Context, st sqltext.Statement, v *sqltext.Values) error {
	_, err := s.changed(ctx, st, v)
	return err
}

// changed runs st and returns how many rows it changed; on SQLite under the process's writer
// lock, as the library's other writes outside a handler.
func (s *sweeper) changed(ctx context.Context, st sqltext.Statement, v *sqltext.Values) (int64, error) {
	if s.caps.OneWriter {
		mu := sqlitewriter.For(s.db)
		mu.Lock()
		defer mu.Unlock()
	}
	res, err := s.db.ExecContext(ctx, st.SQL, st.Bind(nil, v)...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// report logs a pass and tells the observer.
func (s *sweeper) report(ctx context.Context, sw Sweep) {
	attrs := []any{"deleted", sw.Deleted, "batches", sw.Batches, "took", sw.Ended.Sub(sw.Began), "more", sw.More}
	switch {
	case sw.Err != nil && ctx.Err() == nil:
		s.log.Warn("inbox: retention: a pass stopped early", append(attrs, "err", sw.Err)...)
	case sw.Deleted > 0:
		s.log.Info("inbox: retention: deleted expired rows", attrs...)
	default:
		s.log.Debug("inbox: retention: no expired rows", attrs...)
	}
	if s.obs != nil {
		s.obs.Swept(ctx, sw)
	}
}
