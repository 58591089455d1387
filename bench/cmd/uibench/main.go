// Command uibench times each page of the operator's web page (package ui) over a table of a
// million rows, on Postgres, MariaDB and SQLite: it fills the table on the server (once; -refill
// fills it again), serves the page in this process on loopback, and times each page as the
// median of -requests requests, in rounds that request every page once, after a round that
// warms them. The overview's
// counts come from one statement over the whole table that the page runs in the background
// (admin.Stats): that statement is timed on its own, and the page serves the counts it last
// read.
//
//	go run ./bench/cmd/uibench [-db postgres,mariadb,sqlite] [-rows 1000000] [-requests 9]
//
// The rows: 70% processed, 15% due, 5% due again after a failure (retrying), 5% delayed, 3%
// dead with their last error, 2% held by a lease; four queues; five kinds of job; a third of
// the rows in a FIFO group, a customer among 5,000 (a group whose head is delayed is blocked);
// a JSON payload of about 110 bytes with a customer id among 5,000; a publishing time
// (created_at) 100 ms apart; a cancelled_at column (no row cancelled); three schedules in the
// ticks table.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "github.com/glebarez/go-sqlite"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/bench/harness"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/ui"
)

var (
	dbs      = flag.String("db", "postgres,mariadb,sqlite", "the databases to run on, comma-separated")
	rows     = flag.Int("rows", 1_000_000, "the rows of the table")
	requests = flag.Int("requests", 9, "the requests each page is timed over (the median is printed)")
	refill   = flag.Bool("refill", false, "fill the table again even when it holds -rows rows already")
	pgDSN    = flag.String("postgres", env("INBOX_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"), "the Postgres database")
	mariaDSN = flag.String("mariadb", env("INBOX_MARIADB_DSN", "root@tcp(127.0.0.1:3306)/test"), "the MariaDB database (go-sql-driver/mysql's DSN)")
	sqlite   = flag.String("sqlite", filepath.Join(os.TempDir(), "inbox-uibench.db"), "the SQLite file")
)

const table = "inbox_uibench"

var jobs = inbox.Table{
	Name: table, ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", ProcessedAt: "processed_at",
	Queue: "queue", Priority: "priority", RetryAfter: "retry_after", Headers: "headers", DeadAt: "dead_at",
	LastError: "last_error", CreatedAt: "created_at", LockedUntil: "locked_until",
	Kind: "kind", GroupKey: "group_key", CancelledAt: "cancelled_at",
}

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func main() { harness.Main("uibench", run) }

// withParam is a go-sql-driver/mysql DSN with one more parameter.
func withParam(dsn, param string) string {
	if strings.Contains(dsn, "?") {
		return dsn + "&" + param
	}
	return dsn + "?" + param
}

// database is one database the pages are timed on.
type database struct {
	name, driver, dsn string
	d                 dialect.Dialect
	fill              string // the statement that fills the table with {n} rows
	analyze           []string
}

func run(ctx context.Context, args []string) error {
	flag.CommandLine.Parse(args)
	names, err := harness.Names("db", *dbs, []string{"postgres", "mariadb", "sqlite"})
	if err != nil {
		return err
	}
	all := map[string]database{
		"postgres": {"postgres", "pgx", *pgDSN, dialect.Postgres[isolation.Default]{}, postgresFill, []string{"VACUUM ANALYZE " + table}},
		"mariadb": {"mariadb", "mysql", withParam(*mariaDSN, "multiStatements=true"), dialect.MariaDB[isolation.Default]{}, mariadbFill,
			[]string{"ANALYZE TABLE " + table}},
		"sqlite": {"sqlite", "sqlite", "file:" + *sqlite + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)", dialect.SQLite[isolation.Default]{}, sqliteFill, []string{"ANALYZE"}},
	}
	results := map[string]map[string]timing{}
	var order, loads []string
	for _, name := range names {
		fmt.Fprintf(os.Stderr, "%s: ", name)
		loads = append(loads, name+" "+loadAverage())
		res, pages, err := timePages(ctx, all[name])
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		results[name], order = res, pages
		fmt.Fprintln(os.Stderr)
	}
	fmt.Printf("| page | %s |\n|---|%s\n", strings.Join(names, " | "), strings.Repeat("---:|", len(names)))
	defer fmt.Printf("\nload average (1 min) at the start of each database's run: %s\n", strings.Join(loads, ", "))
	for _, page := range order {
		fmt.Printf("| %s |", page)
		for _, name := range names {
			fmt.Printf(" %s |", results[name][page])
		}
		fmt.Println()
	}
	return nil
}

// timing is the median of a page's times, and their range.
type timing struct{ median, low, high time.Duration }

