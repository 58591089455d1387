package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
	"github.com/sqlinbox/inbox/bench/harness/harnesstest"
)

// TestMain runs the test binary as a consumer process of the procs scenario when the parent
// test spawns it (childEnv), as the command's own binary runs.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		if err := child(context.Background(), os.Args[1:], os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString("scale child: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestScaleTiny runs every scenario at a tiny size on every database reachable, so that the
// command cannot rot: 2 processes draining 1,000 rows in each form, single deliveries and
// batches of 16; then in batches of 16, a drain of 1,000 rows, 500 rows beside 20,000
// processed ones, one queue among 20, and 5 seconds sustained. It asserts what the scenarios check, never a rate: every row
// handled, none twice (procs: per row, counted from the children's reports), the tables out.
//
// The servers are those of the live tests, each in a database of the test's own
// (harnesstest.Tiny); one that does not answer is left out, or fails the test under
// INBOX_REQUIRE_DATABASES=1. The databases run side by side.
func TestScaleTiny(t *testing.T) {
	// procs with single deliveries and batches; the other scenarios, whose code is the same
	// for both, with batches only (the advisory form drains a few hundred rows a second under
	// -race).
	tiny := [][]string{
		{"-n", "1000", "-procs", "2", "-rounds", "1", "-batch", "1,16", "procs"},
		{"-rounds", "1", "-batch", "16", "-drain-n", "1000", "-history-n", "20000", "-history-rows", "500",
			"-queues", "20", "-queue-rows", "50", "-sustain-for", "5s", "-sample", "1s", "drain", "history", "queues", "sustained"},
	}
	runTiny := func(ctx context.Context, db, dsn string, out io.Writer) (struct{}, error) {
		for _, args := range tiny {
			if db == "sqlite" && args[len(args)-1] == "procs" {
				continue
			}
			if err := run(ctx, append([]string{"-db", db, "-dsn", db + "=" + dsn}, args...), out); err != nil {
				return struct{}{}, err
			}
		}
		return struct{}{}, nil
	}
	harnesstest.Tiny(t, 3*time.Minute, "inbox_scale_test", []string{"postgres", "mariadb"}, runTiny, func(db, out string, _ struct{}) {
		want := []string{"A long drain", "A table that keeps its processed rows", "One queue among many"}
		if db != "sqlite" {
			want = append(want, "Many processes", "Sustained")
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: no table %q in the output", db, w)
			}
		}
		if strings.Contains(out, "failed (below)") {
			t.Errorf("%s: a procs cell failed", db)
		}
		if db != "sqlite" && !strings.Contains(out, "| "+harness.Label(db)+" | advisory | 16 | 2 |") {
			t.Errorf("%s: no procs row for the advisory form's batches at 2 processes", db)
		}
	})
}
