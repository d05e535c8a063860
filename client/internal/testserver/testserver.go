package testserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// Server is a running `artifactd serve`.
type Server struct {
	// URL is the base address, http://127.0.0.1:<port>.
	URL string
	// Bin is the artifactd binary, Data its data directory.
	Bin, Data string
	stop      func()
}

// Stop stops the server (SIGINT, then waits), so that offline commands
// such as `artifactd replay` can open the data directory. It is safe to
// call more than once.
func (s *Server) Stop() { s.stop() }

// Replay runs `artifactd replay --data <Data> --context ctxID --verify
// hash` (the server must be stopped) and returns its exit code and output.
func (s *Server) Replay(ctxID, hash string) (int, string) {
	out, err := exec.Command(s.Bin, "replay", "--data", s.Data, "--context", ctxID, "--verify", hash).CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		return -1, err.Error()
	}
	return 0, string(out)
}

var servingRE = regexp.MustCompile(`serving (http://[^ ]+)`)

// moduleRoot walks up from this file to the directory holding go.mod.
func moduleRoot() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("no caller information")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("go.mod not found above %s", file)
		}
		dir = parent
	}
}

// Build compiles cmd/artifactd into dir and returns the binary's path.
// ARTIFACTD_BIN, when set, names a binary to use instead.
func Build(t testing.TB, dir string) string {
	t.Helper()
	if bin := os.Getenv("ARTIFACTD_BIN"); bin != "" {
		return bin
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "artifactd")
	// go test puts the toolchain's bin directory first on PATH.
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the client tests build cmd/artifactd and need the go command: %v (or set ARTIFACTD_BIN)", err)
	}
	cmd := exec.Command(goBin, "build", "-o", bin, "./cmd/artifactd")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/artifactd: %v\n%s", err, out)
	}
	return bin
}

// Start builds (or reuses bin when not empty) and starts `artifactd serve`
// with extra flags; the server is stopped with SIGINT when the test ends.
func Start(t testing.TB, bin string, flags ...string) *Server {
	t.Helper()
	if bin == "" {
		bin = Build(t, t.TempDir())
	}
	data := t.TempDir()
	args := append([]string{"serve", "--data", data, "--addr", "127.0.0.1:0"}, flags...)
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(t.TempDir(), "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = cmd.Process.Kill()
				<-done
			}
			logFile.Close()
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			if log, err := os.ReadFile(logFile.Name()); err == nil {
				t.Logf("serve log (last 2000 bytes):\n%s", tail(string(log), 2000))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatalf("artifactd serve exited before serving")
		}
		return &Server{URL: strings.TrimRight(u, "/"), Bin: bin, Data: data, stop: stop}
	case <-ctx.Done():
		t.Fatalf("artifactd serve did not start within 60s")
	}
	return nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}
