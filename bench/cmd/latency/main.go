// Command latency measures how long a row published in one process waits before a consumer in
// another process starts its handler, on Postgres with and without LISTEN/NOTIFY (pgnotify) and
// on SQLite with and without the data_version check (inbox.DataVersionWaker), and how late
// rows published with Delay, and rows a handler put off with RetryAfter, start after they fall
// due. The consumer runs in this process; each cell starts this program again as its publisher
// (-publish). The consumer polls at the default PollInterval (1 s) in every cell.
//
//	go run ./bench/cmd/latency [-rows 500] [-rate 100] [-postgres DSN] [-only substring]
package main

import (
	"context"
	"database/sql"
	"encoding/binary"
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/glebarez/go-sqlite"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/pgnotify"
)

var (
	rows     = flag.Int("rows", 500, "rows each cell publishes")
	rate     = flag.Int("rate", 100, "rows published per second")
	pgDSN    = flag.String("postgres", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "Postgres DSN")
	publish  = flag.String("publish", "", "internal: publish as a child process to driver:dsn")
	table    = flag.String("table", "", "internal: the child's table")
	delay    = flag.Duration("delay", 0, "internal: the child's Delay")
	only     = flag.String("only", "", "run only the cells whose database, wake-up or measure contains this")
	notify   = flag.Bool("notify", false, "internal: the child's Table.Notify")
	interval = time.Second
)

func main() {
	flag.Parse()
	if *publish != "" {
		if err := child(); err != nil {
			log.Fatal(err)
		}
		return
	}
	dir, err := os.MkdirTemp("", "inbox-latency")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sqlitePath := filepath.Join(dir, "latency.db")
	sqliteDSN := "file:" + sqlitePath + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)"
	if *only == "" {
		if err := notifyCost(*pgDSN); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("rows %d per cell at %d/s, published by another process but in the first cell of each database; PollInterval %v; lease form, 4 workers\n\n", *rows, *rate, interval)
	fmt.Println("| database | wake-up | measure | p50 | p99 | max | rows |")
	fmt.Println("|---|---|---|--:|--:|--:|--:|")
	cells := []struct {
		db, wake, driver, dsn string
		d                     dialect.Dialect
	}{
		{"Postgres", inProcess, "pgx", *pgDSN, dialect.Postgres[isolation.Default]{}},
		{"Postgres", "poll only", "pgx", *pgDSN, dialect.Postgres[isolation.Default]{}},
		{"Postgres", "LISTEN/NOTIFY", "pgx", *pgDSN, dialect.Postgres[isolation.Default]{}},
		{"SQLite", inProcess, "sqlite", sqliteDSN, dialect.SQLite[isolation.Default]{}},
		{"SQLite", "poll only", "sqlite", sqliteDSN, dialect.SQLite[isolation.Default]{}},
		{"SQLite", "data_version every 5 ms", "sqlite", sqliteDSN, dialect.SQLite[isolation.Default]{}},
	}
	for _, c := range cells {
		for _, m := range []string{"enqueue to handler", "Delay 200ms, lateness", "RetryAfter 200ms, lateness"} {
			if (c.wake == "poll only" || c.wake == inProcess) && m != "enqueue to handler" || !strings.Contains(c.db+" "+c.wake+" "+m, *only) {
				continue
			}
			lat, err := cell(c.driver, c.dsn, c.d, c.wake, m)
			if err != nil {
				log.Fatalf("%s, %s, %s: %v", c.db, c.wake, m, err)
			}
			slices.Sort(lat)
			fmt.Printf("| %s | %s | %s | %s | %s | %s | %d |\n", c.db, c.wake, m, ms(pct(lat, 50)), ms(pct(lat, 99)), ms(lat[len(lat)-1]), len(lat))
		}
	}
}

// inProcess is the cell that publishes from this process, whose Enqueue wakes the consumer
// without the database: the baseline of the wake-ups across processes.
const inProcess = "none: published in this process"

