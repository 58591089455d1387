package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// libraryPath is the library's module path, as the build info names it.
const libraryPath = "github.com/sqlinbox/inbox"

func version(ctx context.Context, s *session, args []string) error {
	fs := s.flags("version", `Prints the versions of this command, of the library it was built with, and of Go, as the
build recorded them: "(devel)" for a build from a checkout.`)
	if err := s.parse(fs, args); err != nil {
		return err
	}
	cmd, lib := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		cmd = bi.Main.Version
		for _, m := range bi.Deps {
			if m.Path != libraryPath {
				continue
			}
			lib = m.Version
			if m.Replace != nil {
				lib += " (replaced by " + m.Replace.Path + " " + m.Replace.Version + ")"
			}
		}
	}
	fmt.Fprintf(s.stdout, "inbox    %s\nlibrary  %s %s\ngo       %s %s/%s\n", cmd, libraryPath, lib, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
