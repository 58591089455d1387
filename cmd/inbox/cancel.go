package main

import (
	"context"
	"fmt"

	"github.com/sqlinbox/inbox"
)

const cancelHead = `Cancels the rows of -ids (inbox.Cancel), in one transaction: a queued row at once (stamped
cancelled_at, never claimed after), a row in work through its consumer, which cancels its
handler within its poll (Config.CancelPoll) and settles it as cancelled. It never waits for a
row a consumer holds. A processed, dead or cancelled row is left as it is, and said so; the
command then exits with 1. -requeue puts cancelled rows back in the queue instead
(admin.RequeueCancelled). The table needs a cancelled_at column (-cancelled-at), and a row in
work the table inbox_cancels (inbox schema -cancels).`

func cancelCommand(ctx context.Context, s *session, args []string) error {
	fs := s.flags("cancel", cancelHead)
	dsn := dsnFlag(fs, "none")
	requeue := fs.Bool("requeue", false, "put the cancelled rows of -ids back in the queue instead")
	sel := &selectionFlags{queue: new(string), ids: fs.String("ids", "", "the rows of these ids, comma-separated"), all: new(bool), required: true}
	tf := addTableFlags(fs)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if *sel.ids == "" {
		return usagef("no rows selected: give -ids")
	}
	selection, ids, err := sel.selection()
	if err != nil {
		return err
	}
	o, err := s.operate(ctx, *dsn, tf, writeFile)
	if err != nil {
		return err
	}
	defer o.db.Close()
	if o.table.CancelledAt == "" {
		return fmt.Errorf("table %s has no cancelled_at column: add one (a nullable timestamp), or name yours with -cancelled-at", *tf.name)
	}
	if *requeue {
		n, err := o.admin.RequeueCancelled(ctx, selection)
		if err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "requeued %d of %d rows (the others were not cancelled)\n", n, len(ids))
		return nil
	}
	results, err := o.admin.Cancel(ctx, ids...)
	if err != nil {
		return err
	}
	left := 0
	for _, r := range results {
		note := ""
		switch r.Outcome {
		case inbox.CancelRequested:
			note = ": in work; its consumer cancels its handler and settles it as cancelled"
		case inbox.Cancelled:
		default:
			left++
		}
		fmt.Fprintf(s.stdout, "row %d: %s%s\n", r.ID, r.Outcome, note)
	}
	if left > 0 {
		return fmt.Errorf("%d of %d rows were not cancelled (settled before, or not found)", left, len(results))
	}
	return nil
}
