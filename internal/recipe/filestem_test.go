package recipe

import (
	"strings"
	"testing"
)

func TestSourceFileStem(t *testing.T) {
	for src, want := range map[string]string{
		"builtin:smollm2-135m":                                    "smollm2-135m",
		"hf://HuggingFaceTB/SmolLM2-135M-Instruct@main":           "SmolLM2-135M-Instruct",
		"hf://Qwen/Qwen2.5-0.5B-Instruct":                         "Qwen2.5-0.5B-Instruct",
		"./models/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf":              "Qwen2.5-0.5B-Instruct",
		"./x/gemma-3-270m-it.f16.gguf":                            "gemma-3-270m-it",
		"./weights/":                                              "weights",
		"https://example.com/m/Phi-3-mini-IQ4_XS.gguf?download=1": "Phi-3-mini",
		"s3::https://s3.example.com/bucket/llama-3.2-1b.tar.gz":   "llama-3.2-1b",
		"git::https://example.com/org/tiny.git//sub?ref=v1":       "tiny",
		"./my model (copy)":                                       "my-model-copy",
		"./..":                                                    "model",
		"C:\\models\\Mistral-7B":                                  "Mistral-7B",
	} {
		if got := SourceFileStem(src); got != want {
			t.Errorf("SourceFileStem(%q) = %q, want %q", src, got, want)
		}
	}
	if got := (Model{Source: "builtin:smollm2-135m", Name: "SmolLM2-135M-Instruct"}).FileStem(); got != "SmolLM2-135M-Instruct" {
		t.Errorf("model.name is not the stem: %q", got)
	}
}

func TestModelNameRefused(t *testing.T) {
	_, err := Parse("r.yaml", []byte("edgepipe: 1\nname: r\nmodel:\n  source: builtin:smollm2-135m\n  name: ../etc/passwd\ntargets:\n  - name: a\n    device: laptop-cpu\n    format: gguf-q8_0\n"))
	if err == nil {
		t.Fatal("a model.name with a slash was accepted")
	}
	if want := "r.yaml:5:9"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not say %s", err, want)
	}
}
