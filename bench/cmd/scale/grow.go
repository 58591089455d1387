package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox/bench/harness"
)

// marks are the points of the drain scenario's drain, in percent, where it reports the rate.
var marks = []int{1, 50, 99}

// runDrain drains cfg.drainN rows per form and batch size, and prints the rate over the whole
// drain and over the 1 % of its rows around each mark.
func runDrain(ctx context.Context, cfg *config, t *harness.Target, forms []string) error {
	const table = "scale_drain"
	if err := t.CreateTable(ctx, table); err != nil {
		return err
	}
	w := cfg.out
	n := cfg.drainN
	fmt.Fprintf(w, "A long drain, %s: %d rows, %d workers, %d rounds, msgs/s median (min–max); at p %%: over the %d rows around the p %%th\n\n",
		harness.Label(t.Name), n, cfg.workers, cfg.rounds, window(n))
	fmt.Fprintln(w, "| database | form | batch | whole drain | at 1 % | at 50 % | at 99 % | claim reads at 1, 50, 99 % |")
	fmt.Fprintln(w, "|---|---|--:|--:|--:|--:|--:|--:|")
	for _, form := range forms {
		for _, batch := range cfg.batches {
			var whole []float64
			at := make([][]float64, len(marks))
			reads := make([][]float64, len(marks))
			for round := 1; round <= cfg.rounds; round++ {
				if err := t.Prefill(ctx, table, n); err != nil {
					return err
				}
				m := newMarks(n, func() (int64, error) { return claimReads(ctx, t, table, "1 = 1") })
				r, err := harness.DrainLibrary(ctx, t, harness.Consumer{Form: form, Table: table, Workers: cfg.workers,
					Batch: batch, Poll: cfg.poll, Handle: func([]byte) { m.handled() }}, int64(n))
				m.wg.Wait()
				if err == nil {
					err = errors.Join(m.readErr...)
				}
				if err != nil {
					return fmt.Errorf("%s, batch %d: %w", form, batch, err)
				}
				whole = append(whole, r.Rate)
				for i := range marks {
					at[i] = append(at[i], m.rate(i))
					reads[i] = append(reads[i], float64(m.reads[i]))
				}
				progress("%s drain %s batch %d, round %d: %.0f msgs/s; at %v %%: %.0f, %.0f, %.0f; claim reads %v",
					t.Name, form, batch, round, r.Rate, marks, m.rate(0), m.rate(1), m.rate(2), m.reads)
			}
			fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s, %s, %s |\n", harness.Label(t.Name), form, batch,
				harness.Spread(whole), harness.Spread(at[0]), harness.Spread(at[1]), harness.Spread(at[2]),
				readsCell(reads[0]), readsCell(reads[1]), readsCell(reads[2]))
		}
	}
	fmt.Fprintln(w)
	return nil
}

// window is the rows each mark's rate is taken over: 1 % of the drain, at least 2.
func window(n int) int { return max(2, n/100) }

// drainMarks times the rows handled around each mark: mark i's window runs from row lo[i] to
// row hi[i] (in the order handled).
type drainMarks struct {
	count  atomic.Int64
	lo, hi []int64
	from   []atomic.Int64 // Unix nanoseconds when row lo[i] was handled
	to     []atomic.Int64
	// reads are claimReads at each mark, counted beside the drain when its window is half
	// through (read once every measuring goroutine is done: wg).
	reads   []int64
	readErr []error
	wg      sync.WaitGroup
	measure func() (int64, error)
}

func newMarks(n int, measure func() (int64, error)) *drainMarks {
	m := &drainMarks{from: make([]atomic.Int64, len(marks)), to: make([]atomic.Int64, len(marks)),
		reads: make([]int64, len(marks)), readErr: make([]error, len(marks)), measure: measure}
	half := int64(window(n) / 2)
	for _, p := range marks {
		center := int64(n) * int64(p) / 100
		m.lo = append(m.lo, max(1, center-half))
		m.hi = append(m.hi, min(int64(n), center+half))
	}
	return m
}

