package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sqlinbox/inbox/admin"
)

const showHead = `Prints the row of one id, whole: its state, queue, attempts, times, headers, last error and
payload (pretty-printed where it is JSON, as text where it is other UTF-8 text, else as a hex
dump). The id goes before or after the flags: inbox show 42 -dsn …`

func showCommand(ctx context.Context, s *session, args []string) error {
	fs := s.flags("show", showHead)
	dsn := dsnFlag(fs, "none")
	tf := addTableFlags(fs)
	asJSON := fs.Bool("json", false, "print the row as one JSON object (the payload in base64)")
	id, err := s.parseWithID(fs, args)
	if err != nil {
		return err
	}
	o, err := s.operate(ctx, *dsn, tf, readFile)
	if err != nil {
		return err
	}
	defer o.db.Close()
	r, err := o.admin.Row(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "%s\n", b)
		return nil
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, f := range o.fields(r) {
		fmt.Fprintf(w, "%s\t%s\n", f.name, f.value)
	}
	w.Flush()
	fmt.Fprint(s.stdout, b.String())
	if o.table.Payload != "" {
		fmt.Fprint(s.stdout, shownPayload(r.Payload))
	}
	return nil
}

// parseWithID parses args into fs around the one row id the command takes, before the flags or
// after them.
func (s *session) parseWithID(fs *flag.FlagSet, args []string) (int64, error) {
	id, given, err := s.parseWithOptionalID(fs, args)
	if err == nil && !given {
		return 0, usagef("name the row's id: inbox %s 42", fs.Name())
	}
	return id, err
}

// parseWithOptionalID is parseWithID where the id may be left out (given false).
func (s *session) parseWithOptionalID(fs *flag.FlagSet, args []string) (id int64, given bool, err error) {
	var text string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		text, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false, err
		}
		return 0, false, errFlags
	}
	if text == "" && fs.NArg() > 0 {
		text = fs.Arg(0)
		fs.Parse(fs.Args()[1:]) // the flags after the id
	}
	if fs.NArg() > 0 {
		return 0, false, usagef("unexpected argument %q: name one row id", fs.Arg(0))
	}
	if text == "" {
		return 0, false, nil
	}
	id, err = strconv.ParseInt(text, 10, 64)
	if err != nil {
		return 0, false, usagef("%q is not a row id: write it as a number, 42", text)
	}
	return id, true, nil
}

// field is one line of show's output.
type field struct{ name, value string }

// fields are r's columns that the table has, in the order an operator reads them.
func (o *operated) fields(r admin.Row) []field {
	t := o.table
	out := []field{{"id", strconv.FormatInt(r.ID, 10)}, {"state", r.State.String()}}
	add := func(column, name, value string) {
		if column != "" {
			out = append(out, field{name, value})
		}
	}
	add(t.Queue, "queue", r.Queue)
	add(t.Kind, "kind", r.Kind)
	add(t.Attempt, "attempt", strconv.FormatInt(r.Attempt, 10))
	add(t.Priority, "priority", strconv.FormatInt(r.Priority, 10))
	add(t.CreatedAt, "created at", shownTime(r.CreatedAt))
	add(t.RetryAfter, "run at", shownTime(r.RetryAfter))
	add(t.LockedUntil, "lease until", shownTime(r.LockedUntil))
	add(t.ProcessedAt, "processed at", shownTime(r.ProcessedAt))
	add(t.DeadAt, "dead at", shownTime(r.DeadAt))
	add(t.CancelledAt, "cancelled at", shownTime(r.CancelledAt))
	add(t.Headers, "headers", cmp.Or(r.Headers, "-"))
	add(t.UniqueKey, "unique key", cmp.Or(r.UniqueKey, "-"))
	for _, c := range t.Columns {
		out = append(out, field{c, fmt.Sprint(r.Columns[c])})
	}
	add(t.LastError, "last error", cmp.Or(strings.ReplaceAll(r.LastError, "\n", "\n\t"), "-"))
	return out
}

// shownTime is a time as the output writes it, or "-" for none.
func shownTime(at time.Time) string {
	if at.IsZero() {
		return "-"
	}
	return at.UTC().Format("2006-01-02 15:04:05.000000Z")
}

