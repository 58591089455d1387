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
	"time"
)

// modules are the repository's modules that a user gets on their own, by their directory: each
// requires the library, and is built outside the workspace by go install and go get.
var modules = []string{"cmd", "otel", "pgnotify"}

var (
	// releaseVersion matches a release version, as RELEASING.md tags it.
	releaseVersion = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
	// untaggedVersion matches the pseudo-version of a commit of a repository with no tag:
	// v0.0.0-yyyymmddhhmmss-abcdefabcdef.
	untaggedVersion = regexp.MustCompile(`^v0\.0\.0-\d{14}-([0-9a-f]{12})$`)
)

// TestModulesRequireTheLibraryAsInstallReadsThem checks what go install and go get read of the
// go.mod of cmd, otel and pgnotify outside the workspace: no replace or exclude directive (go
// install refuses a module with one, and a user's build ignores them, so the module would
// require what only this checkout has), and the library required at one version, a release or
// the pseudo-version of a commit of this repository's history (see RELEASING.md).
func TestModulesRequireTheLibraryAsInstallReadsThem(t *testing.T) {
	var versions []string
	for _, m := range modules {
		out, err := exec.Command("go", "mod", "edit", "-json", filepath.Join("..", "..", m, "go.mod")).Output()
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
			t.Errorf("%s/go.mod replaces %s: go install refuses it, and a user's build ignores it; the workspace (go.work) serves development", m, r.Old.Path)
		}
		for _, x := range mod.Exclude {
			t.Errorf("%s/go.mod excludes %s: go install refuses it", m, x.Path)
		}
		v := requiredLibrary(t, m, out)
		versions = append(versions, v)
		if !releaseVersion.MatchString(v) && !untaggedVersion.MatchString(v) {
			t.Errorf("%s/go.mod requires %s %s; want a release version or the pseudo-version of a commit of main (RELEASING.md)", m, libraryPath, v)
		}
		if hash := untaggedVersion.FindStringSubmatch(v); v == "v0.0.0-00010101000000-000000000000" {
			t.Errorf("%s/go.mod requires %s at %s, the version go mod tidy writes for a module a replace serves: no repository serves it", m, libraryPath, v)
		} else if hash != nil {
			if err := exec.Command("git", "merge-base", "--is-ancestor", hash[1], "HEAD").Run(); err != nil {
				t.Errorf("%s/go.mod requires %s at %s, whose commit %s is not in this checkout's history (%v)", m, libraryPath, v, hash[1], err)
			}
		}
	}
	for i, v := range versions {
		if v != versions[0] {
			t.Errorf("%s/go.mod requires %s %s, %s/go.mod %s: require one version in all", modules[i], libraryPath, v, modules[0], versions[0])
		}
	}
}

// requiredLibrary is the version of the library that module m's go.mod, as go mod edit -json
// prints it, requires.
func requiredLibrary(t *testing.T, m string, goModJSON []byte) string {
	t.Helper()
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
	t.Fatalf("%s/go.mod does not require %s", m, libraryPath)
	return ""
}

