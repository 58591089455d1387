package inbox_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompileFail builds every program under testdata/compilefail with the go command. A
// program with a want.txt beside it pairs a dialect with a level or form its database cannot
// run: its build must fail, and the compiler's output must hold every line of want.txt. A
// program without one must build, so that the test cannot pass by everything failing.
//
// The go test cache does not see the files a child go command reads, so run this test with
// -count=1 (make test does).
func TestCompileFail(t *testing.T) {
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	mains, err := filepath.Glob(filepath.Join("testdata", "compilefail", "*", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(mains) == 0 {
		t.Fatal("no programs under testdata/compilefail")
	}
	for _, main := range mains {
		dir := filepath.ToSlash(filepath.Dir(main))
		t.Run(filepath.Base(dir), func(t *testing.T) {
			t.Parallel()
			fragments, mustFail := wantFragments(t, dir)
			out, err := exec.Command(gocmd, "build", "-o", os.DevNull, "./"+dir).CombinedOutput()
			if !mustFail {
				if err != nil {
					t.Fatalf("go build ./%s must succeed: %v\n%s", dir, err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("go build ./%s succeeded; it must fail with %q", dir, fragments)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("running go build ./%s: %v", dir, err)
			}
			for _, f := range fragments {
				if !bytes.Contains(out, []byte(f)) {
					t.Errorf("go build ./%s failed without %q in its output:\n%s", dir, f, out)
				}
			}
		})
	}
}

// wantFragments reads the lines of dir/want.txt; mustFail is false when there is no such file.
func wantFragments(t *testing.T, dir string) (fragments []string, mustFail bool) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join(dir, "want.txt"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(want), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			fragments = append(fragments, line)
		}
	}
	if len(fragments) == 0 {
		t.Fatalf("%s/want.txt is empty: list the message fragments the build must print", dir)
	}
	return fragments, true
}
