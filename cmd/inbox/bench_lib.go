package main

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/advisory"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// openTarget opens database name at dsn under the dialect of that name (the mysql cell runs
// the MySQL dialect whatever the server, so it can stand in for MySQL on a MariaDB server).
func openTarget(ctx context.Context, name, dsn string, pool int) (*target, error) {
	driver, source := "", dsn
	switch name {
	case "postgres":
		driver = "pgx"
	case "mysql", "mariadb":
		driver, source = "mysql", strings.TrimPrefix(dsn, "mysql://")
	case "sqlite":
		driver, source = "sqlite", sqliteSource(dsn)
	}
	db, err := sql.Open(driver, source)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("bench: connecting to %s at %s: %w (name another with -dsn %s=…, or leave it out with -db)", name, dsn, err, name)
	}
	d, err := dialect.Parse(name, "")
	if err != nil {
		db.Close()
		return nil, err
	}
	return &target{name: name, dsn: dsn, d: d, db: db}, nil
}

// sqliteSource is the driver's DSN for a SQLite file: WAL, a busy timeout, synchronous FULL so
// that every commit is on disk, as it is on the servers (fsync on), and BEGIN IMMEDIATE for
// database/sql's transactions, as the lease form begins its claims (the raw loop's claims run in
// those).
func sqliteSource(path string) string {
	if strings.HasPrefix(path, "file:") {
		return path
	}
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(FULL)&_txlock=immediate"
}

// serverFacts describes a database's version and durability settings.
func serverFacts(ctx context.Context, t *target) string {
	q := func(query string) string {
		var s string
		if err := t.db.QueryRowContext(ctx, query).Scan(&s); err != nil {
			return "?"
		}
		return s
	}
	q2 := func(query string) string {
		var name, value string
		if err := t.db.QueryRowContext(ctx, query).Scan(&name, &value); err != nil {
			return "?"
		}
		return value
	}
	switch t.name {
	case "postgres":
		return fmt.Sprintf("PostgreSQL %s, fsync=%s, synchronous_commit=%s", q("SHOW server_version"), q("SHOW fsync"), q("SHOW synchronous_commit"))
	case "sqlite":
		return fmt.Sprintf("SQLite %s (github.com/glebarez/go-sqlite), journal_mode=%s, synchronous=%s (2 = FULL)", q("SELECT sqlite_version()"), q("PRAGMA journal_mode"), q("PRAGMA synchronous"))
	}
	return fmt.Sprintf("%s, innodb_flush_log_at_trx_commit=%s", q("SELECT VERSION()"), q2("SHOW VARIABLES LIKE 'innodb_flush_log_at_trx_commit'"))
}

// benchTable is the table every cell drains: an id, a payload, an attempt counter and the lease
// column. Ack deletes the row. The memory run passes "memory" for form, so that its table never
// meets a throughput or latency run's; two bench commands on one database at once still would
// (each drops and creates its tables when it starts).
func benchTable(t *target, form string) inbox.Table {
	return inbox.Table{Name: "inbox_bench_" + t.name + "_" + form, ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt"}
}

func createBenchTable(ctx context.Context, t *target, form string) error {
	q, err := t.d.Quote(benchTable(t, form).Name)
	if err != nil {
		return err
	}
	var ddl string
	switch t.name {
	case "postgres":
		ddl = "CREATE TABLE " + q + " (id BIGSERIAL PRIMARY KEY, payload BYTEA, attempt INT NOT NULL DEFAULT 0, locked_until TIMESTAMPTZ)"
	case "sqlite":
		ddl = "CREATE TABLE " + q + " (id INTEGER PRIMARY KEY, payload BLOB, attempt INTEGER NOT NULL DEFAULT 0, locked_until TEXT)"
	default:
		ddl = "CREATE TABLE " + q + " (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload LONGBLOB, attempt INT NOT NULL DEFAULT 0, locked_until DATETIME(6) NULL)"
	}
	if _, err := t.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+q); err != nil {
		return err
	}
	_, err = t.db.ExecContext(ctx, ddl)
	return err
}

// payloadOf is row seq's payload: small JSON, as an application would publish.
func payloadOf(seq int) []byte {
	return []byte(`{"seq":` + strconv.Itoa(seq) + `,"account":"acct-` + strconv.Itoa(seq%50) + `","amount_cents":` + strconv.Itoa(100+seq%9900) + `}`)
}

