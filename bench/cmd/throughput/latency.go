package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
)

// runLatency publishes rows one at a time at cfg.latencyRate per second for cfg.latencyFor into
// each cell's table while a consumer drains it, and reports enqueue-to-handler latency: from
// just before the publishing call to the handler's start. Two ways per cell: published through
// the library (inbox.Enqueue), which wakes the consumer in this process at once (PollInterval
// left at its 1 s default), and inserted by plain SQL, which the consumer finds by polling every
// 100 ms.
func runLatency(ctx context.Context, targets []*harness.Target, cfg *config) error {
	fmt.Fprintln(cfg.out, "| database | form | publish | p50 | p99 | max | rows |")
	fmt.Fprintln(cfg.out, "|---|---|---|--:|--:|--:|--:|")
	for _, t := range targets {
		t.SetPool(cfg.latencyWorkers + 2)
		for _, form := range onlyOn(t.Name, cfg.forms) {
			for _, wake := range []bool{true, false} {
				lat, err := latencyCell(ctx, t, form, cfg, wake)
				if err != nil {
					return fmt.Errorf("latency, %s %s: %w", t.Name, form, err)
				}
				how := "inbox.Enqueue (wake)"
				if !wake {
					how = "plain INSERT (poll 100ms)"
				}
				fmt.Fprintf(cfg.out, "| %s | %s | %s | %s | %s | %s | %d |\n", harness.Label(t.Name), form, how,
					ms(quantile(lat, 0.50)), ms(quantile(lat, 0.99)), ms(slices.Max(lat)), len(lat))
			}
		}
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

// quantile is the q-quantile of sorted-on-demand samples (nearest rank).
func quantile(v []time.Duration, q float64) time.Duration {
	s := slices.Clone(v)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func latencyCell(ctx context.Context, t *harness.Target, form string, cfg *config, wake bool) ([]time.Duration, error) {
	table := benchTable(t, form)
	if err := t.Prefill(ctx, table, 0); err != nil {
		return nil, err
	}
	var (
		mu   sync.Mutex
		lats []time.Duration
		seen atomic.Int64
	)
	poll := time.Duration(0) // the default, 1 s: a publish wakes the consumer
	if !wake {
		poll = 100 * time.Millisecond
	}
	c, err := harness.Consumer{Form: form, Table: table, Workers: cfg.latencyWorkers, Batch: 1, Poll: poll,
		Handle: func(payload []byte) {
			now := time.Now()
			sent, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimPrefix(payload, []byte(`{"sent":`)), []byte("}"))), 10, 64)
			if err == nil {
				mu.Lock()
				lats = append(lats, now.Sub(time.Unix(0, sent)))
				mu.Unlock()
			}
			seen.Add(1)
		}}.Build(t)
	if err != nil {
		return nil, err
	}
	run := harness.Start(ctx, c)
	defer run.Stop()
	time.Sleep(200 * time.Millisecond) // let the consumer open and go idle

	q, err := t.D.Quote(table)
	if err != nil {
		return nil, err
	}
	insert := "INSERT INTO " + q + " (payload) VALUES (" + t.D.Placeholder(1) + ")"
	interval := time.Second / time.Duration(cfg.latencyRate)
	total := int(cfg.latencyFor / interval)
	next := time.Now()
	for range total {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		payload := []byte(`{"sent":` + strconv.FormatInt(time.Now().UnixNano(), 10) + `}`)
		if wake {
			err = harness.Enqueue(ctx, t, table, payload)
		} else {
			_, err = t.DB.ExecContext(ctx, insert, payload)
		}
		if err != nil {
			return nil, fmt.Errorf("publishing: %w", err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for seen.Load() < int64(total) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := run.Stop(); err != nil {
		return nil, err
	}
	if seen.Load() < int64(total) {
		return nil, fmt.Errorf("%d of %d published rows reached a handler within 10 s of the last publish", seen.Load(), total)
	}
	return lats, nil
}

// runMemory drains cfg.memoryN rows with the lease form and 4 workers and reports the process's
// peak resident set (VmHWM), reset after the prefill so that it measures the drain alone, and
// the resident set sampled as the drain goes, to show whether it stays flat.
func runMemory(ctx context.Context, cfg *config, tmp string) error {
	const workers = 4
	t, err := harness.Open(ctx, cfg.memoryDB, harness.DSN(cfg.dsns, cfg.memoryDB, tmp, "memory.db"), workers+2)
	if err != nil {
		return err
	}
	defer t.Close()
	table := benchTable(t, "memory")
	if err := t.CreateTable(ctx, table); err != nil {
		return err
	}
	fmt.Fprintf(cfg.out, "\nMemory: %d rows, lease form on %s, %d workers\n", cfg.memoryN, harness.Label(t.Name), workers)
	start := time.Now()
	if err := t.Prefill(ctx, table, cfg.memoryN); err != nil {
		return err
	}
	fmt.Fprintf(cfg.out, "prefilled in %s\n", time.Since(start).Round(time.Millisecond))
	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
	before := procStatus("VmRSS")

	var handled atomic.Int64
	all := make(chan struct{})
	want := int64(cfg.memoryN)
	c, err := harness.Consumer{Form: "lease", Table: table, Workers: workers, Batch: 1, Poll: cfg.poll,
		Handle: func([]byte) {
			if handled.Add(1) == want {
				close(all)
			}
		}}.Build(t)
	if err != nil {
		return err
	}
	start = time.Now()
	run := harness.Start(ctx, c)
	defer run.Stop()
	var samples []string
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	nextTenth := want / 10
loop:
	for {
		select {
		case <-all:
			break loop
		case <-run.Done():
			return fmt.Errorf("memory run: the consumer stopped: %v", run.Err())
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if done := handled.Load(); done >= nextTenth {
				samples = append(samples, fmt.Sprintf("%d%%: %s", done*100/want, procStatus("VmRSS")))
				nextTenth = (done/(want/10) + 1) * (want / 10)
			}
		}
	}
	if err := run.Stop(); err != nil {
		return err
	}
	elapsed := time.Since(start)
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	peak := procStatus("VmHWM")
	if resetPeakRSS != nil {
		peak += " (the peak could not be reset after the prefill, so it includes it: " + resetPeakRSS.Error() + ")"
	}
	fmt.Fprintf(cfg.out, "drained in %s (%.0f msgs/s)\n", elapsed.Round(time.Millisecond), float64(want)/elapsed.Seconds())
	fmt.Fprintf(cfg.out, "RSS before the drain %s; peak RSS during it (VmHWM) %s; Go heap in use at the end %.1f MiB\n", before, peak, float64(ms.HeapInuse)/(1<<20))
	fmt.Fprintf(cfg.out, "RSS as it drained: %s\n", strings.Join(samples, ", "))
	return t.CheckDrained(ctx, table, handled.Load(), want)
}

// procStatus reads one field of /proc/self/status ("VmRSS", "VmHWM"), as the kernel prints it.
func procStatus(field string) string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "?"
}
