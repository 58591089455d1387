package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
)

const limitsHead = `Lists, sets or clears the table's concurrency limits: at most -max rows of queue -queue in work
at once, across every consumer and process of the lease form; of all of them, of the kind
-kind, or of the limit key -key (the limit_key column, or -limit-key). A limit takes effect at
each consumer's next claim; lowering one lets the rows in work finish, and no claim takes
another until fewer than the new -max are in work. It needs the limits' tables (inbox schema
-limits -apply creates them); the consumers need them named in inbox.Table.Limits.

  inbox limits list                           # each limit, with its rows in work now
  inbox limits set -queue q -max 5            # the queue's
  inbox limits set -queue q -kind email -max 2
  inbox limits clear -queue q -key tenant-42`

func limitsCommand(ctx context.Context, s *session, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprintf(s.stderr, "usage: inbox limits list|set|clear [flags]\n\n%s\n\n'inbox limits <list|set|clear> -h' lists the flags.\n", limitsHead)
		if len(args) == 0 {
			return usagef("name list, set or clear")
		}
		return flag.ErrHelp
	}
	sub, args := args[0], args[1:]
	fs := s.flags("limits "+sub, limitsHead)
	dsn := dsnFlag(fs, "none")
	tf := addTableFlags(fs)
	var queue, kind, key *string
	var max *int
	asJSON := new(bool)
	switch sub {
	case "list":
		asJSON = fs.Bool("json", false, "print each limit as a line of JSON")
	case "set", "clear":
		queue = fs.String("queue", "", "the queue (empty, and left out, for a table without a queue column)")
		kind = fs.String("kind", "", "the kind whose rows the limit counts (none: the queue's, or -key's)")
		key = fs.String("key", "", "the limit key whose rows the limit counts (none: the queue's, or -kind's)")
		if sub == "set" {
			max = fs.Int("max", 0, "the most rows in work at once: 1 or more")
		}
	default:
		return usagef("limits %q: name list, set or clear", sub)
	}
	if err := s.parse(fs, args); err != nil {
		return err
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
	t.Limits = inbox.LimitsTable
	c, err := inbox.NewClient[dialect.Dialect](o.db, o.d, t)
	if err != nil {
		return err
	}
	if sub == "list" {
		return listLimits(ctx, s, c, t, *asJSON)
	}
	l, err := limitOf(*queue, *kind, *key)
	if err != nil {
		return err
	}
	shown := describeLimit(t, l)
	if sub == "clear" {
		if err := c.ClearLimit(ctx, l.Queue, l.Scope, l.Key); err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "%s: no limit\n", shown)
		return nil
	}
	if *max < 1 {
		return usagef("-max %d: give 1 or more (to stop the queue, inbox pause it)", *max)
	}
	l.Max = *max
	if err := c.SetLimit(ctx, l); err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "%s: at most %d in work at once\n", shown, l.Max)
	return nil
}

// limitOf is the limit -queue, -kind and -key name: the queue's, where neither -kind nor -key
// is given.
func limitOf(queue, kind, key string) (inbox.Limit, error) {
	switch {
	case kind != "" && key != "":
		return inbox.Limit{}, usagef("-kind and -key: a limit counts the rows of one kind or of one key; give one")
	case kind != "":
		return inbox.Limit{Queue: queue, Scope: inbox.LimitPerKind, Key: kind}, nil
	case key != "":
		return inbox.Limit{Queue: queue, Scope: inbox.LimitPerKey, Key: key}, nil
	}
	return inbox.Limit{Queue: queue, Scope: inbox.LimitPerQueue}, nil
}

// describeLimit names l's rows: "queue "q" of table t", with the kind or key.
func describeLimit(t inbox.Table, l inbox.Limit) string {
	shown := "queue " + strconv.Quote(l.Queue) + " of table " + t.Name
	if t.Queue == "" {
		shown = "table " + t.Name
	}
	switch l.Scope {
	case inbox.LimitPerKind:
		shown += ", kind " + strconv.Quote(l.Key)
	case inbox.LimitPerKey:
		shown += ", key " + strconv.Quote(l.Key)
	}
	return shown
}

// listLimits prints the table's limits: a line each, or a line of JSON each.
func listLimits(ctx context.Context, s *session, c *inbox.Client[dialect.Dialect], t inbox.Table, asJSON bool) error {
	list, err := c.Limits(ctx)
	if errors.Is(err, inbox.ErrSchema) {
		return fmt.Errorf("%w (inbox schema -limits -apply creates the limits' tables)", err)
	}
	if err != nil {
		return err
	}
	if asJSON {
		for _, l := range list {
			b, _ := json.Marshal(l)
			fmt.Fprintf(s.stdout, "%s\n", b)
		}
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintf(s.stdout, "table %s has no limit\n", t.Name)
		return nil
	}
	w := tabwriter.NewWriter(s.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "QUEUE\tSCOPE\tKEY\tMAX\tIN WORK")
	for _, l := range list {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\n", l.Queue, l.Scope, l.Key, l.Max, l.InWork)
	}
	return w.Flush()
}
