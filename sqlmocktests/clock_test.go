package sqlmocktests

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"
	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// fakeHost is a host clock a test moves by hand.
type fakeHost struct {
	mu  sync.Mutex
	now time.Time
}

func (h *fakeHost) Now() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.now
}

func (h *fakeHost) add(d time.Duration) {
	h.mu.Lock()
	h.now = h.now.Add(d)
	h.mu.Unlock()
}

// TestDatabaseClock: the offset is the server's reading minus the host's; it is measured again
// a minute later and not before; a failed measurement keeps the last offset, is tried again
// five seconds later, and Sync reports it naming the database. MySQL's clock statement is the
// one the server reads.
func TestDatabaseClock(t *testing.T) {
	m := newRecorder(t, 1)
	d := dialect.MySQL[isolation.Default]{}
	query := d.Caps().ClockQuery
	host := &fakeHost{now: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	reading := func(at time.Time) *sqlmock.Rows {
		return sqlmock.NewRows([]string{"t"}).AddRow(at.Format("2006-01-02 15:04:05.000000"))
	}
	// The server runs 10 s behind the host; three readings, as Sync takes.
	for range 3 {
		m.mock.ExpectQuery(query).WillReturnRows(reading(host.now.Add(-10 * time.Second)))
	}
	c := &inbox.DatabaseClock{DB: m.db, Dialect: d, Host: host}
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := c.Offset(); got != -10*time.Second {
		t.Fatalf("offset %v, want -10s", got)
	}
	if got := c.Now(); !got.Equal(host.Now().Add(-10 * time.Second)) {
		t.Errorf("Now = %v, want the host's time less 10 s", got)
	}

	host.add(59 * time.Second)
	c.Now() // no statement: the sqlmock expectations would fail on one

	host.add(2 * time.Second)
	m.mock.ExpectQuery(query).WillReturnError(errors.New("connection refused"))
	if got := c.Now(); !got.Equal(host.Now().Add(-10 * time.Second)) {
		t.Errorf("after a failed measurement Now = %v, want the last offset kept", got)
	}
	host.add(4 * time.Second)
	c.Now() // still within five seconds of the failure: no statement

	host.add(2 * time.Second)
	for range 3 {
		m.mock.ExpectQuery(query).WillReturnRows(reading(host.now.Add(-3 * time.Second)))
	}
	if got := c.Now(); !got.Equal(host.Now().Add(-3 * time.Second)) {
		t.Errorf("Now = %v, want the host's time less the new offset, 3 s", got)
	}

	m.mock.ExpectQuery(query).WillReturnError(errors.New("connection refused"))
	if err := c.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "mysql") {
		t.Errorf("Sync = %v, want the failure naming the database", err)
	}
	if err := m.mock.ExpectationsWereMet(); err != nil {
		t.Error(err)
	}
}
