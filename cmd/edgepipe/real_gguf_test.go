package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/standin"
)

// realTier skips a test unless EDGEPIPE_REAL=1: those tests run the real
// toolchains (installed by `edgepipe toolchain install`) on the built-in
// model, which takes minutes.
func realTier(t *testing.T) {
	t.Helper()
	if os.Getenv("EDGEPIPE_REAL") != "1" {
		t.Skip("real tier: set EDGEPIPE_REAL=1 after `edgepipe toolchain install` (go tool task test does both)")
	}
}

// realRun runs edgepipe with the real toolchains (no stand-ins on the tool
// path) from the repository root, publishing into a temporary folder.
func realRun(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := binDir(t)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := edgepipe(bin, root, args...)
	env := cmd.Env[:0]
	for _, kv := range cmd.Env {
		// The real tools only: drop the stand-in tool path and keep the
		// caller's cache, where the toolchains are installed.
		if strings.HasPrefix(kv, "EDGEPIPE_TOOL_PATH=") || strings.HasPrefix(kv, "EDGEPIPE_CACHE=") {
			continue
		}
		env = append(env, kv)
	}
	if c := os.Getenv("EDGEPIPE_CACHE"); c != "" {
		env = append(env, "EDGEPIPE_CACHE="+c)
	}
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestRealDemo converts the built-in SmolLM2-135M to GGUF Q4_K_M and Q8_0
// with the real llama.cpp tools, gates both on measured perplexity, and
// checks the published folders and manifests.
func TestRealDemo(t *testing.T) {
	t.Parallel() // two real tests at a time share the cores (docs/testing.md)
	realTier(t)
	out := t.TempDir()
	log, err := realRun(t, "run", "-j", "2", "--out", out, "recipes/demo.yaml")
	t.Logf("edgepipe run recipes/demo.yaml:\n%s", log)
	if err != nil {
		t.Fatalf("demo run failed: %v", err)
	}
	for _, target := range []string{"laptop-q4km", "laptop-q8"} {
		dir := filepath.Join(out, target)
		if log, err := realRun(t, "verify", dir); err != nil {
			t.Fatalf("verify %s: %v\n%s", target, err, log)
		}
		m, err := manifest.Read(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range m.Steps {
			if s.StandIn {
				t.Errorf("%s: step %s ran a stand-in tool in the real tier", target, s.ID)
			}
		}
		p := m.Metrics.Perplexity
		if p == nil || p.Backend != "llama.cpp" || p.Verdict == manifest.VerdictFail || !(p.Baseline > 1) || !(p.Converted > 1) {
			t.Fatalf("%s: perplexity gate %+v", target, p)
		}
		if m.Metrics.KLDivergence == nil || m.Metrics.Top1Agreement == nil {
			t.Errorf("%s: KL divergence or top-1 agreement missing", target)
		}
		consistent := false
		for _, c := range m.Metrics.Checks {
			if strings.Contains(c.Name, "compare-perplexity:f16") && c.Passed {
				consistent = true
			}
		}
		if !consistent {
			t.Errorf("%s: no passed F16-vs-checkpoint agreement check in %+v", target, m.Metrics.Checks)
		}
		t.Logf("%s: size %d, ppl %.4f vs %.4f (delta %+.4f, %s), KL %.5f, top-1 %.3f",
			target, *m.Metrics.SizeBytes, p.Converted, p.Baseline, p.Delta, p.Verdict, *m.Metrics.KLDivergence, *m.Metrics.Top1Agreement)
		// The demo times its Q8_0 target on this host.
		if b := m.Metrics.Bench; (b != nil) != (target == "laptop-q8") {
			t.Errorf("%s: bench %+v", target, b)
		} else if b != nil {
			if b.Backend != "llama.cpp" || !(b.DecodeTokS > 0) || b.Efficiency == nil || !(*b.Efficiency > 0) {
				t.Errorf("%s: bench %+v", target, b)
			}
			t.Logf("%s: decode %.2f tok/s (p50 %.2f, p95 %.2f, p99 %.2f ms), first token %.1f ms for %d tokens, host %.2f GB/s, ceiling %.2f tok/s, efficiency %.3f",
				target, b.DecodeTokS, b.TokenP50MS, b.TokenP95MS, b.TokenP99MS, b.FirstTokenMS, b.PromptTokens,
				*b.HostBandwidthGBs, *b.HostCeilingTokS, *b.Efficiency)
		}
	}
	for _, name := range []string{"report.html", "report.md"} {
		if _, err := os.Stat(filepath.Join(out, name)); err != nil {
			t.Errorf("the demo wrote no %s: %v", name, err)
		}
	}
	// A second run is all cache hits.
	log, err = realRun(t, "run", "--out", out, "recipes/demo.yaml")
	if err != nil {
		t.Fatalf("rerun: %v\n%s", err, log)
	}
	if strings.Contains(log, " done ") || strings.Contains(log, " start ") {
		t.Errorf("rerun ran steps:\n%s", log)
	}
}

// realEdgepipe skips unless EDGEPIPE_REAL=1 and returns a runner for
// edgepipe with the real toolchains (no stand-ins on the tool path) in a
// fresh work folder, and that folder. The toolchains and step outputs live
// in EDGEPIPE_CACHE, default the user cache folder, so later runs reuse
// them. A failing command fails the test with its output.
func realEdgepipe(t *testing.T, installs string) (run func(args ...string) []byte, work string) {
	t.Helper()
	if os.Getenv("EDGEPIPE_REAL") != "1" {
		t.Skipf("real tier: set EDGEPIPE_REAL=1 (%s)", installs)
	}
	work = t.TempDir()
	return func(args ...string) []byte {
		t.Helper()
		out, err := realCommand(t, work, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("edgepipe %v: %v\n%s", args, err, out)
		}
		return out
	}, work
}

// realCommand is edgepipe run in work on the real tools (no stand-in on
// PATH or EDGEPIPE_TOOL_PATH) with the user's cache, where the real tier
// keeps its toolchains.
func realCommand(t *testing.T, work string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir(t), "edgepipe"), args...)
	cmd.Dir = work
	cmd.Env = append(withoutStandinPath(os.Environ()), "EDGEPIPE_CACHE="+userCache(t), "EDGEPIPE_TOOL_PATH=")
	return cmd
}

// withoutStandinPath drops from PATH the folders that hold stand-in tools:
// testscript puts its commands (the stand-ins among them) first on this
// process's PATH, and a system tool found through PATH (chromium) must be
// the real one in the real tier.
func withoutStandinPath(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		path, ok := strings.CutPrefix(kv, "PATH=")
		if !ok {
			out = append(out, kv)
			continue
		}
		var keep []string
		for _, dir := range filepath.SplitList(path) {
			if !holdsStandin(dir) {
				keep = append(keep, dir)
			}
		}
		out = append(out, "PATH="+strings.Join(keep, string(os.PathListSeparator)))
	}
	return out
}

func holdsStandin(dir string) bool {
	for name := range standin.Tools {
		// The helper scripts' names: no system folder has those (it may
		// well have a real chromium, which has a stand-in too).
		if !strings.HasSuffix(name, ".py") {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return true
		}
	}
	return false
}
