package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/dialect"
)

const schemaHead = `Prints the statements that create the table the flags describe, with the claim index the
README recommends: for the database of -dsn (or $INBOX_DSN), or else of -db. -apply runs them
on that database. -check compares the table there with the description instead, column by
column (missing, or of a type that does not fit its role) and the claim index, prints the
statement that fixes each problem, and exits with 1 when there is one. -schedules adds the
ticks table that periodic jobs (inbox.Periodic) need, to the print and to -apply; -retention
the sweeper leases' table (inbox_sweeps) that inbox.Retention needs, once per database; -pauses
the table of paused queues (inbox_pauses) that inbox pause and inbox.Table.Pauses need, once
per database; -rates the table of rate limits (inbox_rates) that inbox rates and
inbox.Table.Rates need, once per database; -cancels the cancel requests' table (inbox_cancels)
that a table with a cancelled_at column needs, once per database. -unique-key adds the unique key column
(unique_key, or -unique-key=NAME) and its
UNIQUE index, which unique jobs (Message.UniqueKey) need; -group-key the FIFO group column
(group_key, or -group-key=NAME), its index and the group holds' table (inbox_groups, once per
database), which FIFO groups (Message.GroupKey, the lease form) need; -limit-key the limit key
column (limit_key, or -limit-key=NAME) that limits per key (Message.LimitKey) need; -limits the
limits' tables (inbox_limits and inbox_slots, once per database) that inbox limits and
inbox.Table.Limits (the lease form) need.`

func schemaCommand(ctx context.Context, s *session, args []string) error {
	fs := s.flags("schema", schemaHead)
	dsn := dsnFlag(fs, "none (then -db)")
	db := fs.String("db", "", "the database to print for without connecting: postgres, mysql, mariadb or sqlite")
	apply := fs.Bool("apply", false, "create the table on the database")
	check := fs.Bool("check", false, "check the table on the database against the description")
	asJSON := fs.Bool("json", false, "with -check, print the check as JSON")
	schedules := fs.Bool("schedules", false, "add the ticks table of the table's periodic jobs (<table>_ticks)")
	retention := fs.Bool("retention", false, "add the table of the sweeper leases (inbox_sweeps) that inbox.Retention needs, once per database")
	pauses := fs.Bool("pauses", false, "add the table of paused queues (inbox_pauses) that inbox pause needs, once per database")
	rates := fs.Bool("rates", false, "add the table of rate limits (inbox_rates) that inbox rates and inbox.Table.Rates need, once per database")
	cancels := fs.Bool("cancels", false, "add the table of cancel requests (inbox_cancels) that a table with a cancelled_at column needs, once per database")
	limits := fs.Bool("limits", false, "add the limits' tables (inbox_limits, inbox_slots) that inbox limits and inbox.Table.Limits need, once per database")
	tf := addTableFlags(fs)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if *apply && *check {
		return usagef("-apply and -check: give one")
	}
	if *schedules && *check {
		return usagef("-schedules and -check: inbox schedules reads the ticks table")
	}
	t, ok, err := s.target(*dsn)
	if err != nil {
		return err
	}
	switch {
	case ok && *db != "":
		return usagef("-db and a DSN: the DSN names the database")
	case !ok && (*apply || *check):
		return usagef("no database: give -dsn, or set $INBOX_DSN")
	case !ok && *db == "":
		return usagef("no database: give -dsn (or set $INBOX_DSN), or -db to print for one")
	}
	switch {
	case *check:
		o, err := s.operateOn(ctx, t, tf, readFile, tf.described)
		if err != nil {
			return err
		}
		defer o.db.Close()
		return printCheck(ctx, s, o, *asJSON)
	case *apply:
		return applySchema(ctx, s, t, tf, sideTables{*schedules, *retention, *pauses, *cancels, *limits, *rates})
	}
	// Printing needs no connection: the DSN's scheme names the database.
	var d dialect.Dialect = t.dialect
	if !ok {
		if d, err = dialectNamed(*db); err != nil {
			return err
		}
	}
	stmts, err := schemaStatements(d, tf.table(), sideTables{*schedules, *retention, *pauses, *cancels, *limits, *rates})
	if err != nil {
		return usagef("%v", err)
	}
	fmt.Fprint(s.stdout, statements(stmts))
	return nil
}