func (m *drainMarks) handled() {
	k := m.count.Add(1)
	for i := range m.lo {
		if k == m.lo[i] {
			m.from[i].Store(time.Now().UnixNano())
		}
		if k == (m.lo[i]+m.hi[i])/2 {
			m.wg.Go(func() { m.reads[i], m.readErr[i] = m.measure() })
		}
		if k == m.hi[i] {
			m.to[i].Store(time.Now().UnixNano())
		}
	}
}

// rate is mark i's rows per second; 0 when its window took no measurable time.
func (m *drainMarks) rate(i int) float64 {
	d := time.Duration(m.to[i].Load() - m.from[i].Load())
	if d <= 0 {
		return 0
	}
	return float64(m.hi[i]-m.lo[i]) / d.Seconds()
}

// runHistory drains cfg.historyRows rows from a table that keeps its processed rows, first with
// no processed row beside them, then beside cfg.historyN processed rows.
func runHistory(ctx context.Context, cfg *config, t *harness.Target, forms []string) error {
	const table = "scale_history"
	if err := createTable(ctx, t, table, true); err != nil {
		return err
	}
	m := cfg.historyRows
	emptyRun := func(form string, batch int) (drained, error) {
		if err := t.Empty(ctx, table); err != nil {
			return drained{}, err
		}
		return fillAndDrain(ctx, cfg, t, harness.Consumer{Form: form, Table: table, Batch: batch, History: true}, rows{from: 1, to: m})
	}
	next := cfg.historyN + 1
	fullRun := func(form string, batch int) (drained, error) {
		r := rows{from: next, to: next + m - 1}
		next += m
		return fillAndDrain(ctx, cfg, t, harness.Consumer{Form: form, Table: table, Batch: batch, History: true}, r)
	}
	fill := func() error {
		if err := t.Empty(ctx, table); err != nil {
			return err
		}
		progress("%s: inserting %d processed rows", t.Name, cfg.historyN)
		start := time.Now()
		if err := insertRows(ctx, t, table, rows{from: 1, to: cfg.historyN, processed: true}); err != nil {
			return err
		}
		progress("%s: %d processed rows in %s", t.Name, cfg.historyN, time.Since(start).Round(time.Second))
		return nil
	}
	return compare(ctx, cfg, t, forms, compared{
		title: fmt.Sprintf("A table that keeps its processed rows, %s: %d rows drained a round, %d workers, %d rounds, msgs/s median (min–max)",
			harness.Label(t.Name), m, cfg.workers, cfg.rounds),
		before: "no processed row", after: fmt.Sprintf("beside %s processed rows", harness.Thousands(float64(cfg.historyN))),
		runBefore: emptyRun, between: fill, runAfter: fullRun,
	})
}

// runQueues drains one queue's cfg.historyRows rows from a table holding that queue alone, and
// then holding cfg.queues-1 other queues of cfg.queueRows rows each beside it.
func runQueues(ctx context.Context, cfg *config, t *harness.Target, forms []string) error {
	const table, queue = "scale_queues", "drained"
	if err := createTable(ctx, t, table, false); err != nil {
		return err
	}
	m := cfg.historyRows
	drain := func(form string, batch int) (drained, error) {
		return fillAndDrain(ctx, cfg, t, harness.Consumer{Form: form, Table: table, Batch: batch, Queue: queue}, rows{from: 1, to: m, queue: queue})
	}
	others := (cfg.queues - 1) * cfg.queueRows
	fill := func() error {
		if err := t.Empty(ctx, table); err != nil {
			return err
		}
		progress("%s: inserting %d rows in %d queues", t.Name, others, cfg.queues-1)
		return insertRows(ctx, t, table, rows{from: 1, to: others, spread: cfg.queues - 1})
	}
	return compare(ctx, cfg, t, forms, compared{
		title: fmt.Sprintf("One queue among many, %s: %d rows of one queue drained a round, %d workers, %d rounds, msgs/s median (min–max)",
			harness.Label(t.Name), m, cfg.workers, cfg.rounds),
		before: "the queue alone", after: fmt.Sprintf("among %d queues (%s rows)", cfg.queues, harness.Thousands(float64(others+m))),
		runBefore: func(form string, batch int) (drained, error) {
			if err := t.Empty(ctx, table); err != nil {
				return drained{}, err
			}
			return drain(form, batch)
		},
		between: fill, runAfter: drain,
	})
}

