package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// startPostgres initialises a Postgres cluster in a temporary directory and starts it on a free
// loopback port, as the postgres system user (the server refuses to run as root), with the
// settings Postgres ships but max_connections = 200 (the procs scenario's 16 processes hold
// about 100 connections) and the settings given (name=value). stop stops it and removes the
// directory.
func startPostgres(settings []string) (dsn string, stop func(), err error) {
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		return "", nil, fmt.Errorf("-own-postgres needs the Debian postgresql package (/usr/lib/postgresql/*/bin/initdb)")
	}
	bin := filepath.Dir(bins[len(bins)-1])
	u, err := user.Lookup("postgres")
	if err != nil {
		return "", nil, fmt.Errorf("-own-postgres needs the postgres system user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	dir, err := os.MkdirTemp("", "inbox-scale-pg-")
	if err != nil {
		return "", nil, err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir) // a server that did not start leaves nothing behind
		}
	}()
	if err := os.Chown(dir, uid, -1); err != nil {
		return "", nil, fmt.Errorf("-own-postgres needs root (to run the server as postgres): %w", err)
	}
	// postgres runs the server's program (initdb, pg_ctl) with args, as the postgres user.
	postgres := func(program string, args ...string) error {
		args = append([]string{filepath.Join(bin, program)}, args...)
		if out, err := exec.Command("runuser", append([]string{"-u", "postgres", "--"}, args...)...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	if err := postgres("initdb", "-D", data, "-A", "trust", "-U", "postgres"); err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200", port, dir)
	for _, s := range settings {
		opts += " -c " + s
	}
	if err := postgres("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start"); err != nil {
		return "", nil, err
	}
	stop = func() {
		if err := postgres("pg_ctl", "-D", data, "-m", "fast", "-w", "stop"); err != nil {
			fmt.Fprintln(os.Stderr, "scale: stopping the own Postgres:", err)
		}
		os.RemoveAll(dir)
	}
	progress("own Postgres at 127.0.0.1:%d (%s), %s", port, dir, opts)
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port), stop, nil
}
