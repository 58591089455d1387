package inbox_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"testing"
)

// TestLibraryImportsOnlyStandardLibrary fails when a package of the library's module (the root
// package, dialect, isolation, outcome, the forms, internal/…) imports, directly or through
// another, anything but the standard library and the module's own packages. Drivers and other
// dependencies belong in integration/, sqlmocktests/ and cmd/, which are modules of their own.
func TestLibraryImportsOnlyStandardLibrary(t *testing.T) {
	gocmd := goCommand(t)
	const module = "github.com/sqlinbox/inbox"
	// -e lists an import the module cannot resolve too, rather than failing on it; under
	// go.work a third-party import may resolve through another module's requirements, and is
	// listed with that module.
	cmd := exec.Command(gocmd, "list", "-e", "-deps", "-json=ImportPath,Standard,Module,Imports", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	type pkg struct {
		ImportPath string
		Standard   bool
		Module     *struct{ Path string }
		Imports    []string
	}
	var own []pkg
	foreign := map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		switch {
		case p.Standard:
		case p.Module != nil && p.Module.Path == module:
			own = append(own, p)
		default:
			foreign[p.ImportPath] = true
		}
	}
	if len(own) == 0 {
		t.Fatalf("go list found no package of %s", module)
	}
	// Every foreign package is reached through a direct import of an own package; naming
	// those is enough.
	for _, p := range own {
		for _, imp := range p.Imports {
			if foreign[imp] {
				t.Errorf("%s imports %s, which is not in the standard library: library packages import only the standard library; move the code that needs it to integration/, sqlmocktests/ or cmd/", p.ImportPath, imp)
			}
		}
	}
}
