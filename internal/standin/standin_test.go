package standin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTextPerplexity(t *testing.T) {
	for _, c := range []struct {
		text   string
		ppl    float64
		tokens int
	}{
		{"a a a a", 6 + 30*1.0/4, 4},
		{"a b a b", 6 + 30*2.0/4, 4},
		{"a b c d", 6 + 30*4.0/4, 4},
		{"A a\n\ta", 6 + 30*1.0/3, 3}, // words fold case, any space splits
	} {
		ppl, tokens := TextPerplexity([]byte(c.text))
		if math.Abs(ppl-c.ppl) > 1e-12 || tokens != c.tokens {
			t.Errorf("TextPerplexity(%q) = %v, %d; want %v, %d", c.text, ppl, tokens, c.ppl, c.tokens)
		}
	}
	for _, empty := range []string{"", " \n\t "} {
		if ppl, tokens := TextPerplexity([]byte(empty)); !math.IsNaN(ppl) || tokens != 0 {
			t.Errorf("TextPerplexity(%q) = %v, %d; want NaN, 0", empty, ppl, tokens)
		}
	}
	// One changed byte that makes a new word moves the number.
	a, _ := TextPerplexity([]byte("the cat sat on the mat"))
	b, _ := TextPerplexity([]byte("the cat sat on thy mat"))
	if a >= b {
		t.Errorf("more varied text scored %v, less varied %v: want higher", b, a)
	}
}

func TestDrift(t *testing.T) {
	for _, c := range []struct{ bits, want float64 }{
		{32, 0}, {16, 0}, {8, 8.0 / 256}, {4, 0.5}, {2, 2},
		{8.5, 0.0221}, {4.85, 0.2774}, {2.6, 1.3195}, // Q8_0, Q4_K_M, Q2_K as the comment says
	} {
		if got := Drift(c.bits); math.Abs(got-c.want) > 1e-4 {
			t.Errorf("Drift(%v) = %v, want %v", c.bits, got, c.want)
		}
	}
	for bits := 1.0; bits < 16; bits += 0.5 {
		if Drift(bits) <= Drift(bits+0.5) {
			t.Errorf("Drift(%v) = %v is not above Drift(%v) = %v: fewer bits must drift more", bits, Drift(bits), bits+0.5, Drift(bits+0.5))
		}
	}
}

func TestResample(t *testing.T) {
	p := []byte("abcdefgh")
	for _, c := range []struct {
		frac float64
		want string
	}{
		{1, "abcdefgh"}, {2, "abcdefgh"}, {0.5, "aceg"}, {0.25, "ae"}, {0.3, "adg"}, {0, ""},
	} {
		if got := Resample(p, c.frac); string(got) != c.want {
			t.Errorf("Resample(%q, %v) = %q, want %q", p, c.frac, got, c.want)
		}
	}
	// A copy, never the caller's slice.
	out := Resample(p, 1)
	out[0] = 'X'
	if p[0] != 'a' {
		t.Error("Resample(p, 1) returned p itself")
	}
	if got := Resample(nil, 0.5); len(got) != 0 {
		t.Errorf("Resample(nil) = %q", got)
	}
	// A kept byte moves the output; the output is a function of the input.
	q := []byte("abXdefgh")
	if bytes.Equal(Resample(p, 0.5), Resample(q, 0.5)) {
		t.Error("a changed kept byte did not change the resampled bytes")
	}
	if !bytes.Equal(Resample(q, 0.5), Resample(q, 0.5)) {
		t.Error("Resample is not deterministic")
	}
}

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestEvalChunks(t *testing.T) {
	dir := t.TempDir()
	text := writeFile(t, filepath.Join(dir, "eval.txt"), strings.Repeat("one two three four five ", 20)) // 100 words
	want, _ := TextPerplexity([]byte(strings.Repeat("one two three four five ", 20)))
	for _, c := range []struct{ nctx, chunks, n int }{
		{10, 0, 10}, {10, -1, 10}, {10, 3, 3}, {10, 10, 10}, {10, 50, 10}, {30, 0, 3}, {50, 0, 2},
	} {
		ppl, tokens, n, err := EvalChunks(text, c.nctx, c.chunks)
		if err != nil || ppl != want || tokens != 100 || n != c.n {
			t.Errorf("EvalChunks(ctx %d, chunks %d) = %v, %d, %d, %v; want %v, 100, %d", c.nctx, c.chunks, ppl, tokens, n, err, want, c.n)
		}
	}
	// Two contexts' worth of words are needed, as llama-perplexity wants.
	if _, _, _, err := EvalChunks(text, 51, 0); err == nil || !strings.Contains(err.Error(), "need at least 102 tokens for --ctx 51, the text has 100") {
		t.Errorf("ctx 51 over 100 words: %v", err)
	}
	if _, _, _, err := EvalChunks(filepath.Join(dir, "missing.txt"), 10, 0); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing text: %v", err)
	}
	// The text's words make the number.
	other := writeFile(t, filepath.Join(dir, "other.txt"), strings.Repeat("one two three four fiv ", 19)+strings.Repeat("six ", 5))
	if p2, _, _, err := EvalChunks(other, 10, 0); err != nil || p2 == want {
		t.Errorf("another text scored %v (%v), the same as the first", p2, err)
	}
}

