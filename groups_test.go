package inbox

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// TestGroupKeyRefused: a GroupKey where the table has no group column, and a group key longer than
// MaxGroupKey characters (counted as characters, not bytes), are refused before any statement,
// naming the table (and the column); a key of MaxGroupKey characters is written, and a message
// of no group writes NULL.
func TestGroupKeyRefused(t *testing.T) {
	d := dialect.MariaDB[isolation.Default]{}
	plain := Table{Name: "jobs", ID: "id", IDGenerated: true}
	grouped := Table{Name: "jobs", ID: "id", IDGenerated: true, GroupKey: "customer"}
	_, err := statements(d, plain, []Message{{GroupKey: "g"}}, false, time.Now())
	if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), "inbox.Table.GroupKey") {
		t.Errorf("a group without a group column: %v, want ErrSchema naming the table and the field", err)
	}
	long := strings.Repeat("é", MaxGroupKey+1)
	_, err = statements(d, grouped, []Message{{GroupKey: "g"}, {GroupKey: long}}, false, time.Now())
	if !errors.Is(err, ErrGroupKeyTooLong) || !strings.Contains(err.Error(), `"customer"`) {
		t.Errorf("a group key of %d characters: %v, want ErrGroupKeyTooLong naming the column", MaxGroupKey+1, err)
	}
	sts, err := statements(d, grouped, []Message{{GroupKey: long[len("é"):]}, {}}, false, time.Now())
	if err != nil {
		t.Fatalf("a group key of %d two-byte characters: %v", MaxGroupKey, err)
	}
	if len(sts) != 1 || len(sts[0].args) != 2 || sts[0].args[0] != long[len("é"):] || sts[0].args[1] != nil {
		t.Errorf("statements = %+v, want one INSERT binding the key, then NULL for the message of no group", sts)
	}
}
