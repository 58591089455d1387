// Command inbox is the library's command-line tool.
//
//	go install github.com/sqlinbox/inbox/cmd/inbox@latest   # or, in a checkout: go run ./cmd/inbox
//
//	inbox demo                      # a queue in an embedded SQLite file, no server needed
//	inbox demo -n 20000 -workers 8
//	inbox demo -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	inbox demo -dsn 'mariadb://root@tcp(127.0.0.1:3306)/test'
//	inbox schema -db postgres       # the CREATE TABLE a description needs (-apply, -check)
//	inbox stats -watch 2s           # rows by state, per queue
//	inbox rows -state delayed       # the rows in a state, highest id first
//	inbox show 42                   # one row, whole: payload, headers, attempts, last error
//	inbox reschedule 42 -in 2h      # a queued row runs later (or -at 2026-12-24T08:00:00Z)
//	inbox pause -queue emails       # no claim takes the queue's rows until inbox resume
//	inbox limits set -queue emails -max 5   # at most 5 in work at once, across processes
//	inbox cancel -ids 42,43         # cancel rows, queued or in work; -requeue puts them back
//	inbox dead list                 # dead rows, newest first; dead requeue, dead purge
//	inbox purge -processed-before 7d
//	inbox schedules                 # periodic jobs: each schedule's last and next tick
//	inbox version
//
// Every command that reaches a database takes it from -dsn, or else from $INBOX_DSN; the DSN's
// scheme picks the driver and the dialect (inbox -h lists them), and no output shows its
// password. inbox exits with 0 when the command succeeded, 1 when it failed, and 2 when the
// command line is wrong; errors go to standard error.
//
// A command that operates a table (every one but schema) finds each role's column by the name
// the README gives it, where the table has that column, and leaves the role out where it has
// not: the README's table needs no flag, and neither does one without, say, headers. A flag
// names a column of another name (-headers=hdrs), which must then exist, or none (-headers=).
//
// The benchmarks are commands of the bench/ module: go run ./bench/cmd/throughput and
// go run ./bench/cmd/peers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// A command is one of inbox's subcommands, in a file of its own. run gets the arguments after
// the command's name.
type command struct {
	name, summary string
	run           func(ctx context.Context, s *session, args []string) error
}

// commands are the subcommands, in the order the usage lists them.
var commands = []command{
	{"demo", "publish messages to a table of its own and drain them with a lease consumer", demo},
	{"schema", "print, create (-apply) or check (-check) the table a description needs", schemaCommand},
	{"stats", "count a table's rows by state, per queue (-watch, -json)", statsCommand},
	{"rows", "list the rows in a state, a page at a time (-state delayed)", rowsCommand},
	{"show", "print one row, whole: inbox show 42", showCommand},
	{"reschedule", "move one queued row to another run time (-at, -in)", rescheduleCommand},
	{"pause", "pause a queue: no claim takes its rows until resume (-queue)", pauseCommand},
	{"resume", "resume a paused queue (-queue)", resumeCommand},
	{"rates", "list, set or clear rate limits of a queue or kind (set -queue q -rate 100/1m)", ratesCommand},
	{"cancel", "cancel rows by id, queued or in work (-ids 1,2; -requeue puts them back)", cancelCommand},
	{"dead", "list, requeue or purge dead rows", deadCommand},
	{"purge", "delete processed rows older than an age (-processed-before 7d)", purgeCommand},
	{"schedules", "list the periodic jobs' schedules with their last and next tick (-json)", schedulesCommand},
	{"limits", "list, set or clear concurrency limits per queue, kind or key (set -queue q -max 5)", limitsCommand},
	{"groups", "list the FIFO groups with rows pending (-blocked); unblock, pause or resume one", groupsCommand},
	{"ui", "serve the operator's web page for one table (-addr 127.0.0.1:8080)", uiCommand},
	{"version", "print the versions of this command, the library and Go", version},
}

