package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/sqlinbox/inbox/bench/harness"
)

// result is one contender's measurements of one shape on one database, a value per round.
type result struct {
	db, name string
	role     role
	// shape is "1 × n" or "calls × rows" for the rates, latencyShape for the latencies.
	shape string
	rates []float64 // rows per second
	// p50 and p99 are the latency's percentiles per round, in milliseconds.
	p50, p99 []float64
	// trips is what ours' calls sent per call (-count-trips), from the last round.
	trips string
}

const latencyShape = "single"

// runPublish measures every contender on each database of cfg.
func runPublish(ctx context.Context, cfg *config) ([]*result, error) {
	tmp, err := os.MkdirTemp("", "inbox-publish-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(cfg.out, "machine   %s; %d rows per measurement, %d rounds\n", harness.Machine(), cfg.n, cfg.rounds)
	var results []*result
	for _, db := range cfg.dbs {
		cs, err := contenders(ctx, db, cfg, tmp)
		if err == nil {
			fmt.Fprintf(cfg.out, "%-9s %s\n", db, cs[0].(*oursPublisher).t.Facts(ctx))
			var res []*result
			res, err = measure(ctx, db, cs, cfg)
			results = append(results, res...)
		}
		for _, c := range cs {
			c.close()
		}
		if err != nil {
			return nil, err
		}
	}
	return results, nil
}

// contenders opens every contender on database db: ours on the bench table and on the job
// table first, then the peers (Postgres) and the raw publishes (-raw). On an error it closes
// those it opened.
func contenders(ctx context.Context, db string, cfg *config, tmp string) ([]contender, error) {
	dsn := cfg.dsns[db]
	if dsn == "" {
		dsn = harness.DefaultDSNs[db]
		if db == "sqlite" {
			dsn = filepath.Join(tmp, "publish.db")
		}
	}
	var cs []contender
	for _, o := range openers(ctx, db, dsn, cfg) {
		c, err := o.open()
		if err != nil {
			for _, c := range cs {
				c.close()
			}
			return nil, fmt.Errorf("%s on %s: %w", o.what, harness.Label(db), err)
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// interpolated is a MariaDB dsn with interpolateParams=true, which has go-sql-driver/mysql
// send each statement with its arguments written in, rather than prepare, execute and close it:
// false for another database, or a dsn that sets it already.
func interpolated(db, dsn string) (string, bool) {
	if db != "mariadb" {
		return "", false
	}
	c, err := mysql.ParseDSN(strings.TrimPrefix(dsn, "mysql://"))
	if err != nil || c.InterpolateParams {
		return "", false
	}
	c.InterpolateParams = true
	return c.FormatDSN(), true
}

// opener opens a contender; what names it in an error.
type opener struct {
	what string
	open func() (contender, error)
}

// openers are the contenders on database db at dsn, in the order contenders opens them.
func openers(ctx context.Context, db, dsn string, cfg *config) []opener {
	var out []opener
	for _, job := range []bool{false, true} {
		out = append(out, opener{"ours", func() (contender, error) { return newOurs(ctx, db, dsn, job, cfg.countTrips, "") }})
	}
	if interpolating, ok := interpolated(db, dsn); ok {
		for _, job := range []bool{false, true} {
			out = append(out, opener{"ours", func() (contender, error) {
				return newOurs(ctx, db, interpolating, job, cfg.countTrips, "interpolateParams=true")
			}})
		}
	}
	for _, p := range cfg.peers {
		switch {
		case db != "postgres":
		case p == "river":
			for _, fast := range []bool{false, true} {
				out = append(out, opener{"River", func() (contender, error) { return newRiver(ctx, dsn, fast) }})
			}
		case p == "gue":
			out = append(out, opener{"gue", func() (contender, error) { return newGue(ctx, dsn) }})
		}
	}
	if !cfg.raw {
		return out
	}
	raw := func(way string, chunk int, job bool) opener {
		return opener{"raw", func() (contender, error) { return newRaw(ctx, db, dsn, way, chunk, job) }}
	}
	for _, job := range []bool{false, true} {
		for _, chunk := range cfg.chunks {
			if job && chunk*6 > maxParams[db] {
				fmt.Fprintf(os.Stderr, "%s: no raw INSERT of %d rows a statement on the job table: %d values, past the %d the database binds\n", db, chunk, chunk*6, maxParams[db])
				continue
			}
			out = append(out, raw("chunks", chunk, job))
		}
		if db == "postgres" {
			out = append(out, raw("unnest", 0, job))
			if !job {
				out = append(out, raw("unnest-text", 0, job))
			}
			out = append(out, raw("copy", 0, job))
		}
	}
	return out
}

// maxParams are the values one statement binds at most: Postgres's and MariaDB's protocols
// count them in 16 bits, and SQLite's SQLITE_MAX_VARIABLE_NUMBER defaults to 32,766.
var maxParams = map[string]int{"postgres": 65535, "mariadb": 65535, "sqlite": 32766}

// shapes are the calls each measurement makes: one call of n rows, then n/call calls of call.
func shapes(cfg *config) []int {
	if cfg.call == cfg.n {
		return []int{cfg.n}
	}
	return []int{cfg.n, cfg.call}
}

func shapeName(n, rows int) string {
	return fmt.Sprintf("%s × %s", harness.Thousands(float64(n/rows)), harness.Thousands(float64(rows)))
}

// measure runs every contender once per round on each shape, then the latency, each round
// starting one contender further along (harness.Rounds). The raw multi-row INSERTs run the
// one-call shape only.
func measure(ctx context.Context, db string, cs []contender, cfg *config) ([]*result, error) {
	var out []*result
	for _, rows := range shapes(cfg) {
		var runs []func(int) error
		for _, c := range cs {
			if r, ok := c.(*rawPublisher); ok && r.way == "chunks" && rows != cfg.n {
				continue // in calls of fewer rows than its chunk it runs what ours runs
			}
			res := &result{db: db, name: c.name(), role: c.role(), shape: shapeName(cfg.n, rows)}
			out = append(out, res)
			runs = append(runs, func(r int) error {
				var (
					rate  float64
					trips string
					err   error
				)
				// A CPU profile (-cpuprofile) tells the contenders and shapes apart by these labels.
				pprof.Do(ctx, pprof.Labels("publisher", c.name(), "shape", res.shape), func(ctx context.Context) {
					rate, trips, err = publishAll(ctx, c, cfg.n, rows)
				})
				if err != nil {
					return fmt.Errorf("%s, %s, %s: %w", harness.Label(db), c.name(), res.shape, err)
				}
				res.rates, res.trips = append(res.rates, rate), trips
				fmt.Fprintf(os.Stderr, "%-8s %-48s %-12s round %d: %9.0f rows/s %s\n", db, c.name(), res.shape, r, rate, trips)
				return nil
			})
		}
		if err := harness.Rounds(cfg.rounds, runs...); err != nil {
			return nil, err
		}
	}
	if cfg.singles == 0 {
		return out, nil
	}
	var runs []func(int) error
	for _, c := range cs {
		if c.oneName() == "" {
			continue
		}
		res := &result{db: db, name: c.oneName(), role: c.role(), shape: latencyShape}
		out = append(out, res)
		runs = append(runs, func(r int) error {
			lat, err := publishSingles(ctx, c, cfg.singles)
			if err != nil {
				return fmt.Errorf("%s, %s, single publishes: %w", harness.Label(db), c.name(), err)
			}
			res.p50, res.p99 = append(res.p50, ms(percentile(lat, 50))), append(res.p99, ms(percentile(lat, 99)))
			fmt.Fprintf(os.Stderr, "%-8s %-48s single       round %d: p50 %.3f ms, p99 %.3f ms\n", db, c.name(), r, res.p50[len(res.p50)-1], res.p99[len(res.p99)-1])
			return nil
		})
	}
	return out, harness.Rounds(cfg.rounds, runs...)
}

// publishAll empties c's table, publishes n rows in calls of rows each, timed, and checks that
// every row landed; it returns the rows per second, and for ours, where the target counts them,
// what the calls sent per call.
func publishAll(ctx context.Context, c contender, n, rows int) (float64, string, error) {
	if err := c.empty(ctx); err != nil {
		return 0, "", err
	}
	calls := make([]func(context.Context) error, n/rows)
	for i := range calls {
		calls[i] = c.prepare(i*rows, rows)
	}
	o, counted := c.(*oursPublisher)
	counted = counted && o.t.Trips != nil
	var before harness.TripCounts
	if counted {
		before = o.snapshot()
	}
	start := time.Now()
	for _, call := range calls {
		if err := call(ctx); err != nil {
			return 0, "", err
		}
	}
	elapsed := time.Since(start)
	trips := ""
	if counted {
		d := o.snapshot().Sub(before)
		k := float64(len(calls))
		trips = fmt.Sprintf("%.0f round trips, %.0f execs, %.0f prepares, %.0f begins, %.0f commits per call",
			float64(d.RoundTrips())/k, float64(d.Calls[harness.CallExec])/k, float64(d.Calls[harness.CallPrepare])/k,
			float64(d.Calls[harness.CallBegin])/k, float64(d.AllCommits())/k)
	}
	return float64(n) / elapsed.Seconds(), trips, landed(ctx, c, n)
}

// landed fails unless c's table holds want rows.
func landed(ctx context.Context, c contender, want int) error {
	got, err := c.count(ctx)
	if err != nil {
		return err
	}
	if got != int64(want) {
		return fmt.Errorf("%d rows landed of %d published", got, want)
	}
	return nil
}

// publishSingles empties c's table, publishes n rows one call each, in sequence, and returns
// each call's time, once it checked that every row landed.
func publishSingles(ctx context.Context, c contender, n int) ([]time.Duration, error) {
	if err := c.empty(ctx); err != nil {
		return nil, err
	}
	lat := make([]time.Duration, n)
	for i := range lat {
		start := time.Now()
		if err := c.one(ctx, i+1); err != nil {
			return nil, err
		}
		lat[i] = time.Since(start)
	}
	return lat, landed(ctx, c, n)
}

// percentile is the p-th percentile of lat (nearest rank).
func percentile(lat []time.Duration, p int) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	i := (len(s)*p+99)/100 - 1
	return s[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
