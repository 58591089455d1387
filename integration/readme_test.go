package integration

import (
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A goBlock is one ```go block of a Markdown file: its text and where it stands.
type goBlock struct {
	file    string // the Markdown file's name
	line    int    // the line of the block's first line of code
	section string // the heading above it
	code    string
}

// readmeGoBlocks returns every ```go block of the Markdown file at path.
func readmeGoBlocks(t *testing.T, path string) []goBlock {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		blocks  []goBlock
		in      *goBlock
		fence   string
		section string
	)
	for i, line := range strings.Split(string(text), "\n") {
		switch {
		case in != nil && strings.TrimSpace(line) == fence:
			blocks = append(blocks, *in)
			in, fence = nil, ""
		case in != nil:
			in.code += line + "\n"
		case fence != "" && strings.TrimSpace(line) == fence:
			fence = "" // the end of a block in another language
		case fence != "":
		case strings.HasPrefix(line, "```"):
			info := strings.TrimLeft(line, "`")
			fence = line[:len(line)-len(info)]
			lang := strings.Fields(info)
			if len(lang) > 0 && lang[0] == "go" {
				in = &goBlock{file: filepath.Base(path), line: i + 2, section: section}
			}
		case strings.HasPrefix(line, "#"):
			section = strings.TrimSpace(strings.TrimLeft(line, "#"))
		}
	}
	if in != nil {
		t.Fatalf("%s:%d: the ```go block is not closed", path, in.line-1)
	}
	return blocks
}

// doesNotCompile marks a line of a README block that shows what the compiler refuses.
const doesNotCompile = "// does not compile"

// goVet type-checks and vets b's code as src gives it (with the same lines), written to a
// directory of its own, with this module's requirements (and the workspace's modules). It
// returns whether go vet passed, and otherwise its output, the positions in it turned into
// positions in the README.
func goVet(t *testing.T, b goBlock, src string) (string, bool) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "block.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "vet", file).CombinedOutput()
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("go vet: %v", err)
		}
		return b.positions(file, out), false
	}
	return "", true
}

// positions turns the positions in file, which holds b's code, into positions in the Markdown
// file.
func (b goBlock) positions(file string, out []byte) string {
	return regexp.MustCompile(regexp.QuoteMeta(file)+`:(\d+)`).ReplaceAllStringFunc(string(out), func(pos string) string {
		n, _ := strconv.Atoi(pos[len(file)+1:])
		return fmt.Sprintf("%s:%d", b.file, b.line+n-1)
	})
}

// TestReadmeGoBlocksCompile checks every ```go block of the README (see blockFaults).
func TestReadmeGoBlocksCompile(t *testing.T) {
	blocks := readmeGoBlocks(t, "../README.md")
	if len(blocks) == 0 {
		t.Fatal("README.md has no ```go block")
	}
	for _, fault := range blockFaults(t, blocks) {
		t.Error(fault)
	}
}

// TestReadmeCheckFindsFaults runs the README's check on a file of faulty blocks, each of which
// it must report, and a block it must pass.
func TestReadmeCheckFindsFaults(t *testing.T) {
	faults := blockFaults(t, readmeGoBlocks(t, "testdata/readme/faults.md"))
	want := []string{
		"faults.md:4 (A fragment): the ```go block is not a complete Go file",
		"faults.md:19:9: undefined: issue",
		"faults.md:32 (A line that compiles though marked): the line marked \"// does not compile\" compiles: _ = outcome.Drop()",
	}
	if len(faults) != len(want) {
		t.Fatalf("found %d faults, want %d:\n%s", len(faults), len(want), strings.Join(faults, "\n"))
	}
	for i, w := range want {
		if !strings.Contains(faults[i], w) {
			t.Errorf("fault %d: %s\nwant it to say %q", i, faults[i], w)
		}
	}
}

// blockFaults checks each block: it is a complete Go file (a package clause, its imports,
// declarations), so that it can be pasted as it is, and it passes go vet. A line marked
// "// does not compile" shows a compile error: the block compiles without the marked lines,
// and fails with each one of them. It returns what is wrong, each where it is.
func blockFaults(t *testing.T, blocks []goBlock) []string {
	var faults []string
	for _, b := range blocks {
		where := fmt.Sprintf("%s:%d (%s)", b.file, b.line, b.section)
		if _, err := parser.ParseFile(token.NewFileSet(), "block.go", b.code, parser.PackageClauseOnly); err != nil {
			faults = append(faults, fmt.Sprintf("%s: the ```go block is not a complete Go file (%v): start it with its package clause and imports, and declare what it uses, so that it compiles as pasted", where, err))
			continue
		}
		lines := strings.Split(b.code, "\n")
		var marked []int
		for i, l := range lines {
			if strings.Contains(l, doesNotCompile) {
				marked = append(marked, i)
			}
		}
		// without blanks every marked line but keep, so that the lines keep their numbers.
		without := func(keep int) string {
			kept := slices.Clone(lines)
			for _, i := range marked {
				if i != keep {
					kept[i] = ""
				}
			}
			return strings.Join(kept, "\n")
		}
		if out, ok := goVet(t, b, without(-1)); !ok {
			faults = append(faults, fmt.Sprintf("%s: the ```go block does not compile, or go vet finds fault with it:\n%s", where, out))
			continue
		}
		for _, i := range marked {
			if _, ok := goVet(t, b, without(i)); ok {
				faults = append(faults, fmt.Sprintf("%s:%d (%s): the line marked %q compiles: %s", b.file, b.line+i, b.section, doesNotCompile, strings.TrimSpace(lines[i])))
			}
		}
	}
	return faults
}

// quickStartOutput is what the README says its Quick start prints: the plain block after "It
// prints" in the section.
var quickStartOutput = regexp.MustCompile("(?s)\n## Quick start\n.*?\nIt prints\n\n```\n(.*?)```\n")

// TestReadmeQuickStartRuns builds the README's Quick start, which must be its first ```go block,
// as it stands, and runs it in a directory of its own. The program publishes a job, runs it
// and stops by itself: the test expects it to end cleanly, having printed exactly what the
// README says it prints.
func TestReadmeQuickStartRuns(t *testing.T) {
	blocks := readmeGoBlocks(t, "../README.md")
	if len(blocks) == 0 || blocks[0].section != "Quick start" {
		t.Fatal("README.md: the first ```go block is not the Quick start's: the first code a reader meets is the program that runs")
	}
	quick := blocks[0]
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := quickStartOutput.FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md: the Quick start does not say what it prints (\"It prints\" and a ``` block)")
	}
	want := string(m[1])

	// A failsafe for a program that hangs: the test fails then, it does not time anything.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(quick.code), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "quickstart")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("README.md:%d: building the Quick start: %v\n%s", quick.line, err, quick.positions(src, out))
	}

	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the Quick start ended with %v (context: %v); its stdout:\n%s\nits stderr:\n%s", err, ctx.Err(), stdout.String(), stderr.String())
	}
	if stdout.String() != want {
		t.Errorf("the Quick start printed\n%s\nthe README says it prints\n%s\nits stderr:\n%s", stdout.String(), want, stderr.String())
	}
}