// cell runs one consumer here and one publisher in a child process (or in this process), and
// returns the latency of each row: from its publishing (or its due time) to its handler's start.
func cell(driver, dsn string, d dialect.Dialect, mode, measure string) ([]time.Duration, error) {
	wake := mode != "poll only" && mode != inProcess
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(8)
	name := fmt.Sprintf("inbox_latency_%d", os.Getpid())
	tbl := inbox.Table{Name: name, ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", RetryAfter: "retry_after"}
	ddl := []string{"DROP TABLE IF EXISTS " + name}
	if driver == "pgx" {
		ddl = append(ddl, "CREATE TABLE "+name+" (id BIGSERIAL PRIMARY KEY, payload BYTEA, attempt INT NOT NULL DEFAULT 0, retry_after TIMESTAMPTZ, locked_until TIMESTAMPTZ(6))")
	} else {
		ddl = append(ddl, "CREATE TABLE "+name+" (id INTEGER PRIMARY KEY, payload BLOB, attempt INTEGER NOT NULL DEFAULT 0, retry_after TEXT, locked_until TEXT)")
	}
	for _, q := range ddl {
		if _, err := db.Exec(q); err != nil {
			return nil, err
		}
	}
	defer db.Exec("DROP TABLE " + name)

	var (
		mu      sync.Mutex
		lat     []time.Duration
		due     = map[int64]time.Time{} // RetryAfter: when each row put off falls due
		allDone = make(chan struct{})
	)
	h := inbox.HandlerFunc(func(_ context.Context, del *inbox.Delivery) outcome.Outcome {
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		sent := time.Unix(0, int64(binary.BigEndian.Uint64(del.Payload)))
		switch {
		case measure == "RetryAfter 200ms, lateness" && del.Attempt == 1:
			due[del.ID] = now.Add(200 * time.Millisecond)
			return outcome.RetryAfter(200 * time.Millisecond)
		case measure == "RetryAfter 200ms, lateness":
			lat = append(lat, now.Sub(due[del.ID]))
		case measure == "Delay 200ms, lateness":
			lat = append(lat, now.Sub(sent.Add(200*time.Millisecond)))
		default:
			lat = append(lat, now.Sub(sent))
		}
		if len(lat) == *rows {
			close(allDone)
		}
		return outcome.Ack()
	})
	cfg := &inbox.Config{Workers: 4, PollInterval: interval}
	if wake && driver == "pgx" {
		cfg.Wakeups = &pgnotify.Listener{ConnString: dsn}
	} else if wake {
		cfg.Wakeups = &inbox.DataVersionWaker{DB: db}
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- inbox.NewConsumer(db, lease.New(d, tbl, nil), h, cfg).Run(ctx) }()
	time.Sleep(500 * time.Millisecond) // the consumer open, its listener listening

	args := []string{"-publish", driver + ":" + dsn, "-table", name, "-rows", strconv.Itoa(*rows), "-rate", strconv.Itoa(*rate)}
	if wake && driver == "pgx" {
		args = append(args, "-notify")
	}
	if measure == "Delay 200ms, lateness" {
		args = append(args, "-delay", "200ms")
	}
	pub := exec.Command(os.Args[0], args...)
	pub.Stdout, pub.Stderr = os.Stdout, os.Stderr
	if mode == inProcess {
		err = publishRows(driver, dsn, name, *rows, *rate, 0, false)
	} else {
		err = pub.Run()
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("the publisher: %w", err)
	}
	select {
	case <-allDone:
	case <-time.After(30 * time.Second):
		cancel()
		return nil, fmt.Errorf("%d of %d rows handled within 30 s", len(lat), *rows)
	}
	cancel()
	if err := <-runDone; err != nil {
		return nil, err
	}
	return lat, nil
}

// child publishes -rows rows at -rate per second to -table, as -publish, -delay and -notify say.
func child() error {
	driver, dsn, _ := strings.Cut(*publish, ":")
	return publishRows(driver, dsn, *table, *rows, *rate, *delay, *notify)
}

// publishRows publishes rows rows at rate per second to table through a pool of its own, each
// payload its publishing time.
func publishRows(driver, dsn, table string, rows, rate int, delay time.Duration, notify bool) error {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	var d dialect.Dialect = dialect.Postgres[isolation.Default]{}
	if driver == "sqlite" {
		d = dialect.SQLite[isolation.Default]{}
	}
	tbl := inbox.Table{Name: table, ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", RetryAfter: "retry_after", Notify: notify}
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for range rows {
		<-tick.C
		payload := binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
		if err := inbox.Enqueue(context.Background(), db, d, tbl, inbox.Message{Payload: payload, Delay: delay}); err != nil {
			return err
		}
	}
	return nil
}

// notifyCost times Enqueue's one-row statement on Postgres as it is, notifying the table's
// channel, beside the bare INSERT it wraps, each autocommitted, at 1 and 4 publishers at once,
// the two kinds alternating in 20 rounds of 500, so that a drift of the machine's load falls on both.
func notifyCost(dsn string) error {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	name := fmt.Sprintf("inbox_notify_cost_%d", os.Getpid())
	if _, err := db.Exec("CREATE TABLE " + name + " (id BIGSERIAL PRIMARY KEY, payload BYTEA)"); err != nil {
		return err
	}
	defer db.Exec("DROP TABLE " + name)
	bare := "INSERT INTO " + name + " (payload) VALUES ($1)"
	notifying := "WITH published AS (" + bare + ") SELECT pg_notify($2, '')"
	channel := inbox.NotifyChannel(name)
	fmt.Println("| publishers | INSERT | INSERT + pg_notify | cost |")
	fmt.Println("|--:|--:|--:|--:|")
	for _, publishers := range []int{1, 4} {
		db.SetMaxOpenConns(publishers)
		var took [2]time.Duration
		var n [2]int
		for round := range 20 {
			kind := round % 2
			start := time.Now()
			var wg sync.WaitGroup
			errs := make(chan error, publishers)
			for range publishers {
				wg.Go(func() {
					for range 500 / publishers {
						args := []any{[]byte("x")}
						q := bare
						if kind == 1 {
							q, args = notifying, append(args, channel)
						}
						if _, err := db.Exec(q, args...); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			if err := <-errs; err != nil {
				return err
			}
			took[kind] += time.Since(start)
			n[kind] += 500 / publishers * publishers
		}
		per := [2]time.Duration{took[0] / time.Duration(n[0]), took[1] / time.Duration(n[1])}
		fmt.Printf("| %d | %d µs | %d µs | %+.0f%% |\n", publishers, per[0].Microseconds(), per[1].Microseconds(), 100*(float64(per[1])/float64(per[0])-1))
	}
	fmt.Println()
	return nil
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
