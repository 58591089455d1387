package harnesstest

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Tiny runs a tiny run of a benchmark command, run, on each database at once, so that the
// command cannot rot: on SQLite, in a file of the test's own that commits without waiting for
// the disk, and on each server of servers that answers, in a database of the test's own named
// after prefix (Scratch); all of it within timeout. run writes the command's output to out and
// returns what the test's checks read beside it. Then, a database after another, SQLite first,
// Tiny logs the run's output and fails the test with the run's error, or hands the output and
// result to check.
func Tiny[R any](t *testing.T, timeout time.Duration, prefix string, servers []string,
	run func(ctx context.Context, db, dsn string, out io.Writer) (R, error),
	check func(db, out string, result R)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type tiny struct {
		db, dsn string
		out     strings.Builder
		result  R
		err     error
	}
	runs := []*tiny{{db: "sqlite", dsn: "file:" + filepath.Join(t.TempDir(), prefix+".db") +
		"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(10000)&_pragma=synchronous(OFF)"}}
	for _, db := range servers {
		if dsn, ok := Scratch(ctx, t, prefix, db); ok {
			runs = append(runs, &tiny{db: db, dsn: dsn})
		}
	}
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() { r.result, r.err = run(ctx, r.db, r.dsn, &r.out) })
	}
	wg.Wait()
	for _, r := range runs {
		t.Logf("%s:\n%s", r.db, r.out.String())
		if r.err != nil {
			t.Errorf("%s: %v", r.db, r.err)
			continue
		}
		check(r.db, r.out.String(), r.result)
	}
}
