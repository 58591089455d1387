package sqlmocktests

import (
	"database/sql/driver"
	"strings"
	"time"

	"github.com/sqlinbox/inbox/dialect"
)

// timeNear matches a bound timestamp within five seconds of want: the forms read the host
// clock, so a test can only bracket it. It takes a time.Time, or where text is set the
// fixed-width text SQLite's dialect binds; and it records the value it matched in into, where
// into is set, for a sameValue to compare a later argument with.
type timeNear struct {
	want time.Time
	text bool
	into *driver.Value
}

// near matches a timestamp within five seconds of want as c's dialect binds it.
func (c dbCase) near(want time.Time) timeNear { return timeNear{want: want, text: c.db == "sqlite"} }

// token is near(want), recording the value matched in into: a lease's token.
func (c dbCase) token(want time.Time, into *driver.Value) timeNear {
	a := c.near(want)
	a.into = into
	return a
}

func (a timeNear) Match(v driver.Value) bool {
	var t time.Time
	switch v := v.(type) {
	case time.Time:
		t = v
	case string:
		var err error
		if t, err = time.Parse(dialect.SQLiteTimeLayout, v); !a.text || err != nil {
			return false
		}
	default:
		return false
	}
	if d := t.Sub(a.want); d <= -5*time.Second || d >= 5*time.Second {
		return false
	}
	if a.into != nil {
		*a.into = v
	}
	return true
}

// sameValue matches exactly the value a timeNear recorded: the token a lease holds.
type sameValue struct{ v *driver.Value }

func (a sameValue) Match(v driver.Value) bool {
	if t, ok := v.(time.Time); ok {
		want, ok := (*a.v).(time.Time)
		return ok && t.Equal(want)
	}
	return *a.v != nil && v == *a.v
}

// textHas matches a bound text holding want: a last error.
type textHas struct{ want string }

func (a textHas) Match(v driver.Value) bool {
	s, ok := v.(string)
	return ok && strings.Contains(s, a.want)
}
