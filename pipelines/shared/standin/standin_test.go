package standin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"github.com/edgepipe/edgepipe/data"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/gguf/gguftest"
	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps/steptest"
)

// The stand-ins write the reports the kinds decode strictly: the same
// types the goldens and the Python writers are checked against.
func TestStandInReportsDecodeStrictly(t *testing.T) {
	dir := t.TempDir()
	gguf := filepath.Join(dir, "m.gguf")
	if err := gguftest.Tiny().File().Write(gguf); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := standin.Tools["gguf_to_hf.py"]([]string{"--gguf", gguf, "--out", filepath.Join(dir, "ckpt")}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var g report.GGUFToHF
	steptest.CheckReport(t, "gguf_to_hf.py", bytes.TrimSpace(out.Bytes()), &g)
	if g.FileType != "Q8_0" || g.TensorTypes["Q8_0"] != 16 || g.Parameters != gguftest.Tiny().Params() || len(g.Files) != 3 {
		t.Fatalf("report %+v", g)
	}

	text := filepath.Join(dir, "eval.txt")
	os.WriteFile(text, bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 200), 0o644)
	out.Reset()
	if err := standin.Tools["hf_perplexity.py"]([]string{"--model", filepath.Join(dir, "ckpt"), "--text", text, "--ctx", "64"}, &out, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	var p report.Perplexity
	steptest.CheckReport(t, "hf_perplexity.py", bytes.TrimSpace(out.Bytes()), &p)
	if p.PPL <= 0 || p.Ctx != 64 {
		t.Fatalf("report %+v", p)
	}
}

// writeFiles writes name -> content into dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// runContract runs the stand-in contract.py and decodes its report strictly.
func runContract(t *testing.T, args ...string) report.Contract {
	t.Helper()
	var out, errOut bytes.Buffer
	if err := standin.Tools["contract.py"](args, &out, &errOut); err != nil {
		t.Fatalf("contract.py %v: %v\n%s", args, err, errOut.String())
	}
	var r report.Contract
	steptest.CheckReport(t, "contract.py", bytes.TrimSpace(out.Bytes()), &r)
	return r
}

// The stand-in contract reads the files the real one compares and judges
// them the same way: an unchanged folder passes every check, and each
// deliberately broken artifact fails its own check, saying what differs.
func TestContractStandInJudgesWhatItReads(t *testing.T) {
	dir := t.TempDir()
	corpus := filepath.Join(dir, "corpus.txt")
	writeFiles(t, dir, map[string]string{"corpus.txt": "one\ntwo\n\nthree\n"})
	src := map[string]string{
		"config.json":            `{"eos_token_id": 2, "bos_token_id": 1}`,
		"generation_config.json": `{"eos_token_id": [2, 7]}`,
		"tokenizer.json":         `{"added_tokens": [{"id": 1, "content": "<s>"}, {"id": 2, "content": "</s>"}], "model": {"merges": ["a b", "c d"]}}`,
		"tokenizer_config.json":  `{"eos_token": "</s>", "bos_token": "<s>", "chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"}`,
	}
	writeFiles(t, filepath.Join(dir, "src"), src)
	artifact := func(name string, change func(map[string]string)) string {
		files := map[string]string{}
		for k, v := range src {
			files[k] = v
		}
		change(files)
		writeFiles(t, filepath.Join(dir, name), files)
		return filepath.Join(dir, name)
	}
	contract := func(art string) report.Contract {
		return runContract(t, "--source", filepath.Join(dir, "src"), "--artifact", art, "--reader", "folder", "--corpus", corpus)
	}

	r := contract(artifact("same", func(map[string]string) {}))
	for name, c := range map[string]report.ContractCheck{"tokenizer": r.Tokenizer, "eos": r.EOS, "bos": r.BOS, "chat_template": r.ChatTemplate} {
		if c.Status != report.ContractPassed {
			t.Errorf("unchanged artifact: %s %s: %s", name, c.Status, c.Detail)
		}
	}
	if r.CorpusTexts != 4 || r.SourceGGUF != nil {
		t.Errorf("corpus texts %d (want 3 lines and the whole), source_gguf %v", r.CorpusTexts, r.SourceGGUF)
	}

	for _, c := range []struct {
		name   string
		change func(map[string]string)
		check  func(report.Contract) report.ContractCheck
		want   string
	}{
		{"wrong EOS", func(f map[string]string) { f["generation_config.json"] = `{"eos_token_id": [2, 9]}` },
			func(r report.Contract) report.ContractCheck { return r.EOS },
			"the artifact does not stop on 7, which the source stops on; the artifact declares 9 as EOS"},
		{"merge dropped", func(f map[string]string) {
			f["tokenizer.json"] = strings.Replace(f["tokenizer.json"], `"a b", `, "", 1)
		},
			func(r report.Contract) report.ContractCheck { return r.Tokenizer }, "tokenizer files differ"},
		{"template removed", func(f map[string]string) { f["tokenizer_config.json"] = `{"eos_token": "</s>", "bos_token": "<s>"}` },
			func(r report.Contract) report.ContractCheck { return r.ChatTemplate }, `no "default" chat template: the source's is lost`},
		{"no tokenizer", func(f map[string]string) { delete(f, "tokenizer.json") },
			func(r report.Contract) report.ContractCheck { return r.Tokenizer }, "the artifact ships no tokenizer"},
	} {
		got := c.check(contract(artifact(c.name, c.change)))
		if got.Status != report.ContractFailed || !strings.Contains(got.Detail, c.want) {
			t.Errorf("%s: %s %q, want failed with %q", c.name, got.Status, got.Detail, c.want)
		}
	}

	// A source without a tokenizer, EOS or chat template: those checks
	// are skipped with the reason, not passed.
	writeFiles(t, filepath.Join(dir, "bare"), map[string]string{"config.json": `{"hidden_size": 8}`})
	r = runContract(t, "--source", filepath.Join(dir, "bare"), "--artifact", filepath.Join(dir, "bare"), "--reader", "folder", "--corpus", corpus)
	for name, c := range map[string]report.ContractCheck{"tokenizer": r.Tokenizer, "eos": r.EOS, "bos": r.BOS, "chat_template": r.ChatTemplate} {
		if c.Status != report.ContractSkipped || c.Detail == "" {
			t.Errorf("bare source: %s %s %q, want skipped with a reason", name, c.Status, c.Detail)
		}
	}

	// An MLC folder whose conversation template is only named (mlc_llm's
	// registry's): its stop set is mlc-chat-config.json's, the template
	// is not compared, and it says so.
	mlc := artifact("mlc", func(f map[string]string) {
		delete(f, "config.json")
		delete(f, "generation_config.json")
		f["mlc-chat-config.json"] = `{"conv_template": {"name": "chatml"}, "eos_token_id": [2, 7], "bos_token_id": 1}`
	})
	r = runContract(t, "--source", filepath.Join(dir, "src"), "--artifact", mlc, "--reader", "mlc", "--corpus", corpus)
	if r.EOS.Status != report.ContractPassed || r.ChatTemplate.Status != report.ContractSkipped || !strings.Contains(r.ChatTemplate.Detail, "mlc_llm's registry") {
		t.Errorf("mlc: eos %+v, chat template %+v", r.EOS, r.ChatTemplate)
	}

	// A GGUF source is read, and its comparison said skipped.
	gg := filepath.Join(dir, "src.gguf")
	if err := gguftest.Tiny().File().Write(gg); err != nil {
		t.Fatal(err)
	}
	r = runContract(t, "--source", filepath.Join(dir, "src"), "--artifact", artifact("same2", func(map[string]string) {}), "--reader", "folder",
		"--corpus", corpus, "--source-gguf", gg)
	if r.SourceGGUF == nil || r.SourceGGUF.Status != report.ContractSkipped {
		t.Errorf("source_gguf %+v, want skipped", r.SourceGGUF)
	}
}

// The reference stand-in reads the prompts and the checkpoint: the brief
// prompt stops at EOS, a sliding-window config adds a window sequence cut
// from the text whose decode crosses the window, and the decode stand-in
// reads what it wrote.
func TestGenerateReferenceStandIn(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	os.MkdirAll(ckpt, 0o755)
	os.WriteFile(filepath.Join(ckpt, "config.json"), []byte(`{"sliding_window": 40, "layer_types": ["sliding_attention", "full_attention"]}`), 0o644)
	os.WriteFile(filepath.Join(ckpt, "model.safetensors"), []byte("weights"), 0o644)
	text := filepath.Join(dir, "eval.txt")
	os.WriteFile(text, bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog. "), 20), 0o644)
	prompts, err := data.Materialize("chat-prompts", dir)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := standin.Tools["generate_reference.py"]([]string{"--model", ckpt, "--prompts", prompts, "--out", filepath.Join(dir, "ref"),
		"--max-new-tokens", "16", "--text", text}, &out, &out); err != nil {
		t.Fatal(err)
	}
	var g report.GenerateReference
	steptest.CheckReport(t, "generate_reference.py", bytes.TrimSpace(out.Bytes()), &g)
	if g.Sequences != 5 || g.SlidingWindow == nil || *g.SlidingWindow != 40 || g.CrossesWindow == nil || !*g.CrossesWindow ||
		g.StoppedAtEOS < 1 || g.MaxNewTokens != 16 || g.ChatTemplate {
		t.Fatalf("report %+v", g)
	}
	rep, err := DecodeReport("artifact", filepath.Join(dir, "ref", "reference.json"), "runtime")
	if err != nil {
		t.Fatal(err)
	}
	if rep.Sequences != 5 || rep.Steps != g.GeneratedTokens || rep.CrossesWindow == nil || !*rep.CrossesWindow {
		t.Errorf("decode %+v", rep)
	}

	// A tokenizer with a chat template says so.
	os.WriteFile(filepath.Join(ckpt, "chat_template.jinja"), []byte("{{ messages }}"), 0o644)
	out.Reset()
	if err := standin.Tools["generate_reference.py"]([]string{"--model", ckpt, "--prompts", prompts, "--out", filepath.Join(dir, "ref3"),
		"--text", text}, &out, &out); err != nil {
		t.Fatal(err)
	}
	steptest.CheckReport(t, "generate_reference.py", bytes.TrimSpace(out.Bytes()), &g)
	if !g.ChatTemplate {
		t.Errorf("chat_template.jinja: report %+v", g)
	}

	// Without --text a sliding-window model has no window passage.
	if err := standin.Tools["generate_reference.py"]([]string{"--model", ckpt, "--prompts", prompts, "--out", filepath.Join(dir, "ref2")},
		&bytes.Buffer{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "pass --text") {
		t.Errorf("no --text: %v", err)
	}
}

// tiny_model.py's stand-in writes its report strictly, and a checkpoint
// whose weights follow its inputs: the same inputs the same bytes,
// another architecture or text other bytes; it refuses an architecture
// tiny_model.py does not build and a folder without a tokenizer.
func TestTinyModelStandIn(t *testing.T) {
	dir := t.TempDir()
	tok := filepath.Join(dir, "tok")
	os.MkdirAll(tok, 0o755)
	os.WriteFile(filepath.Join(tok, "tokenizer.json"), []byte(`{"model": {}}`), 0o644)
	os.WriteFile(filepath.Join(tok, "model.safetensors"), []byte("the tokenizer model's weights"), 0o644)
	text := filepath.Join(dir, "text.txt")
	os.WriteFile(text, []byte("the quick brown fox jumps over the lazy dog"), 0o644)
	build := func(arch, out string) report.TinyModel {
		t.Helper()
		var stdout bytes.Buffer
		if err := standin.Tools["tiny_model.py"]([]string{"--arch", arch, "--tokenizer", tok, "--text", text, "--out", out}, &stdout, &bytes.Buffer{}); err != nil {
			t.Fatal(err)
		}
		var r report.TinyModel
		steptest.CheckReport(t, "tiny_model.py", bytes.TrimSpace(stdout.Bytes()), &r)
		return r
	}
	a := build("qwen3", filepath.Join(dir, "a"))
	if a.Architecture != "Qwen3ForCausalLM" || a.TextTokens != 9 || a.Parameters != 128 ||
		strings.Join(a.Files, " ") != "config.json model.safetensors tokenizer.json" {
		t.Fatalf("report %+v", a)
	}
	st, err := os.ReadFile(filepath.Join(dir, "a", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(st); hex.EncodeToString(sum[:]) != a.SHA256 || int64(len(st)) != a.Bytes {
		t.Errorf("the report's digest %s is not the file's", a.SHA256)
	}
	if again := build("qwen3", filepath.Join(dir, "b")); again.SHA256 != a.SHA256 {
		t.Error("the same inputs made other weights")
	}
	if other := build("gemma3", filepath.Join(dir, "c")); other.SHA256 == a.SHA256 || other.Architecture != "Gemma3ForCausalLM" {
		t.Errorf("another architecture made the same weights: %+v", other)
	}
	os.WriteFile(text, []byte("another text"), 0o644)
	if other := build("qwen3", filepath.Join(dir, "d")); other.SHA256 == a.SHA256 {
		t.Error("another text made the same weights")
	}
	err = standin.Tools["tiny_model.py"]([]string{"--arch", "gpt2", "--tokenizer", tok, "--text", text, "--out", filepath.Join(dir, "e")}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `invalid choice: "gpt2"`) {
		t.Errorf("unknown architecture: %v", err)
	}
	os.Remove(filepath.Join(tok, "tokenizer.json"))
	err = standin.Tools["tiny_model.py"]([]string{"--arch", "llama", "--tokenizer", tok, "--text", text, "--out", filepath.Join(dir, "f")}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "has no tokenizer.json or tokenizer.model") {
		t.Errorf("no tokenizer: %v", err)
	}
}
