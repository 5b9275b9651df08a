package standin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/gguf"
)

// run calls a stand-in the way the standin binary does: by the name of
// the tool it replaces.
func run(t *testing.T, tool string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	f, ok := standin.Tools[tool]
	if !ok {
		t.Fatalf("no stand-in registered for %s", tool)
	}
	var o, e bytes.Buffer
	err = f(args, &o, &e)
	return o.String(), e.String(), err
}

func write(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// checkpoint writes a Hugging Face checkpoint: config.json and shards.
func checkpoint(t *testing.T, dir, config string, shards map[string]string) string {
	t.Helper()
	write(t, filepath.Join(dir, "config.json"), config)
	for name, b := range shards {
		write(t, filepath.Join(dir, name), b)
	}
	return dir
}

// weights is a payload long enough for resampling to keep distinct bytes.
var weights = strings.Repeat("0123456789abcdef", 64)

// f16 converts a fresh checkpoint with the given hidden size to F16.
func f16(t *testing.T, hidden string) string {
	t.Helper()
	dir := t.TempDir()
	src := checkpoint(t, filepath.Join(dir, "ckpt"), `{"hidden_size": `+hidden+`}`, map[string]string{"model.safetensors": weights})
	out := filepath.Join(dir, "model-f16.gguf")
	if _, _, err := run(t, "convert_hf_to_gguf.py", src, "--outtype", "f16", "--outfile", out); err != nil {
		t.Fatal(err)
	}
	return out
}

func mustRead(t *testing.T, path string) (header, []byte) {
	t.Helper()
	h, payload, err := readGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	return h, payload
}

// near is false for NaN: a number the parser did not find is not near.
func near(a, b, eps float64) bool { return math.Abs(a-b) <= eps }

func TestEveryToolIsRegistered(t *testing.T) {
	for _, name := range []string{"convert_hf_to_gguf.py", "llama-quantize", "llama-perplexity", "llama-imatrix", "llama-bench"} {
		if standin.Tools[name] == nil {
			t.Errorf("no stand-in for %s", name)
		}
	}
}

func TestGGUFRoundTripAndRefusals(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.gguf")
	h := header{StandIn: true, Type: "Q8_0", Bits: 8.5, HiddenSize: 576, SourceSHA256: "abc", Imatrix: "def",
		Tokenizer: map[string]any{"tokenizer.ggml.eos_token_id": 2.0}}
	if err := writeGGUF(path, h, []byte("payload")); err != nil {
		t.Fatal(err)
	}
	got, payload := mustRead(t, path)
	if !reflect.DeepEqual(got, h) || string(payload) != "payload" {
		t.Errorf("read back %+v, %q", got, payload)
	}
	if _, err := os.Stat(path + ".part"); !os.IsNotExist(err) {
		t.Errorf("the temporary file is left: %v", err)
	}
	b, _ := os.ReadFile(path)
	if string(b[:4]) != "GGUF" {
		t.Errorf("magic %q", b[:4])
	}
	for name, content := range map[string]string{
		"short":     "GGU",
		"magic":     "GGML" + string(b[4:]),
		"truncated": string(b[:20]),
		"json":      "GGUF\x03\x00\x00\x00\x02\x00\x00\x00{x",
		"overrun":   "GGUF\x03\x00\x00\x00\x05\x00\x00\x00{}", // says 5 bytes of metadata, holds 2
	} {
		p := write(t, filepath.Join(dir, name), content)
		if _, _, err := readGGUF(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: %v: want an error naming the file", name, err)
		} else if (name == "overrun" || name == "truncated") && !strings.Contains(err.Error(), "truncated header") {
			t.Errorf("%s: %v: want truncated header", name, err)
		}
	}
	if _, _, err := readGGUF(filepath.Join(dir, "missing")); !os.IsNotExist(err) {
		t.Errorf("a missing file: %v", err)
	}
}

func TestConvert(t *testing.T) {
	dir := t.TempDir()
	cfg := `{"hidden_size": 576, "num_hidden_layers": 2}`
	src := checkpoint(t, filepath.Join(dir, "ckpt"), cfg, map[string]string{
		"model-00002-of-00002.safetensors": "SECOND" + weights,
		"model-00001-of-00002.safetensors": "FIRST" + weights,
		"tokenizer.json":                   "not weights",
	})
	out := filepath.Join(dir, "out.gguf")
	// Flags before and after the folder, as argparse takes them.
	_, stderr, err := run(t, "convert_hf_to_gguf.py", "--outtype", "f16", src, "--outfile", out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stderr, "Model successfully exported to "+out) {
		t.Errorf("stderr %q", stderr)
	}
	h, payload := mustRead(t, out)
	shards := "FIRST" + weights + "SECOND" + weights // in name order
	sum := sha256.Sum256([]byte(cfg + shards))
	tok := sha256.Sum256([]byte("tokenizer.json 11\nnot weights"))
	want := header{StandIn: true, Type: "F16", Bits: 16, HiddenSize: 576, SourceSHA256: hex.EncodeToString(sum[:]),
		Tokenizer: map[string]any{"tokenizer.ggml.model": "stand-in", "tokenizer.stand_in.sha256": hex.EncodeToString(tok[:])}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("header %+v, want %+v", h, want)
	}
	if string(payload) != shards {
		t.Errorf("an F16 payload is the shards' bytes: got %d bytes", len(payload))
	}

	// Q8_0 keeps 8.5/16 of the bytes; F32 all of them.
	for typ, n := range map[string]int{"q8_0": int(math.Ceil(float64(len(shards)) * 8.5 / 16)), "F32": len(shards), "bf16": len(shards)} {
		out := filepath.Join(dir, typ+".gguf")
		if _, _, err := run(t, "convert_hf_to_gguf.py", src, "--outtype", typ, "--outfile", out); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		h, payload := mustRead(t, out)
		if h.Type != strings.ToUpper(typ) || h.Bits != typeBits[h.Type] || len(payload) != n || h.SourceSHA256 != want.SourceSHA256 {
			t.Errorf("%s: %+v, %d bytes; want %d", typ, h, len(payload), n)
		}
	}

	// A changed weight byte or config moves the digest and the bytes.
	first, _ := os.ReadFile(out)
	write(t, filepath.Join(src, "model-00002-of-00002.safetensors"), "SECOND"+weights[:len(weights)-1]+"X")
	if _, _, err := run(t, "convert_hf_to_gguf.py", src, "--outfile", out); err != nil {
		t.Fatal(err)
	}
	if second, _ := os.ReadFile(out); bytes.Equal(first, second) {
		t.Error("a changed weight byte left the GGUF as it was")
	}
	if h2, _ := mustRead(t, out); h2.SourceSHA256 == want.SourceSHA256 {
		t.Error("a changed weight byte left the source digest as it was")
	}
	write(t, filepath.Join(src, "config.json"), `{"hidden_size": 512}`)
	if _, _, err := run(t, "convert_hf_to_gguf.py", src, "--outfile", out); err != nil {
		t.Fatal(err)
	}
	if h3, _ := mustRead(t, out); h3.HiddenSize != 512 {
		t.Errorf("hidden size %d, want the config's 512", h3.HiddenSize)
	}
}

func TestConvertRefusals(t *testing.T) {
	dir := t.TempDir()
	good := checkpoint(t, filepath.Join(dir, "good"), `{"hidden_size": 8}`, map[string]string{"model.safetensors": weights})
	noCfg := checkpoint(t, filepath.Join(dir, "nocfg"), `{}`, nil)
	os.Remove(filepath.Join(noCfg, "config.json"))
	badCfg := checkpoint(t, filepath.Join(dir, "badcfg"), `{"hidden_size": "x"}`, map[string]string{"model.safetensors": weights})
	noWeights := checkpoint(t, filepath.Join(dir, "noweights"), `{"hidden_size": 8}`, nil)
	out := filepath.Join(dir, "out.gguf")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{good}, "usage: convert_hf_to_gguf.py"},
		{[]string{"--outfile", out}, "usage: convert_hf_to_gguf.py"},
		{[]string{good, good, "--outfile", out}, "usage: convert_hf_to_gguf.py"},
		{[]string{good, "--outfile", out, "--nope", "x"}, "nope"},
		{[]string{good, "--outfile", out, "--outtype", "q9_9"}, "unsupported outtype q9_9"},
		{[]string{noCfg, "--outfile", out}, "no config.json in " + noCfg},
		{[]string{badCfg, "--outfile", out}, "config.json:"},
		{[]string{noWeights, "--outfile", out}, "no *.safetensors in " + noWeights},
	} {
		if _, _, err := run(t, "convert_hf_to_gguf.py", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused conversion wrote %s", out)
	}
}

