package stmt

import (
	"fmt"
	"testing"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// TestExplainArgs binds one argument per parameter, NULL but for a LIMIT's 1, and counts
// neither what a quoted name or a literal holds nor a repeated Postgres parameter twice.
func TestExplainArgs(t *testing.T) {
	pg := dialect.Postgres[isolation.Default]{}.Caps()
	my := dialect.MySQL[isolation.Default]{}.Caps()
	for _, c := range []struct {
		caps  *dialect.Caps
		query string
		want  string
	}{
		{my, "SELECT `a?` FROM t WHERE x = ? AND y = '?' ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED", "[<nil> 1]"},
		{my, "UPDATE t SET a = ? WHERE id IN (?, ?)", "[<nil> <nil> <nil>]"},
		{my, "DELETE FROM t WHERE id = ?", "[<nil>]"},
		{pg, `SELECT "$9" FROM t WHERE a = $2 AND b = $1 AND set_config('x$7', 'off', true) = 'off' AND c = $2 limit  $3`, "[<nil> <nil> 1]"},
		{pg, "SAVEPOINT inbox_handler", "[]"},
	} {
		args, err := explainArgs(c.caps, c.query)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(args); got != c.want {
			t.Errorf("explainArgs(%s) = %s, want %s", c.query, got, c.want)
		}
	}
}
