package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sqlinbox/inbox/admin"
)

// A change is what dead requeue, dead purge and purge did, or under -dry-run would do, as
// -json prints it.
type change struct {
	DryRun bool  `json:"dry_run"`
	Rows   int64 `json:"rows"` // the rows changed, or that would be
	// IDs and Skipped are null but for a selection by -ids: then IDs are the ids of the rows
	// changed, and Skipped the ids left alone, each with why, in the order given.
	IDs     []int64   `json:"ids"`
	Skipped []skipped `json:"skipped"`
}

// skipped is an id a change left alone.
type skipped struct {
	ID     int64  `json:"id"`
	Reason string `json:"reason"` // "not dead" or "not found"
}

// print prints c: as JSON, or as text, whole for a selection by queue or of every queue, and for
// one by ids, verb and note around the ids taken, then a line per id skipped.
func (c change) print(s *session, asJSON bool, whole, verb, note string) {
	if asJSON {
		b, _ := json.Marshal(c)
		fmt.Fprintf(s.stdout, "%s\n", b)
		return
	}
	var b strings.Builder
	dryRun := " (dry run: nothing was deleted)"
	if c.IDs == nil {
		b.WriteString(whole)
	} else {
		fmt.Fprintf(&b, "%s %d of the %d ids%s", verb, len(c.IDs), len(c.IDs)+len(c.Skipped), note)
		if len(c.IDs) > 0 {
			b.WriteString(": " + idList(c.IDs))
		}
		for _, x := range c.Skipped {
			fmt.Fprintf(&b, "\nskipped %d: %s", x.ID, x.Reason)
		}
		dryRun = "\n(dry run: nothing was deleted)"
	}
	if c.DryRun {
		b.WriteString(dryRun)
	}
	fmt.Fprintf(s.stdout, "%s\n", b.String())
}

// idList writes ids as -ids takes them: 1,2,3.
func idList(ids []int64) string {
	text := make([]string, len(ids))
	for i, id := range ids {
		text[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(text, ",")
}

// changeDead requeues or purges (do) the dead rows sel names. Given ids, it changes them one
// at a time, so as to know which it changed, and then tells why it skipped the others.
func (o *operated) changeDead(ctx context.Context, do func(context.Context, admin.Selection) (int64, error), sel admin.Selection, ids []int64) (change, error) {
	if ids == nil {
		n, err := do(ctx, sel)
		return change{Rows: n}, err
	}
	c := change{IDs: []int64{}}
	var left []int64
	for _, id := range ids {
		n, err := do(ctx, admin.IDs(id))
		if err != nil {
			if len(c.IDs) > 0 {
				err = fmt.Errorf("%w (ids %s were changed before this failure)", err, idList(c.IDs))
			}
			return c, err
		}
		if n == 0 {
			left = append(left, id)
			continue
		}
		c.Rows += n
		c.IDs = append(c.IDs, id)
	}
	var err error
	c.Skipped, err = o.whySkipped(ctx, left)
	return c, err
}

// deadToPurge is the change dead purge would make of sel, read without changing anything: the
// dead rows of sel, through the listing that dead list prints, which selects as the purge does.
func (o *operated) deadToPurge(ctx context.Context, sel admin.Selection, ids []int64) (change, error) {
	c := change{DryRun: true}
	var dead []int64 // with ids, the dead among them
	for after := (admin.Cursor{}); ; {
		page, err := o.admin.Dead(ctx, sel, after, pageRows)
		if err != nil {
			return c, err
		}
		c.Rows += int64(len(page))
		for _, r := range page {
			if ids != nil {
				dead = append(dead, r.ID)
			}
		}
		if len(page) < pageRows {
			break
		}
		after = page[len(page)-1].Cursor()
	}
	if ids == nil {
		return c, nil
	}
	c.IDs = []int64{}
	var left []int64
	for _, id := range ids {
		if slices.Contains(dead, id) {
			c.IDs = append(c.IDs, id)
		} else {
			left = append(left, id)
		}
	}
	var err error
	c.Skipped, err = o.whySkipped(ctx, left)
	return c, err
}

// pageRows is the most rows a statement of the command reads or names.
const pageRows = 1000

// whySkipped tells, of ids a change of dead rows left alone, which are of rows that are not
// dead and which are of no row.
func (o *operated) whySkipped(ctx context.Context, ids []int64) ([]skipped, error) {
	out := []skipped{}
	if len(ids) == 0 {
		return out, nil
	}
	q, err := o.table.Quote(o.d)
	if err != nil {
		return nil, err
	}
	found := map[int64]bool{}
	for chunk := range slices.Chunk(ids, pageRows) {
		marks := make([]string, len(chunk))
		args := make([]any, len(chunk))
		for i, id := range chunk {
			marks[i], args[i] = o.d.Placeholder(i+1), id
		}
		rows, err := o.db.QueryContext(ctx, "SELECT "+q.ID+" FROM "+q.Name+" WHERE "+q.ID+" IN ("+strings.Join(marks, ", ")+")", args...)
		if err != nil {
			return nil, fmt.Errorf("table %q: looking up the ids skipped: %w", o.table.Name, err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("table %q: looking up the ids skipped: %w", o.table.Name, err)
			}
			found[id] = true
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
	}
	for _, id := range ids {
		why := "not found"
		if found[id] {
			why = "not dead"
		}
		out = append(out, skipped{id, why})
	}
	return out, nil
}

// countProcessed counts the rows that purge would delete: those of the selection processed
// before at.
func (o *operated) countProcessed(ctx context.Context, sel *selectionFlags, at time.Time) (int64, error) {
	t := o.table
	switch {
	case t.ProcessedAt == "":
		return 0, fmt.Errorf("table %q: purge needs the ProcessedAt role, which the description lacks (-processed-at=): a table without it deletes its rows when they are processed", t.Name)
	case sel.queueSet && t.Queue == "":
		return 0, fmt.Errorf("table %q: purge of queue %q: the description has no Queue column (-queue-column=), so the table is one queue: leave -queue out", t.Name, *sel.queue)
	}
	q, err := t.Quote(o.d)
	if err != nil {
		return 0, err
	}
	query := "SELECT COUNT(*) FROM " + q.Name + " WHERE " + q.ProcessedAt + " < " + o.d.Placeholder(1)
	args := []any{o.d.Time(at)}
	if sel.queueSet {
		query += " AND " + q.Queue + " = " + o.d.Placeholder(2)
		args = append(args, *sel.queue)
	}
	var n int64
	if err := o.db.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("table %q: counting the processed rows: %w", t.Name, err)
	}
	return n, nil
}
