package main

import (
	"context"
	"fmt"
	"time"
)

const rescheduleHead = `Moves one queued row (neither processed nor dead, held by no consumer) to run at -at, a time
as 2026-12-24T08:00:00Z, or -in a while from now (90m, 2d); a time not ahead of now makes it due
at once. It never waits for a row a consumer holds: it says the row is in work, settled or
missing, and changes nothing. The id goes before or after the flags; -key names the row by its
unique key instead (a table with a unique key column).`

func rescheduleCommand(ctx context.Context, s *session, args []string) error {
	fs := s.flags("reschedule", rescheduleHead)
	dsn := dsnFlag(fs, "none")
	tf := addTableFlags(fs)
	at := fs.String("at", "", "the row's run time, RFC 3339 (2026-12-24T08:00:00Z)")
	in := fs.String("in", "", "the row's run time as a while from now (90m, 36h, 2d)")
	key := fs.String("key", "", "the row's unique key, in place of its id")
	id, given, err := s.parseWithOptionalID(fs, args)
	switch {
	case err != nil:
		return err
	case given == (*key != ""):
		return usagef("name the row by its id or by -key, one of them: inbox reschedule 42 -in 2h")
	}
	runAt, err := runTimeFlags(*at, *in, time.Now())
	if err != nil {
		return err
	}
	o, err := s.operate(ctx, *dsn, tf, writeFile)
	if err != nil {
		return err
	}
	defer o.db.Close()
	if *key != "" {
		id, err = o.admin.RescheduleKey(ctx, *key, runAt)
	} else {
		err = o.admin.Reschedule(ctx, id, runAt)
	}
	if err != nil {
		return err
	}
	if runAt.After(time.Now()) {
		fmt.Fprintf(s.stdout, "row %d runs at %s\n", id, shownTime(runAt))
	} else {
		fmt.Fprintf(s.stdout, "row %d is due now\n", id)
	}
	return nil
}

// runTimeFlags is the time -at or -in gives, exactly one of them, -in counted from now.
func runTimeFlags(at, in string, now time.Time) (time.Time, error) {
	switch {
	case (at == "") == (in == ""):
		return time.Time{}, usagef("give the run time by -at or by -in, one of them")
	case in != "":
		d, err := parseAge(in)
		if err != nil {
			return time.Time{}, usagef("-in %q: %v", in, err)
		}
		return now.Add(d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return time.Time{}, usagef("-at %q: write the time as 2026-12-24T08:00:00Z (RFC 3339)", at)
	}
	return t, nil
}
