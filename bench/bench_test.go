package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/bench/shellpeer"
	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/standin"
	_ "github.com/edgepipe/edgepipe/pipelines/standins" // every family's stand-ins
)

func TestResultLine(t *testing.T) {
	r := result{name: "x"}
	r.add("a_s", 1500*time.Millisecond)
	r.add("n", int64(12345))
	r.add("ok", true)
	r.add("goal", "ratio>=0.9")
	r.add("note", "two words")
	r.ratio = 0.123456
	want := `BENCH x a_s=1.5 n=12345 ok=yes goal="ratio>=0.9" note="two words" ratio=0.123`
	if got := r.line(); got != want {
		t.Errorf("line:\n got %s\nwant %s", got, want)
	}
	s := result{name: "y", skipped: "no tools"}
	if got := s.line(); got != `BENCH y skipped reason="no tools"` {
		t.Errorf("skipped line: %s", got)
	}
	if strings.Contains(s.line(), "ratio=") {
		t.Error("a skipped benchmark printed a ratio")
	}
}

func TestFmtBytes(t *testing.T) {
	for n, want := range map[int64]string{
		100:           "100B",
		1536:          "1.5KiB",
		4 << 30:       "4GiB",
		64 << 20:      "64MiB",
		1<<30 + 1<<20: "1GiB", // 1.001 GiB: two decimals
	} {
		if got := fmtBytes(n); got != want {
			t.Errorf("fmtBytes(%d) = %s, want %s", n, got, want)
		}
	}
}

func TestSelectBenchmarks(t *testing.T) {
	all, err := selectBenchmarks(nil)
	if err != nil || len(all) != len(benchmarks) {
		t.Fatalf("no args: %d benchmarks, %v", len(all), err)
	}
	got, err := selectBenchmarks([]string{"hash", "noop-rerun"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].name != "noop-rerun" || got[1].name != "hash" {
		t.Errorf("selection not in registry order: %v", []string{got[0].name, got[1].name})
	}
	if _, err := selectBenchmarks([]string{"hsah"}); err == nil || !strings.Contains(err.Error(), "noop-rerun") {
		t.Errorf("unknown name: %v (want an error listing the names)", err)
	}
}

func TestRunCountsReadsOfReapedDescendants(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "data")
	const size = 3 << 20
	if err := os.WriteFile(file, bytes.Repeat([]byte("x"), size), 0o644); err != nil {
		t.Fatal(err)
	}
	// cat is a grandchild: its reads reach the child's counters only
	// because sh reaps it.
	m, err := mustSucceed(context.Background(), command{argv: []string{"sh", "-c", "cat " + file + " >/dev/null; true"}})
	if err != nil {
		t.Fatal(err)
	}
	if m.rchar < size {
		t.Errorf("rchar %d, want at least the %d bytes cat read", m.rchar, size)
	}
	if m.maxRSS <= 0 || m.wall <= 0 {
		t.Errorf("maxRSS %d wall %v: want both positive", m.maxRSS, m.wall)
	}

	idle, err := mustSucceed(context.Background(), command{argv: []string{"true"}})
	if err != nil {
		t.Fatal(err)
	}
	if idle.rchar >= size {
		t.Errorf("true read %d bytes", idle.rchar)
	}
}

func TestRunExitCode(t *testing.T) {
	m, err := run(context.Background(), command{argv: []string{"sh", "-c", "echo oops >&2; exit 3"}})
	if err != nil {
		t.Fatal(err)
	}
	if m.exitCode != 3 || !strings.Contains(m.errorText(), "oops") {
		t.Errorf("exit %d, output %q", m.exitCode, m.errorText())
	}
	if _, err := mustSucceed(context.Background(), command{argv: []string{"false"}}); err == nil {
		t.Error("mustSucceed accepted exit 1")
	}
}

func TestSampleTreeRSSSeesGrandchildren(t *testing.T) {
	m, err := mustSucceed(context.Background(), command{argv: []string{"sh", "-c", "sleep 0.3; true"}, sampleTreeRSS: true})
	if err != nil {
		t.Fatal(err)
	}
	if m.peakTreeRSS <= 0 {
		t.Errorf("peak tree RSS %d, want > 0", m.peakTreeRSS)
	}
}