// What pipelines/gguf's quantizeFallbacks reads from llama-quantize's log.
var (
	fallbackLine    = regexp.MustCompile(`required for type\s+(\S+)\)\s*->\s*falling back to\s+(\S+)`)
	fallbackSummary = regexp.MustCompile(`(\d+) of (\d+) tensor\(s\) required fallback quantization`)
)

func TestQuantize(t *testing.T) {
	in := f16(t, "512")
	dir := filepath.Dir(in)
	_, payload := mustRead(t, in)
	out := filepath.Join(dir, "q4.gguf")
	stdout, _, err := run(t, "llama-quantize", in, out, "q4_k_m", "2")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout, "main: quantizing '"+in+"' to '"+out+"' as Q4_K_M\n") ||
		!strings.Contains(stdout, "llama_model_quantize_impl: quant size  = ") {
		t.Errorf("stdout %q", stdout)
	}
	if fallbackLine.MatchString(stdout) || fallbackSummary.MatchString(stdout) {
		t.Errorf("rows of 512 fit K-quants' 256, yet: %q", stdout)
	}
	h, q := mustRead(t, out)
	if h.Type != "Q4_K_M" || h.Bits != 4.85 || h.Imatrix != "" || h.HiddenSize != 512 {
		t.Errorf("header %+v", h)
	}
	if want := int(math.Ceil(float64(len(payload)) * 4.85 / 16)); len(q) != want {
		t.Errorf("%d bytes, want %d (4.85 of 16 bits)", len(q), want)
	}

	// An importance matrix is recorded by digest and moves the bytes.
	im := write(t, filepath.Join(dir, "imatrix.dat"), "imatrix one\n")
	withIm := filepath.Join(dir, "q4-im.gguf")
	if _, _, err := run(t, "llama-quantize", "--imatrix", im, in, withIm, "Q4_K_M"); err != nil {
		t.Fatal(err)
	}
	h, _ = mustRead(t, withIm)
	if sum := sha256.Sum256([]byte("imatrix one\n")); h.Imatrix != hex.EncodeToString(sum[:]) {
		t.Errorf("imatrix %q, want the file's sha256", h.Imatrix)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(withIm)
	if bytes.Equal(a, b) {
		t.Error("quantizing with an importance matrix wrote the same bytes as without")
	}

	// Requantizing a smaller type resamples from the input's own bits.
	q2 := filepath.Join(dir, "q2.gguf")
	if _, _, err := run(t, "llama-quantize", out, q2, "Q2_K"); err != nil {
		t.Fatal(err)
	}
	if h2, p2 := mustRead(t, q2); h2.Type != "Q2_K" || len(p2) != int(math.Ceil(float64(len(q))*2.6/4.85)) {
		t.Errorf("Q2_K from Q4_K_M: %+v, %d bytes", h2, len(p2))
	}
}

