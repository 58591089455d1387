package conflict

import (
	"context"
	"errors"
	"testing"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

func TestRetry(t *testing.T) {
	busy := errors.New("database is locked (5) (SQLITE_BUSY)") // a conflict on SQLite
	refused := errors.New("no such column: x")
	d := dialect.SQLite[isolation.Default]{}
	budget := d.Caps().ConflictTries
	for _, tt := range []struct {
		name      string
		errs      []error // op's result at each try; past the end, nil
		tries     int
		want      error
		exhausted bool
	}{
		{"succeeds at once", nil, 1, nil, false},
		{"a refusal ends it", []error{refused}, 1, refused, false},
		{"conflicts then succeeds", []error{busy, busy}, 3, nil, false},
		{"conflicts then a refusal", []error{busy, refused}, 2, refused, false},
		{"conflicts every try", []error{busy, busy, busy, busy, busy, busy, busy}, budget, busy, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tries := 0
			err := Retry(context.Background(), d, func() error {
				tries++
				if tries <= len(tt.errs) {
					return tt.errs[tries-1]
				}
				return nil
			})
			if tries != tt.tries || !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) || errors.Is(err, ErrTooMany) != tt.exhausted {
				t.Errorf("ran %d times, err %v; want %d, %v (exhausted: %v)", tries, err, tt.tries, tt.want, tt.exhausted)
			}
		})
	}
}

func TestRetryStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tries := 0
	err := Retry(ctx, dialect.Postgres[isolation.Default]{}, func() error {
		tries++
		cancel()
		return errors.New("ERROR: deadlock detected (SQLSTATE 40P01)")
	})
	if tries != 1 || err == nil || errors.Is(err, ErrTooMany) {
		t.Errorf("ran %d times, err %v; want one try and its conflict", tries, err)
	}
}