func TestSchedGraph(t *testing.T) {
	deps := schedGraph(1000)
	if len(deps) != 1000 || len(deps[0]) != 0 {
		t.Fatalf("%d steps, first needs %v", len(deps), deps[0])
	}
	wide := 0
	for i, d := range deps[1:] {
		i++
		if len(d) == 0 || len(d) > 2 {
			t.Fatalf("step %d needs %v", i, d)
		}
		for _, j := range d {
			if j >= i || j < i-20 {
				t.Fatalf("step %d needs %d, not one of the 20 before it", i, j)
			}
		}
		if len(d) == 2 && d[0] == d[1] {
			t.Fatalf("step %d needs %d twice", i, d[0])
		}
		if !contains(d, i-1) {
			wide++
		}
	}
	if wide < 500 {
		t.Errorf("only %d steps can run beside their predecessor; the graph is nearly a chain", wide)
	}
	if again := schedGraph(1000); !equalDeps(again, deps) {
		t.Error("schedGraph is not deterministic")
	}
	tf := schedTaskfile(deps[:3], "/bin/true")
	if !strings.Contains(tf, "run: once") || strings.Count(tf, "cmds: [/bin/true]") != 3 {
		t.Errorf("taskfile:\n%s", tf)
	}
}

func contains(xs []int, x int) bool {
	for _, v := range xs {
		if v == x {
			return true
		}
	}
	return false
}

func equalDeps(a, b [][]int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for k := range a[i] {
			if a[i][k] != b[i][k] {
				return false
			}
		}
	}
	return true
}

func TestParseNsPerOp(t *testing.T) {
	out := []byte("goos: linux\nBenchmarkNoop1000-2   \t      20\t   2500000 ns/op\nBenchmarkNoop1000-2 20 3000000 ns/op\nBenchmarkNoop1000-2 20 1000000 ns/op\nPASS\n")
	got, err := parseNsPerOp(out)
	if err != nil || got != 2500000 {
		t.Errorf("got %v, %v; want the median 2500000", got, err)
	}
	if _, err := parseNsPerOp([]byte("FAIL\n")); err == nil {
		t.Error("no error without a result line")
	}
}

// The integration tests below run the real edgepipe on the stand-in tools.

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// testEnv builds edgepipe and the stand-ins once into a temp folder and
// returns an env that uses them.
func testEnv(t *testing.T) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs edgepipe")
	}
	root, err := findRoot("")
	if err != nil {
		t.Fatal(err)
	}
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "bench-test-bin-*")
		if buildErr != nil {
			return
		}
		for _, b := range [][2]string{{"edgepipe", "./cmd/edgepipe"}, {"standins/standin", "./pipelines/standins/cmd/standin"}} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, b[0]), b[1])
			cmd.Dir = root
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = &buildError{err, out}
				return
			}
		}
		buildErr = standin.Link(filepath.Join(buildDir, "standins"))
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	scratch := t.TempDir()
	// Shards of 8 MiB are over digest's mmap threshold, so the byte counts
	// cover reads through mappings (counted from the overhead event).
	return &env{
		config:   config{root: root, tmp: scratch, reps: 2, slowReps: 1, noopBytes: 32 << 20, hashBytes: 8 << 20, schedSteps: 30},
		edgepipe: filepath.Join(buildDir, "edgepipe"),
		standins: filepath.Join(buildDir, "standins"),
		scratch:  scratch,
		log:      io.Discard,
	}
}

type buildError struct {
	err error
	out []byte
}

func (b *buildError) Error() string { return b.err.Error() + "\n" + string(b.out) }

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

func keys(r result) map[string]string {
	out := map[string]string{}
	for _, p := range r.keys {
		out[p.key] = p.value
	}
	return out
}

