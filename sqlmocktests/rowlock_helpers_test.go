package sqlmocktests

import (
	"database/sql/driver"
	"time"
)

// rowlockTimeNear matches a bound timestamp within a few seconds of want: the form reads the
// host clock, so the test can only bracket it.
type rowlockTimeNear struct{ want time.Time }

func (a rowlockTimeNear) Match(v driver.Value) bool {
	t, ok := v.(time.Time)
	if !ok {
		return false
	}
	d := t.Sub(a.want)
	return d > -5*time.Second && d < 5*time.Second
}

// rowlockSQLState is a driver error carrying a SQLSTATE the way pgx's does.
type rowlockSQLState struct{ code string }

func (e rowlockSQLState) Error() string {
	return "ERROR: could not serialize access due to concurrent update (SQLSTATE " + e.code + ")"
}
func (e rowlockSQLState) SQLState() string { return e.code }
