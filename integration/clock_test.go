package integration

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// skewedClock is a host clock that runs ahead of the real one.
type skewedClock time.Duration

func (s skewedClock) Now() time.Time { return time.Now().Add(time.Duration(s)) }

// TestClockSkew: a consumer whose host clock runs 10 s ahead takes a row whose lease still runs
// on another consumer, and a row delayed for 4 s, at once when it reads its host's clock; with a
// DatabaseClock it takes neither early, on every database, and it measures its offset as the
// skew. The first case shows the test can tell.
func TestClockSkew(t *testing.T) {
	const skew = 10 * time.Second
	var tests []subtest
	for _, c := range cells(t) {
		if c.form != "lease" {
			continue
		}
		for _, database := range []bool{false, true} {
			name := c.b.name + "/host clock"
			if database {
				name = c.b.name + "/database clock"
			}
			tests = append(tests, subtest{name, func(t *testing.T) {
				dbs := c.openDBs(t, 2, 6)
				tbl := c.b.newTable(t, dbs[0], fullTable)
				c.publish(t, dbs[0], tbl, inbox.Message{Queue: "q", Payload: []byte("held")})

				started := make(chan struct{})
				var once sync.Once
				release := make(chan struct{})
				holder := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
					once.Do(func() { close(started) })
					select {
					case <-release:
					case <-ctx.Done():
					}
					return outcome.Ack()
				})
				stopHolder := runConsumer(t, dbs[0], c.newFormLease(t, tbl, 2*time.Second), holder, &inbox.Config{Queue: "q"})
				select {
				case <-started:
				case <-time.After(10 * time.Second):
					t.Fatal("the holder was not handed the row")
				}
				c.publish(t, dbs[0], tbl, inbox.Message{Queue: "q", Payload: []byte("delayed"), Delay: 4 * time.Second})

				var clock inbox.Clock = skewedClock(skew)
				var dbClock *inbox.DatabaseClock
				if database {
					dbClock = &inbox.DatabaseClock{DB: dbs[1], Dialect: c.b.dialect, Host: skewedClock(skew)}
					clock = dbClock
				}
				var held, delayed atomic.Int32
				early := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
					switch string(d.Payload) {
					case "held":
						held.Add(1)
					case "delayed":
						delayed.Add(1)
					}
					return outcome.Ack()
				})
				stopSkewed := runConsumer(t, dbs[1], c.newFormLease(t, tbl, 2*time.Second), early,
					&inbox.Config{Queue: "q", Clock: clock, PollInterval: 50 * time.Millisecond})
				// Three seconds: the holder's lease (2 s) ran out once by the real clock and was
				// extended meanwhile, and the delayed row is not due yet.
				time.Sleep(3 * time.Second)
				stopSkewed()
				close(release)
				stopHolder()

				if database {
					if held.Load() != 0 || delayed.Load() != 0 {
						t.Errorf("with the database's clock, the skewed consumer took the held row %d times and the delayed row %d times; want neither", held.Load(), delayed.Load())
					}
					if off := dbClock.Offset(); off > -skew+time.Second || off < -skew-time.Second {
						t.Errorf("measured offset %v, want about %v", off, -skew)
					}
					return
				}
				if held.Load() == 0 || delayed.Load() == 0 {
					t.Errorf("with its host's clock, the skewed consumer took the held row %d times and the delayed row %d times; want both taken early (the test cannot tell otherwise)", held.Load(), delayed.Load())
				}
			}})
		}
	}
	runConcurrently(t, 4, tests) // each cell waits 3 s on its own tables
}