// sideTables are the tables schema adds beside the job table: its ticks table, the sweeper
// leases' table, the table of paused queues, the table of cancel requests, the limits' tables,
// the rates' table.
type sideTables struct{ schedules, retention, pauses, cancels, limits, rates bool }

// schemaStatements are the statements that create table t on d, and those of the side tables
// side asks for (the shared ones where they are not there).
func schemaStatements(d dialect.Dialect, t inbox.Table, side sideTables) ([]string, error) {
	stmts, err := admin.Schema(d, t)
	if err != nil {
		return nil, err
	}
	if side.schedules {
		ticks, err := inbox.TicksSchema(d, t)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, ticks)
	}
	if side.retention {
		stmts = append(stmts, admin.RetentionSchema(d)...)
	}
	if side.cancels {
		stmts = append(stmts, admin.CancelSchema(d)...)
	}
	if side.pauses {
		t.Pauses = inbox.PausesTable
		pauses, err := admin.PausesSchema(d, t)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, pauses...)
	}
	if side.limits {
		t.Limits = inbox.LimitsTable
		limits, err := inbox.LimitsSchema(d, t)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, limits...)
	}
	if side.rates {
		t.Rates = inbox.RatesTable
		rates, err := admin.RatesSchema(d, t)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, rates...)
	}
	return stmts, nil
}

// applySchema creates the described table on t's database, with the side tables side asks for
// (schemaStatements), and prints the statements it ran.
func applySchema(ctx context.Context, s *session, t target, tf *tableFlags, side sideTables) error {
	o, err := s.operateOn(ctx, t, tf, createFile, tf.described)
	if err != nil {
		return err
	}
	defer o.db.Close()
	stmts, err := schemaStatements(o.d, o.table, side)
	if err != nil {
		return err
	}
	for _, st := range stmts {
		if _, err := o.db.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("creating table %s in %s: %s: %w", *tf.name, t.shown, st, err)
		}
	}
	fmt.Fprintf(s.stdout, "created table %s in %s:\n%s", *tf.name, t.shown, statements(stmts))
	return nil
}

// statements writes statements as a script: each ends with a semicolon and a line break.
func statements(stmts []string) string { return strings.Join(stmts, ";\n") + ";\n" }

// printCheck prints the check of o's table, and fails when the table is missing (printing, as
// text, the statements that create it) or does not match its description.
func printCheck(ctx context.Context, s *session, o *operated, asJSON bool) error {
	c, err := o.admin.Check(ctx)
	if err != nil {
		return err
	}
	if asJSON {
		b, _ := json.MarshalIndent(c, "", "  ")
		fmt.Fprintf(s.stdout, "%s\n", b)
	}
	if !c.Found {
		if asJSON {
			return fmt.Errorf("table %q does not exist in %s: inbox schema prints the statements that create it, and -apply runs them", c.Table, o.shown)
		}
		stmts, err := o.admin.Schema()
		if err != nil {
			return err
		}
		fmt.Fprintf(s.stdout, "table %s does not exist in %s; these statements create it (inbox schema -apply runs them):\n%s", c.Table, o.shown, statements(stmts))
		return fmt.Errorf("table %q does not exist in %s: create it with the statements above", c.Table, o.shown)
	}
	if !asJSON {
		printColumns(s, c)
	}
	if c.OK() {
		return nil
	}
	if asJSON {
		return fmt.Errorf("table %q does not match its description: the JSON above gives each problem's fix", c.Table)
	}
	return fmt.Errorf("table %q does not match its description: each WRONG line above ends with its fix", c.Table)
}