func TestNoopRerunMeasuresReadsAndHits(t *testing.T) {
	e := testEnv(t)
	res, err := runNoopRerun(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	k := keys(res)
	for _, key := range []string{"verify_rehashed_all", "touch_rehashed", "touch_cache_hit"} {
		if k[key] != "yes" {
			t.Errorf("%s=%s, want yes (line: %s)", key, k[key], res.line())
		}
	}
	// The rerun must read far less than one shard; the checksum peer reads
	// every input (runNoopRerun fails otherwise).
	if n := atoi(t, k["edgepipe_read_bytes"]); n >= e.noopBytes/noopShards {
		t.Errorf("edgepipe read %d bytes on a cached rerun: %s", n, res.line())
	}
	if n := atoi(t, k["after_touch_read_bytes"]); n >= e.noopBytes/noopShards {
		t.Errorf("the run after the touched rerun read %d bytes: the memo did not keep the new identity", n)
	}
	if res.ratio <= 0 {
		t.Errorf("ratio %v", res.ratio)
	}
	if entries, _ := os.ReadDir(e.scratch); len(entries) != 0 {
		t.Errorf("test data left behind: %v", entries)
	}
}

func TestSchedulerRunsEveryStep(t *testing.T) {
	e := testEnv(t)
	res, err := runScheduler(context.Background(), e)
	if err != nil {
		t.Fatal(err)
	}
	if k := keys(res); k["steps"] != "30" || res.ratio <= 0 {
		t.Errorf("line: %s", res.line())
	}
}

func TestHashAgreesWithOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	e := testEnv(t)
	res, err := runHash(context.Background(), e) // fails when the digests differ
	if err != nil {
		t.Fatal(err)
	}
	if res.ratio <= 0 {
		t.Errorf("line: %s", res.line())
	}
}