// A context of no words cannot be cut into chunks: a clear refusal, not
// a division by zero.
func TestEvalChunksRefusesAContextUnderOneWord(t *testing.T) {
	text := writeFile(t, filepath.Join(t.TempDir(), "eval.txt"), "a b c d")
	for _, nctx := range []int{0, -4} {
		_, _, n, err := EvalChunks(text, nctx, 0)
		if err == nil || !strings.Contains(err.Error(), "--ctx must be at least 1") {
			t.Errorf("EvalChunks(ctx %d) = %d chunks, %v; want a refusal", nctx, n, err)
		}
	}
}

func TestArgs(t *testing.T) {
	pos, flags, err := Args([]string{"serve", "--model", "m", "-x", "-1", "--mode=fast", "dir", "--empty="})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pos, []string{"serve", "dir"}) {
		t.Errorf("positionals %q", pos)
	}
	want := map[string]string{"--model": "m", "-x": "-1", "--mode": "fast", "--empty": ""}
	if len(flags) != len(want) {
		t.Errorf("flags %q, want %q", flags, want)
	}
	for k, v := range want {
		if got, ok := flags[k]; !ok || got != v {
			t.Errorf("flags[%q] = %q, %v; want %q", k, got, ok, v)
		}
	}
	if _, _, err := Args([]string{"pos", "--last"}); err == nil || err.Error() != "--last needs a value" {
		t.Errorf("a flag without its value: %v", err)
	}
	if pos, flags, err := Args(nil); err != nil || len(pos) != 0 || len(flags) != 0 {
		t.Errorf("Args(nil) = %q, %q, %v", pos, flags, err)
	}
}

func TestParseFlags(t *testing.T) {
	newFS := func() (*flag.FlagSet, *string, *int) {
		fs := flag.NewFlagSet("tool", flag.ContinueOnError)
		return fs, fs.String("out", "", ""), fs.Int("n", 1, "")
	}
	fs, out, n := newFS()
	if err := ParseFlags(fs, []string{"--out", "o", "-n=3"}); err != nil || *out != "o" || *n != 3 {
		t.Errorf("flags: out %q, n %d, %v", *out, *n, err)
	}
	// Errors come back; nothing is printed (the tool's stderr is its log).
	fs, _, _ = newFS()
	if err := ParseFlags(fs, []string{"--nope", "x"}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("an unknown flag: %v", err)
	}
	if fs.Output() != io.Discard {
		t.Error("ParseFlags leaves the flag set printing its usage")
	}
	fs, _, _ = newFS()
	if err := ParseFlags(fs, []string{"-n", "many"}); err == nil {
		t.Error("-n many: want an error")
	}
}

// As its comment says, and as the real tools' argparse does: a flag after
// a positional is parsed, not silently left at its default.
func TestParseFlagsAfterPositionals(t *testing.T) {
	fs := flag.NewFlagSet("tool", flag.ContinueOnError)
	out, n := fs.String("out", "", ""), fs.Int("n", 1, "")
	if err := ParseFlags(fs, []string{"a", "--out", "o", "b", "-n", "4", "c"}); err != nil || *out != "o" || *n != 4 {
		t.Errorf("flags after positionals: out %q, n %d, %v", *out, *n, err)
	}
	if !slices.Equal(fs.Args(), []string{"a", "b", "c"}) {
		t.Errorf("positionals %q, want a b c in order", fs.Args())
	}
	// "--" still ends the flags.
	fs = flag.NewFlagSet("tool", flag.ContinueOnError)
	out = fs.String("out", "", "")
	if err := ParseFlags(fs, []string{"a", "--", "--out", "o"}); err != nil || *out != "" || !slices.Equal(fs.Args(), []string{"a", "--out", "o"}) {
		t.Errorf("after --: out %q, args %q, %v", *out, fs.Args(), err)
	}
	fs = flag.NewFlagSet("tool", flag.ContinueOnError)
	fs.String("out", "", "")
	if err := ParseFlags(fs, []string{"a", "--nope"}); err == nil {
		t.Error("an unknown flag after a positional: want an error")
	}
}