// printColumns prints a check of a table that exists: a line per column, and the claim index.
func printColumns(s *session, c admin.Check) {
	for _, col := range c.Columns {
		mark := "ok   "
		if !col.OK() {
			mark = "WRONG"
		}
		fmt.Fprintf(s.stdout, "%s %s\n", mark, col)
	}
	switch {
	case len(c.Index.Columns) == 0:
		fmt.Fprintf(s.stdout, "ok    claim index: none needed, the claim orders by id\n")
	case c.Index.OK():
		fmt.Fprintf(s.stdout, "ok    claim index (%s): %s\n", strings.Join(c.Index.Columns, ", "), c.Index.Found)
	case c.Index.LacksKind != "":
		fmt.Fprintf(s.stdout, "WRONG claim index (%s): %s lacks the kind column, which a consumer of kinds claims by: %s\n", strings.Join(c.Index.Columns, ", "), c.Index.LacksKind, c.Index.Fix)
	default:
		fmt.Fprintf(s.stdout, "WRONG claim index (%s) is missing: %s\n", strings.Join(c.Index.Columns, ", "), c.Index.Fix)
	}
}

const statsHead = `Prints, per queue, the table's rows by state: due now, delayed (retry_after ahead), in work
(held by a lease; "unknown" without a lease column: the row lock and advisory forms hold rows
by locks, and their rows in work count as due), retrying (due or delayed after a delivery),
dead, processed, and how long the longest-waiting due row has been due ("unknown" when a due
row was never delayed: the table keeps no publishing time). With -kind-column, each queue's
rows are counted per kind of job too, a line per kind under the queue's (with -json, under
"kinds"): rows of a kind that no consumer runs wait there, due, their oldest due growing. One
statement, which reads the whole table. With -watch it prints again and again: on a terminal in place, into a file or a
pipe one snapshot after the other, a blank line apart.`

func statsCommand(ctx context.Context, s *session, args []string) error {
	fs := s.flags("stats", statsHead)
	dsn := dsnFlag(fs, "none")
	watch := fs.Duration("watch", 0, "print again every this long until interrupted (0: once)")
	asJSON := fs.Bool("json", false, "print each count as a line of JSON (unknown counts are null; oldest_due_seconds in seconds)")
	tf := addTableFlags(fs)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if *watch < 0 {
		return usagef("-watch %v: give 0 or more", *watch)
	}
	o, err := s.operate(ctx, *dsn, tf, readFile)
	if err != nil {
		return err
	}
	defer o.db.Close()
	for snapshot := 0; ; snapshot++ {
		stats, err := o.admin.Stats(ctx)
		if err != nil {
			if *watch > 0 && ctx.Err() != nil {
				return nil
			}
			return err
		}
		switch {
		case *asJSON:
			printStatsJSON(s, stats)
		case *watch == 0:
			printStats(s, stats, o.table.CancelledAt != "")
		default:
			head := fmt.Sprintf("table %s, %s (every %v)\n", *tf.name, time.Now().Format(time.DateTime), *watch)
			if s.terminal {
				head = "\x1b[H\x1b[2J" + head + "\n" // home and clear: print in place
			} else if snapshot > 0 {
				head = "\n" + head
			}
			fmt.Fprint(s.stdout, head)
			printStats(s, stats, o.table.CancelledAt != "")
		}
		if *watch == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(*watch):
		}
	}
}

// shown is a count as the table prints it.
func shown(n int64) string {
	if n == admin.Unknown {
		return "unknown"
	}
	return strconv.FormatInt(n, 10)
}

