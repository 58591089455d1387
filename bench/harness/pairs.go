package harness

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// DSN is database name's DSN: the one dsns names, else DefaultDSNs's; for sqlite, where dsns
// names none, the file named file in dir.
func DSN(dsns map[string]string, name, dir, file string) string {
	if dsn := dsns[name]; dsn != "" {
		return dsn
	}
	if name == "sqlite" {
		return filepath.Join(dir, file)
	}
	return DefaultDSNs[name]
}

// EachTarget opens each of dbs in turn, at its DSN (DSN: SQLite in a new temporary directory,
// removed on return), with a pool of pool connections, writes its name and Facts as a line to
// w, calls f with it and closes it. The first error stops the run and is returned.
func EachTarget(ctx context.Context, w io.Writer, dbs []string, dsns map[string]string, pool int, f func(*Target) error) error {
	tmp, err := os.MkdirTemp("", "inbox-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, db := range dbs {
		t, err := Open(ctx, db, DSN(dsns, db, tmp, "bench.db"), pool)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%-9s %s\n", db, t.Facts(ctx))
		err = f(t)
		t.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// Pair is a cell that drains its table two ways, rounds interleaved: a form on one database at
// one worker count, with the msgs/s of each round's drain without what the command measures
// (Plain) and with it (With).
type Pair struct {
	Form, DB    string
	Workers     int
	Plain, With []float64
}

// Grid is the cells of a run that drains each table two ways: each of Forms (SQLite: the lease
// form only) on each of DBs, at its DSN in DSNs (DSN), at each of Workers.
type Grid struct {
	Workers    []int
	DBs, Forms []string
	DSNs       map[string]string
}

// RunPairs opens each database in turn (EachTarget, writing its facts to w, with a pool of the
// most Workers+2), has table create each form's table on it and name it, and fills a Pair of
// the form for each of Workers in turn by drain, the pool set to its workers+2. It returns the
// pairs in that order; the first error stops the run.
func (g Grid) RunPairs(ctx context.Context, w io.Writer, table func(t *Target, form string) (string, error), drain func(t *Target, p *Pair, table string) error) ([]*Pair, error) {
	var pairs []*Pair
	err := EachTarget(ctx, w, g.DBs, g.DSNs, slices.Max(g.Workers)+2, func(t *Target) error {
		for _, form := range g.Forms {
			if t.Name == "sqlite" && form != "lease" {
				continue
			}
			name, err := table(t, form)
			if err != nil {
				return err
			}
			for _, workers := range g.Workers {
				p := &Pair{Form: form, DB: t.Name, Workers: workers}
				t.SetPool(workers + 2)
				if err := drain(t, p, name); err != nil {
					return err
				}
				pairs = append(pairs, p)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return pairs, nil
}

// PrintPairs writes pairs to w as a markdown table, a row a pair: its form, database and
// workers, the Spread of Plain under the head plain, of With under with, and under ratio their
// PairedRatio With/Plain ("–" where no round counted both).
func PrintPairs(w io.Writer, plain, with, ratio string, pairs []*Pair) {
	fmt.Fprintf(w, "| form | database | workers | %s | %s | %s |\n", plain, with, ratio)
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|")
	for _, p := range pairs {
		r := "–"
		if v := PairedRatio(p.With, p.Plain); v > 0 {
			r = fmt.Sprintf("%.3f", v)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s |\n", p.Form, Label(p.DB), p.Workers, Spread(p.Plain), Spread(p.With), r)
	}
}
