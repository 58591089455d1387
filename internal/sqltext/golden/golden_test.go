package golden

import (
	"bytes"
	"os"
	"testing"
)

// TestFilesAreInTheirFormat reads every golden file and writes its entries again: a file edited
// by hand out of the format (a statement over two lines, a lost name) fails here rather than as
// a puzzling mismatch.
func TestFilesAreInTheirFormat(t *testing.T) {
	files, err := Files()
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files under %s (%v)", Dir(), err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := Parse(b)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		again, err := Format(entries)
		if err != nil || !bytes.Equal(again, b) {
			t.Errorf("%s: its %d entries written again differ from the file (%v)", f, len(entries), err)
		}
	}
	if _, err := Parse([]byte("-- claim\nSELECT 1\nSELECT 2\n")); err == nil {
		t.Errorf("a statement over two lines parsed")
	}
}