// printStats prints a line per queue, and where the table has a kind column a column kind and
// a line per kind of each queue under the queue's line, whose kind reads "(all)"; where it has a
// cancelled_at column (cancelled), a column of the cancelled rows after the processed ones.
func printStats(s *session, stats []admin.Stats, cancelled bool) {
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	byKind := slices.ContainsFunc(stats, func(st admin.Stats) bool { return st.Kinds != nil })
	kind := func(k string) string {
		if !byKind {
			return ""
		}
		return k + "\t"
	}
	cancelledCol, cancelledOf := "", func(admin.Stats) string { return "" }
	if cancelled {
		cancelledCol = "cancelled\t"
		cancelledOf = func(st admin.Stats) string { return strconv.FormatInt(st.Cancelled, 10) + "\t" }
	}
	fmt.Fprintln(w, "queue\t"+kind("kind")+"due\tdelayed\tin work\tretrying\tdead\tprocessed\t"+cancelledCol+"oldest due\t")
	line := func(queue, kind string, st admin.Stats) {
		oldest := "-"
		switch {
		case st.OldestDue == admin.Unknown:
			oldest = "unknown"
		case st.Due > 0:
			oldest = st.OldestDue.Round(time.Second).String()
		}
		fmt.Fprintf(w, "%s\t%s%d\t%d\t%s\t%s\t%d\t%d\t%s%s\t\n", queue, kind, st.Due, st.Delayed, shown(st.InWork), shown(st.Retrying), st.Dead, st.Processed, cancelledOf(st), oldest)
	}
	for _, st := range stats {
		queue := st.Queue
		if queue == "" {
			queue = `""`
		}
		if st.Paused {
			queue += " (paused)"
		}
		line(queue, kind("(all)"), st)
		for _, k := range st.Kinds {
			name := k.Kind
			if name == "" {
				name = "(none)"
			}
			line(queue, kind(name), k)
		}
	}
	w.Flush()
	fmt.Fprint(s.stdout, b.String())
	if len(stats) == 0 {
		fmt.Fprintln(s.stdout, "(no rows)")
	}
}

// jsonStats is a queue's counts as -json prints them, named as admin.Stats's JSON names them,
// and the time of the count: an unknown count is null.
type jsonStats struct {
	Queue     string   `json:"queue"`
	Paused    bool     `json:"paused,omitempty"` // on a queue's line only
	Due       int64    `json:"due"`
	Delayed   int64    `json:"delayed"`
	InWork    *int64   `json:"in_work"`
	Retrying  *int64   `json:"retrying"`
	Dead      int64    `json:"dead"`
	Processed int64    `json:"processed"`
	Cancelled int64    `json:"cancelled"`
	OldestDue *float64 `json:"oldest_due_seconds"`
	// Kind and Kinds are as admin.Stats's: a queue's counts per kind of job, where the table
	// has a kind column (-kind-column).
	Kind  string      `json:"kind,omitempty"`
	Kinds []jsonStats `json:"kinds,omitempty"`
	At    string      `json:"at,omitempty"` // on a queue's line only
}

func printStatsJSON(s *session, stats []admin.Stats) {
	at := time.Now().UTC().Format(time.RFC3339)
	for _, st := range stats {
		j := toJSONStats(st)
		j.At = at
		b, _ := json.Marshal(j)
		fmt.Fprintf(s.stdout, "%s\n", b)
	}
}

// toJSONStats is st as -json prints it, its kinds' counts with it.
func toJSONStats(st admin.Stats) jsonStats {
	known := func(n int64) *int64 {
		if n == admin.Unknown {
			return nil
		}
		return &n
	}
	j := jsonStats{Queue: st.Queue, Paused: st.Paused, Kind: st.Kind, Due: st.Due, Delayed: st.Delayed, InWork: known(st.InWork), Retrying: known(st.Retrying), Dead: st.Dead, Processed: st.Processed, Cancelled: st.Cancelled}
	if st.OldestDue != admin.Unknown {
		secs := st.OldestDue.Seconds()
		j.OldestDue = &secs
	}
	for _, k := range st.Kinds {
		j.Kinds = append(j.Kinds, toJSONStats(k))
	}
	return j
}

const deadHead = `Lists, requeues or purges the table's dead rows (DeadAt set):

  inbox dead list [-queue q] [-limit 50] [-after cursor] [-json]
      newest first; a full page ends with the -after that prints the next (with -json, each
      row carries its cursor: the last row's is the next page's -after)
  inbox dead requeue (-ids 1,2,3 | -queue q | -all) [-json]
      back in the queue, due at once, attempt reset to 0 (the last error is kept)
  inbox dead purge (-ids 1,2,3 | -queue q | -all) [-dry-run] [-json]
      deleted; -dry-run says what would be, and deletes nothing

With -ids, requeue and purge say which ids they took and which they skipped, and why: not dead,
or not found.`