// TestInstallAsAUserWould gets the modules as someone outside this checkout would, outside the
// workspace, from a git repository that answers for github.com/sqlinbox/inbox with this
// checkout's history and its working tree on top, as the public repository would:
//
//   - untagged, as today: go install github.com/sqlinbox/inbox/cmd/inbox@latest; a module of the
//     user's that imports the library, otel and pgnotify, resolved by go mod tidy, and the same
//     module with each of them replaced by a clone; and cmd, otel and pgnotify each load there
//     from their own go.mod and go.sum;
//   - then the release steps of RELEASING.md, for v0.1.0, and go install …@v0.1.0.
func TestInstallAsAUserWould(t *testing.T) {
	if testing.Short() {
		t.Skip("clones the repository and installs the command as a user would")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("the install test needs git:", err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skip("not in a git checkout: the install test clones the repository")
	}
	root := strings.TrimSpace(string(top))
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
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s (in %s): %v\n%s", name, strings.Join(args, " "), dir, err, out)
		}
		t.Logf("%s %s (in %s): %v", name, strings.Join(args, " "), strings.TrimPrefix(dir, tmp), time.Since(start).Round(time.Millisecond))
		return string(out)
	}
	// loads checks that a module's packages and tests load outside the workspace from what its
	// go.mod and go.sum say, without building them.
	loads := func(m string) { sh(filepath.Join(repo, m), "go", "list", "-deps", "-test", "./...") }
	pinned := requiredLibrary(t, "cmd", []byte(sh(".", "go", "mod", "edit", "-json", "../go.mod")))
	commit := pinned[strings.LastIndexByte(pinned, '-')+1:]
	if err := exec.Command("git", "-C", root, "cat-file", "-e", commit+"^{commit}").Run(); err != nil {
		// A shallow clone (a CI checkout of depth 1) lacks the commit the pseudo-version names.
		t.Skipf("this checkout's history lacks commit %s, which cmd/go.mod requires the library at: clone the repository whole to run the install test", commit)
	}

	// The repository: this checkout's history (the pseudo-version's commit among it), and the
	// working tree committed on top.
	sh(tmp, "git", "clone", "-q", "--no-hardlinks", root, repo)
	sh(repo, "git", "rm", "-q", "-r", ".")
	copyWorkingTree(t, root, repo, sh(root, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"))
	sh(repo, "git", "add", "-A")
	sh(repo, "git", "commit", "-q", "--allow-empty", "-m", "the working tree")

	// Untagged. The command, outside any module.
	sh(tmp, "go", "install", libraryPath+"/cmd/inbox@latest")
	version := sh(tmp, filepath.Join(tmp, "bin", "inbox"), "version")
	if !regexp.MustCompile(`^inbox    v0\.0\.0-\d{14}-[0-9a-f]{12}\nlibrary  ` + regexp.QuoteMeta(libraryPath+" "+pinned) + "\n").MatchString(version) {
		t.Errorf("inbox version, installed @latest from the untagged repository:\n%s\nwant the command at a pseudo-version, and the library at %s", version, pinned)
	}
	// A user's module, which imports the three modules and lets go mod tidy find them.
	app := filepath.Join(tmp, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		t.Fatal(err)
	}
	source := "package main\n\nimport (\n\t_ \"" + libraryPath + "\"\n\t_ \"" + libraryPath + "/otel\"\n\t_ \"" + libraryPath + "/pgnotify\"\n)\n\nfunc main() {}\n"
	if err := os.WriteFile(filepath.Join(app, "main.go"), []byte(source), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(app, "go", "mod", "init", "example.com/app")
	sh(app, "go", "mod", "tidy")
	sh(app, "go", "build", "-o", filepath.Join(tmp, "app.bin"), ".")
	// The same module served by a clone, as the README says for a repository one cannot fetch.
	if err := os.WriteFile(filepath.Join(app, "go.mod"), []byte("module example.com/app\n\ngo 1.26.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(app, "go.sum"))
	sh(app, "go", "mod", "edit", "-replace", libraryPath+"="+repo, "-replace", libraryPath+"/otel="+filepath.Join(repo, "otel"), "-replace", libraryPath+"/pgnotify="+filepath.Join(repo, "pgnotify"))
	sh(app, "go", "mod", "tidy")
	sh(app, "go", "build", "-o", filepath.Join(tmp, "app.bin"), ".")
	if got := sh(app, "go", "list", "-m", libraryPath); !strings.HasSuffix(got, " => "+repo+"\n") {
		t.Errorf("go list -m %s: %q; want it replaced by the clone", libraryPath, got)
	}
	// Each module as its go.mod and go.sum are, outside the workspace.
	for _, m := range modules {
		loads(m)
	}

	// The release, by RELEASING.md.
	const release = "v0.1.0"
	// 1. Each module requires the library at the version about to be tagged.
	for _, m := range modules {
		sh(filepath.Join(repo, m), "go", "mod", "edit", "-require="+libraryPath+"@"+release)
	}
	sh(repo, "git", "commit", "-q", "-am", "cmd, otel and pgnotify require the library's "+release)
	// 2. The library's tag.
	sh(repo, "git", "tag", release)
	// 3. Outside the workspace, each module's go.sum takes the library's checksums.
	for _, m := range modules {
		sh(filepath.Join(repo, m), "go", "mod", "tidy")
		loads(m)
	}
	if changed := strings.Fields(sh(repo, "git", "status", "--porcelain")); strings.Join(changed, " ") != "M cmd/go.sum M otel/go.sum M pgnotify/go.sum" {
		t.Errorf("the release step changed %q; want only the three go.sum files", changed)
	}
	sh(repo, "git", "commit", "-q", "-am", "cmd, otel and pgnotify: go.sum has the library's "+release)
	// 4. The modules' tags, on that commit.
	for _, m := range modules {
		sh(repo, "git", "tag", m+"/"+release)
	}
	// 5. Install, outside any module.
	sh(tmp, "go", "install", libraryPath+"/cmd/inbox@"+release)
	out := sh(tmp, filepath.Join(tmp, "bin", "inbox"), "version")
	want := fmt.Sprintf("inbox    %s\nlibrary  %s %s\ngo       %s %s/%s\n", release, libraryPath, release, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if out != want {
		t.Errorf("inbox version, installed @%s:\n%s\nwant:\n%s", release, out, want)
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
