package harness

import (
	"os"
	"runtime/pprof"
)

// CPUProfile starts a CPU profile of the process, written to the file at path, and returns what
// stops it and closes the file; with path "" it profiles nothing and stop does nothing.
func CPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