func (t timing) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0f", float64(d.Microseconds())/1000) }
	return fmt.Sprintf("%s ms (%s–%s)", ms(t.median), ms(t.low), ms(t.high))
}

func timingOf(times []time.Duration) timing {
	slices.Sort(times)
	return timing{median: times[len(times)/2], low: times[0], high: times[len(times)-1]}
}

// page is a request the bench times.
type page struct {
	name string
	path string
	form url.Values // a POST of this form, with the session's token; nil: a GET
}

// pagesOf are the pages timed over a table of n rows.
func pagesOf(n int) []page {
	return []page{
		{"queues (the counts last read)", "/", nil},
		{"queues, the live refresh", "/?part=queues", nil},
		{"rows: due", "/rows?state=due", nil},
		{"rows: delayed", "/rows?state=delayed", nil},
		{"rows: in work", "/rows?state=in+work", nil},
		{"rows: retrying", "/rows?state=retrying", nil},
		{"rows: dead, one queue", "/rows?state=dead&queue=emails", nil},
		{"rows: processed over an hour ago", "/rows?state=processed&older=1h", nil},
		{"rows: last error contains", "/rows?state=dead&error=user9", nil},
		{"rows: payload customer.id is 42", "/rows?state=any&path=customer.id&value=42", nil},
		{"rows: a page half way down", "/rows?state=any&before=" + strconv.Itoa(n/2), nil},
		{"rows: due of a kind", "/rows?state=due&kind=digest", nil},
		{"rows: any state of a queue and a kind", "/rows?state=any&queue=emails&kind=digest", nil},
		{"a row", "/rows/" + strconv.Itoa(n*7/9), nil},
		{"groups (of the first queue)", "/groups", nil},
		{"groups of another queue", "/groups?queue=webhooks", nil},
		{"groups of a queue, blocked only", "/groups?queue=reports&blocked=1", nil},
		{"schedules", "/schedules", nil},
		{"count before requeue of a queue's dead rows", "/act", url.Values{"do": {"requeue"}, "scope": {"matching"}, "state": {"dead"}, "queue": {"emails"}}},
		{"count before delete of rows processed over an hour ago", "/act", url.Values{"do": {"delete"}, "scope": {"matching"}, "state": {"processed"}, "older": {"1h"}}},
		{"count before delete of rows dead over an hour ago", "/act", url.Values{"do": {"delete"}, "scope": {"matching"}, "state": {"dead"}, "older": {"1h"}}},
		{"count before delete of payload matches", "/act", url.Values{"do": {"delete"}, "scope": {"matching"}, "state": {"any"}, "path": {"customer.id"}, "value": {"42"}}},
		{"count before cancel of a queue's due rows", "/act", url.Values{"do": {"cancel"}, "scope": {"matching"}, "state": {"due"}, "queue": {"emails"}}},
		{"count before cancel of retrying rows of a kind", "/act", url.Values{"do": {"cancel"}, "scope": {"matching"}, "state": {"retrying"}, "kind": {"digest"}}},
		{"count before cancel of 50 selected rows", "/act", selected(n, 50)},
		{"health", "/healthz", nil},
	}
}

// selected is the form of a cancel of k rows selected among the newest of n, every fourth.
func selected(n, k int) url.Values {
	form := url.Values{"do": {"cancel"}, "scope": {"selected"}, "state": {"any"}}
	for i := range k {
		form.Add("id", strconv.Itoa(n-4*i))
	}
	return form
}

// statsPage names the timing of admin.Stats, the statement behind the queues' counts.
const statsPage = "the counts behind the queues (admin.Stats, in the background)"

