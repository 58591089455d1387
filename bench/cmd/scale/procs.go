package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
)

// procsCell is one form with one batch size and one process count; it collects each round's
// msgs/s and what the rounds found.
type procsCell struct {
	form         string
	batch, procs int
	rates        []float64
	twice        int64 // rows handled more than once, over the rounds
	logged       int64 // warnings and errors the children logged (a failed settlement is one)
	failure      string
}

// runProcs runs every form, batch size and process count, the process counts of a cell's
// rounds in turning order (harness.Rounds), and prints the table.
func runProcs(ctx context.Context, cfg *config, t *harness.Target, forms []string) error {
	const table = "scale_procs"
	if err := t.CreateTable(ctx, table); err != nil {
		return err
	}
	var cells []*procsCell
	for _, form := range forms {
		for _, batch := range cfg.batches {
			row := make([]*procsCell, len(cfg.procs))
			drains := make([]func(int) error, len(cfg.procs))
			for i, procs := range cfg.procs {
				c := &procsCell{form: form, batch: batch, procs: procs}
				row[i] = c
				drains[i] = func(round int) error {
					if c.failure != "" {
						return nil
					}
					r, err := procsRound(ctx, cfg, t, table, c)
					if err != nil {
						if ctx.Err() != nil {
							return ctx.Err()
						}
						// A server that refuses the processes' connections stops the curve
						// there; the table says so and the run goes on.
						c.failure = err.Error()
						progress("%s %s batch %d, %d processes: %v", t.Name, form, batch, procs, err)
						return nil
					}
					c.rates = append(c.rates, r.rate)
					c.twice += r.twice
					c.logged += r.logged
					progress("%s %s batch %d, %d × %d workers, round %d: %.0f msgs/s, %d handled twice, %d logged",
						t.Name, form, batch, procs, cfg.workers, round, r.rate, r.twice, r.logged)
					return nil
				}
			}
			if err := harness.Rounds(cfg.rounds, drains...); err != nil {
				return err
			}
			cells = append(cells, row...)
		}
	}
	w := cfg.out
	fmt.Fprintf(w, "Many processes, %s: %d rows a drain, %d workers a process, %d rounds, msgs/s median (min–max)\n\n", harness.Label(t.Name), cfg.n, cfg.workers, cfg.rounds)
	fmt.Fprintln(w, "| database | form | batch | processes | msgs/s | rows handled twice | warnings logged |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|")
	var broken []string
	for _, c := range cells {
		rate := harness.Spread(c.rates)
		if c.failure != "" {
			rate = "failed (below)"
			broken = append(broken, fmt.Sprintf("- %s, batch %d, %d processes: %s", c.form, c.batch, c.procs, c.failure))
		}
		fmt.Fprintf(w, "| %s | %s | %d | %d | %s | %d | %d |\n", harness.Label(t.Name), c.form, c.batch, c.procs, rate, c.twice, c.logged)
	}
	fmt.Fprintln(w)
	for _, b := range broken {
		fmt.Fprintln(w, b)
	}
	if len(broken) > 0 {
		fmt.Fprintln(w)
	}
	return nil
}

// procsResult is one round of a procs cell.
type procsResult struct {
	rate          float64 // rows per second from the first row handled to the last
	twice, logged int64
}

