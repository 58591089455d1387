package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
)

const ratesHead = `Lists, sets or clears rate limits: with -set N/DURATION (e.g. -set 100/1m), at most N rows of
the queue -queue (of the kind -kind, where given) are claimed in any window of DURATION, across
every consumer and process of the lease form, from the commit; -clear removes the rate. Without
either it lists the table's rates with the starts of their last interval. It needs the rates
table (inbox schema -rates -apply creates it); the consumers need it named in inbox.Table.Rates.`

func ratesCommand(ctx context.Context, s *session, args []string) error {
	fs := s.flags("rates", ratesHead)
	dsn := dsnFlag(fs, "none")
	queue := fs.String("queue", "", "the queue (empty, and left out, for a table without a queue column)")
	kind := fs.String("kind", "", "the kind whose rows the rate limits; empty: every row of the queue")
	set := fs.String("set", "", "the rate to set: N/DURATION, at most N starts in any window of DURATION")
	clear := fs.Bool("clear", false, "remove the rate of -queue (and -kind)")
	tf := addTableFlags(fs)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if *set != "" && *clear {
		return usagef("-set and -clear: give one")
	}
	var rate inbox.Rate
	if *set != "" {
		n, per, ok := strings.Cut(*set, "/")
		starts, err := strconv.Atoi(n)
		d, derr := time.ParseDuration(per)
		if !ok || err != nil || derr != nil {
			return usagef("-set %q: give N/DURATION, as 100/1m", *set)
		}
		rate = inbox.Rate{Queue: *queue, Kind: *kind, Starts: starts, Per: d}
	}
	o, err := s.operate(ctx, *dsn, tf, writeFile)
	if err != nil {
		return err
	}
	defer o.db.Close()
	t := o.table
	t.Rates = inbox.RatesTable
	a, err := admin.New(o.db, o.d, t)
	if err != nil {
		return err
	}
	switch {
	case *set != "":
		if err := a.SetRate(ctx, rate); err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "%s: at most %d starts per %v\n", rateShown(*queue, *kind), rate.Starts, rate.Per)
		return nil
	case *clear:
		if err := a.ClearRate(ctx, *queue, *kind); err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "%s: no rate\n", rateShown(*queue, *kind))
		return nil
	}
	rates, err := a.Rates(ctx)
	if err != nil {
		return err
	}
	for _, r := range rates {
		fmt.Fprintf(s.stdout, "%s\t%d per %v\t%d in the last %v\n", rateShown(r.Queue, r.Kind), r.Starts, r.Per, r.Recent, r.Per)
	}
	return nil
}

// rateShown names the rate of queue and kind.
func rateShown(queue, kind string) string {
	if kind == "" {
		return "queue " + strconv.Quote(queue)
	}
	return "queue " + strconv.Quote(queue) + " kind " + strconv.Quote(kind)
}