func TestQuantizeReportsFallbacksAsLlamaCppDoes(t *testing.T) {
	in := f16(t, "576") // SmolLM2's width: not a multiple of 256
	out := filepath.Join(filepath.Dir(in), "q.gguf")
	stdout, _, err := run(t, "llama-quantize", in, out, "Q4_K_M")
	if err != nil {
		t.Fatal(err)
	}
	lines := fallbackLine.FindAllStringSubmatch(stdout, -1)
	sum := fallbackSummary.FindStringSubmatch(stdout)
	if len(lines) != 3 || sum == nil || sum[1] != "3" || lines[0][1] != "q4_K" || lines[0][2] != "q5_0" {
		t.Errorf("fallback lines %q, summary %q in %q", lines, sum, stdout)
	}
	if !strings.Contains(stdout, "ncols    576") {
		t.Errorf("the warning does not give the width: %q", stdout)
	}
	// 384 is a multiple of 128, not of 256.
	if stdout, _, err := run(t, "llama-quantize", f16(t, "384"), out, "Q6_K"); err != nil || len(fallbackLine.FindAllString(stdout, -1)) != 3 {
		t.Errorf("Q6_K at 384: %v, %q", err, stdout)
	}
	// Q4_0's blocks are 32 wide: no fallback.
	stdout, _, err = run(t, "llama-quantize", in, out, "Q4_0")
	if err != nil || fallbackLine.MatchString(stdout) {
		t.Errorf("Q4_0 at 576: %v, %q", err, stdout)
	}
}