func TestCopyCheckpointFiles(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	keep := map[string]string{"config.json": `{"a": 1}`, "tokenizer.json": "tok", "generation_config.json": "gen"}
	for n, c := range keep {
		writeFile(t, filepath.Join(from, n), c)
	}
	for _, n := range []string{"model.safetensors", "model-00001-of-00002.safetensors", "model.onnx", "result.json", "step.log", "sub/config.json"} {
		writeFile(t, filepath.Join(from, n), "not copied")
	}
	if err := CopyCheckpointFiles(from, to); err != nil {
		t.Fatal(err)
	}
	ents, err := os.ReadDir(to)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
		b, _ := os.ReadFile(filepath.Join(to, e.Name()))
		if string(b) != keep[e.Name()] {
			t.Errorf("%s holds %q, want %q", e.Name(), b, keep[e.Name()])
		}
	}
	if !slices.Equal(got, []string{"config.json", "generation_config.json", "tokenizer.json"}) {
		t.Errorf("copied %q, want the config and tokenizer files only", got)
	}
	if err := CopyCheckpointFiles(filepath.Join(from, "missing"), to); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing source: %v", err)
	}
	if err := CopyCheckpointFiles(from, filepath.Join(to, "missing")); err == nil {
		t.Error("a missing destination: want an error")
	}
}

func TestPrintJSON(t *testing.T) {
	var b bytes.Buffer
	if err := PrintJSON(&b, map[string]any{"ppl": 1.5, "model": "m"}); err != nil {
		t.Fatal(err)
	}
	if b.String() != `{"model":"m","ppl":1.5}`+"\n" {
		t.Errorf("PrintJSON wrote %q: want one JSON line", b.String())
	}
	if err := PrintJSON(&b, math.Inf(1)); err == nil {
		t.Error("PrintJSON(+Inf): want the encoder's error")
	}
}

func TestRunTimings(t *testing.T) {
	sum := [32]byte{1, 2, 3}
	const base = 1_234_567 // not a round number: the timings are whole ns
	got := RunTimings(sum, "prompt", base, 20)
	if len(got) != 20 {
		t.Fatalf("%d timings, want 20", len(got))
	}
	distinct := map[float64]bool{}
	for i, v := range got {
		if v < base || v > 1.3*base || v != math.Trunc(v) {
			t.Errorf("timing %d = %v: want a whole ns in [base, 1.3 base]", i, v)
		}
		distinct[v] = true
	}
	if len(distinct) < 10 {
		t.Errorf("%d distinct timings out of 20: want the run index to vary them", len(distinct))
	}
	if !slices.Equal(got, RunTimings(sum, "prompt", base, 20)) {
		t.Error("RunTimings is not deterministic")
	}
	if slices.Equal(got, RunTimings(sum, "decode", base, 20)) {
		t.Error("another salt gave the same timings")
	}
	other := sum
	other[31] ^= 1
	if slices.Equal(got, RunTimings(other, "prompt", base, 20)) {
		t.Error("another model digest gave the same timings")
	}
	if slow := RunTimings(sum, "prompt", 2*base, 20); slow[0] <= got[0] {
		t.Errorf("a bigger base gave %v, not more than %v", slow[0], got[0])
	}
	if len(RunTimings(sum, "x", 1, 0)) != 0 {
		t.Error("RunTimings(n=0) is not empty")
	}
}