// shownPayload is the payload as show writes it, after a line that says its size and how it is
// shown: JSON indented, other UTF-8 text as it is, anything else as a hex dump.
func shownPayload(p []byte) string {
	if p == nil {
		return "payload\tNULL\n"
	}
	var indented bytes.Buffer
	switch {
	case json.Valid(p) && json.Indent(&indented, p, "", "  ") == nil:
		return fmt.Sprintf("payload (%d bytes, JSON):\n%s\n", len(p), indented.String())
	case printable(p):
		return fmt.Sprintf("payload (%d bytes, text):\n%s\n", len(p), strings.TrimSuffix(string(p), "\n"))
	}
	return fmt.Sprintf("payload (%d bytes, hex):\n%s", len(p), hex.Dump(p))
}

// printable reports whether p is UTF-8 text with no control characters but line breaks and tabs,
// which a terminal shows as they are.
func printable(p []byte) bool {
	if !utf8.Valid(p) {
		return false
	}
	for _, r := range string(p) {
		if unicode.IsControl(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}

const rowsHead = `Lists the rows in one state (-state due, delayed, in-work, retrying, dead, processed,
cancelled or any), the highest id first, a page at a time, each with its queue (and kind),
attempt, the time of its state (publishing for due rows, run time for delayed ones, lease expiry
for rows in work, settlement for dead, processed and cancelled ones) and the start of its last
error. -before-id pages on.`

func rowsCommand(ctx context.Context, s *session, args []string) error {
	fs := s.flags("rows", rowsHead)
	dsn := dsnFlag(fs, "none")
	tf := addTableFlags(fs)
	stateName := fs.String("state", "due", "the rows' state: due, delayed, in-work, retrying, dead, processed, cancelled or any")
	queue := fs.String("queue", "", "the rows of this queue only")
	kind := fs.String("kind", "", "the rows of this kind of job only (a table with a kind column)")
	limit := fs.Int("limit", 50, "the most rows to list")
	before := fs.Int64("before-id", 0, "list the rows below this id, as the previous page printed it")
	asJSON := fs.Bool("json", false, "print a JSON object per row")
	if err := s.parse(fs, args); err != nil {
		return err
	}
	state, err := admin.ParseState(strings.ReplaceAll(*stateName, "-", " "))
	if err != nil {
		return usagef("-state: %v", err)
	}
	if *limit <= 0 {
		return usagef("-limit %d: give 1 or more", *limit)
	}
	f := admin.Filter{State: state}
	if *queue != "" {
		f.Queues = []string{*queue}
	}
	if *kind != "" {
		f.Kinds = []string{*kind}
	}
	if *before > 0 {
		f.ToID = *before - 1
	}
	o, err := s.operate(ctx, *dsn, tf, readFile)
	if err != nil {
		return err
	}
	defer o.db.Close()
	rows, err := o.admin.Rows(ctx, f, *limit)
	if err != nil {
		return err
	}
	if *asJSON {
		for _, r := range rows {
			b, _ := json.Marshal(r)
			fmt.Fprintf(s.stdout, "%s\n", b)
		}
		return nil
	}
	printRows(s, rows, o.table.Kind != "")
	if len(rows) == *limit {
		fmt.Fprintf(s.stdout, "next page: -before-id %d\n", rows[len(rows)-1].ID)
	}
	return nil
}

// printRows prints rows as a table, with their kind where the table has kinds.
func printRows(s *session, rows []admin.Row, kinds bool) {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	queue := func(r admin.Row) string { return r.Queue }
	if kinds {
		fmt.Fprintln(w, "id\tstate\tqueue\tkind\tattempt\tsince\tlast error")
		queue = func(r admin.Row) string { return r.Queue + "\t" + r.Kind }
	} else {
		fmt.Fprintln(w, "id\tstate\tqueue\tattempt\tsince\tlast error")
	}
	for _, r := range rows {
		fmt.Fprintf(w, "%d\t%s\t%s\t%d\t%s\t%s\n", r.ID, r.State, queue(r), r.Attempt, shownTime(stateTime(r)), oneLine(r.LastError))
	}
	w.Flush()
	fmt.Fprint(s.stdout, b.String())
}

// stateTime is the time r entered its state, or will leave it: its settlement for a dead,
// processed or cancelled row, its lease's expiry for a row in work, its run time for a delayed one, and its
// publishing (or, where it was retried, its last run time) for a due one.
func stateTime(r admin.Row) time.Time {
	switch r.State {
	case admin.Dead:
		return r.DeadAt
	case admin.Processed:
		return r.ProcessedAt
	case admin.Cancelled:
		return r.CancelledAt
	case admin.InWork:
		return r.LockedUntil
	case admin.Delayed:
		return r.RetryAfter
	}
	if !r.RetryAfter.IsZero() {
		return r.RetryAfter
	}
	return r.CreatedAt
}