func TestQuantizeRefusals(t *testing.T) {
	in := f16(t, "512")
	dir := filepath.Dir(in)
	out := filepath.Join(dir, "out.gguf")
	notGGUF := write(t, filepath.Join(dir, "model.safetensors"), weights)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "usage: llama-quantize"},
		{[]string{in, out}, "usage: llama-quantize"},
		{[]string{"--imatrix", "im", in, out}, "usage: llama-quantize"},
		{[]string{in, out, "Q9_K"}, "invalid ftype Q9_K"},
		{[]string{notGGUF, out, "Q8_0"}, "is not a GGUF file"},
		{[]string{filepath.Join(dir, "missing"), out, "Q8_0"}, "no such file"},
		{[]string{"--imatrix", filepath.Join(dir, "missing.dat"), in, out, "Q8_0"}, "imatrix:"},
	} {
		if _, _, err := run(t, "llama-quantize", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("a refused quantization wrote %s", out)
	}
}

const evalText = "the quick brown fox jumps over the lazy dog and the cat sat on the mat while a bird sang in the old tree by the river " // 27 words

func TestPerplexityBaselineAndKLDivergence(t *testing.T) {
	in := f16(t, "512")
	dir := filepath.Dir(in)
	text := write(t, filepath.Join(dir, "eval.txt"), strings.Repeat(evalText, 4)) // 108 words
	base := filepath.Join(dir, "logits.kld")
	stdout, _, err := run(t, "llama-perplexity", "-m", in, "-c", "16", "-b", "16", "-t", "2", "-f", text, "--kl-divergence-base", base)
	if err != nil {
		t.Fatal(err)
	}
	// The baseline's log, read by the pipeline's own parser.
	m, err := gguf.ParsePerplexityLog(stdout)
	if err != nil {
		t.Fatalf("%v in %q", err, stdout)
	}
	ppl, tokens := standin.TextPerplexity([]byte(strings.Repeat(evalText, 4)))
	if !near(m.PPL, ppl, 1e-4) || m.Chunks != tokens/16 || !math.IsNaN(m.KLD) || !math.IsNaN(m.SameTop) {
		t.Errorf("baseline %+v, want PPL %.4f over %d chunks", m, ppl, tokens/16)
	}
	var rec baseRecord
	b, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(strings.Repeat(evalText, 4)))
	if rec.Chunks != 6 || rec.Context != 16 || rec.Bits != 16 || rec.TextSHA != hex.EncodeToString(sum[:]) || rec.PPL != ppl {
		t.Errorf("base record %+v", rec)
	}

	// --chunks bounds the chunks.
	stdout, _, err = run(t, "llama-perplexity", "-m", in, "-c", "16", "--chunks", "2", "-f", text)
	if m, _ := gguf.ParsePerplexityLog(stdout); err != nil || m.Chunks != 2 {
		t.Errorf("--chunks 2: %v, %+v", err, m)
	}

	// A quantized model scored against the baseline's logits.
	q4 := filepath.Join(dir, "q4.gguf")
	if _, _, err := run(t, "llama-quantize", in, q4, "Q4_K_M"); err != nil {
		t.Fatal(err)
	}
	stdout, _, err = run(t, "llama-perplexity", "-m", q4, "-c", "16", "--kl-divergence-base", base, "--kl-divergence")
	if err != nil {
		t.Fatal(err)
	}
	k, err := gguf.ParsePerplexityLog(stdout)
	if err != nil {
		t.Fatalf("%v in %q", err, stdout)
	}
	d := standin.Drift(4.85)
	// As the real tool in this mode: no chunk count (the kind takes the
	// baseline's), and the delta's paired standard error.
	if !near(k.PPL, ppl+d, 1e-4) || !near(k.KLD, d/10, 1e-6) || !near(k.SameTop, 1-d/5, 1e-5) || k.Chunks != 0 || !near(k.DeltaSE, 0.01+d/10, 1e-6) {
		t.Errorf("converted %+v, want PPL %.4f, KLD %.6f, same top %.5f, delta SE %.6f", k, ppl+d, d/10, 1-d/5, 0.01+d/10)
	}

	// The drift is the converted model's beyond the baseline's: a model
	// scored against a baseline of its own type has drifted nowhere.
	q4base := filepath.Join(dir, "q4.kld")
	if _, _, err := run(t, "llama-perplexity", "-m", q4, "-c", "16", "-f", text, "--kl-divergence-base", q4base); err != nil {
		t.Fatal(err)
	}
	stdout, _, err = run(t, "llama-perplexity", "-m", q4, "--kl-divergence-base", q4base, "--kl-divergence")
	if self, err2 := gguf.ParsePerplexityLog(stdout); err != nil || err2 != nil || self.KLD != 0 || !near(self.PPL, ppl+d, 1e-4) {
		t.Errorf("Q4_K_M against its own baseline: %+v, %v, %v", self, err, err2)
	}

	// Fewer bits drift further; an importance matrix drifts less.
	q2 := filepath.Join(dir, "q2.gguf")
	im := write(t, filepath.Join(dir, "imatrix.dat"), "im")
	q2im := filepath.Join(dir, "q2im.gguf")
	for _, args := range [][]string{{in, q2, "Q2_K"}, {"--imatrix", im, in, q2im, "Q2_K"}} {
		if _, _, err := run(t, "llama-quantize", args...); err != nil {
			t.Fatal(err)
		}
	}
	score := func(model string) gguf.PerplexityLog {
		out, _, err := run(t, "llama-perplexity", "-m", model, "--kl-divergence-base", base, "--kl-divergence")
		if err != nil {
			t.Fatal(err)
		}
		m, err := gguf.ParsePerplexityLog(out)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	s2, s2im := score(q2), score(q2im)
	if s2.KLD <= k.KLD || s2.PPL <= k.PPL || s2.SameTop >= k.SameTop {
		t.Errorf("Q2_K %+v does not drift further than Q4_K_M %+v", s2, k)
	}
	if !near(s2im.KLD, 0.8*s2.KLD, 1e-6) {
		t.Errorf("Q2_K with an importance matrix: KLD %v, want 0.8 x %v", s2im.KLD, s2.KLD)
	}
}

