package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"

	"github.com/sqlinbox/inbox"
)

const pauseHead = `Pauses the queue -queue: from the commit, no claim of any consumer, in any process, takes a
row of it; the rows in work finish and settle, publishing goes on, and the other queues run.
A queue no row names yet may be paused. It needs the table of paused queues (inbox schema
-pauses -apply creates it); the consumers need it named in inbox.Table.Pauses. inbox resume
undoes it; inbox stats marks a paused queue.`

const resumeHead = `Resumes the queue -queue, which inbox pause paused: claims take its rows again from the
commit (consumers in other processes at their next poll, or at once where they listen for
the table's notifications and the table notifies).`

func pauseCommand(ctx context.Context, s *session, args []string) error {
	return pauseOrResume(ctx, s, args, "pause", pauseHead)
}

func resumeCommand(ctx context.Context, s *session, args []string) error {
	return pauseOrResume(ctx, s, args, "resume", resumeHead)
}

// pauseOrResume runs the command name, pause or resume, on the queue its flags name.
func pauseOrResume(ctx context.Context, s *session, args []string, name, head string) error {
	fs := s.flags(name, head)
	dsn := dsnFlag(fs, "none")
	queue := fs.String("queue", "", "the queue (empty, and left out, for a table without a queue column)")
	tf := addTableFlags(fs)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "queue" })
	o, err := s.operate(ctx, *dsn, tf, writeFile)
	if err != nil {
		return err
	}
	defer o.db.Close()
	switch {
	case o.table.Pauses == "":
		return fmt.Errorf("the database has no table of paused queues (%s): create it with inbox schema -pauses -apply", inbox.PausesTable)
	case o.table.Queue != "" && !given:
		return usagef("give the queue with -queue (-queue= for the queue named by the empty string)")
	case o.table.Queue == "" && *queue != "":
		return usagef("-queue %q: table %s has no queue column, so it is one queue: leave -queue out", *queue, o.table.Name)
	}
	shown := "queue " + strconv.Quote(*queue) + " of table " + o.table.Name
	if o.table.Queue == "" {
		shown = "table " + o.table.Name
	}
	if name == "pause" {
		if err := o.admin.Pause(ctx, *queue); err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "%s is paused: no claim takes its rows until inbox resume; the rows in work finish\n", shown)
		return nil
	}
	if err := o.admin.Resume(ctx, *queue); err != nil {
		return err
	}
	fmt.Fprintf(s.stdout, "%s is resumed\n", shown)
	return nil
}
