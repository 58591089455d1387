package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
)

// backgroundFor is how long -count-trips watches each server's counters before the drains, to
// tell the other sessions' share of a drain's server counts.
const backgroundFor = 2 * time.Second

// printBackground writes what each server counted while the command sent it nothing.
func printBackground(ctx context.Context, w io.Writer, targets []*harness.Target) error {
	for _, t := range targets {
		if t.Name == "sqlite" {
			continue
		}
		bg, err := t.ServerBackground(ctx, backgroundFor)
		if err != nil {
			return fmt.Errorf("%s: reading the server's counters: %w", t.Name, err)
		}
		s := backgroundFor.Seconds()
		if t.Name == "postgres" {
			fmt.Fprintf(w, "%-9s other sessions over %v: %.0f xids/s\n", t.Name, backgroundFor, float64(bg.XIDs)/s)
		} else {
			fmt.Fprintf(w, "%-9s other sessions over %v: %.0f Com_commit/s, %.0f Questions/s\n", t.Name, backgroundFor, float64(bg.Commits)/s, float64(bg.Questions)/s)
		}
	}
	return nil
}

// perMessage is the median over rounds of f of a round's traffic, per message of n.
func perMessage(rounds []harness.Traffic, n int, f func(harness.Traffic) int64) float64 {
	if len(rounds) == 0 {
		return 0
	}
	v := make([]float64, len(rounds))
	for i, r := range rounds {
		v[i] = float64(f(r)) / float64(n)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// pair formats f per message of the library's drains and the raw loop's, "–" for a side with
// no counted round.
func pair(c *cell, n int, f func(harness.Traffic) int64) string {
	side := func(rounds []harness.Traffic) string {
		if len(rounds) == 0 {
			return "–"
		}
		return fmt.Sprintf("%.3f", perMessage(rounds, n, f))
	}
	return side(c.libTraffic) + ", " + side(c.rawTraffic)
}

func roundTrips(t harness.Traffic) int64 { return t.Counted.RoundTrips() }
func commits(t harness.Traffic) int64    { return t.Counted.AllCommits() }
func waiting(t harness.Traffic) int64    { return t.Counted.AllCommits() - t.Counted.Unflushed }

// printTrips writes the round trips and commits per message of each cell in Markdown.
func printTrips(w io.Writer, cells []*cell, n int) {
	fmt.Fprintln(w, "| database | form | batch | workers | round trips/msg library, raw | commits/msg library, raw | of them waiting for the disk library, raw |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|")
	for _, c := range cells {
		fmt.Fprintf(w, "| %s | %s | %d | %d | %s | %s | %s |\n", harness.Label(c.db), c.form, c.batch, c.workers,
			pair(c, n, roundTrips), pair(c, n, commits), pair(c, n, waiting))
	}
}

// printServerCheck writes, for each cell on a server, the server's own counters per message
// beside what the wrapper counted of the same: on Postgres the transaction ids assigned beside
// the commits; on MySQL and MariaDB Com_commit beside the COMMITs sent, and Questions beside
// the round trips that were statements (not prepares or pings).
func printServerCheck(w io.Writer, cells []*cell, n int) {
	fmt.Fprintln(w, "| database | form | batch | workers | library: server / counted | raw: server / counted |")
	fmt.Fprintln(w, "|---|---|--:|--:|---|---|")
	for _, c := range cells {
		if c.db == "sqlite" {
			continue
		}
		side := func(rounds []harness.Traffic) string {
			if len(rounds) == 0 {
				return "–"
			}
			per := func(f func(harness.Traffic) int64) float64 { return perMessage(rounds, n, f) }
			if c.db == "postgres" {
				return fmt.Sprintf("%.2f xids / %.2f commits", per(func(t harness.Traffic) int64 { return t.Server.XIDs }), per(commits))
			}
			return fmt.Sprintf("%.2f Com_commit / %.2f COMMITs, %.2f Questions / %.2f statements",
				per(func(t harness.Traffic) int64 { return t.Server.Commits }), per(func(t harness.Traffic) int64 { return t.Counted.Commits }),
				per(func(t harness.Traffic) int64 { return t.Server.Questions }), per(questions))
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %s | %s |\n", harness.Label(c.db), c.form, c.batch, c.workers, side(c.libTraffic), side(c.rawTraffic))
	}
}

// questions are the round trips that the server counts among its Questions: not prepares,
// not pings.
func questions(t harness.Traffic) int64 {
	return t.Counted.RoundTrips() - t.Counted.Calls[harness.CallPrepare] - t.Counted.Calls[harness.CallPing]
}