func usage(w io.Writer) {
	fmt.Fprint(w, "usage: inbox <command> [flags]\n\ncommands:\n")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\n'inbox <command> -h' lists a command's flags.\n\n", dsnHelp)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// run runs the command args[0] names with the rest of args, and returns the exit status: 0
// when it succeeded, 1 when it failed, 2 when the command line is wrong, 130 when it was
// interrupted.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	s := &session{stdout: &scrubber{w: stdout}, stderr: &scrubber{w: stderr}, getenv: getenv, terminal: isTerminal(stdout)}
	if len(args) == 0 {
		usage(s.stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		usage(s.stdout)
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, s, args[1:])
		var bad usageError
		switch {
		case err == nil, errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errFlags):
			return 2 // the flag package has printed what is wrong, and the usage
		case errors.As(err, &bad):
			fmt.Fprintf(s.stderr, "inbox %s: %s\n'inbox %s -h' lists its flags.\n", c.name, said(err), c.name)
			return 2
		case ctx.Err() != nil && errors.Is(err, context.Canceled):
			fmt.Fprintf(s.stderr, "inbox %s: interrupted\n", c.name)
			return 130
		default:
			fmt.Fprintf(s.stderr, "inbox %s: %s\n", c.name, said(err))
			return 1
		}
	}
	fmt.Fprintf(s.stderr, "inbox: unknown command %q\n\n", args[0])
	usage(s.stderr)
	return 2
}

// said is err's text after the command's name: without the "inbox: " the library's errors
// begin with, which the name replaces.
func said(err error) string { return strings.TrimPrefix(err.Error(), "inbox: ") }

// isTerminal reports whether w is a terminal (a character device), where stats -watch redraws
// in place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// A session is what a command runs with: its output streams, which hide the password of every
// DSN the session has parsed, whether the standard output is a terminal, and the environment.
type session struct {
	stdout, stderr *scrubber
	getenv         func(string) string
	terminal       bool // stdout is a terminal
}

// flags returns the flag set of command name, printing its usage (head, then the flags) and
// its errors to standard error.
func (s *session) flags(name, head string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(s.stderr)
	fs.Usage = func() {
		fmt.Fprintf(s.stderr, "usage: inbox %s [flags]\n\n%s\n\nflags:\n", name, strings.TrimSpace(head))
		fs.PrintDefaults()
		if fs.Lookup("dsn") != nil {
			fmt.Fprint(s.stderr, "\n", dsnHelp)
		}
	}
	return fs
}

// parse parses args into fs; a command takes no arguments besides its flags.
func (s *session) parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errFlags
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// dsnFlag registers -dsn, the database of every command that reaches one (see session.target).
func dsnFlag(fs *flag.FlagSet, fallback string) *string {
	return fs.String("dsn", "", "the database, by a DSN (below); default $INBOX_DSN, or else "+fallback)
}

// target parses the DSN a command was given (its -dsn flag, or else $INBOX_DSN) and hides its
// password in the session's output from now on, whether it parses or not. An empty DSN returns
// ok false. A DSN that does not parse is a usage error.
func (s *session) target(flagValue string) (t target, ok bool, err error) {
	dsn := flagValue
	if dsn == "" {
		dsn = s.getenv("INBOX_DSN")
	}
	if dsn == "" {
		return target{}, false, nil
	}
	t, err = parseDSN(dsn)
	t.fromEnv = flagValue == ""
	s.stdout.hide(t.secrets...)
	s.stderr.hide(t.secrets...)
	if err != nil {
		if t.fromEnv {
			err = fmt.Errorf("$INBOX_DSN: %w", err)
		}
		return t, false, usageError{err}
	}
	return t, true, nil
}

// usageError is a mistake in the command line: run prints it and exits with 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// errFlags is a command line the flag package refused, and has said why.
var errFlags = errors.New("bad flags")

// A scrubber writes to w with every secret it was told to hide replaced by xxxxx. Each Write is
// scrubbed alone, so a secret split across two writes would pass: every line here is written
// whole. Writes are serialized, since the consumer's logger writes from its own goroutines.
type scrubber struct {
	mu      sync.Mutex
	w       io.Writer
	secrets []string
	r       *strings.Replacer
}

// hide adds secrets to those the scrubber replaces.
func (s *scrubber) hide(secrets ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, x := range secrets {
		if x != "" {
			s.secrets = append(s.secrets, x)
		}
	}
	// The longest first, so that a secret containing another is replaced whole.
	sort.SliceStable(s.secrets, func(i, j int) bool { return len(s.secrets[i]) > len(s.secrets[j]) })
	pairs := make([]string, 0, 2*len(s.secrets))
	for _, x := range s.secrets {
		pairs = append(pairs, x, hidden)
	}
	s.r = strings.NewReplacer(pairs...)
}

func (s *scrubber) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	text := string(p)
	if s.r != nil {
		text = s.r.Replace(text)
	}
	if _, err := io.WriteString(s.w, text); err != nil {
		return 0, err
	}
	return len(p), nil
}
