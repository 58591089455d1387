package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sqlinbox/inbox/admin"
)

const groupsHead = `Lists the table's FIFO groups that have rows pending (neither processed, dead nor cancelled),
by queue and group key (the group_key column, or -group-key): each group's head (the row it runs
next, or runs now), its pending rows, and what it waits for: held by the row in work, blocked by
a head that failed and retries later, or free. It reads without locks.`

func groupsCommand(ctx context.Context, s *session, args []string) error {
	fs := s.flags("groups", groupsHead)
	dsn := dsnFlag(fs, "none")
	tf := addTableFlags(fs)
	limit := fs.Int("limit", 100, "the most groups to list")
	blocked := fs.Bool("blocked", false, "list only the groups a failing head blocks")
	asJSON := fs.Bool("json", false, "print each group as a line of JSON")
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if *limit <= 0 {
		return usagef("-limit %d: give 1 or more", *limit)
	}
	o, err := s.operate(ctx, *dsn, tf, readFile)
	if err != nil {
		return err
	}
	defer o.db.Close()
	list, err := o.admin.Groups(ctx, *limit)
	if err != nil {
		return err
	}
	now := time.Now()
	if *blocked {
		var only []admin.Group
		for _, g := range list {
			if g.Blocked(now) {
				only = append(only, g)
			}
		}
		list = only
	}
	if *asJSON {
		for _, g := range list {
			b, _ := json.Marshal(g)
			fmt.Fprintf(s.stdout, "%s\n", b)
		}
		return nil
	}
	if len(list) == 0 {
		fmt.Fprintf(s.stdout, "no group of table %s has rows pending%s\n", *tf.name, map[bool]string{true: " and a blocked head", false: ""}[*blocked])
		return nil
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "queue\tgroup\thead\tpending\twaits for")
	for _, g := range list {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", g.Queue, g.Key, g.Head, g.Pending, waitsFor(g, now))
	}
	w.Flush()
	fmt.Fprint(s.stdout, b.String())
	return nil
}

// waitsFor says what group g waits for at now.
func waitsFor(g admin.Group, now time.Time) string {
	switch {
	case g.HeldBy != 0:
		return fmt.Sprintf("row %d, in work", g.HeldBy)
	case g.Blocked(now):
		return fmt.Sprintf("blocked: its head failed %d times and retries at %s", g.HeadAttempt, shownTime(g.HeadRetryAt))
	}
	return "nothing: its head is next"
}