func TestPerplexityFollowsTheText(t *testing.T) {
	in := f16(t, "512")
	dir := filepath.Dir(in)
	score := func(text string) float64 {
		path := write(t, filepath.Join(dir, "eval.txt"), text)
		out, _, err := run(t, "llama-perplexity", "-m", in, "-c", "8", "-f", path)
		if err != nil {
			t.Fatal(err)
		}
		m, err := gguf.ParsePerplexityLog(out)
		if err != nil {
			t.Fatal(err)
		}
		return m.PPL
	}
	a := score(strings.Repeat(evalText, 2))
	b := score(strings.Repeat(evalText, 2) + "zebra")
	if a == b {
		t.Error("another word in the text left the perplexity as it was")
	}
	if a != score(strings.Repeat(evalText, 2)) {
		t.Error("the same text scored twice gave two numbers")
	}
}

func TestPerplexityRefusals(t *testing.T) {
	in := f16(t, "512")
	dir := filepath.Dir(in)
	text := write(t, filepath.Join(dir, "eval.txt"), evalText)
	notJSON := write(t, filepath.Join(dir, "bad.kld"), "logits")
	notGGUF := write(t, filepath.Join(dir, "model.safetensors"), weights)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-m", notGGUF, "-f", text, "-c", "8"}, "is not a GGUF file"},
		{[]string{"-m", in, "-f", filepath.Join(dir, "missing.txt"), "-c", "8"}, "no such file"},
		{[]string{"-m", in, "-f", text, "-c", "32"}, "you need at least 64 tokens to evaluate perplexity with a context of 32; the text has 27"},
		{[]string{"-m", in, "--kl-divergence"}, "kl-divergence base:"},
		{[]string{"-m", in, "--kl-divergence-base", notJSON, "--kl-divergence"}, "kl-divergence base:"},
		{[]string{"-m", in, "-f", text, "--bogus"}, "bogus"},
	} {
		if _, _, err := run(t, "llama-perplexity", c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}

// Like the real llama-perplexity (perplexity.cpp: tokens < 2*n_ctx), a
// text needs two contexts' worth of tokens, not one; and a context under
// one token is refused rather than divided by.
func TestPerplexityNeedsTwoContextsOfText(t *testing.T) {
	in := f16(t, "512")
	text := write(t, filepath.Join(filepath.Dir(in), "eval.txt"), evalText) // 27 words
	for _, c := range []string{"16", "14"} {
		out, _, err := run(t, "llama-perplexity", "-m", in, "-f", text, "-c", c)
		if err == nil || !strings.Contains(err.Error(), "you need at least") || strings.Contains(out, "Final estimate") {
			t.Errorf("27 words at -c %s: %v, %q; want a refusal", c, err, out)
		}
	}
	if _, _, err := run(t, "llama-perplexity", "-m", in, "-f", text, "-c", "13"); err != nil {
		t.Errorf("27 words at -c 13: %v", err)
	}
	for _, c := range []string{"0", "-1"} {
		if _, _, err := run(t, "llama-perplexity", "-m", in, "-f", text, "-c", c); err == nil || !strings.Contains(err.Error(), "-c must be at least 1") {
			t.Errorf("-c %s: %v", c, err)
		}
	}
}

func TestImatrix(t *testing.T) {
	in := f16(t, "512")
	dir := filepath.Dir(in)
	text := write(t, filepath.Join(dir, "calib.txt"), evalText)
	out := filepath.Join(dir, "imatrix.dat")
	if _, _, err := run(t, "llama-imatrix", "-m", in, "-f", text, "-o", out, "-c", "8", "-b", "8", "-t", "2", "--chunks", "3"); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	h, payload := mustRead(t, in)
	sum := sha256.Sum256([]byte(h.SourceSHA256 + string(payload[:min(len(payload), 4096)]) + evalText))
	if string(first) != "imatrix "+hex.EncodeToString(sum[:])+"\n" {
		t.Errorf("imatrix %q, want the digest of the model and the text", first)
	}
	// Another text, another matrix; another model, another matrix.
	write(t, text, evalText+"more")
	if _, _, err := run(t, "llama-imatrix", "-m", in, "-f", text, "-o", out); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(out)
	if bytes.Equal(first, second) {
		t.Error("another calibration text gave the same importance matrix")
	}
	other := f16(t, "768")
	if _, _, err := run(t, "llama-imatrix", "-m", other, "-f", text, "-o", out); err != nil {
		t.Fatal(err)
	}
	if third, _ := os.ReadFile(out); bytes.Equal(third, second) {
		t.Error("another model gave the same importance matrix")
	}

	for _, args := range [][]string{
		{"-m", filepath.Join(dir, "missing.gguf"), "-f", text, "-o", out},
		{"-m", in, "-f", filepath.Join(dir, "missing.txt"), "-o", out},
		{"-m", in, "-f", text, "-o", filepath.Join(dir, "no", "such", "dir", "imatrix.dat")},
		{"-m", in, "-f", text, "-o", out, "--bogus"},
	} {
		if _, _, err := run(t, "llama-imatrix", args...); err == nil {
			t.Errorf("%q: want an error", args)
		}
	}
}

// llamaBenchLine is what pipelines/gguf's readLlamaBenchTests decodes
// from each line of llama-bench -o jsonl that holds "samples_ns".
type llamaBenchLine struct {
	NPrompt   int       `json:"n_prompt"`
	NGen      int       `json:"n_gen"`
	NDepth    int       `json:"n_depth"`
	NThreads  int       `json:"n_threads"`
	SamplesNS []float64 `json:"samples_ns"`
}

func benchLines(t *testing.T, stdout string) []llamaBenchLine {
	t.Helper()
	var out []llamaBenchLine
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if !strings.HasPrefix(line, "{") || !strings.Contains(line, `"samples_ns"`) {
			t.Fatalf("not a llama-bench result line: %q", line)
		}
		var l llamaBenchLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

func TestLlamaBenchPrintsWhatThePipelineReads(t *testing.T) {
	in := f16(t, "512")
	// The two runs pipelines/gguf's Measure makes.
	stdout, stderr, err := run(t, "llama-bench", "-m", in, "-r", "3", "-t", "2", "-o", "jsonl", "-p", "16", "-n", "0")
	if err != nil {
		t.Fatal(err)
	}
	pp := benchLines(t, stdout)
	if len(pp) != 1 || pp[0].NPrompt != 16 || pp[0].NGen != 0 || pp[0].NDepth != 0 || pp[0].NThreads != 2 || len(pp[0].SamplesNS) != 3 {
		t.Errorf("prompt run %+v", pp)
	}
	if !strings.Contains(stderr, "3 repetitions") {
		t.Errorf("stderr %q", stderr)
	}
	stdout, _, err = run(t, "llama-bench", "-m", in, "-r", "3", "-t", "2", "-o", "jsonl", "-p", "0", "-n", "1", "-d", "16")
	if err != nil {
		t.Fatal(err)
	}
	tg := benchLines(t, stdout)
	if len(tg) != 1 || tg[0].NPrompt != 0 || tg[0].NGen != 1 || tg[0].NDepth != 16 || len(tg[0].SamplesNS) != 3 {
		t.Errorf("decode run %+v", tg)
	}
	// Both tests in one run, by default 5 repetitions.
	stdout, _, err = run(t, "llama-bench", "-m", in, "-o", "jsonl")
	if both := benchLines(t, stdout); err != nil || len(both) != 2 || both[0].NPrompt != 512 || both[1].NGen != 128 || len(both[1].SamplesNS) != 5 {
		t.Errorf("defaults: %v, %+v", err, both)
	}
}

func TestLlamaBenchTimingsFollowTheModel(t *testing.T) {
	dir := t.TempDir()
	small := f16(t, "512")
	// Same size, other bytes: one byte changed.
	b, _ := os.ReadFile(small)
	b[len(b)-1] ^= 1
	twin := write(t, filepath.Join(dir, "twin.gguf"), string(b))
	h, payload := mustRead(t, small)
	big := filepath.Join(dir, "big.gguf")
	// 2 MiB more at the stand-in's 20 GB/s: about 100 us a token over the
	// 50 us overhead, well past the 30% the runs vary by.
	if err := writeGGUF(big, h, bytes.Repeat(payload, 2<<20/len(payload))); err != nil {
		t.Fatal(err)
	}
	samples := func(model string, extra ...string) []float64 {
		out, _, err := run(t, "llama-bench", append([]string{"-m", model, "-r", "4", "-o", "jsonl", "-p", "0", "-n", "8"}, extra...)...)
		if err != nil {
			t.Fatal(err)
		}
		return benchLines(t, out)[0].SamplesNS
	}
	s := samples(small)
	if !slices.Equal(s, samples(small)) {
		t.Error("the same model gave other timings")
	}
	if slices.Equal(s, samples(twin)) {
		t.Error("a changed byte in the model left the timings as they were")
	}
	if slices.Max(s) >= slices.Min(samples(big)) {
		t.Errorf("a 2 MiB bigger model is not slower: %v vs %v", s, samples(big))
	}
	if slices.Max(s) >= slices.Min(samples(small, "-d", "8192")) {
		t.Error("decoding at depth 8192 is not slower than at 0")
	}
}

func TestLlamaBenchRefusals(t *testing.T) {
	in := f16(t, "512")
	notGGUF := write(t, filepath.Join(t.TempDir(), "m.safetensors"), weights)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-m", in}, `prints only -o jsonl, not "md"`},
		{[]string{"-m", in, "-o", "csv"}, `not "csv"`},
		{[]string{"-m", in, "-o", "jsonl", "-r", "0"}, "-r must be at least 1"},
		{[]string{"-m", notGGUF, "-o", "jsonl"}, "failed to load model '" + notGGUF + "'"},
		{[]string{"-o", "jsonl"}, "failed to load model ''"},
		{[]string{"-m", in, "-o", "jsonl", "-p", "x"}, "invalid value"},
	} {
		if out, _, err := run(t, "llama-bench", c.args...); err == nil || !strings.Contains(err.Error(), c.want) || out != "" {
			t.Errorf("%q: %v, %q; want %q and no result line", c.args, err, out, c.want)
		}
	}
}

// The converter keeps what the real one writes of the checkpoint's
// tokenizer, and llama-tokenize reads it back: no tokenizer, no tokens.
func TestConvertKeepsTheTokenizerAndTokenizeReadsIt(t *testing.T) {
	src := checkpoint(t, t.TempDir(), `{"hidden_size": 64, "eos_token_id": 7, "bos_token_id": 1}`, map[string]string{"model.safetensors": weights})
	out := filepath.Join(t.TempDir(), "f16.gguf")
	if _, _, err := run(t, "convert_hf_to_gguf.py", src, "--outtype", "f16", "--outfile", out); err != nil {
		t.Fatal(err)
	}
	prompt := write(t, filepath.Join(t.TempDir(), "p.txt"), "hi")
	if h, _ := mustRead(t, out); h.Tokenizer != nil {
		t.Errorf("a checkpoint without a tokenizer gave a GGUF with one: %v", h.Tokenizer)
	}
	if _, _, err := run(t, "llama-tokenize", "-m", out, "-f", prompt, "--ids"); err == nil || !strings.Contains(err.Error(), "no vocabulary") {
		t.Errorf("llama-tokenize on a GGUF without a tokenizer: %v", err)
	}

	write(t, filepath.Join(src, "tokenizer.json"), `{"added_tokens": [{"id": 1, "content": "<s>"}, {"id": 2, "content": "</s>"}]}`)
	write(t, filepath.Join(src, "tokenizer_config.json"), `{"eos_token": "</s>", "bos_token": "<s>", "add_bos_token": true, "chat_template": "{{ messages }}"}`)
	if _, _, err := run(t, "convert_hf_to_gguf.py", src, "--outtype", "f16", "--outfile", out); err != nil {
		t.Fatal(err)
	}
	h, _ := mustRead(t, out)
	for key, want := range map[string]any{"tokenizer.ggml.eos_token_id": 2.0, "tokenizer.ggml.bos_token_id": 1.0,
		"tokenizer.ggml.add_bos_token": true, "tokenizer.chat_template": "{{ messages }}"} {
		if h.Tokenizer[key] != want {
			t.Errorf("%s = %v, want %v (the tokenizer's, not config.json's eos 7)", key, h.Tokenizer[key], want)
		}
	}
	if d, _ := h.Tokenizer["tokenizer.stand_in.sha256"].(string); len(d) != 64 {
		t.Errorf("no digest of the tokenizer files: %v", h.Tokenizer)
	}
	// Quantizing keeps the tokenizer.
	q := filepath.Join(t.TempDir(), "q8.gguf")
	if _, _, err := run(t, "llama-quantize", out, q, "Q8_0"); err != nil {
		t.Fatal(err)
	}
	if hq, _ := mustRead(t, q); !reflect.DeepEqual(hq.Tokenizer, h.Tokenizer) {
		t.Errorf("quantized tokenizer %v, want %v", hq.Tokenizer, h.Tokenizer)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ids"}, "[1, 107, 108]\n"},
		{[]string{"--ids", "--no-bos"}, "[107, 108]\n"},
		{nil, "     1 -> ''\n   107 -> 'h'\n   108 -> 'i'\n"},
	} {
		got, _, err := run(t, "llama-tokenize", append([]string{"-m", q, "-f", prompt}, c.args...)...)
		if err != nil || got != c.want {
			t.Errorf("llama-tokenize %v: %q, %v; want %q", c.args, got, err, c.want)
		}
	}
}
