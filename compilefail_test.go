package inbox_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// levels are the markers of package isolation: the levels, and SQLite's transaction modes.
var levels = []string{"Default", "ReadUncommitted", "ReadCommitted", "RepeatableRead", "Serializable", "Deferred", "Immediate", "Exclusive"}

// opens is what each dialect type takes as its level, as dialect/levels.go declares it: the
// constraint and the markers it holds. Every other marker of levels must not compile with it.
// forms says whether the row lock and advisory forms take the dialect.
var opens = []struct {
	dialect, constraint string
	levels              []string
	forms               bool
}{
	{"Postgres", "PostgresOpens", []string{"Default", "ReadCommitted", "RepeatableRead", "Serializable"}, true},
	{"MySQL", "MySQLOpens", []string{"Default", "ReadUncommitted", "ReadCommitted", "RepeatableRead", "Serializable"}, true},
	{"MariaDB", "MySQLOpens", []string{"Default", "ReadUncommitted", "ReadCommitted", "RepeatableRead", "Serializable"}, true},
	{"SQLite", "SQLiteOpens", []string{"Default", "Deferred", "Immediate", "Exclusive"}, false},
}

// program is one program TestCompileFail builds: its main's body, and the fragments the
// compiler's output must hold, none where it must build.
type program struct {
	name string
	why  string // what it shows, the comment above its package clause
	body []string
	want []string
}

// programs are the programs TestCompileFail builds: for each dialect, one that opens every level
// it takes (with the row lock and advisory forms, where they take it) and one for every level it
// must refuse; a dialect chosen at run time with every form; and SQLite with each form that
// refuses it.
func programs() []program {
	ps := []program{
		{
			name: "ok_runtime",
			why:  "A dialect chosen at run time compiles with every form; its pair is checked at startup.",
			body: []string{
				`d, err := dialect.Parse("sqlite", "immediate")`,
				`if err != nil {`,
				`	panic(err)`,
				`}`,
				`jobs := inbox.Table{Name: "jobs", ID: "id"}`,
				`rowlock.New(d, jobs)`,
				`advisory.New(d, jobs, nil)`,
			},
		},
		{
			name: "advisory_sqlite",
			why:  "SQLite has no session locks, so the advisory form does not take a SQLite dialect.",
			body: []string{`advisory.New(dialect.SQLite[isolation.Default]{}, inbox.Table{Name: "jobs", ID: "id"}, nil)`},
			want: []string{"does not satisfy advisory.Dialect", "NoSessionLocksOnSQLiteUseLease"},
		},
		{
			name: "rowlock_sqlite",
			why:  "SQLite has no row locks, so the row lock form does not take a SQLite dialect.",
			body: []string{`rowlock.New(dialect.SQLite[isolation.Immediate]{}, inbox.Table{Name: "jobs", ID: "id"})`},
			want: []string{"does not satisfy rowlock.Dialect", "NoRowLocksOnSQLiteUseLease"},
		},
	}
	for _, o := range opens {
		ok := program{name: "ok_" + strings.ToLower(o.dialect), why: o.dialect + " opens every level listed here."}
		if o.forms {
			ok.why = o.dialect + " opens every level listed here and takes the row lock and advisory forms at each."
			ok.body = append(ok.body, `jobs := inbox.Table{Name: "jobs", ID: "id"}`)
		}
		for _, l := range levels {
			d := "dialect." + o.dialect + "[isolation." + l + "]{}"
			switch {
			case !slices.Contains(o.levels, l):
				ps = append(ps, program{
					name: strings.ToLower(o.dialect + "_" + l),
					why:  o.dialect + " does not open isolation." + l + ".",
					body: []string{"var _ dialect.Dialect = " + d},
					want: []string{"isolation." + l + " does not satisfy dialect." + o.constraint},
				})
			case o.forms:
				ok.body = append(ok.body, "rowlock.New("+d+", jobs)", "advisory.New("+d+", jobs, nil)")
			default:
				ok.body = append(ok.body, "var _ dialect.Dialect = "+d)
			}
		}
		ps = append(ps, ok)
	}
	return ps
}

// imports are the packages a program may use, in the order gofmt sorts them.
var imports = []string{
	"github.com/sqlinbox/inbox",
	"github.com/sqlinbox/inbox/advisory",
	"github.com/sqlinbox/inbox/dialect",
	"github.com/sqlinbox/inbox/isolation",
	"github.com/sqlinbox/inbox/rowlock",
}

// source is p as a main package, importing the packages its body names (an unused import
// would fail every build for the wrong reason).
func (p program) source() []byte {
	body := strings.Join(p.body, "\n\t")
	var b bytes.Buffer
	b.WriteString("// " + p.why + "\npackage main\n\nimport (\n")
	for _, imp := range imports {
		if strings.Contains(body, path.Base(imp)+".") {
			b.WriteString("\t\"" + imp + "\"\n")
		}
	}
	b.WriteString(")\n\nfunc main() {\n\t" + body + "\n}\n")
	return b.Bytes()
}

// TestCompileFail builds every program of programs with the go command, in a module of its
// own that requires this one from this checkout. A program with fragments pairs a dialect with
// a level or form its database cannot run: its build must fail, and the compiler's output must
// hold every fragment. A program without any must build, so that the test cannot pass by
// everything failing.
//
// The go test cache does not see the files a child go command reads, so run this test with
// -count=1 (make test does).
func TestCompileFail(t *testing.T) {
	gocmd := goCommand(t)
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	mod := t.TempDir()
	// The programs' module is outside the workspace: GOWORK=off keeps a GOWORK naming this
	// repository's go.work from claiming it. go mod init gives it the go command's own version,
	// never older than this module's.
	env := append(os.Environ(), "GOWORK=off")
	for _, args := range [][]string{
		{"mod", "init", "compilefail"},
		{"mod", "edit", "-require=github.com/sqlinbox/inbox@v0.0.0", "-replace=github.com/sqlinbox/inbox=" + root},
	} {
		cmd := exec.Command(gocmd, args...)
		cmd.Dir, cmd.Env = mod, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	for _, p := range programs() {
		if err := os.Mkdir(filepath.Join(mod, p.name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(mod, p.name, "main.go"), p.source(), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(gocmd, "build", "-o", os.DevNull, "./"+p.name)
			cmd.Dir, cmd.Env = mod, env
			out, err := cmd.CombinedOutput()
			if len(p.want) == 0 {
				if err != nil {
					t.Fatalf("go build of\n%s\nmust succeed: %v\n%s", p.source(), err, out)
				}
				return
			}
			if err == nil {
				t.Fatalf("go build of\n%s\nsucceeded; it must fail with %q", p.source(), p.want)
			}
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("running go build ./%s: %v", p.name, err)
			}
			for _, f := range p.want {
				if !bytes.Contains(out, []byte(f)) {
					t.Errorf("go build of\n%s\nfailed without %q in its output:\n%s", p.source(), f, out)
				}
			}
		})
	}
}

// goCommand is the go command on PATH, which the tests that build or list this module run.
func goCommand(t *testing.T) string {
	t.Helper()
	gocmd, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is not on PATH: %v", err)
	}
	return gocmd
}
