package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBenchTinySQLite runs the bench command end to end on an embedded SQLite file (no server):
// library and raw drains that must each empty the table with every row handled once (the drain
// checks fail the command otherwise), the latency runs, and the plot.
func TestBenchTinySQLite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	plot := filepath.Join(t.TempDir(), "bench.svg")
	err := bench(ctx, []string{"-db", "sqlite", "-n", "60", "-rounds", "1", "-workers", "1,3", "-batch", "1,4",
		"-latency-for", "100ms", "-latency-rate", "100", "-plot", plot})
	if err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(plot)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(svg), "<svg") || !strings.Contains(string(svg), "SQLite, lease") {
		t.Fatalf("the plot is not an SVG with the SQLite lease panel:\n%.300s", svg)
	}
}

func TestBenchFlags(t *testing.T) {
	cfg, err := parseBenchFlags([]string{"-workers", "8,1,4,4", "-db", "postgres,sqlite", "-dsn", "postgres=postgres://x/y"})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.workers; len(got) != 3 || got[0] != 1 || got[2] != 8 {
		t.Errorf("-workers 8,1,4,4 parsed as %v, want [1 4 8]", got)
	}
	if cfg.dsns["postgres"] != "postgres://x/y" {
		t.Errorf("-dsn postgres=… parsed as %q", cfg.dsns["postgres"])
	}
	for _, bad := range [][]string{{"-workers", "0"}, {"-db", "oracle"}, {"-forms", "queue"}, {"-dsn", "nothing"}, {"-memory-db", "mysql"}} {
		if _, err := parseBenchFlags(bad); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
}

func TestMedianAndThousands(t *testing.T) {
	if m := median([]float64{3, 1, 2}); m != 2 {
		t.Errorf("median of 3,1,2 = %v", m)
	}
	if m := median([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("median of 4,1,2,3 = %v", m)
	}
	for in, want := range map[float64]string{7: "7", 1234: "1,234", 1234567.4: "1,234,567", 100000: "100,000"} {
		if got := thousands(in); got != want {
			t.Errorf("thousands(%v) = %q, want %q", in, got, want)
		}
	}
}
