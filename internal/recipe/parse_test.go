package recipe

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the .golden files of testdata/recipes/bad")

// TestBadRecipes checks the exact text users see for each broken recipe:
// parse and validation problems together, as Load reports them.
func TestBadRecipes(t *testing.T) {
	files, err := filepath.Glob("testdata/recipes/bad/*.yaml")
	if err != nil || len(files) < 20 {
		t.Fatalf("want at least 20 bad recipes, found %d (%v)", len(files), err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			_, err := Load(file, fakeCatalog{}, fakeKinds)
			var diags Diagnostics
			if !errors.As(err, &diags) {
				t.Fatalf("want Diagnostics, got %v", err)
			}
			for _, d := range diags {
				if d.Pos.File != file || d.Pos.Line < 1 || d.Pos.Col < 1 {
					t.Errorf("diagnostic without a full file:line:col position: %#v", d)
				}
			}
			got := diags.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -run TestBadRecipes -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("diagnostics differ from %s\ngot:\n%s\nwant:\n%s", golden, got, want)
			}
		})
	}
}

func TestGoodRecipes(t *testing.T) {
	files, err := filepath.Glob("testdata/recipes/good/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no good recipes: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".yaml"), func(t *testing.T) {
			r, err := Load(file, fakeCatalog{}, fakeKinds)
			if err != nil {
				t.Fatalf("want a clean recipe, got:\n%v", err)
			}
			if r.Path != file || r.Edgepipe != 1 || r.Name == "" || len(r.Targets) == 0 {
				t.Errorf("recipe incomplete: %+v", r)
			}
		})
	}
}

// TestDesignExample pins what the documented example parses into.
func TestDesignExample(t *testing.T) {
	const file = "testdata/recipes/good/design-example.yaml"
	r, err := ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	at := func(line, col int) Pos { return Pos{File: file, Line: line, Col: col} }
	gate := PerplexityGate{Context: 512, WarnDelta: 0.5, MaxDelta: 2.0}
	want := &Recipe{
		Path:        file,
		Edgepipe:    1,
		Name:        "smollm2-laptop",
		Description: "SmolLM2-135M for CPU laptops",
		Model:       Model{Source: "hf://HuggingFaceTB/SmolLM2-135M-Instruct@main", SourcePos: at(6, 11)},
		Data:        Data{Calibration: "builtin:calibration", Eval: "builtin:eval", Pos: at(11, 1)},
		Quality:     Quality{Perplexity: gate, Generation: DefaultGeneration()},
		Targets: []Target{
			{Name: "laptop-q4km", Device: "apple-m3-max", Format: "gguf-q4_k_m", Context: 8192, KVDtype: "f16",
				Quality: Quality{Perplexity: gate, Generation: DefaultGeneration()}, Pos: at(22, 3), DevicePos: at(23, 13), FormatPos: at(24, 13), ContextPos: at(25, 5)},
			{Name: "laptop-q8", Device: "generic-x86-laptop", Format: "gguf-q8_0", KVDtype: "f16",
				Quality: Quality{Perplexity: PerplexityGate{Context: 512, WarnDelta: 0.5, MaxDelta: 0.5}, Generation: DefaultGeneration()},
				Pos:     at(26, 3), DevicePos: at(27, 13), FormatPos: at(28, 13)},
		},
		Steps: []StepSpec{{ID: "smoke", Uses: "run", Needs: []string{"laptop-q4km"},
			With:    map[string]any{"argv": []any{"python3", "scripts/smoke.py", "${laptop-q4km.outputs.model}"}},
			WithPos: map[string]Pos{"": at(35, 5), "argv": at(36, 7)},
			Pos:     at(32, 3), UsesPos: at(33, 11), NeedsPos: []Pos{at(34, 13)}}},
		NamePos: at(2, 7),
	}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got\n%#v\nwant\n%#v", r, want)
	}
}

