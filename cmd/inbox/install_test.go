package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// TestGoModAsInstallReadsIt checks what go install reads of cmd/go.mod: no replace or exclude
// directive (go install refuses a module with one), and the library required at a release
// version, the one tagged with the command (see RELEASING.md).
func TestGoModAsInstallReadsIt(t *testing.T) {
	out, err := exec.Command("go", "mod", "edit", "-json", "../go.mod").Output()
	if err != nil {
		t.Fatal(err)
	}
	var mod struct {
		Replace []struct{ Old struct{ Path string } }
		Exclude []struct{ Path string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatal(err)
	}
	for _, r := range mod.Replace {
		t.Errorf("cmd/go.mod replaces %s: go install refuses it; the workspace (go.work) serves development", r.Old.Path)
	}
	for _, x := range mod.Exclude {
		t.Errorf("cmd/go.mod excludes %s: go install refuses it", x.Path)
	}
	if v := requiredLibrary(t, out); !regexp.MustCompile(`^v\d+\.\d+\.\d+$`).MatchString(v) {
		t.Errorf("cmd/go.mod requires %s %s; want a release version, the one tagged with the command", libraryPath, v)
	}
}

func requiredLibrary(t *testing.T, goModJSON []byte) string {
	var mod struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(goModJSON, &mod); err != nil {
		t.Fatal(err)
	}
	for _, r := range mod.Require {
		if r.Path == libraryPath {
			return r.Version
		}
	}
	t.Fatalf("cmd/go.mod does not require %s", libraryPath)
	return ""
}

// TestInstallFromTags runs the release steps of RELEASING.md on a copy of the working tree, for
// the version cmd/go.mod requires, and installs the command from the tags as a user would: go
// install github.com/sqlinbox/inbox/cmd/inbox@version, outside the workspace, with a local git
// repository answering for github.com/sqlinbox/inbox.
func TestInstallFromTags(t *testing.T) {
	if testing.Short() {
		t.Skip("copies the repository and installs the command from tags")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("the install test needs git:", err)
	}
	tmp := t.TempDir()
	repo := filepath.Join(tmp, "inbox")
	gitconfig := filepath.Join(tmp, "gitconfig")
	if err := os.WriteFile(gitconfig, []byte(fmt.Sprintf("[url %q]\n\tinsteadOf = https://%s\n[protocol \"file\"]\n\tallow = always\n[user]\n\tname = inbox test\n\temail = test@example.invalid\n", "file://"+repo, libraryPath)), 0o644); err != nil {
		t.Fatal(err)
	}
	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	// A module cache of the test's own, so that the shared one never holds the test's versions;
	// the other modules come from the shared one's downloads. -trimpath keeps the builds of
	// the dependencies independent of where the module cache is, so they are compiled once.
	environ := append(os.Environ(),
		"GIT_CONFIG_GLOBAL="+gitconfig, "GIT_CONFIG_NOSYSTEM=1",
		"GOWORK=off", "GOPRIVATE="+libraryPath, "GOBIN="+filepath.Join(tmp, "bin"),
		"GOMODCACHE="+filepath.Join(tmp, "modcache"), "GOFLAGS=-modcacherw -trimpath",
		"GOPROXY=file://"+filepath.Join(goEnv("GOMODCACHE"), "cache", "download")+","+goEnv("GOPROXY"))
	sh := func(dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, environ
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
		}
		return string(out)
	}

	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not in a git checkout: the install test copies the repository's working tree")
	}
	root := strings.TrimSpace(string(top))
	copyWorkingTree(t, root, repo, sh(root, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"))
	sh(repo, "git", "init", "-q")
	sh(repo, "git", "add", "-A")
	sh(repo, "git", "commit", "-q", "-m", "the working tree")

	version := requiredLibrary(t, []byte(sh(".", "go", "mod", "edit", "-json", "../go.mod")))

	// 1. cmd/go.mod requires the library at the version about to be tagged: it does already.
	cmd := filepath.Join(repo, "cmd")
	// 2. The library's tag.
	sh(repo, "git", "tag", version)
	// 3. Outside the workspace, cmd/go.sum takes the library's checksums.
	sh(cmd, "go", "mod", "tidy")
	sh(cmd, "go", "vet", "./...")
	if changed := strings.Fields(sh(repo, "git", "status", "--porcelain")); strings.Join(changed, " ") != "M cmd/go.sum" {
		t.Errorf("the release step changed %q; want only cmd/go.sum", changed)
	}
	sh(repo, "git", "commit", "-q", "-am", "cmd/go.sum has the library's "+version)
	// 4. The command's tag, on that commit.
	sh(repo, "git", "tag", "cmd/"+version)
	// 5. Install, outside any module.
	sh(tmp, "go", "install", libraryPath+"/cmd/inbox@"+version)

	out := sh(tmp, filepath.Join(tmp, "bin", "inbox"), "version")
	want := fmt.Sprintf("inbox    %s\nlibrary  %s %s\ngo       %s %s/%s\n", version, libraryPath, version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if out != want {
		t.Errorf("inbox version, installed:\n%s\nwant:\n%s", out, want)
	}
}

// copyWorkingTree copies the files list names (NUL-separated, relative to root) to dir; a file
// deleted from the working tree is left out.
func copyWorkingTree(t *testing.T, root, dir, list string) {
	t.Helper()
	for _, name := range strings.Split(strings.TrimRight(list, "\x00"), "\x00") {
		from, err := os.Open(filepath.Join(root, name))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		info, err := from.Stat()
		if err != nil || !info.Mode().IsRegular() {
			from.Close()
			continue
		}
		to := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			t.Fatal(err)
		}
		w, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, info.Mode().Perm())
		if err == nil {
			_, err = io.Copy(w, from)
			if cerr := w.Close(); err == nil {
				err = cerr
			}
		}
		from.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}
