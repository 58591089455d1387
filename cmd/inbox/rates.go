package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
)

const ratesHead = `Lists, sets or clears rate limits: at most N rows of queue -queue (of the kind -kind, where
given) claimed in any window of DURATION, across every consumer and process of the lease form,
from the commit. It needs the rates table (inbox schema -rates -apply creates it); the
consumers need it named in inbox.Table.Rates.

  inbox rates list                               # each rate, with the starts of its last interval
  inbox rates set -queue q -rate 100/1m          # the queue's
  inbox rates set -queue q -kind email -rate 5/1s
  inbox rates clear -queue q -kind email`

func ratesCommand(ctx context.Context, s *session, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprintf(s.stderr, "usage: inbox rates list|set|clear [flags]\n\n%s\n\n'inbox rates <list|set|clear> -h' lists the flags.\n", ratesHead)
		if len(args) == 0 {
			return usagef("name list, set or clear")
		}
		return flag.ErrHelp
	}
	sub, args := args[0], args[1:]
	fs := s.flags("rates "+sub, ratesHead)
	dsn := dsnFlag(fs, "none")
	tf := addTableFlags(fs)
	queue, kind, set := new(string), new(string), new(string)
	switch sub {
	case "list":
	case "set", "clear":
		queue = fs.String("queue", "", "the queue (empty, and left out, for a table without a queue column)")
		kind = fs.String("kind", "", "the kind whose rows the rate limits; empty: every row of the queue")
		if sub == "set" {
			set = fs.String("rate", "", "N/DURATION: at most N starts in any window of DURATION")
		}
	default:
		return usagef("rates %q: name list, set or clear", sub)
	}
	if err := s.parse(fs, args); err != nil {
		return err
	}
	var rate inbox.Rate
	if sub == "set" {
		var err error
		if rate, err = rateOf(*queue, *kind, *set); err != nil {
			return err
		}
	}
	access := writeFile
	if sub == "list" {
		access = readFile
	}
	o, err := s.operate(ctx, *dsn, tf, access)
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
	switch sub {
	case "set":
		if err := a.SetRate(ctx, rate); err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "%s: at most %d starts per %v\n", rateShown(*queue, *kind), rate.Starts, rate.Per)
		return nil
	case "clear":
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

// rateOf is the rate of queue and kind that -rate's N/DURATION gives.
func rateOf(queue, kind, set string) (inbox.Rate, error) {
	n, per, ok := strings.Cut(set, "/")
	starts, err := strconv.Atoi(n)
	d, derr := time.ParseDuration(per)
	if !ok || err != nil || derr != nil {
		return inbox.Rate{}, usagef("-rate %q: give N/DURATION, as 100/1m", set)
	}
	return inbox.Rate{Queue: queue, Kind: kind, Starts: starts, Per: d}, nil
}

// rateShown names the rate of queue and kind.
func rateShown(queue, kind string) string {
	if kind == "" {
		return "queue " + strconv.Quote(queue)
	}
	return "queue " + strconv.Quote(queue) + " kind " + strconv.Quote(kind)
}