// The shell peer of demo-overhead must do the same work as edgepipe: its
// outputs are byte for byte the ones edgepipe cached.
func TestShellPeerReproducesEdgepipeOutputs(t *testing.T) {
	e := testEnv(t)
	dir := t.TempDir()
	if err := writeTinyProject(dir, "tiny", ""); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	out := filepath.Join(dir, "out")
	if _, err := mustSucceed(context.Background(), command{
		argv: []string{e.edgepipe, "run", "--out", out, "recipe.yaml"}, dir: dir, env: e.standinEnv(cache),
	}); err != nil {
		t.Fatal(err)
	}
	steps, err := shellpeer.PublishedSteps(out)
	if err != nil {
		t.Fatal(err)
	}
	peer := filepath.Join(dir, "peer")
	script, err := shellpeer.Script(steps, peer, false)
	if err != nil {
		t.Fatal(err)
	}
	scriptPath := filepath.Join(dir, "peer.sh")
	if err := os.WriteFile(scriptPath, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := mustSucceed(context.Background(), command{argv: []string{"sh", scriptPath}, dir: dir}); err != nil {
		t.Fatalf("%v\nscript:\n%s", err, script)
	}
	// Each step that ran a command is timed.
	times, err := shellpeer.ReadTimes(filepath.Join(peer, shellpeer.TimesFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range steps {
		if len(s.Argv) > 0 && !(times[s.ID] > 0) {
			t.Errorf("step %s: no time in the peer's %s: %v", s.ID, shellpeer.TimesFile, times)
		}
	}
	compared := 0
	for _, s := range steps {
		if s.CacheKey == "" {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(peer, s.CacheKey, "*"))
		for _, f := range files {
			cached := filepath.Join(cache, "objects", s.CacheKey, filepath.Base(f))
			if fileSum(t, f) != fileSum(t, cached) {
				t.Errorf("step %s: %s differs from edgepipe's %s", s.ID, f, cached)
			}
			compared++
		}
	}
	if compared < 3 {
		t.Errorf("compared only %d output files; script:\n%s", compared, script)
	}
	if strings.Contains(script, filepath.Join(cache, "tmp")) {
		t.Errorf("script still writes into edgepipe's cache:\n%s", script)
	}
}

func TestOverheadAndRerunOnStandins(t *testing.T) {
	e := testEnv(t)
	dir := t.TempDir()
	if err := writeTinyProject(dir, "tiny", ""); err != nil {
		t.Fatal(err)
	}
	runEnv := e.standinEnv(filepath.Join(dir, "cache"))
	recipe := filepath.Join(dir, "recipe.yaml")
	res, cold, err := measureOverhead(context.Background(), e, recipe, runEnv, dir)
	if err != nil {
		t.Fatal(err)
	}
	if k := keys(res); k["tool_commands"] == "" || res.ratio <= 0 || cold.cold <= 0 {
		t.Errorf("line: %s", res.line())
	}
	e.demoCold = &cold
	rerun, err := measureRerun(context.Background(), e, recipe, runEnv)
	if err != nil {
		t.Fatal(err)
	}
	if rerun.ratio <= 0 {
		t.Errorf("line: %s", rerun.line())
	}
	// Every published folder still verifies after the forced reruns.
	// (report.html and report.md sit beside them and are not artifacts.)
	dirs, _ := filepath.Glob(filepath.Join(cold.out, "*", manifest.FileName))
	if len(dirs) == 0 {
		t.Fatalf("no published folder under %s", cold.out)
	}
	for _, m := range dirs {
		d := filepath.Dir(m)
		if problems, err := manifest.Verify(d); err != nil || len(problems) > 0 {
			t.Errorf("%s: %v %v", d, err, problems)
		}
	}
}

func TestParallelOnStandins(t *testing.T) {
	e := testEnv(t)
	dir := t.TempDir()
	if err := writeTinyProject(dir, "tiny", ""); err != nil {
		t.Fatal(err)
	}
	res, err := measureParallel(context.Background(), e, filepath.Join(dir, "recipe.yaml"), e.standinEnv(filepath.Join(dir, "cache")), filepath.Join(dir, "out"))
	if err != nil {
		t.Fatal(err)
	}
	if k := keys(res); k["published"] != "1" || k["verified"] != "1" || k["met"] != "yes" {
		t.Errorf("line: %s", res.line())
	}
}

func TestMissingToolchainsSkip(t *testing.T) {
	e := testEnv(t)
	reason, err := e.toolchainsMissing(context.Background(), demoToolchains)
	if err != nil {
		t.Fatal(err)
	}
	// Either answer is possible; a skip must say how to fix it.
	if reason != "" && !strings.Contains(reason, "go tool task toolchains") {
		t.Errorf("reason %q does not say how to install the toolchains", reason)
	}
	e.allTargetsRecipe = "recipes/no-such-recipe.yaml"
	res, err := runAllTargets(context.Background(), e)
	if err != nil || res.skipped == "" || !strings.Contains(res.line(), "skipped") {
		t.Errorf("missing recipe: %s, %v", res.line(), err)
	}
}

func TestMainRejectsUnknownBenchmark(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := mainErr(context.Background(), []string{"nope"}, &out, &errOut); code != 2 {
		t.Errorf("exit %d, want 2; stderr %s", code, errOut.String())
	}
	if out.Len() != 0 {
		t.Errorf("printed %q", out.String())
	}
}

func fileSum(t *testing.T, p string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, c := range s {
		if c < '0' || c > '9' {
			t.Fatalf("%q is not a byte count", s)
		}
		n = n*10 + int64(c-'0')
	}
	return n
}

// demo-overhead breaks edgepipe's -j 1 time into the parts of its own work
// (the overhead event) next to the tools'; here on the stand-ins.
func TestDemoOverheadBreaksDownOwnShare(t *testing.T) {
	e := testEnv(t)
	dir := t.TempDir()
	if err := writeTinyProject(dir, "tiny", ""); err != nil {
		t.Fatal(err)
	}
	res, _, err := measureOverhead(context.Background(), e, filepath.Join(dir, "recipe.yaml"), e.standinEnv(filepath.Join(dir, "cache")), dir)
	if err != nil {
		t.Fatal(err)
	}
	k := keys(res)
	for _, key := range []string{"j1_tools_s", "j1_hash_outputs_s", "j1_publish_s", "j1_keys_s", "j1_own_s"} {
		v, err := strconv.ParseFloat(k[key], 64)
		if err != nil || v < 0 {
			t.Errorf("%s=%q, want a duration (line: %s)", key, k[key], res.line())
		}
	}
	if v, _ := strconv.ParseFloat(k["j1_tools_s"], 64); v <= 0 {
		t.Errorf("no time in the tools: %s", res.line())
	}
}
