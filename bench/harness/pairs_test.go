package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestPrintPairs: the table the groups and limits commands print, a row a pair, the ratio paired
// by round and "–" where no round counted both sides.
func TestPrintPairs(t *testing.T) {
	var b strings.Builder
	PrintPairs(&b, "no limit", "limit", "with/without (paired)", []*Pair{
		{Form: "lease", DB: "postgres", Workers: 8, Plain: []float64{1000, 2000}, With: []float64{500, 1500}},
		{Form: "rowlock", DB: "mariadb", Workers: 1, Plain: []float64{0}, With: []float64{10}},
	})
	want := `| form | database | workers | no limit | limit | with/without (paired) |
|---|---|--:|--:|--:|--:|
| lease | Postgres | 8 | 1,500 (1,000–2,000) | 1,000 (500–1,500) | 0.625 |
| rowlock | MariaDB | 1 | – | 10 (10–10) | – |
`
	if got := b.String(); got != want {
		t.Errorf("PrintPairs wrote\n%s\nwant\n%s", got, want)
	}
}

// TestDSN: -dsn's DSN first, then the default; SQLite without one is the file in the directory.
func TestDSN(t *testing.T) {
	dsns := map[string]string{"mariadb": "u@tcp(h:1)/d"}
	for name, want := range map[string]string{
		"mariadb":  "u@tcp(h:1)/d",
		"postgres": DefaultDSNs["postgres"],
		"sqlite":   filepath.Join("/tmp/x", "f.db"),
	} {
		if got := DSN(dsns, name, "/tmp/x", "f.db"); got != want {
			t.Errorf("DSN(%s) = %q, want %q", name, got, want)
		}
	}
}

// TestRunPairs: on SQLite only the lease form runs; a Pair per worker count, in order, on a
// pool of its workers+2, with the facts of each database written first.
func TestRunPairs(t *testing.T) {
	ctx := context.Background()
	var out strings.Builder
	var tables []string
	g := Grid{Workers: []int{1, 3}, DBs: []string{"sqlite"}, Forms: []string{"rowlock", "lease"}, DSNs: map[string]string{}}
	pairs, err := g.RunPairs(ctx, &out,
		func(tg *Target, form string) (string, error) {
			tables = append(tables, form)
			return "t_" + form, nil
		},
		func(tg *Target, p *Pair, table string) error {
			if open := tg.DB.Stats().MaxOpenConnections; open != p.Workers+2 {
				return fmt.Errorf("pool of %d connections for %d workers", open, p.Workers)
			}
			p.Plain, p.With = []float64{1}, []float64{float64(p.Workers)}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "sqlite    SQLite ") {
		t.Errorf("facts line %q", out.String())
	}
	if strings.Join(tables, ",") != "lease" {
		t.Errorf("tables created for forms %v, want lease alone on sqlite", tables)
	}
	var got []string
	for _, p := range pairs {
		got = append(got, fmt.Sprintf("%s/%s/%d/%v", p.Form, p.DB, p.Workers, p.With))
	}
	if want := "lease/sqlite/1/[1] lease/sqlite/3/[3]"; strings.Join(got, " ") != want {
		t.Errorf("pairs %v, want %s", got, want)
	}
}