func timePages(ctx context.Context, dbase database) (map[string]timing, []string, error) {
	db, err := sql.Open(dbase.driver, dbase.dsn)
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	db.SetMaxOpenConns(4)
	if err := fill(ctx, db, dbase); err != nil {
		return nil, nil, err
	}
	a, err := admin.New(db, dbase.d, jobs)
	if err != nil {
		return nil, nil, err
	}
	out := map[string]timing{}
	var statsTimes []time.Duration
	for range 3 {
		start := time.Now()
		if _, err := a.Stats(ctx); err != nil {
			return nil, nil, err
		}
		statsTimes = append(statsTimes, time.Since(start))
	}
	out[statsPage] = timingOf(statsTimes)
	// The counts are read once, before the pages are timed, and not again while they are: the
	// page serves the counts it last read, and the statement's own time is above.
	h, err := ui.New(a, &ui.Config{QueryTimeout: time.Minute, CountEvery: time.Hour})
	if err != nil {
		return nil, nil, err
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	get := func(path string) (string, error) {
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return string(b), err
	}
	for {
		body, err := get("/")
		if err != nil {
			return nil, nil, err
		}
		if strings.Contains(body, `class="counts"`) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	body, err := get("/rows")
	if err != nil {
		return nil, nil, err
	}
	token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	if token == nil {
		return nil, nil, fmt.Errorf("the rows page has no session token")
	}
	order := []string{statsPage}
	send := func(p page) error {
		if p.form == nil {
			_, err := get(p.path)
			return err
		}
		form := url.Values{"csrf": {token[1]}}
		for k, v := range p.form {
			form[k] = v
		}
		resp, err := client.PostForm(srv.URL+p.path, form)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), `id="count"`) {
			return fmt.Errorf("POST %s %v: %s, no count", p.path, p.form, resp.Status)
		}
		return nil
	}
	// Each round times every page once, so that a page's requests spread over the run: a
	// moment when the machine is busier slows every page alike.
	all := pagesOf(*rows)
	times := make([][]time.Duration, len(all))
	for round := range *requests + 1 {
		for i, p := range all {
			start := time.Now()
			if err := send(p); err != nil {
				return nil, nil, err
			}
			if round > 0 { // the first round warms each page
				times[i] = append(times[i], time.Since(start))
			}
		}
		fmt.Fprint(os.Stderr, ".")
	}
	for i, p := range all {
		out[p.name] = timingOf(times[i])
		order = append(order, p.name)
	}
	return out, order, nil
}

// loadAverage is the machine's load average over the last minute, where /proc says it.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