func TestFullRecipe(t *testing.T) {
	r, err := ParseFile("testdata/recipes/good/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(r.Description, "SmolLM2-135M for laptops") || !r.Model.AllowPickle || r.Model.TrustRemoteCode {
		t.Errorf("description/model: %+v", r)
	}
	if r.Data.Calibration != "data/calibration.txt" || r.Data.Eval != "builtin:eval" {
		t.Errorf("data: %+v", r.Data)
	}
	if want := (PerplexityGate{Context: 256, WarnDelta: 0.25, MaxDelta: 1.5, MaxChunks: 8}); r.Quality.Perplexity != want {
		t.Errorf("quality: %+v", r.Quality.Perplexity)
	}
	if r.Resources != (Resources{MaxMemoryGB: 20, Jobs: 2}) {
		t.Errorf("resources: %+v", r.Resources)
	}
	var names []string
	for _, tg := range r.Targets {
		names = append(names, tg.Name)
	}
	if !reflect.DeepEqual(names, []string{"laptop-q4km", "laptop-q8", "browser"}) {
		t.Errorf("targets out of file order: %v", names)
	}
	q4, q8, web := r.Targets[0], r.Targets[1], r.Targets[2]
	// Merged budgets, with the target's own key winning over the anchor's.
	if q4.MinTokensPerS != 20 || q4.MaxMemoryGB != 1.5 || q4.MaxFirstTokenMS != 250 || q8.MaxMemoryGB != 2 {
		t.Errorf("merged budgets: q4 %+v q8 %+v", q4, q8)
	}
	if web.MinTokensPerS != 0 || web.KVDtype != "q4" || q8.KVDtype != "fp8" || q4.KVDtype != "f16" {
		t.Errorf("budgets or kv_dtype: web %+v", web)
	}
	if !reflect.DeepEqual(q4.With, map[string]any{"imatrix": true}) {
		t.Errorf("with: got %#v", q4.With)
	}
	// A step's with: holds plain values of any shape.
	wantWith := map[string]any{"argv": []any{"echo", "done"}, "group_size": 128, "ratio": 0.5, "tags": []any{"fast", "small"},
		"nested": map[string]any{"a": 1, "b": []any{true, nil}}}
	if len(r.Steps) == 3 && !reflect.DeepEqual(r.Steps[2].With, wantWith) {
		t.Errorf("step with: got %#v", r.Steps[2].With)
	}
	// The per-target max_delta is stricter than the shared warn_delta:
	// its warning band ends where failure starts.
	if want := (PerplexityGate{Context: 256, WarnDelta: 0.2, MaxDelta: 0.2, MaxChunks: 8}); q8.Quality.Perplexity != want {
		t.Errorf("q8 quality: %+v", q8.Quality.Perplexity)
	}
	if q4.Quality != r.Quality {
		t.Errorf("q4 quality should be the recipe's: %+v", q4.Quality)
	}
	if len(r.Steps) != 3 || r.Steps[0].ID != "gguf-quantize:q4_k_m" || r.Steps[0].Uses != "" ||
		r.Steps[1].TimeoutS != 120 || !reflect.DeepEqual(r.Steps[2].Needs, []string{"smoke", "source", "perplexity:baseline"}) {
		t.Errorf("steps: %+v", r.Steps)
	}
	if len(r.Steps[1].NeedsPos) != 3 || r.Steps[1].NeedsPos[2].Line == 0 {
		t.Errorf("needs positions: %+v", r.Steps[1].NeedsPos)
	}
	tc := r.Toolchains
	if len(tc) != 2 || tc["llama.cpp"].Tools["llama-quantize"] != "/opt/llama.cpp/bin/llama-quantize" ||
		tc["hf"].Python != "/usr/bin/python3.12" || tc["hf"].Pos.Line == 0 {
		t.Errorf("toolchains: %+v", tc)
	}
}