func TestModelCost(t *testing.T) {
	dir := t.TempDir()
	small := writeFile(t, filepath.Join(dir, "small"), strings.Repeat("w", 2000))
	big := writeFile(t, filepath.Join(dir, "big"), strings.Repeat("w", 4000))
	twin := writeFile(t, filepath.Join(dir, "twin"), strings.Repeat("w", 1999)+"x")
	sum, cost, err := ModelCost(small)
	if err != nil {
		t.Fatal(err)
	}
	if cost != 50_000+2000.0/20 {
		t.Errorf("cost %v, want 50000 + 2000/20", cost)
	}
	_, bigCost, _ := ModelCost(big)
	if bigCost <= cost {
		t.Errorf("a bigger model costs %v, the smaller %v", bigCost, cost)
	}
	twinSum, twinCost, _ := ModelCost(twin)
	if twinSum == sum || twinCost != cost {
		t.Error("one changed byte: want another digest at the same cost")
	}
	if _, _, err := ModelCost(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing model: %v", err)
	}
}

func TestCheckpointDigest(t *testing.T) {
	dir := t.TempDir()
	if _, err := CheckpointDigest(dir); err == nil || !strings.Contains(err.Error(), "not a Hugging Face checkpoint") {
		t.Errorf("an empty folder: %v", err)
	}
	writeFile(t, filepath.Join(dir, "config.json"), `{"hidden_size": 8}`)
	if _, err := CheckpointDigest(dir); err == nil || !strings.Contains(err.Error(), "no *.safetensors") {
		t.Errorf("no weights: %v", err)
	}
	// The shards in name order, after the config.
	writeFile(t, filepath.Join(dir, "b.safetensors"), "BBB")
	writeFile(t, filepath.Join(dir, "a.safetensors"), "AAA")
	got, err := CheckpointDigest(dir)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := DigestFiles([]byte(`{"hidden_size": 8}`), filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors"))
	if got != want {
		t.Errorf("CheckpointDigest = %s, want config then a then b: %s", got, want)
	}
	writeFile(t, filepath.Join(dir, "b.safetensors"), "BBC")
	if moved, _ := CheckpointDigest(dir); moved == got {
		t.Error("a changed weight byte left the digest as it was")
	}
	writeFile(t, filepath.Join(dir, "b.safetensors"), "BBB")
	writeFile(t, filepath.Join(dir, "config.json"), `{"hidden_size": 9}`)
	if moved, _ := CheckpointDigest(dir); moved == got {
		t.Error("a changed config left the digest as it was")
	}
}

func TestDigestFiles(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, filepath.Join(dir, "a"), "hello ")
	b := writeFile(t, filepath.Join(dir, "b"), "world")
	got, err := DigestFiles([]byte("head:"), a, b)
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte("head:hello world")); got != hex.EncodeToString(sum[:]) {
		t.Errorf("DigestFiles(head, a, b) = %s, want the sha256 of their concatenation", got)
	}
	if other, _ := DigestFiles([]byte("Head:"), a, b); other == got {
		t.Error("another head gave the same digest")
	}
	if _, err := DigestFiles(nil, a, filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing file: %v", err)
	}
}

func TestLinkMakesOneLinkPerTool(t *testing.T) {
	withTools(t, "tool-a", "tool-b.py")
	dir := t.TempDir()
	// An old copy in the way is replaced.
	writeFile(t, filepath.Join(dir, "tool-a"), "old")
	if err := Link(dir); err != nil {
		t.Fatal(err)
	}
	for name := range Tools {
		target, err := os.Readlink(filepath.Join(dir, name))
		if err != nil || target != "standin" {
			t.Errorf("%s -> %q, %v; want a link to standin", name, target, err)
		}
	}
	// Again over its own links.
	if err := Link(dir); err != nil {
		t.Errorf("Link over its own links: %v", err)
	}
	if err := Link(filepath.Join(dir, "missing")); err == nil {
		t.Error("Link into a missing folder: want an error")
	}
}

// withTools registers stand-ins that record their calls, for this test.
func withTools(t *testing.T, names ...string) *[][]string {
	t.Helper()
	var calls [][]string
	for _, n := range names {
		if _, ok := Tools[n]; ok {
			t.Fatalf("a stand-in %q is already registered", n)
		}
		Tools[n] = func(args []string, stdout, stderr io.Writer) error {
			calls = append(calls, append([]string{n}, args...))
			if len(args) > 0 && args[0] == "fail" {
				return errors.New("told to fail")
			}
			_, err := io.WriteString(stdout, "out "+strings.Join(args, " ")+"\n")
			io.WriteString(stderr, "log line\n")
			return err
		}
	}
	t.Cleanup(func() {
		for _, n := range names {
			delete(Tools, n)
		}
	})
	return &calls
}