func deadCommand(ctx context.Context, s *session, args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprintf(s.stderr, "usage: inbox dead list|requeue|purge [flags]\n\n%s\n\n'inbox dead <list|requeue|purge> -h' lists the flags.\n", deadHead)
		if len(args) == 0 {
			return usagef("name list, requeue or purge")
		}
		return flag.ErrHelp
	}
	sub, args := args[0], args[1:]
	fs := s.flags("dead "+sub, deadHead)
	dsn := dsnFlag(fs, "none")
	sel := addSelectionFlags(fs, sub != "list")
	tf := addTableFlags(fs)
	var limit *int
	after, dryRun := new(string), new(bool)
	switch sub {
	case "list":
		limit = fs.Int("limit", 50, "the most rows to list")
		after = fs.String("after", "", "list the rows after this cursor, as the previous page printed it")
	case "purge":
		dryRun = fs.Bool("dry-run", false, "say what would be purged, and purge nothing")
	case "requeue":
	default:
		return usagef("dead %q: name list, requeue or purge", sub)
	}
	asJSON := fs.Bool("json", false, "print as JSON: list, a line per row; requeue and purge, what they did")
	if err := s.parse(fs, args); err != nil {
		return err
	}
	selection, ids, err := sel.selection()
	if err != nil {
		return err
	}
	if sub == "list" {
		return deadList(ctx, s, *dsn, tf, selection, *after, *limit, *asJSON)
	}
	a := writeFile
	if *dryRun {
		a = readFile
	}
	o, err := s.operate(ctx, *dsn, tf, a)
	if err != nil {
		return err
	}
	defer o.db.Close()
	var c change
	switch {
	case *dryRun:
		c, err = o.deadToPurge(ctx, selection, ids)
	case sub == "purge":
		c, err = o.changeDead(ctx, o.admin.PurgeDead, selection, ids)
	default:
		c, err = o.changeDead(ctx, o.admin.Requeue, selection, ids)
	}
	if err != nil {
		return err
	}
	verb, note := "purged", ""
	switch {
	case *dryRun:
		verb = "would purge"
	case sub == "requeue":
		verb, note = "requeued", " (attempts reset to 0)"
	}
	c.print(s, *asJSON, fmt.Sprintf("%s %d dead rows of %s%s", verb, c.Rows, selection, note), verb, note)
	return nil
}

// deadList prints a page of dead rows, newest first.
func deadList(ctx context.Context, s *session, dsn string, tf *tableFlags, selection admin.Selection, after string, limit int, asJSON bool) error {
	var cursor admin.Cursor
	if after != "" {
		var err error
		if cursor, err = admin.ParseCursor(after); err != nil {
			return usagef("-after: %v", err)
		}
	}
	if limit <= 0 {
		return usagef("-limit %d: give 1 or more", limit)
	}
	o, err := s.operate(ctx, dsn, tf, readFile)
	if err != nil {
		return err
	}
	defer o.db.Close()
	rows, err := o.admin.Dead(ctx, selection, cursor, limit)
	if err != nil {
		return err
	}
	if asJSON {
		for _, r := range rows {
			b, _ := json.Marshal(deadJSON{r, r.Cursor().String()})
			fmt.Fprintf(s.stdout, "%s\n", b)
		}
		return nil
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "id\tqueue\tattempt\tdead at\tlast error")
	for _, r := range rows {
		fmt.Fprintf(w, "%d\t%s\t%d\t%s\t%s\n", r.ID, r.Queue, r.Attempt, r.DeadAt.Format("2006-01-02 15:04:05.000000Z"), oneLine(r.LastError))
	}
	w.Flush()
	fmt.Fprint(s.stdout, b.String())
	if len(rows) == limit {
		fmt.Fprintf(s.stdout, "next page: -after %s\n", rows[len(rows)-1].Cursor())
	}
	return nil
}

// deadJSON is a dead row as dead list -json prints it: with its cursor, which as -after lists
// the rows after it.
type deadJSON struct {
	admin.DeadRow
	Cursor string `json:"cursor"`
}

// oneLine is an error's text on one line, cut at 120 characters.
func oneLine(text string) string {
	text = strings.Join(strings.Fields(text), " ")
	if r := []rune(text); len(r) > 120 {
		return string(r[:119]) + "…"
	}
	return text
}

