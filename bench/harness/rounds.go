package harness

// Rounds runs every drain once a round for rounds rounds, round r starting with drain
// (r-1) mod len(drains) and going on in order, wrapping around. A drain runs slower right after
// a heavier one (the database is still writing out the one before), and no drain may always be
// the one that follows the same other: with two drains, a cell's library and raw loop, the
// order alternates (library first in odd rounds, raw first in even ones). The first error
// stops the rounds.
func Rounds(rounds int, drains ...func(round int) error) error {
	for r := 1; r <= rounds; r++ {
		for k := range drains {
			if err := drains[(r-1+k)%len(drains)](r); err != nil {
				return err
			}
		}
	}
	return nil
}