// compared is a scenario that measures every form and batch size before and after a change of
// the table (between), and prints both and their ratio.
type compared struct {
	title, before, after string
	runBefore, runAfter  func(form string, batch int) (drained, error)
	between              func() error
}

func compare(ctx context.Context, cfg *config, t *harness.Target, forms []string, c compared) error {
	type cell struct {
		form                    string
		batch                   int
		before, after           []float64
		readsBefore, readsAfter []float64
	}
	var cells []*cell
	for _, form := range forms {
		for _, batch := range cfg.batches {
			cells = append(cells, &cell{form: form, batch: batch})
		}
	}
	measure := func(run func(string, int) (drained, error), which string, after bool) error {
		for round := 1; round <= cfg.rounds; round++ {
			for _, cl := range cells {
				r, err := run(cl.form, cl.batch)
				if err != nil {
					return fmt.Errorf("%s, batch %d, %s: %w", cl.form, cl.batch, which, err)
				}
				if after {
					cl.after, cl.readsAfter = append(cl.after, r.rate), append(cl.readsAfter, float64(r.reads))
				} else {
					cl.before, cl.readsBefore = append(cl.before, r.rate), append(cl.readsBefore, float64(r.reads))
				}
				progress("%s %s batch %d, %s, round %d: %.0f msgs/s, claim reads %d", t.Name, cl.form, cl.batch, which, round, r.rate, r.reads)
			}
		}
		return nil
	}
	if err := measure(c.runBefore, c.before, false); err != nil {
		return err
	}
	if err := c.between(); err != nil {
		return err
	}
	if err := measure(c.runAfter, c.after, true); err != nil {
		return err
	}
	w := cfg.out
	fmt.Fprintf(w, "%s\n\n| database | form | batch | %s | %s | after/before | claim reads, before and after |\n|---|---|--:|--:|--:|--:|--:|\n", c.title, c.before, c.after)
	for _, cl := range cells {
		ratio := "–"
		if b := harness.Median(cl.before); b > 0 {
			ratio = fmt.Sprintf("%.2f", harness.Median(cl.after)/b)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s, %s |\n", harness.Label(t.Name), cl.form, cl.batch, harness.Spread(cl.before), harness.Spread(cl.after), ratio,
			readsCell(cl.readsBefore), readsCell(cl.readsAfter))
	}
	fmt.Fprintln(w)
	return nil
}

// drained is one drain of the history or queues scenario: its rate, and the claim reads
// (claimReads) before it.
type drained struct {
	rate  float64
	reads int64
}

// fillAndDrain inserts rows r, analyzes the table, counts a claim's reads and drains the rows
// through consumer c.
func fillAndDrain(ctx context.Context, cfg *config, t *harness.Target, c harness.Consumer, r rows) (drained, error) {
	var d drained
	if err := insertRows(ctx, t, c.Table, r); err != nil {
		return d, err
	}
	if err := t.Analyze(ctx, c.Table); err != nil {
		return d, err
	}
	where := "1 = 1"
	switch {
	case c.History:
		where = harness.HistoryColumn + " IS NULL"
	case c.Queue != "":
		where = harness.QueueColumn + " = '" + c.Queue + "'"
	}
	var err error
	if d.reads, err = claimReads(ctx, t, c.Table, where); err != nil {
		return d, err
	}
	c.Workers, c.Poll = cfg.workers, cfg.poll
	l, err := harness.DrainLibrary(ctx, t, c, int64(r.to-r.from+1))
	d.rate = l.Rate
	return d, err
}