// runMain runs Main with os.Stdout and os.Stderr going to files.
func runMain(t *testing.T, name string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	out, err := os.Create(filepath.Join(dir, "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	errf, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = out, errf
	defer func() { os.Stdout, os.Stderr = oldOut, oldErr }()
	code = Main(name, args)
	out.Close()
	errf.Close()
	o, _ := os.ReadFile(out.Name())
	e, _ := os.ReadFile(errf.Name())
	return code, string(o), string(e)
}

func TestMainDispatch(t *testing.T) {
	calls := withTools(t, "fake-tool")

	code, out, errs := runMain(t, "fake-tool", "-m", "model", "pos")
	if code != 0 || out != "out -m model pos\n" || errs != "log line\n" {
		t.Errorf("fake-tool: %d, %q, %q", code, out, errs)
	}
	if len(*calls) != 1 || !slices.Equal((*calls)[0], []string{"fake-tool", "-m", "model", "pos"}) {
		t.Errorf("calls %q", *calls)
	}

	code, _, errs = runMain(t, "fake-tool", "fail")
	if code != 1 || errs != "fake-tool (stand-in): told to fail\n" {
		t.Errorf("a failing tool: %d, %q", code, errs)
	}

	// --version says what it is without running the tool.
	n := len(*calls)
	code, out, _ = runMain(t, "fake-tool", "--version")
	if code != 0 || out != "edgepipe stand-in for fake-tool (not the real tool)\n" || len(*calls) != n {
		t.Errorf("--version: %d, %q, %d calls", code, out, len(*calls)-n)
	}
	// Only alone: a --version among other arguments goes to the tool.
	if code, out, _ = runMain(t, "fake-tool", "--version", "x"); code != 0 || out != "out --version x\n" {
		t.Errorf("--version x: %d, %q", code, out)
	}

	code, _, errs = runMain(t, "no-such-tool", "--version")
	if code != 2 || errs != "standin: no stand-in for \"no-such-tool\"\n" {
		t.Errorf("an unknown tool: %d, %q", code, errs)
	}

	dir := t.TempDir()
	if code, _, errs = runMain(t, "standin", "link", dir); code != 0 || errs != "" {
		t.Errorf("standin link: %d, %q", code, errs)
	}
	if target, err := os.Readlink(filepath.Join(dir, "fake-tool")); err != nil || target != "standin" {
		t.Errorf("standin link made %q, %v", target, err)
	}
	if code, _, errs = runMain(t, "standin", "link", filepath.Join(dir, "missing", "deeper")); code != 1 || !strings.HasPrefix(errs, "standin: ") {
		t.Errorf("standin link into a missing folder: %d, %q", code, errs)
	}
	// standin itself is no stand-in: anything but "link DIR" is unknown.
	if code, _, _ = runMain(t, "standin", "link"); code != 2 {
		t.Errorf("standin link without a folder: %d, want 2", code)
	}
}

func TestMainSlowsDownTheNamedStandIn(t *testing.T) {
	withTools(t, "slow-tool", "quick-tool")
	t.Setenv("EDGEPIPE_STANDIN_SLOW", "slow-tool:1")
	start := time.Now()
	if code, _, _ := runMain(t, "quick-tool"); code != 0 || time.Since(start) > 900*time.Millisecond {
		t.Errorf("quick-tool: %d after %v: only the named stand-in waits", code, time.Since(start))
	}
	start = time.Now()
	if code, _, _ := runMain(t, "slow-tool"); code != 0 || time.Since(start) < time.Second {
		t.Errorf("slow-tool: %d after %v, want at least 1s", code, time.Since(start))
	}
	// --version answers at once: a slowed stand-in still says what it is.
	start = time.Now()
	if code, _, _ := runMain(t, "slow-tool", "--version"); code != 0 || time.Since(start) > 900*time.Millisecond {
		t.Errorf("slow-tool --version: %d after %v", code, time.Since(start))
	}
	t.Setenv("EDGEPIPE_STANDIN_SLOW", "slow-tool:soon")
	start = time.Now()
	if code, _, _ := runMain(t, "slow-tool"); code != 0 || time.Since(start) > 900*time.Millisecond {
		t.Errorf("a malformed EDGEPIPE_STANDIN_SLOW slowed slow-tool by %v", time.Since(start))
	}
}
