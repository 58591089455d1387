package lease

import (
	"slices"
	"testing"
)

// TestCandidatesInOrder: a row tries the free slot that names it first, then the free slots below
// the limit in number order, never a held slot or one at or above the limit, whatever its id.
func TestCandidatesInOrder(t *testing.T) {
	slots := []slotSeen{{slot: 0, holder: 7}, {slot: 1, holder: 3, held: true}, {slot: 2, holder: 9}, {slot: 3, holder: 12}, {slot: 4, holder: 5}, {slot: 5, holder: 6}}
	numbers := func(ss []slotSeen) []int {
		var ns []int
		for _, s := range ss {
			ns = append(ns, s.slot)
		}
		return ns
	}
	cases := []struct {
		id   int64
		want []int
	}{
		{id: 8, want: []int{0, 2, 3, 4}},  // 5 is at the limit, 1 held
		{id: 12, want: []int{3, 0, 2, 4}}, // its own slot first
		{id: 3, want: []int{0, 2, 3, 4}},  // its own slot is held: not its to take
		{id: 14, want: []int{0, 2, 3, 4}},
	}
	for _, c := range cases {
		if got := numbers(candidates(slots, c.id, 5)); !slices.Equal(got, c.want) {
			t.Errorf("id %d: candidates %v, want %v", c.id, got, c.want)
		}
	}
}