// fill creates the table and fills it with -rows rows, unless it holds them already.
func fill(ctx context.Context, db *sql.DB, dbase database) error {
	var highest sql.NullInt64
	// A table filled before it had a group column is filled again.
	err := db.QueryRowContext(ctx, "SELECT MAX(id) FROM "+table+" WHERE group_key IS NULL OR group_key IS NOT NULL").Scan(&highest)
	if err == nil && highest.Int64 == int64(*rows) && !*refill {
		fmt.Fprintf(os.Stderr, "%d rows already; ", *rows)
		return nil
	}
	stmts, err := admin.Schema(dbase.d, jobs)
	if err != nil {
		return err
	}
	quoted, _ := dbase.d.Quote(table)
	ticksName := inbox.TicksTable(table)
	ticks, err := inbox.TicksSchema(dbase.d, jobs)
	if err != nil {
		return err
	}
	stmts = append(stmts, "DROP TABLE IF EXISTS "+ticksName, ticks,
		"INSERT INTO "+ticksName+" (name, last_tick, next_tick, job_id) VALUES "+
			"('nightly report', 1700000000000000, 1700086400000000, 12), ('hourly digest', 1700000000000000, 1700003600000000, 34), ('weekly invoices', 0, 0, 0)")
	start := time.Now()
	for _, s := range append(append([]string{"DROP TABLE IF EXISTS " + quoted}, stmts...), strings.ReplaceAll(dbase.fill, "{n}", strconv.Itoa(*rows))) {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	for _, s := range dbase.analyze {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	fmt.Fprintf(os.Stderr, "filled %d rows in %v; ", *rows, time.Since(start).Round(time.Second))
	return nil
}

// The statements that fill the table with {n} rows, row g in the state (g/4)%100 says and in
// the queue g%4 says.
const (
	postgresFill = `INSERT INTO ` + table + ` (payload, attempt, processed_at, queue, retry_after, dead_at, last_error, locked_until, created_at, kind, group_key)
SELECT convert_to('{"customer":{"id":' || (g % 5000) || ',"email":"user' || g || '@example.com"},"order":"A-' || g || '","amount":' || (g % 997) || '}', 'UTF8'),
  CASE WHEN s < 70 THEN 1 WHEN s < 85 THEN 0 WHEN s < 90 THEN 1 WHEN s < 93 THEN 25 WHEN s < 95 THEN 1 ELSE 2 END,
  CASE WHEN s < 70 THEN now() - (n - g) * interval '100 ms' END,
  (ARRAY['emails','invoices','reports','webhooks'])[1 + g % 4],
  CASE WHEN s BETWEEN 85 AND 89 THEN now() + interval '1 hour' WHEN s >= 95 THEN now() - interval '1 minute' END,
  CASE WHEN s BETWEEN 90 AND 92 THEN now() - (n - g) * interval '100 ms' END,
  CASE WHEN s >= 85 AND s NOT BETWEEN 93 AND 94 THEN 'smtp: 550 5.1.1 <user' || g || '@example.com>: mailbox unavailable' END,
  CASE WHEN s BETWEEN 93 AND 94 THEN now() + interval '1 hour' END,
  now() - (n - g) * interval '100 ms',
  (ARRAY['welcome','receipt','digest','export','ping'])[1 + g % 5],
  CASE WHEN g % 3 = 0 THEN 'customer-' || (g % 5000) END
FROM (SELECT g, (g / 4) % 100 AS s, {n} AS n FROM generate_series(1, {n}) g) r`

	mariadbFill = `SET SESSION max_recursive_iterations = 100000000;
INSERT INTO ` + table + ` (payload, attempt, processed_at, queue, retry_after, dead_at, last_error, locked_until, created_at, kind, group_key)
WITH RECURSIVE r(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM r WHERE g < {n})
SELECT CONCAT('{"customer":{"id":', g % 5000, ',"email":"user', g, '@example.com"},"order":"A-', g, '","amount":', g % 997, '}'),
  CASE WHEN s < 70 THEN 1 WHEN s < 85 THEN 0 WHEN s < 90 THEN 1 WHEN s < 93 THEN 25 WHEN s < 95 THEN 1 ELSE 2 END,
  CASE WHEN s < 70 THEN UTC_TIMESTAMP(6) - INTERVAL ({n} - g) * 100000 MICROSECOND END,
  ELT(1 + g % 4, 'emails', 'invoices', 'reports', 'webhooks'),
  CASE WHEN s BETWEEN 85 AND 89 THEN UTC_TIMESTAMP(6) + INTERVAL 1 HOUR WHEN s >= 95 THEN UTC_TIMESTAMP(6) - INTERVAL 1 MINUTE END,
  CASE WHEN s BETWEEN 90 AND 92 THEN UTC_TIMESTAMP(6) - INTERVAL ({n} - g) * 100000 MICROSECOND END,
  CASE WHEN s >= 85 AND s NOT BETWEEN 93 AND 94 THEN CONCAT('smtp: 550 5.1.1 <user', g, '@example.com>: mailbox unavailable') END,
  CASE WHEN s BETWEEN 93 AND 94 THEN UTC_TIMESTAMP(6) + INTERVAL 1 HOUR END,
  UTC_TIMESTAMP(6) - INTERVAL ({n} - g) * 100000 MICROSECOND,
  ELT(1 + g % 5, 'welcome', 'receipt', 'digest', 'export', 'ping'),
  CASE WHEN g % 3 = 0 THEN CONCAT('customer-', g % 5000) END
FROM (SELECT g, (g DIV 4) % 100 AS s FROM r) x`

	sqliteFill = `INSERT INTO ` + table + ` (payload, attempt, processed_at, queue, retry_after, dead_at, last_error, locked_until, created_at, kind, group_key)
WITH RECURSIVE r(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM r WHERE g < {n})
SELECT CAST('{"customer":{"id":' || (g % 5000) || ',"email":"user' || g || '@example.com"},"order":"A-' || g || '","amount":' || (g % 997) || '}' AS BLOB),
  CASE WHEN s < 70 THEN 1 WHEN s < 85 THEN 0 WHEN s < 90 THEN 1 WHEN s < 93 THEN 25 WHEN s < 95 THEN 1 ELSE 2 END,
  CASE WHEN s < 70 THEN strftime('%Y-%m-%d %H:%M:%f000', 'now', '-' || (({n} - g) / 10.0) || ' seconds') END,
  CASE g % 4 WHEN 0 THEN 'emails' WHEN 1 THEN 'invoices' WHEN 2 THEN 'reports' ELSE 'webhooks' END,
  CASE WHEN s BETWEEN 85 AND 89 THEN strftime('%Y-%m-%d %H:%M:%f000', 'now', '+1 hour') WHEN s >= 95 THEN strftime('%Y-%m-%d %H:%M:%f000', 'now', '-1 minute') END,
  CASE WHEN s BETWEEN 90 AND 92 THEN strftime('%Y-%m-%d %H:%M:%f000', 'now', '-' || (({n} - g) / 10.0) || ' seconds') END,
  CASE WHEN s >= 85 AND s NOT BETWEEN 93 AND 94 THEN 'smtp: 550 5.1.1 <user' || g || '@example.com>: mailbox unavailable' END,
  CASE WHEN s BETWEEN 93 AND 94 THEN strftime('%Y-%m-%d %H:%M:%f000', 'now', '+1 hour') END,
  strftime('%Y-%m-%d %H:%M:%f000', 'now', '-' || (({n} - g) / 10.0) || ' seconds'),
  CASE g % 5 WHEN 0 THEN 'welcome' WHEN 1 THEN 'receipt' WHEN 2 THEN 'digest' WHEN 3 THEN 'export' ELSE 'ping' END,
  CASE WHEN g % 3 = 0 THEN 'customer-' || (g % 5000) END
FROM (SELECT g, (g / 4) % 100 AS s FROM r)`
)
