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

const ratesHead = `Lists, sets or clears rate limits: at most N rows of queue -queue (of the kind -kind, or of
the limit key -key, where given) claimed in any window of DURATION, across every consumer and
process of the lease form, from the commit. A row must pass every rate that matches it: its
queue's, its kind's and its key's. It needs the rates table (inbox schema -rates -apply creates
it; a rate per key needs the limit key column too, -limit-key); the consumers need it named in
inbox.Table.Rates.

  inbox rates list                               # each rate, with the starts of its last interval
  inbox rates set -queue q -rate 100/1m          # the queue's
  inbox rates set -queue q -kind email -rate 5/1s
  inbox rates set -queue q -key tenant-42 -rate 10/1m
  inbox rates clear -queue q -kind email`

// rateFlags are the flags of inbox rates set and clear: the rate's queue, kind or key, and
// set's N/DURATION.
type rateFlags struct {
	queue, kind, key, rate *string
}

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
	rf, err := addRateFlags(fs, sub)
	if err != nil {
		return err
	}
	if err := s.parse(fs, args); err != nil {
		return err
	}
	var rate inbox.Rate
	if sub != "list" {
		if rate, err = rateOf(*rf.queue, *rf.kind, *rf.key, *rf.rate); err != nil {
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
	return runRates(ctx, s, a, sub, rate)
}

// addRateFlags adds to fs the flags of inbox rates sub: none for list, the rate's queue, kind
// and key for clear, and -rate too for set.
func addRateFlags(fs *flag.FlagSet, sub string) (rateFlags, error) {
	rf := rateFlags{new(string), new(string), new(string), new(string)}
	switch sub {
	case "list":
	case "set", "clear":
		rf.queue = fs.String("queue", "", "the queue (empty, and left out, for a table without a queue column)")
		rf.kind = fs.String("kind", "", "the kind whose rows the rate limits (none: the queue's, or -key's)")
		rf.key = fs.String("key", "", "the limit key whose rows the rate limits (the limit_key column, or -limit-key; none: the queue's, or -kind's)")
		if sub == "set" {
			rf.rate = fs.String("rate", "", "N/DURATION: at most N starts in any window of DURATION")
		}
	default:
		return rf, usagef("rates %q: name list, set or clear", sub)
	}
	return rf, nil
}

// runRates runs inbox rates sub (list, set or clear) on a: set and clear on rate.
func runRates(ctx context.Context, s *session, a *admin.Admin, sub string, rate inbox.Rate) error {
	switch sub {
	case "set":
		if err := a.SetRate(ctx, rate); err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "%s: at most %d starts per %v\n", rateShown(rate), rate.Starts, rate.Per)
		return nil
	case "clear":
		if err := a.ClearRate(ctx, rate.Queue, rate.Scope, rate.Key); err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "%s: no rate\n", rateShown(rate))
		return nil
	}
	rates, err := a.Rates(ctx)
	if err != nil {
		return err
	}
	for _, r := range rates {
		fmt.Fprintf(s.stdout, "%s\t%d per %v\t%d in the last %v\n", rateShown(r), r.Starts, r.Per, r.Recent, r.Per)
	}
	return nil
}

// rateOf is the rate -queue, -kind and -key name (the queue's where neither -kind nor -key is
// given; limitOf's words), with the starts and interval -rate's N/DURATION gives, where it is
// given (set).
func rateOf(queue, kind, key, set string) (inbox.Rate, error) {
	l, err := limitOf(queue, kind, key)
	if err != nil {
		return inbox.Rate{}, usagef("-kind and -key: a rate counts the rows of one kind or of one key; give one")
	}
	r := inbox.Rate{Queue: l.Queue, Scope: l.Scope, Key: l.Key}
	if set == "" {
		return r, nil
	}
	n, per, ok := strings.Cut(set, "/")
	starts, err := strconv.Atoi(n)
	d, derr := time.ParseDuration(per)
	if !ok || err != nil || derr != nil {
		return inbox.Rate{}, usagef("-rate %q: give N/DURATION, as 100/1m", set)
	}
	r.Starts, r.Per = starts, d
	return r, nil
}

// rateShown names r's rows: its queue, with its kind or key.
func rateShown(r inbox.Rate) string {
	shown := "queue " + strconv.Quote(r.Queue)
	switch r.Scope {
	case inbox.LimitPerKind:
		shown += " kind " + strconv.Quote(r.Key)
	case inbox.LimitPerKey:
		shown += " key " + strconv.Quote(r.Key)
	}
	return shown
}
