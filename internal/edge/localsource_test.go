package edge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/recipe"
)

// A local folder's pickle weights and model code are refused at
// model.source by plan, unless the recipe opts in, as the run's source step
// would refuse them; a folder that is not there is MissingLocalSource's.
func TestLocalSourceProblems(t *testing.T) {
	const target = "  laptop: {device: x86-laptop, format: gguf-q8_0}\n"
	cases := []struct {
		name, file, content, optIn, want string
	}{
		{"clean", "model.safetensors", "", "", ""},
		{"pickle", "pytorch_model.bin", "", "", "pytorch_model.bin is a pickle file"},
		{"pickle allowed", "pytorch_model.bin", "", "allow_pickle", ""},
		{"nested code", "code/modeling_x.py", "", "", "the model ships code (code/modeling_x.py)"},
		{"code trusted", "modeling_x.py", "", "trust_remote_code", ""},
		{"auto_map", "tokenizer_config.json", `{"auto_map": {"AutoTokenizer": "x.Y"}}`, "", "tokenizer_config.json has auto_map"},
		{"auto_map trusted", "tokenizer_config.json", `{"auto_map": {"AutoTokenizer": "x.Y"}}`, "trust_remote_code", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := preflightRecipe(t, llama3ConfigJSON, target)
			f := filepath.Join(r.Dir(), "model", tc.file)
			if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			switch tc.optIn {
			case "allow_pickle":
				r.Model.AllowPickle = true
			case "trust_remote_code":
				r.Model.TrustRemoteCode = true
			}
			diags := LocalSourceProblems(r)
			pre, _ := Preflight(r)
			switch {
			case tc.want == "" && (len(diags) > 0 || len(pre) > 0):
				t.Errorf("refused: %v / %v", diags, pre)
			case tc.want != "" && (len(diags) != 1 || !strings.Contains(diags[0].Msg, tc.want) || diags[0].Pos != r.Model.SourcePos):
				t.Errorf("got %v, want one diagnostic at model.source containing %q", diags, tc.want)
			case tc.want != "" && (len(pre) != 1 || pre[0].Msg != diags[0].Msg):
				t.Errorf("plan's pre-flight: %v", pre)
			}
			if d := MissingLocalSource(r); len(d) > 0 {
				t.Errorf("the folder is there: %v", d)
			}
		})
	}
}

func TestMissingLocalSource(t *testing.T) {
	dir := t.TempDir()
	for _, src := range []string{"./nowhere", "./nowhere.gguf", filepath.Join(dir, "gone")} {
		r, err := recipe.Parse(filepath.Join(dir, "r.yaml"), []byte("edgepipe: 1\nname: r\nmodel:\n  source: "+src+"\ntargets:\n  laptop: {device: x86-laptop, format: gguf-q8_0}\n"))
		if err != nil {
			t.Fatal(err)
		}
		d := MissingLocalSource(r)
		if len(d) != 1 || !strings.Contains(d[0].Msg, "no such") || d[0].Pos.Line != 4 {
			t.Errorf("%s: %v", src, d)
		}
		if LocalSourceProblems(r) != nil {
			t.Errorf("%s: a missing folder is not LocalSourceProblems' to report", src)
		}
	}
	for _, src := range []string{"builtin:smollm2-135m", "hf://org/name", "https://example.com/m.gguf"} {
		r, err := recipe.Parse(filepath.Join(dir, "r.yaml"), []byte("edgepipe: 1\nname: r\nmodel:\n  source: "+src+"\ntargets:\n  laptop: {device: x86-laptop, format: gguf-q8_0}\n"))
		if err != nil {
			t.Fatal(err)
		}
		if d := MissingLocalSource(r); d != nil {
			t.Errorf("%s is not local: %v", src, d)
		}
	}
}
