//go:build race

package integration

// raceDetector reports whether the tests run under the race detector (go test -race), which
// slows the pure-Go SQLite driver several times over.
const raceDetector = true
