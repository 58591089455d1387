package inbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox/outcome"
)

// TestCancelledOutcomes: a row asked to be cancelled while its handler ran settles by
// outcome.Cancel whatever the handler returned, but for an Ack outside transactional mode; the
// rows not asked keep their outcomes.
func TestCancelledOutcomes(t *testing.T) {
	u := []*Delivery{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4}}
	for _, tx := range []bool{false, true} {
		outs := []outcome.Outcome{outcome.Ack(), outcome.Retry(), outcome.Fail(errors.New("boom")), outcome.Ack()}
		cancelledOutcomes(u, outs, []int64{1, 2, 3}, tx)
		want := []outcome.Kind{outcome.KindAck, outcome.KindCancel, outcome.KindCancel, outcome.KindAck}
		if tx {
			want[0] = outcome.KindCancel
		}
		for i, o := range outs {
			if o.Kind() != want[i] {
				t.Errorf("transactional %v, row %d: %v, want %v", tx, u[i].ID, o, want[i])
			}
			if o.Kind() == outcome.KindCancel && !errors.Is(o.Err(), ErrCancelled) {
				t.Errorf("transactional %v, row %d: the cancel's reason is %v, want ErrCancelled", tx, u[i].ID, o.Err())
			}
		}
	}
}

// TestCancelResultErr: a cancelled or requested row is no error; a settled one wraps
// ErrSettled and a missing one ErrNotFound, each naming the row.
func TestCancelResultErr(t *testing.T) {
	for _, tt := range []struct {
		o    CancelOutcome
		want error
	}{
		{Cancelled, nil}, {CancelRequested, nil},
		{AlreadyProcessed, ErrSettled}, {AlreadyDead, ErrSettled}, {AlreadyCancelled, ErrSettled},
		{NotFound, ErrNotFound},
	} {
		err := CancelResult{ID: 7, Outcome: tt.o, table: "jobs"}.Err()
		if (err == nil) != (tt.want == nil) || !errors.Is(err, tt.want) {
			t.Errorf("%v: Err() = %v, want %v", tt.o, err, tt.want)
		}
		if err != nil && !strings.Contains(err.Error(), `table "jobs", row 7`) {
			t.Errorf("%v: %q does not name the row", tt.o, err)
		}
		if tt.want == ErrSettled && !strings.Contains(err.Error(), tt.o.String()) {
			t.Errorf("%v: %q does not say the row's state", tt.o, err)
		}
	}
}
