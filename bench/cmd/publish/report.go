package main

import (
	"fmt"
	"io"
	"slices"

	"github.com/sqlinbox/inbox/bench/harness"
)

// report prints the rates, each peer's and raw publish's paired ratio to ours (ours / this:
// above 1, ours is faster), the latencies with the paired ratio of each to ours (this / ours:
// above 1, ours is faster), and what ours' calls sent, where counted.
func report(w io.Writer, cfg *config, results []*result) {
	fmt.Fprintf(w, "\n| database | calls × rows | publisher | rows/s median (min–max) | ours, bench table / this | ours, job table / this |\n|---|--:|---|--:|--:|--:|\n")
	for _, r := range results {
		if r.shape == latencyShape {
			continue
		}
		bench, job := ratios(results, r, func(o, r *result) float64 { return harness.PairedRatio(o.rates, r.rates) })
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", harness.Label(r.db), r.shape, r.name, harness.Spread(r.rates), bench, job)
	}
	if cfg.singles > 0 {
		fmt.Fprintf(w, "\n%d single-row publishes in sequence per round; milliseconds, median of the rounds' percentiles (min–max)\n", cfg.singles)
		fmt.Fprintf(w, "\n| database | publisher | p50 ms | p99 ms | p50: this / ours, bench table | p50: this / ours, job table |\n|---|---|--:|--:|--:|--:|\n")
		for _, r := range results {
			if r.shape != latencyShape {
				continue
			}
			bench, job := ratios(results, r, func(o, r *result) float64 { return harness.PairedRatio(r.p50, o.p50) })
			fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", harness.Label(r.db), r.name, msSpread(r.p50), msSpread(r.p99), bench, job)
		}
	}
	for _, r := range results {
		if r.trips != "" {
			fmt.Fprintf(w, "\n%s, %s, %s: %s", harness.Label(r.db), r.name, r.shape, r.trips)
		}
	}
	fmt.Fprintln(w)
}

// ratios are ratio of ours on the bench table and ours on the job table against r, on r's
// database and shape, formatted; "–" for ours' own rows.
func ratios(results []*result, r *result, ratio func(ours, r *result) float64) (bench, job string) {
	if r.role == oursRole {
		return "–", "–"
	}
	out := []string{"–", "–"}
	ours := 0
	for _, o := range results {
		if o.role == oursRole && o.db == r.db && o.shape == r.shape {
			if v := ratio(o, r); v > 0 && ours < 2 {
				out[ours] = fmt.Sprintf("%.2f", v)
			}
			ours++
		}
	}
	return out[0], out[1]
}

// msSpread formats milliseconds as "median (min–max)".
func msSpread(v []float64) string {
	if len(v) == 0 {
		return "–"
	}
	return fmt.Sprintf("%.3f (%.3f–%.3f)", harness.Median(v), slices.Min(v), slices.Max(v))
}
