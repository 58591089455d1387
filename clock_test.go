package inbox

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestDatabaseClockWithoutADatabase: a DatabaseClock missing its DB or Dialect fails Sync
// naming both fields, and its Now reads the host's clock meanwhile rather than panicking.
func TestDatabaseClockWithoutADatabase(t *testing.T) {
	c := &DatabaseClock{}
	if err := c.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "DB and Dialect") {
		t.Fatalf("Sync = %v; want an error naming DB and Dialect", err)
	}
	if d := time.Since(c.Now()); d < -time.Second || d > time.Second {
		t.Errorf("Now is %v off the host's clock, want the host's clock", d)
	}
}
