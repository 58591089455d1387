package inbox

import (
	"database/sql"
	"testing"
	"time"
)

// TestPoolWatchWarnsOncePerEpisode feeds the pool's watch a sequence of looks: it warns once an
// episode of a full pool with waits has lasted poolWaitLimit, not again while it lasts, says
// when it ends, and starts afresh with the next episode. A full pool that nobody waits for, and
// a pool without a limit, are no episode to warn of.
func TestPoolWatchWarnsOncePerEpisode(t *testing.T) {
	start := time.Now()
	type look struct {
		at         time.Duration
		inUse, max int
		waits      int64
		say        poolLookout
	}
	looks := []look{
		{0, 2, 3, 0, poolFine},
		{1 * time.Second, 3, 3, 1, poolFine}, // full from here, one wait begun since the last look
		{3 * time.Second, 3, 3, 1, poolFine},
		{5 * time.Second, 3, 3, 1, poolFine},
		{6 * time.Second, 3, 3, 1, poolStarved}, // five seconds since the first full look
		{7 * time.Second, 3, 3, 2, poolFine},
		{9 * time.Second, 3, 3, 2, poolFine},
		{10 * time.Second, 2, 3, 2, poolEased},
		{11 * time.Second, 3, 3, 2, poolFine}, // full again, nobody waiting: no episode
		{17 * time.Second, 3, 3, 2, poolFine},
		{18 * time.Second, 3, 3, 3, poolFine}, // a wait begins: the episode with it
		{19 * time.Second, 3, 3, 3, poolFine},
		{20 * time.Second, 1, 3, 3, poolFine}, // never warned of: nothing to say at its end
		{21 * time.Second, 3, 3, 4, poolFine},
		{26 * time.Second, 3, 3, 4, poolStarved},
		{27 * time.Second, 9, 0, 4, poolEased}, // the limit lifted
		{40 * time.Second, 9, 0, 9, poolFine},
	}
	var w poolWatch
	var prev sql.DBStats
	for _, l := range looks {
		s := sql.DBStats{MaxOpenConnections: l.max, InUse: l.inUse, WaitCount: l.waits}
		if say, _ := w.look(start.Add(l.at), prev, s); say != l.say {
			t.Errorf("at %v (%d of %d in use, %d waits): %d, want %d", l.at, l.inUse, l.max, l.waits, say, l.say)
		}
		prev = s
	}
}
