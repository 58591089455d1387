package inbox

// groupKey is the value m writes to t's group column: NULL for a message of no group. It refuses
// a GroupKey where t has no group column (ErrSchema) and a key longer than MaxGroupKey
// (ErrGroupKeyTooLong), before any statement runs.
func groupKey(t Table, m Message) (any, error) {
	return keyArg(t, keyColumn{"GroupKey", "group", "-group-key", t.GroupKey, MaxGroupKey, ErrGroupKeyTooLong}, m.GroupKey)
}