// prefill empties the table and inserts n rows in one transaction, a thousand per statement.
// It keeps no more than one statement's rows in memory, so a million rows cost what a thousand do.
func prefill(ctx context.Context, t *target, table string, n int) error {
	q, err := t.d.Quote(table)
	if err != nil {
		return err
	}
	empty := "TRUNCATE TABLE " + q
	if t.name == "sqlite" {
		empty = "DELETE FROM " + q
	}
	if _, err := t.db.ExecContext(ctx, empty); err != nil {
		return err
	}
	tx, err := t.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	const chunk = 1000
	for from := 0; from < n; from += chunk {
		rows := min(chunk, n-from)
		var b strings.Builder
		b.WriteString("INSERT INTO " + q + " (payload) VALUES ")
		args := make([]any, rows)
		for i := range rows {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(" + t.d.Placeholder(i+1) + ")")
			args[i] = payloadOf(from + i + 1)
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	analyze := "ANALYZE " + q
	if t.name == "mysql" || t.name == "mariadb" {
		analyze = "ANALYZE TABLE " + q
	}
	rows, err := t.db.QueryContext(ctx, analyze) // MySQL answers ANALYZE TABLE with a result set
	if err != nil {
		return err
	}
	return rows.Close()
}

// remaining counts the rows left in a table.
func remaining(ctx context.Context, t *target, table string) (int, error) {
	q, err := t.d.Quote(table)
	if err != nil {
		return 0, err
	}
	var n int
	err = t.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+q).Scan(&n)
	return n, err
}

// newForm builds a fresh form value (a form serves one consumer at a time).
func newForm(t *target, form string) (inbox.Form, error) {
	tbl := benchTable(t, form)
	switch form {
	case "rowlock":
		return rowlock.New(t.d, tbl), nil
	case "lease":
		return lease.New(t.d, tbl, &lease.Config{}), nil
	}
	return advisory.New(t.d, tbl, tbl.Name+"-{id}")
}

// benchLogger shows the library's warnings and errors: a bench run that logs them is not a
// clean measurement.
var benchLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// libraryRound is one library drain: its rate, a note on rows handled again, and the time Run
// took before its first claim (Open: the server and schema checks, the statements prepared)
// and after the last settlement (shutdown, Close).
type libraryRound struct {
	rate           float64
	allocs         float64 // heap allocations per message, Run's start and shutdown included
	note           string
	open, shutdown time.Duration
}

// drainLibrary prefills the form's table and drains it through a Consumer with w workers, one
// delivery per handler call (batch 1) or batches of up to batch rows through NewBatchConsumer.
// The time runs from the first claim's start to the last settlement, as the raw loop's runs
// from its first claim (its statements prepared before) to its last; Run's start before it and
// its shutdown after are reported apart. A settlement that fails (a deadlock on MySQL or
// MariaDB, say) gives its rows back, and the drain goes on until the table is empty, the rows
// handled again counted in the round's note.
func drainLibrary(ctx context.Context, t *target, form string, cfg *benchConfig, w, batch int, bar *benchBar) (round libraryRound, err error) {
	table := benchTable(t, form).Name
	if err := prefill(ctx, t, table, cfg.n); err != nil {
		return round, fmt.Errorf("prefilling: %w", err)
	}
	f, err := newForm(t, form)
	if err != nil {
		return round, err
	}
	want := int64(cfg.n)
	var handled atomic.Int64
	dc := newDrainCounts(want)
	if cfg.countClaims {
		defer func() {
			bar.logf("%s %s W=%d batch=%d: %d claims, %d found nothing, %d rows claimed", t.name, form, w, batch, dc.claims.Load(), dc.empty.Load(), dc.rows.Load())
		}()
	}
	icfg := &inbox.Config{Workers: w, PollInterval: cfg.poll, Logger: benchLogger}
	var c *inbox.Consumer
	if batch == 1 {
		var counted inbox.Form = &drainForm{f, dc}
		if sc, ok := f.(inbox.SettleClaimer); ok {
			counted = &drainSettleClaimForm{drainForm{f, dc}, sc}
		}
		c = inbox.NewConsumer(t.db, counted, inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			handled.Add(1)
			bar.add(1)
			return outcome.Ack()
		}), icfg)
	} else {
		bf, ok := f.(inbox.BatchForm)
		if !ok {
			return round, fmt.Errorf("the %s form does not implement inbox.BatchForm", form)
		}
		c = inbox.NewBatchConsumer(t.db, &drainBatchForm{bf, dc}, batch, inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
			handled.Add(int64(len(ds)))
			bar.add(int64(len(ds)))
			acks := make([]outcome.Outcome, len(ds))
			for i := range acks {
				acks[i] = outcome.Ack()
			}
			return acks
		}), icfg)
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 1)
	mallocs := mallocsSoFar()
	start := time.Now()
	go func() { errc <- c.Run(runCtx) }()
	stopped := func(err error) error {
		return fmt.Errorf("the consumer stopped before the table was drained (%d of %d settled): %v", dc.settled.Load(), want, err)
	}
	var settled time.Time // when the last row settled
	select {
	case <-dc.all:
		settled = time.Unix(0, dc.lastSettled.Load())
	case <-dc.failed:
		// The failed settlement's rows come back and settle later, or some of them settled
		// after all (a lease lost on part of a batch): the table says when every row is gone.
		for {
			left, err := remaining(ctx, t, table)
			if err != nil {
				stop()
				<-errc
				return round, err
			}
			if left == 0 {
				break
			}
			select {
			case err := <-errc:
				return round, stopped(err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		settled = time.Now()
	case err := <-errc:
		return round, stopped(err)
	case <-ctx.Done():
		stop()
		<-errc
		return round, ctx.Err()
	}
	stop()
	if err := <-errc; err != nil {
		return round, err
	}
	round.allocs = float64(mallocsSoFar()-mallocs) / float64(want)
	firstClaim := time.Unix(0, dc.firstClaim.Load())
	round.open, round.shutdown = firstClaim.Sub(start), time.Since(settled)
	n := handled.Load()
	select {
	case <-dc.failed:
		// A row handled again after a failed settlement gave it back is no double delivery.
		round.note = fmt.Sprintf("a settlement failed (see the log) and %d rows were handled again", n-want)
		n = want
	default:
	}
	if err := checkDrained(ctx, t, table, n, want); err != nil {
		return round, err
	}
	round.rate = float64(want) / settled.Sub(firstClaim).Seconds()
	return round, nil
}

// mallocsSoFar is the process's heap allocations so far.
func mallocsSoFar() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.Mallocs
}

// drainCheckError is a drain that ended with rows left or rows handled twice.
type drainCheckError struct{ msg string }

func (e *drainCheckError) Error() string { return e.msg }

// checkDrained fails a drain whose table is not empty or whose handlers ran a row twice.
func checkDrained(ctx context.Context, t *target, table string, handled, want int64) error {
	left, err := remaining(ctx, t, table)
	if err != nil {
		return err
	}
	if left != 0 || handled != want {
		return &drainCheckError{fmt.Sprintf("drain check failed: %d rows left in %s, %d handled of %d (see the log above)", left, table, handled, want)}
	}
	return nil
}

// drainCounts follows a library drain through its form: the rows settled, whether a
// settlement failed, and the claims (-count-claims: an empty claim sends a worker to sleep for
// the poll interval).
type drainCounts struct {
	want                int64
	firstClaim          atomic.Int64 // when the first claim began, in Unix nanoseconds
	lastSettled         atomic.Int64 // when the last row settled, in Unix nanoseconds
	settled             atomic.Int64
	all                 chan struct{} // closed when every row has settled
	failed              chan struct{} // closed at the first settlement that failed
	failOnce            sync.Once
	claims, empty, rows atomic.Int64
}

func newDrainCounts(want int64) *drainCounts {
	return &drainCounts{want: want, all: make(chan struct{}), failed: make(chan struct{})}
}

// claiming marks the start of the drain's first claim.
func (c *drainCounts) claiming() { c.firstClaim.CompareAndSwap(0, time.Now().UnixNano()) }

func (c *drainCounts) claimed(ds []*inbox.Delivery, err error) ([]*inbox.Delivery, error) {
	c.claims.Add(1)
	c.rows.Add(int64(len(ds)))
	if err == nil && len(ds) == 0 {
		c.empty.Add(1)
	}
	return ds, err
}

// settledRows counts the n rows of a settlement that succeeded. Only whole successes count, so
// the count reaches want exactly when every row settled and no settlement failed.
func (c *drainCounts) settledRows(n int, err error) error {
	if err != nil {
		c.failOnce.Do(func() { close(c.failed) })
		return err
	}
	if c.settled.Add(int64(n)) == c.want {
		c.lastSettled.Store(time.Now().UnixNano())
		close(c.all)
	}
	return nil
}

// drainForm counts the claims and settlements of a consumer of single deliveries.
type drainForm struct {
	inbox.Form
	counts *drainCounts
}

func (f *drainForm) Claim(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	f.counts.claiming()
	return f.counts.claimed(f.Form.Claim(ctx, max))
}

func (f *drainForm) Settle(ctx context.Context, d *inbox.Delivery, o outcome.Outcome) error {
	return f.counts.settledRows(1, f.Form.Settle(ctx, d, o))
}

// drainSettleClaimForm is drainForm over a form that settles a row and claims the next in one
// call (inbox.SettleClaimer), which the consumer would not see through drainForm.
type drainSettleClaimForm struct {
	drainForm
	sc inbox.SettleClaimer
}

func (f *drainSettleClaimForm) SettleAndClaim(ctx context.Context, d *inbox.Delivery, o outcome.Outcome, max int) ([]*inbox.Delivery, error, error) {
	ds, settleErr, claimErr := f.sc.SettleAndClaim(ctx, d, o, max)
	ds, claimErr = f.counts.claimed(ds, claimErr)
	return ds, f.counts.settledRows(1, settleErr), claimErr
}

// drainBatchForm counts the claims and settlements of a batch consumer.
type drainBatchForm struct {
	inbox.BatchForm
	counts *drainCounts
}

func (f *drainBatchForm) ClaimBatch(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	f.counts.claiming()
	return f.counts.claimed(f.BatchForm.ClaimBatch(ctx, max))
}

func (f *drainBatchForm) SettleBatch(ctx context.Context, ds []*inbox.Delivery, os []outcome.Outcome) error {
	return f.counts.settledRows(len(ds), f.BatchForm.SettleBatch(ctx, ds, os))
}
