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
a head that failed and retries later or died in work, paused, or free. It reads without locks.

inbox groups unblock|pause|resume -queue Q -group G changes one group (see -h of each).`

const groupUnblockHead = `Lets the group -group of -queue go on past its dead head: where consumers keep a group blocked
when its head dies (lease.Config.GroupsStayBlocked), the dead row holds its group until this,
a requeue of the row (inbox dead requeue -ids ID: it runs again) or its purge. The dead row
stays dead, to be inspected, requeued (it then runs before the group's later rows) or purged;
the group's next row runs at the next claim.`

const groupPauseHead = `Pauses the group -group of -queue: from the commit no claim of any consumer, in any process,
takes a row of it; its row in work finishes and settles, and the other groups run. A group no
row names yet may be paused. inbox groups resume undoes it.`

const groupResumeHead = `Resumes the group -group of -queue, which inbox groups pause paused: claims take its rows
again from the commit (consumers in other processes at their next poll).`

func groupsCommand(ctx context.Context, s *session, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "unblock":
			return groupChange(ctx, s, args[1:], "unblock", groupUnblockHead)
		case "pause":
			return groupChange(ctx, s, args[1:], "pause", groupPauseHead)
		case "resume":
			return groupChange(ctx, s, args[1:], "resume", groupResumeHead)
		}
	}
	fs := s.flags("groups", groupsHead)
	dsn := dsnFlag(fs, "none")
	tf := addTableFlags(fs)
	limit := fs.Int("limit", 100, "the most groups to list")
	blocked := fs.Bool("blocked", false, "list only the groups a failing or dead head blocks")
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
	case !g.PausedSince.IsZero():
		return "paused since " + shownTime(g.PausedSince) + " (inbox groups resume)"
	case g.DeadHead != 0:
		return fmt.Sprintf("blocked: its head %d died in work (inbox groups unblock, or inbox dead requeue -ids %d)", g.DeadHead, g.DeadHead)
	case g.Blocked(now):
		return fmt.Sprintf("blocked: its head failed %d times and retries at %s", g.HeadAttempt, shownTime(g.HeadRetryAt))
	}
	return "nothing: its head is next"
}

// groupChange runs the command inbox groups name (unblock, pause or resume) on the group its
// flags name.
func groupChange(ctx context.Context, s *session, args []string, name, head string) error {
	fs := s.flags("groups "+name, head)
	dsn := dsnFlag(fs, "none")
	queue := fs.String("queue", "", "the group's queue (left out for a table without a queue column)")
	group := fs.String("group", "", "the group's key")
	tf := addTableFlags(fs)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if *group == "" {
		return usagef("give the group's key with -group")
	}
	o, err := s.operate(ctx, *dsn, tf, writeFile)
	if err != nil {
		return err
	}
	defer o.db.Close()
	shown := fmt.Sprintf("group %q of queue %q of table %s", *group, *queue, o.table.Name)
	switch name {
	case "unblock":
		dead, err := o.admin.UnblockGroup(ctx, *queue, *group)
		switch {
		case err != nil:
			return err
		case dead == 0:
			fmt.Fprintf(s.stdout, "%s is not blocked by a dead head: nothing changed\n", shown)
		default:
			fmt.Fprintf(s.stdout, "%s goes on past its dead head %d, which stays dead (inbox dead requeue -ids %d runs it again)\n", shown, dead, dead)
		}
		return nil
	case "pause":
		if err := o.admin.PauseGroup(ctx, *queue, *group); err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "%s is paused: no claim takes its rows until inbox groups resume; its row in work finishes\n", shown)
		return nil
	}
	if err := o.admin.ResumeGroup(ctx, *queue, *group); err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "%s is resumed\n", shown)
	return nil
}
