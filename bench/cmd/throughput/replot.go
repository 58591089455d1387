package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"

	"github.com/sqlinbox/inbox/bench/harness"
)

// roundLine matches the line the command logs for each drain, and allocsNote the
// allocations per message it reports (runs before they were counted do not).
var (
	roundLine  = regexp.MustCompile(`^(\w+)\s+(\w+)\s+W=(\d+) batch=(\d+)\s+(library|raw)\s+round (\d+):\s+(\d+) msgs/s(?: \((.*)\))?$`)
	allocsNote = regexp.MustCompile(`^([\d.]+) allocs/msg`)
)

// replot rebuilds the throughput table and the plot from the per-round lines of earlier runs'
// logs (-from-log): to combine a rerun of some cells with the rest of a run. A cell found in a
// later file replaces the same cell of an earlier one.
func replot(cfg *config) error {
	var cells []*cell
	for _, path := range cfg.fromLogs {
		f, err := os.Open(path)
		if err != nil {
			return fmt.Errorf("-from-log: %w", err)
		}
		fresh := map[*cell]bool{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			m := roundLine.FindStringSubmatch(sc.Text())
			if m == nil {
				continue
			}
			w, _ := strconv.Atoi(m[3])
			b, _ := strconv.Atoi(m[4])
			rate, _ := strconv.ParseFloat(m[7], 64)
			i := slices.IndexFunc(cells, func(c *cell) bool { return c.db == m[1] && c.form == m[2] && c.workers == w && c.batch == b })
			if i < 0 {
				cells = append(cells, &cell{db: m[1], form: m[2], workers: w, batch: b})
				i = len(cells) - 1
			}
			c := cells[i]
			if !fresh[c] {
				c.lib, c.raw, c.libAllocs, c.rawAllocs, fresh[c] = nil, nil, nil, nil, true
			}
			lib := m[5] == "library"
			if lib {
				c.lib = append(c.lib, rate)
			} else {
				c.raw = append(c.raw, rate)
			}
			if a := allocsNote.FindStringSubmatch(m[8]); a != nil {
				allocs, _ := strconv.ParseFloat(a[1], 64)
				if lib {
					c.libAllocs = append(c.libAllocs, allocs)
				} else {
					c.rawAllocs = append(c.rawAllocs, allocs)
				}
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			return err
		}
	}
	if len(cells) == 0 {
		return fmt.Errorf("no per-round lines in %v", cfg.fromLogs)
	}
	cfg.workers, cfg.batches = nil, nil
	for _, c := range cells {
		if !slices.Contains(cfg.workers, c.workers) {
			cfg.workers = append(cfg.workers, c.workers)
		}
		if !slices.Contains(cfg.batches, c.batch) {
			cfg.batches = append(cfg.batches, c.batch)
		}
		cfg.rounds = max(cfg.rounds, len(c.raw))
	}
	slices.Sort(cfg.workers)
	slices.Sort(cfg.batches)
	dbOrder := func(db string) int { return slices.Index(harness.Databases, db) }
	formOrder := func(f string) int { return slices.Index(harness.Forms, f) }
	slices.SortStableFunc(cells, func(a, b *cell) int {
		for _, d := range []int{dbOrder(a.db) - dbOrder(b.db), formOrder(a.form) - formOrder(b.form), a.workers - b.workers, a.batch - b.batch} {
			if d != 0 {
				return d
			}
		}
		return 0
	})
	fmt.Fprintf(cfg.out, "Throughput, rebuilt from %v: msgs/s median (min–max)\n\n", cfg.fromLogs)
	printCells(cfg.out, cells)
	if cfg.plot != "" {
		if err := writePlot(cfg.plot, cells, cfg); err != nil {
			return err
		}
		fmt.Fprintf(cfg.out, "\nplot written to %s\n", cfg.plot)
	}
	return nil
}
