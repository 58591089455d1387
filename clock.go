package inbox

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
)

// Clock tells the time that the forms write and compare: lease expiries, retry_after,
// processed_at. By default it is this host's clock; DatabaseClock follows the database
// server's.
type Clock interface {
	Now() time.Time
}

// hostClock is this host's clock.
type hostClock struct{}

func (hostClock) Now() time.Time { return time.Now() }

// Now reads q's clock, or this host's where q has none.
func (q Binding) Now() time.Time {
	if q.Clock == nil {
		return time.Now()
	}
	return q.Clock.Now()
}

// DatabaseClock is a Clock that follows the database server's clock: this host's clock
// corrected by its offset from the server's, measured at Sync and again every minute after, as
// the offset of the server's reading from the midpoint of its round trip (the best of three).
// Consumers on hosts whose clocks disagree then agree on every lease and every retry_after to
// within half a round trip plus the drift of a minute, where with host clocks a host whose clock
// runs ahead takes rows whose leases still run elsewhere. Use one DatabaseClock per database;
// it is safe for concurrent use. The zero value is not usable: set DB and Dialect.
//
// A measurement that fails keeps the last offset and is tried again five seconds later. A
// Consumer with a DatabaseClock syncs it when Run starts and fails when it cannot.
type DatabaseClock struct {
	// DB and Dialect are the database whose clock to follow.
	DB      *sql.DB
	Dialect dialect.Dialect
	// Host is the clock being corrected; nil is this host's. (A test gives a skewed one.)
	Host Clock

	offset  atomic.Int64 // server minus host, in nanoseconds
	next    atomic.Int64 // host time, in Unix nanoseconds, of the next measurement; 0: never measured
	measure sync.Mutex
}

// How often a DatabaseClock measures its offset again, and again after a failure.
const (
	clockEvery = time.Minute
	clockRetry = 5 * time.Second
)

// Now returns the host's time corrected by the offset last measured; the first call of a
// clock never synced, and every call a minute after the last measurement, measures first (one
// caller at a time; the others read the last offset meanwhile).
func (c *DatabaseClock) Now() time.Time {
	now := c.host().Now()
	if next := c.next.Load(); now.UnixNano() >= next && c.measure.TryLock() {
		if c.next.Load() == next { // nobody measured since
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			c.sync(ctx)
			cancel()
		}
		c.measure.Unlock()
		now = c.host().Now()
	}
	return now.Add(time.Duration(c.offset.Load()))
}

// Offset is the server's clock minus the host's, as last measured.
func (c *DatabaseClock) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// Sync measures the offset now.
func (c *DatabaseClock) Sync(ctx context.Context) error {
	c.measure.Lock()
	defer c.measure.Unlock()
	return c.sync(ctx)
}

func (c *DatabaseClock) sync(ctx context.Context) error {
	host := c.host()
	if c.DB == nil || c.Dialect == nil {
		c.next.Store(host.Now().Add(clockRetry).UnixNano())
		return sentinel.Errorf(nil, "", "a DatabaseClock needs the database whose clock it follows: set its DB and Dialect")
	}
	best, bestTrip := time.Duration(0), time.Duration(-1)
	var err error
	for range 3 {
		var text string
		t0 := host.Now()
		if err = c.DB.QueryRowContext(ctx, c.Dialect.Caps().ClockQuery).Scan(&text); err != nil {
			break
		}
		t1 := host.Now()
		server, perr := dialect.ScannedTime(text)
		if perr != nil {
			err = fmt.Errorf("the server's time: %w", perr)
			break
		}
		if trip := t1.Sub(t0); bestTrip < 0 || trip < bestTrip {
			best, bestTrip = server.Sub(t0.Add(trip/2)), trip
		}
	}
	if bestTrip < 0 {
		c.next.Store(host.Now().Add(clockRetry).UnixNano())
		return sentinel.Errorf(nil, "", "reading the database's clock (%s): %w", c.Dialect.Name(), err)
	}
	c.offset.Store(int64(best))
	c.next.Store(host.Now().Add(clockEvery).UnixNano())
	return nil
}

func (c *DatabaseClock) host() Clock {
	if c.Host == nil {
		return hostClock{}
	}
	return c.Host
}
