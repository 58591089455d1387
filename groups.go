package inbox

import (
	"unicode/utf8"

	"github.com/sqlinbox/inbox/internal/sentinel"
)

// groupKey is the value m writes to t's group column: NULL for a message of no group. It refuses
// a GroupKey where t has no group column (ErrSchema) and a key longer than MaxGroupKey
// (ErrGroupKeyTooLong), before any statement runs.
func groupKey(t Table, m Message) (any, error) {
	switch {
	case m.GroupKey == "":
		return nil, nil
	case t.GroupKey == "":
		return nil, sentinel.Errorf(ErrSchema, sentinel.Table(t.Name), "a Message has GroupKey %q, but the description names no group column: add the column (inbox schema -group-key) and name it in inbox.Table.GroupKey", m.GroupKey)
	case utf8.RuneCountInString(m.GroupKey) > MaxGroupKey:
		return nil, sentinel.Errorf(ErrGroupKeyTooLong, sentinel.Column(t.Name, t.GroupKey), "a Message's GroupKey is %d characters, over the %d the column holds (MaxGroupKey): hash a longer key into one (hex SHA-256 is 64)", utf8.RuneCountInString(m.GroupKey), MaxGroupKey)
	}
	return m.GroupKey, nil
}