const purgeHead = `Deletes the processed rows (ProcessedAt set) processed longer ago than -processed-before,
of every queue or of -queue, a thousand rows a statement. -dry-run counts them instead, and
deletes nothing.`

func purgeCommand(ctx context.Context, s *session, args []string) error {
	fs := s.flags("purge", purgeHead)
	dsn := dsnFlag(fs, "none")
	before := fs.String("processed-before", "", "the age past which a processed row is deleted: 7d, 36h, 90m (required)")
	dryRun := fs.Bool("dry-run", false, "say how many rows would be purged, and purge nothing")
	asJSON := fs.Bool("json", false, "print what it did as JSON")
	sel := addSelectionFlags(fs, false)
	tf := addTableFlags(fs)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	if *before == "" {
		return usagef("-processed-before: give the age past which processed rows go (7d, say)")
	}
	age, err := parseAge(*before)
	if err != nil {
		return usagef("-processed-before %q: %v", *before, err)
	}
	selection, _, err := sel.selection()
	if err != nil {
		return err
	}
	a := writeFile
	if *dryRun {
		a = readFile
	}
	o, err := s.operate(ctx, *dsn, tf, a)
	if err != nil {
		return err
	}
	defer o.db.Close()
	c := change{DryRun: *dryRun}
	at := time.Now().Add(-age)
	if *dryRun {
		c.Rows, err = o.countProcessed(ctx, sel, at)
	} else {
		c.Rows, err = o.admin.PurgeProcessed(ctx, selection, age)
	}
	if err != nil {
		return err
	}
	verb := "purged"
	if *dryRun {
		verb = "would purge"
	}
	c.print(s, *asJSON, fmt.Sprintf("%s %d rows of %s processed before %s", verb, c.Rows, selection, at.UTC().Format(time.RFC3339)), verb, "")
	return nil
}

// parseAge reads a duration as time.ParseDuration does, and also in days: 7d.
func parseAge(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseFloat(days, 64)
		if err != nil || n < 0 {
			return 0, errors.New("write a number of days (7d) or a duration (36h, 90m)")
		}
		return time.Duration(n * float64(24*time.Hour)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, errors.New("write a number of days (7d) or a duration (36h, 90m)")
	}
	return d, nil
}

// selectionFlags are -queue, and for the commands that change dead rows -ids and -all, which
// select the rows a command takes: exactly one where required, otherwise every queue unless
// -queue.
type selectionFlags struct {
	queue    *string
	queueSet bool
	ids      *string
	all      *bool
	required bool
}

func addSelectionFlags(fs *flag.FlagSet, changes bool) *selectionFlags {
	f := &selectionFlags{queue: new(string), ids: new(string), all: new(bool), required: changes}
	fs.Func("queue", "the rows of this queue (its queue column's value) only", func(v string) error {
		*f.queue, f.queueSet = v, true
		return nil
	})
	if changes {
		f.ids = fs.String("ids", "", "the rows of these ids, comma-separated")
		f.all = fs.Bool("all", false, "every dead row, of every queue")
	}
	return f
}

// selection returns the rows the flags select, and with -ids the ids, each once, in the order
// given.
func (f *selectionFlags) selection() (admin.Selection, []int64, error) {
	given := 0
	for _, set := range []bool{f.queueSet, *f.ids != "", *f.all} {
		if set {
			given++
		}
	}
	switch {
	case given > 1:
		return admin.Selection{}, nil, usagef("-ids, -queue and -all: give one")
	case given == 0 && f.required:
		return admin.Selection{}, nil, usagef("no rows selected: give -ids, -queue or -all")
	case f.queueSet:
		return admin.Queue(*f.queue), nil, nil
	case *f.ids != "":
		var ids []int64
		for _, field := range strings.Split(*f.ids, ",") {
			id, err := strconv.ParseInt(strings.TrimSpace(field), 10, 64)
			if err != nil {
				return admin.Selection{}, nil, usagef("-ids %q: write ids as 1,2,3", *f.ids)
			}
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		return admin.IDs(ids...), ids, nil
	}
	return admin.All(), nil, nil
}
