package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/bench/harness"
	"github.com/sqlinbox/inbox/lease"
)

// claimBlock is how many claims a block of -claims times in a row with one form.
const claimBlock = 100

// claimCell is the claim alone on one database: µs a claim in each block, without and with the
// kind filter.
type claimCell struct {
	db           string
	plain, kinds []float64
}

// runClaims times the lease form's claim of one row by itself, with and without the filter of
// -kinds kinds, on each database: less noisy than a drain, whose rounds carry the settlements
// and the consumer's start.
func runClaims(ctx context.Context, cfg *config) error {
	var cells []*claimCell
	err := harness.EachTarget(ctx, os.Stdout, cfg.dbs, cfg.dsns, 4, func(t *harness.Target) error {
		c := &claimCell{db: t.Name}
		cells = append(cells, c)
		return timeClaims(ctx, t, c, "inbox_bench_kinds_claims_"+t.Name, cfg)
	})
	if err != nil {
		return err
	}
	fmt.Printf("\nOne lease claim of 1 row, with the filter of %d kinds and without: %d blocks of %d claims each, µs a claim, median (min–max) of the blocks\n\n", cfg.kinds, cfg.claims, claimBlock)
	fmt.Println("| database | no kind filter | kind filter (" + fmt.Sprint(cfg.kinds) + " kinds) | with/without (paired) | claim cost |")
	fmt.Println("|---|--:|--:|--:|--:|")
	for _, c := range cells {
		r := harness.PairedRatio(c.kinds, c.plain)
		fmt.Printf("| %s | %s | %s | %.3f | %+.1f%% |\n", harness.Label(c.db), harness.Spread(c.plain), harness.Spread(c.kinds), r, (r-1)*100)
	}
	return nil
}

// timeClaims prefills table with rows spread over the kinds and opens two lease forms over it,
// one claiming the kinds (inbox.Binding.Kinds, as a consumer of inbox.Kinds opens it) and one
// every row; they take turns at blocks of claims, which of them first alternating, and each
// claimed row is deleted after its claim, untimed, so that every claim finds its row first.
func timeClaims(ctx context.Context, t *harness.Target, c *claimCell, table string, cfg *config) error {
	if err := t.CreateKindTable(ctx, table); err != nil {
		return err
	}
	if err := t.Prefill(ctx, table, 2*cfg.claims*claimBlock); err != nil {
		return err
	}
	if err := t.SetKinds(ctx, table, cfg.kinds); err != nil {
		return err
	}
	tbl := harness.Table(table)
	tbl.Kind = harness.KindColumn
	var kinds []inbox.ClaimedKind
	for i := range cfg.kinds {
		kinds = append(kinds, inbox.ClaimedKind{Kind: fmt.Sprintf("kind_%d", i)})
	}
	slices.SortFunc(kinds, func(a, b inbox.ClaimedKind) int { return cmp.Compare(a.Kind, b.Kind) })
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var forms [2]inbox.Form
	for i, k := range [][]inbox.ClaimedKind{nil, kinds} {
		forms[i] = lease.New(t.D, tbl, &lease.Config{Lease: time.Hour})
		if _, err := forms[i].Open(ctx, t.DB, inbox.Binding{Logger: logger, Kinds: k}); err != nil {
			return err
		}
		defer forms[i].Close()
	}
	q, err := t.D.Quote(table)
	if err != nil {
		return err
	}
	del := "DELETE FROM " + q + " WHERE id = " + t.D.Placeholder(1)
	block := func(f inbox.Form) (float64, error) {
		var spent time.Duration
		for range claimBlock {
			start := time.Now()
			ds, err := f.Claim(ctx, 1)
			spent += time.Since(start)
			if err != nil || len(ds) != 1 {
				return 0, fmt.Errorf("%s: a claim returned %d rows: %v", c.db, len(ds), err)
			}
			if _, err := t.DB.ExecContext(ctx, del, ds[0].ID); err != nil {
				return 0, err
			}
		}
		return float64(spent.Microseconds()) / claimBlock, nil
	}
	for b := range cfg.claims {
		order := []int{0, 1}
		if b%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			us, err := block(forms[i])
			if err != nil {
				return err
			}
			if i == 0 {
				c.plain = append(c.plain, us)
			} else {
				c.kinds = append(c.kinds, us)
			}
		}
	}
	return nil
}
