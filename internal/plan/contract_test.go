package plan_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/edgepipe/edgepipe/pipelines/shared"

	. "github.com/edgepipe/edgepipe/internal/plan"
)

// Every text-generation target's publish needs the contract of its model,
// read the way its format is; targets with the same model share one, and
// it reads the built-in corpus.
func TestContractStepPerModel(t *testing.T) {
	p := load(t, "", `edgepipe: 1
name: m
model: {source: ./model}
targets:
  a: {device: x86-laptop, format: gguf-q8_0}
  b: {device: snapdragon-x-elite, format: gguf-q8_0}
  c: {device: x86-laptop, format: onnx-int4}
  d: {device: webgpu-m3-max, format: mlc-q4f16_1}
  e: {device: apple-m4, format: coreml-int4}
`)
	for _, c := range []struct {
		target, model, artifact string
		targets                 []string
	}{
		{"a", "gguf-quantize:q8_0", shared.ContractGGUF, []string{"a", "b"}},
		{"b", "gguf-quantize:q8_0", shared.ContractGGUF, []string{"a", "b"}},
		{"c", "onnx-quantize:int4", shared.ContractFolder, []string{"c"}},
		{"d", "mlc-native-config:q4f16_1@c4096", shared.ContractMLC, []string{"d"}},
		{"e", "coreml-convert:int4@c4096", shared.ContractFolder, []string{"e"}},
	} {
		id := "contract:" + c.model
		s, ok := p.Step(id)
		if !ok {
			t.Fatalf("%s: no step %s; steps %v", c.target, id, graph(p))
		}
		cp := s.Params.(*shared.ContractParams)
		if s.Kind != "contract" || !slices.Equal(s.Needs, []string{SourceStepID, c.model}) || *cp != (shared.ContractParams{Artifact: c.artifact}) {
			t.Errorf("%s: %s needs %v, params %+v", c.target, id, s.Needs, cp)
		}
		if s.Data[shared.DataTokenizerCorpus] != "builtin:tokenizer-corpus" || len(s.Data) != 1 {
			t.Errorf("%s: data %v", id, s.Data)
		}
		if !slices.Equal(s.Targets, c.targets) {
			t.Errorf("%s serves %v, want %v", id, s.Targets, c.targets)
		}
		pub, _ := p.Step(PublishStepID(c.target))
		if !slices.Contains(pub.Needs, id) || pub.Needs[0] != c.model {
			t.Errorf("publish:%s needs %v: want the model first and %s among its checks", c.target, pub.Needs, id)
		}
	}
}

// A GGUF source's own GGUF is where the contract step can find it: a
// local file as a data file (its content in the key), a built-in model by
// its name, a download as not kept.
func TestContractGGUFSource(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "m.gguf"), []byte("GGUF"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		source, want, data string
	}{
		{"./model", "", ""},
		{"./m.gguf", shared.GGUFSourceLocal, "./m.gguf"},
		{"builtin:smollm2-135m", "builtin:smollm2-135m", ""},
		{"builtin:tiny-qwen2", "", ""},
		{"https://example.com/m.Q4_K_M.gguf", shared.GGUFSourceDownload, ""},
		{"hf://org/model", "", ""},
	} {
		p := load(t, dir, "edgepipe: 1\nname: m\nmodel: {source: "+c.source+"}\ntargets:\n  a: {device: x86-laptop, format: gguf-q8_0}\n")
		s, ok := p.Step("contract:gguf-quantize:q8_0")
		if !ok {
			t.Fatalf("%s: no contract step", c.source)
		}
		if got := s.Params.(*shared.ContractParams).GGUFSource; got != c.want {
			t.Errorf("%s: gguf_source %q, want %q", c.source, got, c.want)
		}
		if s.Data[shared.DataGGUF] != c.data {
			t.Errorf("%s: gguf data %q, want %q", c.source, s.Data[shared.DataGGUF], c.data)
		}
	}
}

// Every built-in text-generation family's targets get the contract.
func TestEveryBuiltinFamilyHasTheContract(t *testing.T) {
	n := 0
	for _, f := range Families() {
		if f.Task == "" && f.Name != "enginetest" {
			n++
			if f.NoContract {
				t.Errorf("family %s opts out of the behavioural contract", f.Name)
			}
		}
	}
	if n < 8 {
		t.Errorf("%d text-generation families registered: the built-in ones are not linked", n)
	}
}
