package lease

import (
	"slices"
	"testing"
	"time"
)

// TestMergerTakesEachRowOnce: two settlements of one row (the row claimed again by another worker
// after its lease ran out) never share a merged statement, whose RETURNING names only ids: the
// settlement under the stale token would read as settled. The later one waits for the next
// statement, and so does every row past mergeMax.
func TestMergerTakesEachRowOnce(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	row := func(id int64, s int) *mergeRow {
		return &mergeRow{id: id, token: t0.Add(time.Duration(s) * time.Second)}
	}
	m := &merger{queue: []*mergeRow{row(1, 0), row(2, 0), row(1, 1), row(3, 0), row(2, 1)}}

	ids := func(rs []*mergeRow) (out []int64) {
		for _, r := range rs {
			out = append(out, r.id)
		}
		return out
	}
	if got := ids(m.take()); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("first statement takes rows %v, want [1 2 3]", got)
	}
	if got := ids(m.queue); !slices.Equal(got, []int64{1, 2}) {
		t.Fatalf("left queued: %v, want [1 2] (the later settlements of rows 1 and 2)", got)
	}
	if got := m.take(); len(got) != 2 || !got[0].token.Equal(t0.Add(time.Second)) {
		t.Fatalf("second statement takes %v, want rows 1 and 2 under their later tokens", ids(got))
	}

	m.queue = nil
	for i := range mergeMax + 3 {
		m.queue = append(m.queue, row(int64(i), 0))
	}
	if got := len(m.take()); got != mergeMax {
		t.Errorf("a statement takes %d rows, want at most %d", got, mergeMax)
	}
	if got := len(m.queue); got != 3 {
		t.Errorf("%d rows left queued, want 3", got)
	}
}