// createTable drops and creates a table of the bench table's columns (harness.Table) and, with
// history, harness.HistoryColumn, or else harness.QueueColumn, each with the claim index the
// README advises for it.
func createTable(ctx context.Context, t *harness.Target, name string, history bool) error {
	q, err := t.D.Quote(name)
	if err != nil {
		return err
	}
	idx, err := t.D.Quote(name + "_claim")
	if err != nil {
		return err
	}
	var columns, index string
	if t.Name == "mysql" || t.Name == "mariadb" {
		columns = "id BIGINT AUTO_INCREMENT PRIMARY KEY, payload LONGBLOB, attempt INT NOT NULL DEFAULT 0, locked_until DATETIME(6) NULL"
		if history {
			columns += ", processed_at DATETIME(6) NULL, INDEX " + idx + " (processed_at, id)"
		} else {
			columns += ", queue VARCHAR(191) NOT NULL, INDEX " + idx + " (queue, id)"
		}
	} else {
		timestamp := "TIMESTAMPTZ"
		columns = "id BIGSERIAL PRIMARY KEY, payload BYTEA, attempt INT NOT NULL DEFAULT 0"
		if t.Name == "sqlite" {
			columns, timestamp = "id INTEGER PRIMARY KEY, payload BLOB, attempt INTEGER NOT NULL DEFAULT 0", "TEXT"
		}
		columns += ", locked_until " + timestamp
		if history {
			columns += ", processed_at " + timestamp
			index = "CREATE INDEX " + idx + " ON " + q + " (id) WHERE processed_at IS NULL"
		} else {
			columns += ", queue TEXT NOT NULL"
			index = "CREATE INDEX " + idx + " ON " + q + " (queue, id)"
		}
	}
	for _, s := range []string{"DROP TABLE IF EXISTS " + q, "CREATE TABLE " + q + " (" + columns + ")", index} {
		if s == "" {
			continue
		}
		if _, err := t.DB.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("creating table %s: %s: %w", name, s, err)
		}
	}
	return nil
}

// rows are generated rows from seq from to seq to (their payloads harness.Payload's first
// field): processed (stamped), of one queue, or spread over queues q-0 to q-(spread-1).
type rows struct {
	from, to  int
	processed bool
	queue     string
	spread    int
}

// insertRows inserts r, the database generating them, a million rows a statement.
func insertRows(ctx context.Context, t *harness.Target, table string, r rows) error {
	q, err := t.D.Quote(table)
	if err != nil {
		return err
	}
	const chunk = 1000000
	for from := r.from; from <= r.to; from += chunk {
		to := min(r.to, from+chunk-1)
		cols, g := "payload", "g"
		var values, source string
		switch t.Name {
		case "postgres":
			values = `convert_to('{"seq":' || g || ',"account":"acct"}', 'UTF8')`
			source = fmt.Sprintf("generate_series(%d::bigint, %d::bigint) g", from, to)
		case "sqlite":
			values = `CAST('{"seq":' || g || ',"account":"acct"}' AS BLOB)`
			source = fmt.Sprintf("(WITH RECURSIVE s(g) AS (SELECT %d UNION ALL SELECT g + 1 FROM s WHERE g < %d) SELECT g FROM s)", from, to)
		default:
			g = "seq"
			values = `CONCAT('{"seq":', seq, ',"account":"acct"}')`
			source = fmt.Sprintf("seq_%d_to_%d", from, to)
		}
		if r.processed {
			cols += ", processed_at"
			values += ", CURRENT_TIMESTAMP" // on SQLite not the library's layout, but not NULL, which is all a claim asks
		}
		switch {
		case r.queue != "":
			cols += ", queue"
			values += ", '" + r.queue + "'"
		case r.spread > 0:
			cols += ", queue"
			if t.Name == "mysql" || t.Name == "mariadb" {
				values += fmt.Sprintf(", CONCAT('q-', %s %% %d)", g, r.spread)
			} else {
				values += fmt.Sprintf(", 'q-' || (%s %% %d)", g, r.spread)
			}
		}
		s := "INSERT INTO " + q + " (" + cols + ") SELECT " + values + " FROM " + source
		if _, err := t.DB.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("inserting rows %d to %d into %s: %w", from, to, table, err)
		}
	}
	return nil
}
