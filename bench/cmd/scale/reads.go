package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/sqlinbox/inbox/bench/harness"
)

// claimReads counts what finding the next 16 claimable rows of table costs the database, by
// the work done rather than the time taken, so that other load on the machine does not move
// it: on Postgres the buffers the SELECT touches (EXPLAIN (ANALYZE, BUFFERS): every index and
// heap page, dead tuples' included), on MySQL and MariaDB the index entries it reads
// (Handler_read_first, _key and _next around it). It runs the claim's index walk, SELECT id …
// WHERE where ORDER BY id LIMIT 16, without the lock (a claim's lock adds the rows it returns,
// not the ones it steps over). -1 on SQLite, which counts neither.
func claimReads(ctx context.Context, t *harness.Target, table, where string) (int64, error) {
	q, err := t.D.Quote(table)
	if err != nil {
		return 0, err
	}
	query := "SELECT id FROM " + q + " WHERE " + where + " ORDER BY id LIMIT 16"
	switch t.Name {
	case "postgres":
		var plan string
		if err := t.DB.QueryRowContext(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+query).Scan(&plan); err != nil {
			return 0, err
		}
		var p []struct {
			Plan struct {
				Hit  int64 `json:"Shared Hit Blocks"`
				Read int64 `json:"Shared Read Blocks"`
			}
		}
		if err := json.Unmarshal([]byte(plan), &p); err != nil || len(p) == 0 {
			return 0, fmt.Errorf("reading EXPLAIN's plan %.200q: %v", plan, err)
		}
		return p[0].Plan.Hit + p[0].Plan.Read, nil
	case "mysql", "mariadb":
		conn, err := t.DB.Conn(ctx)
		if err != nil {
			return 0, err
		}
		defer conn.Close()
		reads := func() (int64, error) {
			rows, err := conn.QueryContext(ctx, "SHOW SESSION STATUS WHERE Variable_name IN ('Handler_read_first', 'Handler_read_key', 'Handler_read_next')")
			if err != nil {
				return 0, err
			}
			defer rows.Close()
			var sum int64
			for rows.Next() {
				var name, value string
				if err := rows.Scan(&name, &value); err != nil {
					return 0, err
				}
				n, _ := strconv.ParseInt(value, 10, 64)
				sum += n
			}
			return sum, rows.Err()
		}
		before, err := reads()
		if err != nil {
			return 0, err
		}
		rows, err := conn.QueryContext(ctx, query)
		if err != nil {
			return 0, err
		}
		for rows.Next() {
		}
		if err := rows.Close(); err != nil {
			return 0, err
		}
		after, err := reads()
		return after - before, err
	}
	return -1, nil
}

// readsCell formats the median of claim reads; "–" where the database counts none.
func readsCell(v []float64) string {
	if m := harness.Median(v); m > 0 {
		return harness.Thousands(m)
	}
	return "–"
}