// procsRound prefills the table and drains it with c.procs child processes. Each child
// reports every row it handles (its seq and when), so that the parent counts the handlings of
// each row: a row handled twice fails the round unless a child logged a warning or error (a
// failed settlement gives its row back, and the library logs it).
func procsRound(ctx context.Context, cfg *config, t *harness.Target, table string, c *procsCell) (procsResult, error) {
	var res procsResult
	if err := t.Prefill(ctx, table, cfg.n); err != nil {
		return res, err
	}
	exe, err := os.Executable()
	if err != nil {
		return res, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(cfg.n/50+60)*time.Second)
	defer cancel()

	counts := make([]atomic.Int32, cfg.n+1)
	var (
		distinct, first, last atomic.Int64
		logged                atomic.Int64
		allDone               = make(chan struct{})
		doneOnce              sync.Once
		ready                 = make(chan error, c.procs)
		exited                = make(chan error, c.procs)
		stdins                []io.WriteCloser
		readers               sync.WaitGroup
	)
	first.Store(1<<63 - 1)
	for i := range c.procs {
		cmd := exec.CommandContext(ctx, exe, "-db", t.Name, "-dsn", t.DSN, "-form", c.form, "-table", table,
			"-workers", strconv.Itoa(cfg.workers), "-batch", strconv.Itoa(c.batch), "-poll", cfg.poll.String())
		cmd.Env = append(os.Environ(), childEnv+"=1")
		in, err := cmd.StdinPipe()
		if err != nil {
			return res, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return res, err
		}
		errOut, err := cmd.StderrPipe()
		if err != nil {
			return res, err
		}
		if err := cmd.Start(); err != nil {
			return res, err
		}
		stdins = append(stdins, in)
		defer in.Close() // a child still running reads EOF and stops
		readers.Add(2)
		go func() {
			defer readers.Done()
			s := bufio.NewScanner(errOut)
			for s.Scan() {
				line := s.Text()
				if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
					logged.Add(1)
				}
				fmt.Fprintf(os.Stderr, "child %d: %s\n", i+1, line)
			}
		}()
		go func() {
			defer readers.Done()
			s := bufio.NewScanner(out)
			if !s.Scan() || s.Text() != "ready" {
				ready <- fmt.Errorf("child %d did not start (see its log above)", i+1)
				return
			}
			ready <- nil
			for s.Scan() {
				seq, at, ok := parseReport(s.Text())
				if !ok || seq < 1 || seq > cfg.n {
					continue
				}
				if counts[seq].Add(1) == 1 && distinct.Add(1) == int64(cfg.n) {
					doneOnce.Do(func() { close(allDone) })
				}
				for v := first.Load(); at < v && !first.CompareAndSwap(v, at); v = first.Load() {
				}
				for v := last.Load(); at > v && !last.CompareAndSwap(v, at); v = last.Load() {
				}
			}
		}()
		go func() { exited <- cmd.Wait() }()
	}
	for range c.procs {
		if err := <-ready; err != nil {
			return res, err
		}
	}
	for _, in := range stdins {
		if _, err := io.WriteString(in, "go\n"); err != nil {
			return res, err
		}
	}
	select {
	case <-allDone:
	case err := <-exited:
		return res, fmt.Errorf("a child exited before the table was drained (%d of %d rows handled): %v", distinct.Load(), cfg.n, err)
	case <-ctx.Done():
		return res, fmt.Errorf("%d of %d rows handled before the round's deadline: %w", distinct.Load(), cfg.n, ctx.Err())
	}
	for _, in := range stdins {
		in.Close()
	}
	var errs []error
	for range c.procs {
		if err := <-exited; err != nil {
			errs = append(errs, err)
		}
	}
	readers.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, fmt.Errorf("a child failed: %w", err)
	}
	left, err := t.Remaining(ctx, table)
	if err != nil {
		return res, err
	}
	for i := range counts {
		if counts[i].Load() > 1 {
			res.twice += int64(counts[i].Load() - 1)
		}
	}
	res.logged = logged.Load()
	if left != 0 {
		return res, fmt.Errorf("%d rows left in %s after every row was handled", left, table)
	}
	if res.twice > 0 && res.logged == 0 {
		return res, fmt.Errorf("%d rows handled twice with no settlement failure logged", res.twice)
	}
	res.rate = float64(cfg.n-1) / time.Duration(last.Load()-first.Load()).Seconds()
	return res, nil
}

// parseReport reads a child's line: the row's seq and the Unix nanoseconds it was handled at.
func parseReport(line string) (seq int, at int64, ok bool) {
	a, b, found := strings.Cut(line, " ")
	if !found {
		return 0, 0, false
	}
	seq, err1 := strconv.Atoi(a)
	at, err2 := strconv.ParseInt(b, 10, 64)
	return seq, at, err1 == nil && err2 == nil
}

// child is a consumer process of the procs scenario: it opens its pool, says "ready", waits
// for "go" on stdin, and runs the consumer until stdin closes, writing to stdout a line for
// every row handled: its seq (read from the payload) and the Unix nanoseconds it was handled at.
func child(ctx context.Context, args []string, stdin io.Reader, stdout io.Writer) error {
	fs := flag.NewFlagSet("scale child", flag.ContinueOnError)
	db := fs.String("db", "", "database")
	dsn := fs.String("dsn", "", "DSN")
	form := fs.String("form", "", "form")
	table := fs.String("table", "", "bench table")
	workers := fs.Int("workers", 4, "workers")
	batch := fs.Int("batch", 1, "rows per claim")
	poll := fs.Duration("poll", 100*time.Millisecond, "PollInterval")
	if err := fs.Parse(args); err != nil {
		return err
	}
	t, err := harness.Open(ctx, *db, *dsn, *workers+2)
	if err != nil {
		return err
	}
	defer t.Close()
	w := bufio.NewWriter(stdout)
	in := bufio.NewReader(stdin)
	if _, err := w.WriteString("ready\n"); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if line, err := in.ReadString('\n'); err != nil || line != "go\n" {
		return fmt.Errorf("want go on stdin, got %q (%v)", line, err)
	}
	ctx, stop := context.WithCancel(ctx)
	go func() {
		io.Copy(io.Discard, in) // until the parent closes stdin
		stop()
	}()
	reports := make(chan [2]int64, 4096)
	written := make(chan error, 1)
	go func() {
		var err error
		for r := range reports {
			if err == nil {
				_, err = fmt.Fprintf(w, "%d %d\n", r[0], r[1])
			}
			if err == nil && len(reports) == 0 {
				err = w.Flush()
			}
		}
		if err == nil {
			err = w.Flush()
		}
		written <- err
	}()
	r, err := harness.Consumer{Form: *form, Table: *table, Workers: *workers, Batch: *batch, Poll: *poll,
		Handle: func(payload []byte) {
			reports <- [2]int64{int64(harness.Seq(payload)), time.Now().UnixNano()}
		}}.Build(t)
	if err != nil {
		return err
	}
	err = r.Run(ctx)
	close(reports)
	return errors.Join(err, <-written)
}