// TestParseMessages covers single problems in small inline recipes, checking
// the message and where it points.
func TestParseMessages(t *testing.T) {
	const head = "edgepipe: 1\nname: t\nmodel: {source: builtin:x}\n"
	const target = "targets:\n  cpu:\n    device: x86-laptop\n    format: gguf-q8_0\n"
	cases := []struct {
		name, yaml string
		want       []string // "LINE:COL: message" prefixes, in order
	}{
		{"context must be an integer", head + target + "    context: big\n",
			[]string{`8:14: targets.cpu.context must be an integer, got string "big"`}},
		{"quoted number hints at the quotes", head + target + "    context: \"512\"\n",
			[]string{"8:14: targets.cpu.context must be an integer, got string \"512\"\n  hint: remove the quotes"}},
		{"context must be positive", head + target + "    context: 0\n",
			[]string{"8:14: targets.cpu.context must be greater than 0, got 0"}},
		{"huge integer", head + target + "    context: 99999999999999999999\n",
			[]string{"8:14: targets.cpu.context is out of range"}},
		{"unknown top-level key", head + target + "targts: {}\n",
			[]string{"8:1: unknown key \"targts\" at the top level of the recipe\n  hint: did you mean \"targets\"?"}},
		{"x- keys are ignored", head + target + "x-anything: {whatever: [1, 2]}\n", nil},
		{"duplicate key points at the second", head + target + "    device: apple-a18\n",
			[]string{`8:5: duplicate key "device" in targets.cpu (first set on line 6)`}},
		{"name with a slash", "edgepipe: 1\nname: a/b\nmodel: {source: x}\n" + target,
			[]string{"2:7: recipe name \"a/b\" is not a valid name"}},
		{"name dot-dot", "edgepipe: 1\nname: \"..\"\nmodel: {source: x}\n" + target,
			[]string{"2:7: recipe name \"..\" is not a valid name"}},
		{"name backslash", "edgepipe: 1\nname: 'a\\b'\nmodel: {source: x}\n" + target,
			[]string{`2:7: recipe name "a\\b" is not a valid name`}},
		{"name of 65 characters", "edgepipe: 1\nname: " + strings.Repeat("a", 65) + "\nmodel: {source: x}\n" + target,
			[]string{"2:7: recipe name \"" + strings.Repeat("a", 65) + "\" is 65 characters long; the limit is 64"}},
		{"name of 64 characters is fine", "edgepipe: 1\nname: " + strings.Repeat("a", 64) + "\nmodel: {source: x}\n" + target, nil},
		{"target name with uppercase", head + "targets:\n  CPU:\n    device: x86-laptop\n    format: gguf-q8_0\n",
			[]string{"5:3: target name \"CPU\" is not a valid name"}},
		{"empty value", head + "targets:\n  cpu:\n    device:\n    format: gguf-q8_0\n",
			[]string{"6:12: targets.cpu.device is empty"}},
		{"tab in indentation", head + "targets:\n  cpu:\n\tdevice: x86-laptop\n",
			[]string{"6:1: tabs are not allowed in YAML indentation; use spaces"}},
		{"tab after spaces", head + "targets:\n  cpu:\n    device: x86-laptop\n  \t format: gguf-q8_0\n",
			[]string{"7:3: tabs are not allowed in YAML indentation; use spaces"}},
		{"tab inside a value is fine", head + "description: \"a\\tb\"\n" + target, nil},
		{"second document", head + target + "---\nname: two\n",
			[]string{"8:1: a recipe file holds one YAML document, but a second one starts here"}},
		{"version 2", "edgepipe: 2\nbogus: 1\n",
			[]string{"1:11: recipe format version 2 is not supported"}},
		{"infinite number", head + target + "    max_memory_gb: .inf\n",
			[]string{"8:20: targets.cpu.max_memory_gb must be a finite number, got .inf"}},
		{"needs must be a list", head + target + "steps:\n  s:\n    uses: run\n    needs: cpu\n",
			[]string{"11:12: steps.s.needs must be a list of target or step names, got string \"cpu\"\n  hint: write a list, even of one: needs: [cpu]"}},
		{"step without uses", head + target + "steps:\n  s:\n    needs: [cpu]\n",
			[]string{"9:3: step \"s\" has no uses"}},
		{"override without uses is fine", head + target + "steps:\n  \"gguf-quantize:q8_0\":\n    with: {threads: 1}\n", nil},
		{"target may override only max_delta", head + target + "    quality: {perplexity: {warn_delta: 0.1}}\n",
			[]string{"8:28: targets.cpu.quality.perplexity.warn_delta cannot be set per target"}},
		{"warn above max", head + target + "quality: {perplexity: {warn_delta: 3}}\n",
			[]string{"8:36: quality.perplexity.warn_delta (3) is greater than max_delta (2)"}},
		{"targets empty", head + "targets:\n",
			[]string{"4:1: targets is empty: a recipe needs at least one target"}},
		{"scalar root", "just text\n",
			[]string{"1:1: a recipe is a mapping of keys (edgepipe:, name:, model:, targets:, ...), but this file holds a single value, not keys (its text is not shown"}},
		{"complex key", head + target + "? [a, b]\n: c\n",
			[]string{"8:3: a key at the top level of the recipe must be a name, got a list"}},
		{"windows line endings", strings.ReplaceAll(head+target, "\n", "\r\n"), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("r.yaml", []byte(c.yaml))
			var diags Diagnostics
			if err != nil && !errors.As(err, &diags) {
				t.Fatalf("want Diagnostics, got %T %v", err, err)
			}
			if len(diags) != len(c.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%v", len(diags), len(c.want), err)
			}
			for i, w := range c.want {
				if got := diags[i].String(); !strings.HasPrefix(got, "r.yaml:"+w) {
					t.Errorf("diagnostic %d:\n%s\nwant prefix\nr.yaml:%s", i, got, w)
				}
			}
		})
	}
}

