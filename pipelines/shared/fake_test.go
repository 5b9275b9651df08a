package shared

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/edgepipe/edgepipe/steps"
)

// fakeStep is a steps.Context whose tools do not run: Exec records each
// argv and calls tool (when set), which plays the tool's part by writing
// files and printing its report into the step's log.
type fakeStep struct {
	sc   *steps.Context
	argv [][]string
	tool func(argv []string) error
	data map[string]string

	mu       sync.Mutex
	log      strings.Builder
	progress []string
}

func newFakeStep(t *testing.T, params any, inputs ...steps.Input) *fakeStep {
	t.Helper()
	dir := t.TempDir()
	f := &fakeStep{data: map[string]string{}}
	out, scratch, recipeDir := filepath.Join(dir, "out"), filepath.Join(dir, "scratch"), filepath.Join(dir, "recipe")
	for _, d := range []string{out, scratch, recipeDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.sc = &steps.Context{StepID: "step", Params: params, Inputs: inputs, Out: out, Scratch: scratch,
		Tool: func(name string) ([]string, error) { return []string{"/opt/tools/" + name}, nil },
		Exec: func(_ context.Context, argv []string, _ []string) error {
			f.argv = append(f.argv, argv)
			if f.tool != nil {
				return f.tool(argv)
			}
			return nil
		},
		Log: logWriter{f},
		Data: func(role string) (string, error) {
			if p, ok := f.data[role]; ok {
				return p, nil
			}
			return "", fmt.Errorf("the recipe has no %s data", role)
		},
		Result:  &steps.Result{},
		LogPath: filepath.Join(dir, "step.log"),
		Progress: func(label string, done, total int64) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.progress = append(f.progress, label)
		},
		CacheDir:  filepath.Join(dir, "cache"),
		RecipeDir: recipeDir,
		Threads:   2,
	}
	return f
}

type logWriter struct{ f *fakeStep }

func (w logWriter) Write(b []byte) (int, error) {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return w.f.log.Write(b)
}

func (f *fakeStep) logText() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.log.String()
}

// print appends lines to the step's log file, as a tool's output.
func (f *fakeStep) print(t *testing.T, lines ...string) {
	t.Helper()
	lf, err := os.OpenFile(f.sc.LogPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer lf.Close()
	for _, l := range lines {
		if _, err := fmt.Fprintln(lf, l); err != nil {
			t.Fatal(err)
		}
	}
}

// argAfter is the value that follows flag in argv ("" when absent).
func argAfter(argv []string, flag string) string {
	for i, a := range argv[:max(len(argv)-1, 0)] {
		if a == flag {
			return argv[i+1]
		}
	}
	return ""
}

// writeFiles writes name -> content under dir, making folders.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// listFiles lists the files under dir, relative and slash-separated.
func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// withFetcher registers a fetcher for the test's duration.
func withFetcher(t *testing.T, f Fetcher) {
	t.Helper()
	old := Fetchers
	Fetchers = append(Fetchers[:len(Fetchers):len(Fetchers)], f)
	t.Cleanup(func() { Fetchers = old })
}

// tlsServer is an https server on 127.0.0.1 that the getter (which clones
// http.DefaultTransport) trusts for the test's duration.
func tlsServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	old := http.DefaultTransport
	http.DefaultTransport = srv.Client().Transport
	t.Cleanup(func() {
		http.DefaultTransport = old
		srv.Close()
	})
	return srv
}