// A file that is not a recipe (a token, a key, a .env file) parses as one
// bare value: the error says so without quoting it, so a secret given by
// mistake (or named by a hostile bundle's plan) never reaches a log.
func TestNotARecipeIsNotQuoted(t *testing.T) {
	for _, body := range []string{
		"ghp_SECRETtoken0123456789\n",
		"SECRET-AKIAIOSFODNN7 wJalrXUtnFEMI/K7MDENG\nsecond line\n",
		"key=SECRET\nother=2\n",
		"&anchor SECRET\n",
		"'SECRET'\n",
		"123456789SECRET\n",
	} {
		_, err := Parse("r.yaml", []byte(body))
		if err == nil {
			t.Fatalf("%q parsed as a recipe", body)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("the error quotes the file:\n%v", err)
		}
		if !strings.Contains(err.Error(), "a recipe is a mapping of keys") {
			t.Errorf("the error does not say the file is not a recipe:\n%v", err)
		}
	}
}

func TestParseDefaults(t *testing.T) {
	r, err := Parse("r.yaml", []byte("edgepipe: 1\nname: t\nmodel: {source: builtin:x}\n"+
		"targets:\n  cpu:\n    device: x86-laptop\n    format: gguf-q8_0\n"))
	if err != nil {
		t.Fatal(err)
	}
	gate := PerplexityGate{Context: DefaultPPLContext, WarnDelta: DefaultWarnDelta, MaxDelta: DefaultMaxDelta}
	if r.Quality.Perplexity != gate || r.Targets[0].Quality.Perplexity != gate {
		t.Errorf("quality defaults: %+v / %+v", r.Quality, r.Targets[0].Quality)
	}
	if r.Data.Calibration != "builtin:calibration" || r.Data.Eval != "builtin:eval" {
		t.Errorf("data defaults: %+v", r.Data)
	}
	if r.Targets[0].KVDtype != "f16" || r.Targets[0].Context != 0 || r.Model.AllowPickle || r.Model.TrustRemoteCode {
		t.Errorf("target defaults: %+v", r.Targets[0])
	}
}

// A recipe with errors still comes back with what parsed, so validation
// problems can be reported in the same pass.
func TestParseReturnsPartialRecipe(t *testing.T) {
	r, err := Parse("r.yaml", []byte("edgepipe: 1\nname: t\nmodel: {source: x}\ncolour: blue\n"+
		"targets:\n  web:\n    device: webgpu-m3-max\n    format: gguf-q4_k_m\n"))
	if err == nil || r == nil || len(r.Targets) != 1 {
		t.Fatalf("want a partial recipe and an error, got %v, %v", r, err)
	}
	if diags := Validate(r, fakeCatalog{}, nil); len(diags) != 1 {
		t.Errorf("want the device/format problem from Validate, got %v", diags)
	}
	if r, err := Parse("r.yaml", []byte("a: [\n")); r != nil || err == nil {
		t.Errorf("syntax error: want nil recipe and an error, got %v, %v", r, err)
	}
}

func TestParseFileMissing(t *testing.T) {
	_, err := ParseFile(filepath.Join(t.TempDir(), "nope.yaml"))
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("want a not-exist error, got %v", err)
	}
}

// Merges of merges of one anchor expand each mapping once; expanded
// naively, this recipe is 10^8 merged keys.
func TestParseMergeFanOut(t *testing.T) {
	var b strings.Builder
	b.WriteString("edgepipe: 1\nname: m\nmodel: {source: x}\nx-0: &m0 {k: v}\n")
	for i := 1; i <= 8; i++ {
		refs := strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*m%d, ", i-1), 10), ", ")
		fmt.Fprintf(&b, "x-%d: &m%d {<<: [%s]}\n", i, i, refs)
	}
	b.WriteString("targets:\n  cpu:\n    device: x86-laptop\n    format: gguf-q8_0\n    with: {<<: *m8}\n")
	r, err := Parse("r.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Targets[0].With, map[string]any{"k": "v"}) {
		t.Errorf("with: %#v", r.Targets[0].With)
	}
}

// A small recipe must not turn into millions of errors: one anchor of 300
// unknown keys merged into 300 targets is 90,000 problems, of which
// MaxDiagnostics are kept and MaxShown listed, and a huge key is echoed
// by its start and length.
func TestDiagnosticsAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("edgepipe: 1\nname: amp\nmodel: {source: builtin:smollm2-135m}\nx-bad: &bad\n")
	for i := range 300 {
		fmt.Fprintf(&b, "  junk%d: 1\n", i)
	}
	b.WriteString("targets:\n")
	for i := range 300 {
		fmt.Fprintf(&b, "  t%d: {<<: *bad, device: x86-laptop, format: gguf-q8_0}\n", i)
	}
	_, err := LoadBytes("amp.yaml", []byte(b.String()), fakeCatalog{}, fakeKinds)
	var diags Diagnostics
	if !errors.As(err, &diags) {
		t.Fatalf("want Diagnostics, got %v", err)
	}
	if len(diags) > MaxDiagnostics+1 {
		t.Errorf("kept %d diagnostics, want at most %d", len(diags), MaxDiagnostics+1)
	}
	msg := diags.Error()
	lines := strings.Split(msg, "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "and ") || !strings.Contains(last, " more problems not listed") {
		t.Errorf("last line %q, want the count of problems not listed", last)
	}
	var n int
	fmt.Sscanf(last, "and %d more", &n)
	if want := 300*300 - MaxShown; n != want {
		t.Errorf("says %d more, want %d", n, want)
	}
	if len(msg) > 64<<10 {
		t.Errorf("the message is %d bytes", len(msg))
	}
	big := "edgepipe: 1\nname: big\nmodel: {source: builtin:smollm2-135m}\ntargets:\n  big: {device: " + strings.Repeat("k", 2<<20) + ", format: gguf-q8_0}\n"
	_, err = LoadBytes("big.yaml", []byte(big), fakeCatalog{}, fakeKinds)
	if err == nil || len(err.Error()) > 1000 || !strings.Contains(err.Error(), `unknown device "kkkkkkkk`) || !strings.Contains(err.Error(), `... (2097152 bytes)"`) {
		t.Errorf("a 2 MiB device name is not clipped in its error (%d bytes)", len(fmt.Sprint(err)))
	}
}
