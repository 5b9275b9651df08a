package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mainJSON runs edgepipe and decodes its stdout into v.
func mainJSON(t *testing.T, v any, args ...string) (code int, stderr string) {
	t.Helper()
	code, stdout, stderr := runMain(t, nil, args...)
	if err := json.Unmarshal([]byte(stdout), v); err != nil {
		t.Fatalf("edgepipe %s: stdout is not JSON (%v):\n%s\nstderr: %s", strings.Join(args, " "), err, stdout, stderr)
	}
	return code, stderr
}

func TestDevicesAndCeilingJSON(t *testing.T) {
	var devs []struct {
		ID string `json:"id"`
	}
	if code, _ := mainJSON(t, &devs, "devices", "--json"); code != ExitOK || len(devs) < 5 {
		t.Fatalf("devices: exit %d, %d devices", code, len(devs))
	}
	var ceil struct {
		ModelGB float64           `json:"model_gb"`
		Devices []json.RawMessage `json:"devices"`
	}
	if code, _ := mainJSON(t, &ceil, "ceiling", "--model-gb", "4.7", "--json"); code != ExitOK || ceil.ModelGB != 4.7 || len(ceil.Devices) != len(devs) {
		t.Errorf("ceiling: exit %d, %+v", code, ceil)
	}
	r := writeRecipe(t, t.TempDir(), "two.yaml", twoTargets)
	var byRecipe struct {
		Recipe  string `json:"recipe"`
		Targets []struct {
			Target  string            `json:"target"`
			ModelGB float64           `json:"model_gb"`
			Devices []json.RawMessage `json:"devices"`
		} `json:"targets"`
	}
	code, _ := mainJSON(t, &byRecipe, "ceiling", "--recipe", r, "--out", t.TempDir(), "--json")
	if code != ExitOK || byRecipe.Recipe != "two" || len(byRecipe.Targets) != 2 || byRecipe.Targets[0].Target != "laptop-q4" ||
		!(byRecipe.Targets[0].ModelGB > 0) || len(byRecipe.Targets[0].Devices) == 0 {
		t.Errorf("ceiling --recipe: exit %d, %+v", code, byRecipe)
	}
	// The recipe as the argument, as every command takes one.
	var positional struct {
		Recipe string `json:"recipe"`
	}
	if code, _ := mainJSON(t, &positional, "ceiling", r, "-o", t.TempDir(), "--json"); code != ExitOK || positional.Recipe != "two" {
		t.Errorf("ceiling RECIPE: exit %d, %+v", code, positional)
	}
	for _, args := range [][]string{{"ceiling"}, {"ceiling", "--model-gb", "1", "--recipe", r}, {"ceiling", "--model-gb", "1", r}, {"ceiling", r, r}} {
		if code, _, stderr := runMain(t, nil, args...); code != ExitUsage || !strings.Contains(stderr, "ceiling takes --model-gb GB or a RECIPE") {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
}

func TestPickJSON(t *testing.T) {
	var pk struct {
		Platform string `json:"platform"`
		Device   string `json:"device"`
		Format   string `json:"format"`
		Steps    []struct {
			ID   string `json:"id"`
			Kind string `json:"kind"`
		} `json:"steps"`
		PipelineMissing string `json:"pipeline_missing"`
	}
	code, stderr := mainJSON(t, &pk, "pick", "--platform", "laptop", "--model", "builtin:smollm2-135m", "--json")
	if code != ExitOK || pk.Platform != "laptop" || pk.Device == "" || pk.Format == "" || len(pk.Steps) == 0 || pk.PipelineMissing != "" {
		t.Errorf("pick: exit %d, %+v, %s", code, pk, stderr)
	}
	var vp map[string]any
	if code, stderr := mainJSON(t, &vp, "pick", "--task", "vision", "--platform", "laptop", "--params", "2.5M", "--json"); code != ExitOK || len(vp) == 0 {
		t.Errorf("pick --task vision: exit %d, %v, %s", code, vp, stderr)
	}
	if code, _, stderr := runMain(t, nil, "pick", "extra"); code != ExitUsage || !strings.Contains(stderr, "pick takes flags only") {
		t.Errorf("pick extra: %d %q", code, stderr)
	}
}

// doctor --json lists every tool; without a recipe it is an inventory
// (exit 0: a toolchain not installed yet is installed on first use), with
// one it exits 2 when what the recipe needs is missing, naming the command
// that installs it.
func TestDoctorJSON(t *testing.T) {
	cache := t.TempDir()
	var st []struct {
		Name           string
		Toolchain      string
		Found          bool
		InstallCommand string `json:"install_command"`
	}
	code, stderr := mainJSON(t, &st, "doctor", "--json", "--cache-dir", cache)
	if code != ExitOK || stderr != "" {
		t.Errorf("doctor: exit %d, %q", code, stderr)
	}
	found := map[string]bool{}
	for _, s := range st {
		found[s.Name] = true
	}
	if !found["uv"] || !found["llama-quantize"] || !found["builtin:smollm2-135m"] {
		t.Errorf("doctor lists %v", found)
	}
	r := writeRecipe(t, t.TempDir(), "two.yaml", twoTargets)
	st = nil
	code, stderr = mainJSON(t, &st, "doctor", "--json", "--cache-dir", cache, r)
	if code != ExitUsage || !strings.Contains(stderr, "run `edgepipe toolchain install --for "+r+"`") {
		t.Errorf("doctor RECIPE: exit %d, %q", code, stderr)
	}
	// Only what the recipe needs: no vision toolchain, no uv-only tools.
	for _, s := range st {
		if s.Name == "builtin:mobilenetv3-small-digits" || s.Name == "weed" {
			t.Errorf("doctor RECIPE lists %s", s.Name)
		}
	}
}

func TestCacheAndPlanJSON(t *testing.T) {
	cache := t.TempDir()
	var ents []json.RawMessage
	if code, stderr := mainJSON(t, &ents, "cache", "ls", "--json", "--cache-dir", cache); code != ExitOK || len(ents) != 0 {
		t.Errorf("cache ls: exit %d, %v, %s", code, ents, stderr)
	}
	dir := t.TempDir()
	r := writeRecipe(t, dir, "two.yaml", twoTargets)
	var pj struct {
		Recipe  string   `json:"recipe"`
		Targets []string `json:"targets"`
		Steps   []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
		} `json:"steps"`
	}
	code, stderr := mainJSON(t, &pj, "plan", "--json", "--cache-dir", cache, "-t", "laptop-q8", r)
	if code != ExitOK || pj.Recipe != r || len(pj.Targets) != 1 || pj.Targets[0] != "laptop-q8" || len(pj.Steps) == 0 {
		t.Errorf("plan --json: exit %d, %+v, %s", code, pj, stderr)
	}
	for _, s := range pj.Steps {
		if strings.Contains(s.ID, "laptop-q4") {
			t.Errorf("a step of an unselected target: %s", s.ID)
		}
	}
	code, stdout, stderr := runMain(t, nil, "plan", "--cache-dir", cache, r)
	if code != ExitOK || !strings.HasPrefix(stdout, "recipe two: 2 targets, ") || !strings.Contains(stdout, "publish:laptop-q4") {
		t.Errorf("plan: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if code, _, stderr := runMain(t, nil, "plan", "--cache-dir", cache, "--bundle", dir, r); code != ExitUsage || !strings.Contains(stderr, "--bundle: "+dir+" is a folder") {
		t.Errorf("plan --bundle DIR: %d %q", code, stderr)
	}
}

func TestToolchainCommand(t *testing.T) {
	cache := t.TempDir()
	r := writeRecipe(t, t.TempDir(), "two.yaml", twoTargets)
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"toolchain", "install", "--dry-run", "uv"}, ExitOK, "would install uv: runs uv; about 40 MB\n", ""},
		{[]string{"toolchain", "install", "--dry-run", "llama"}, ExitOK, "would install uv: needed to install llama; about 40 MB\nwould install llama: ", ""},
		{[]string{"toolchain", "install", "--dry-run", "--for", r}, ExitOK, "would install llamacpp: runs convert_hf_to_gguf.py, llama-perplexity, llama-quantize, llama-tokenize;", ""},
		{[]string{"toolchain", "install", "--dry-run", "builtin:smollm2-135m"}, ExitOK, "would install builtin:smollm2-135m: ; a small model", ""},
		{[]string{"toolchain", "install", "pytorch"}, ExitUsage, "", `no toolchain named "pytorch"`},
		{[]string{"toolchain", "install", "--for", r, "uv"}, ExitUsage, "", "name toolchains or give --for RECIPE, not both"},
		{[]string{"toolchain", "remove"}, ExitUsage, "", "toolchain remove takes the toolchains to remove"},
		{[]string{"toolchain", "remove", "pytorch"}, ExitUsage, "", `no toolchain named "pytorch"`},
		{[]string{"toolchain", "remove", "uv"}, ExitUsage, "", "toolchain uv is not installed"},
		{[]string{"toolchain", "prune", "uv"}, ExitUsage, "", "toolchain prune takes no names"},
		{[]string{"toolchain", "list"}, ExitOK, "NAME", ""},
	} {
		code, stdout, stderr := runMain(t, nil, append(tc.args, "--cache-dir", cache)...)
		if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("edgepipe %s: exit %d, stdout %q, stderr %q", strings.Join(tc.args, " "), code, stdout, stderr)
		}
	}
	// A dry run installs nothing.
	if ents, _ := os.ReadDir(filepath.Join(cache, "toolchains")); len(ents) != 0 {
		t.Errorf("a dry run wrote %v", ents)
	}
}

func TestInitCommand(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "recipes", "my-laptop.yaml")
	code, stdout, stderr := runMain(t, nil, "init", "--platform", "laptop", "--model", "builtin:smollm2-135m", "-o", out)
	if code != ExitOK || !strings.HasPrefix(stdout, "wrote "+out+": target laptop, ") || !strings.Contains(stdout, "next: edgepipe plan "+out) {
		t.Fatalf("init: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := loadPlan(out); err != nil {
		t.Errorf("the written recipe does not load: %v", err)
	}
	b := mustReadFile(t, out)
	if !strings.Contains(string(b), "name: my-laptop") || !strings.Contains(string(b), "edgepipe init --platform laptop --model builtin:smollm2-135m") {
		t.Errorf("recipe:\n%s", b)
	}
	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"init", "--platform", "laptop", "--model", "builtin:smollm2-135m", "-o", out}, "already exists; pass --force"},
		{[]string{"init", "--platform", "laptop", "--model", "builtin:smollm2-135m"}, "init writes the recipe named by -o"},
		{[]string{"init", "--platform", "laptop", "--model", "builtin:smollm2-135m", "--eval", "x.npz", "-o", out + ".2"}, "--calibration and --eval are for --task vision"},
		{[]string{"init", "--task", "vision", "--platform", "laptop", "--params", "2M", "--format", "gguf-q8_0", "-o", out + ".3"}, "--task vision takes --platform, --model or --params"},
	} {
		if code, _, stderr := runMain(t, nil, tc.args...); code != ExitUsage || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("edgepipe %s: exit %d, %q", strings.Join(tc.args, " "), code, stderr)
		}
	}
	if code, stdout, stderr := runMain(t, nil, "init", "--platform", "laptop", "--model", "builtin:smollm2-135m", "--context", "8192", "-o", out, "--force"); code != ExitOK ||
		!strings.Contains(string(mustReadFile(t, out)), "--context 8192") {
		t.Errorf("init --force: exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// Every command's JSON names its fields in snake_case: a key with a
// capital letter is a Go field without its json tag.
func TestJSONKeysAreSnakeCase(t *testing.T) {
	cache := t.TempDir()
	r := writeRecipe(t, t.TempDir(), "two.yaml", twoTargets)
	bad := writeRecipe(t, t.TempDir(), "bad.yaml", "edgepipe: 1\nname: bad\nmodel: {source: ./nowhere}\ntargets:\n  t: {device: x86-laptop, format: gguf-q8_0}\n")
	for _, args := range [][]string{
		{"devices", "--json"},
		{"ceiling", "--model-gb", "4.7", "--json"},
		{"pick", "--platform", "ios,laptop", "--model", "builtin:smollm2-135m", "--json"},
		{"plan", "--json", "--cache-dir", cache, r},
		{"validate", "--json", r},
		{"validate", "--json", bad},
		{"cache", "ls", "--json", "--cache-dir", cache},
		{"doctor", "--json", "--cache-dir", cache},
		{"toolchain", "list", "--json", "--cache-dir", cache},
		{"version", "--json"},
	} {
		var v any
		mainJSON(t, &v, args...)
		var walk func(any, string)
		walk = func(v any, at string) {
			switch x := v.(type) {
			case map[string]any:
				for k, e := range x {
					if strings.ToLower(k) != k || strings.Contains(k, " ") {
						t.Errorf("%s: key %q at %s is not snake_case", strings.Join(args, " "), k, at)
					}
					walk(e, at+"."+k)
				}
			case []any:
				for _, e := range x {
					walk(e, at+"[]")
				}
			}
		}
		walk(v, "")
	}
}

// validate --json: ok with the counts, or the errors with their places
// (exit 2); a command with nothing to format refuses --json, naming those
// that take it.
func TestValidateJSONAndRefusedJSON(t *testing.T) {
	r := writeRecipe(t, t.TempDir(), "two.yaml", twoTargets)
	var ok validateJSON
	if code, _ := mainJSON(t, &ok, "validate", "--json", r); code != ExitOK || !ok.OK || ok.Targets != 2 || ok.Steps == 0 {
		t.Errorf("validate --json: exit %d, %+v", code, ok)
	}
	bad := writeRecipe(t, t.TempDir(), "bad.yaml", "edgepipe: 1\nname: bad\nmodel: {source: ./nowhere}\ntargets:\n  t: {device: x86-laptop, format: gguf-q8_0}\n")
	var no struct {
		OK     bool `json:"ok"`
		Errors []struct {
			Pos struct {
				Line, Col int
			} `json:"pos"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if code, _ := mainJSON(t, &no, "validate", "--json", bad); code != ExitUsage || no.OK || len(no.Errors) != 1 || no.Errors[0].Pos.Line != 3 || !strings.Contains(no.Errors[0].Message, "no such folder") {
		t.Errorf("validate --json on a bad recipe: exit %d, %+v", code, no)
	}
	code, _, stderr := runMain(t, nil, "init", "--json")
	if code != ExitUsage || !strings.Contains(stderr, "edgepipe init has no --json: it prints no data to format (the commands that do: ") || !strings.Contains(stderr, "validate") {
		t.Errorf("init --json: exit %d, %q", code, stderr)
	}
}

// A mistyped subcommand gets the closest one, as a mistyped command does;
// --json where a subcommand prints no data is refused, naming what takes it.
func TestSubcommandSuggestionsAndJSONRefusals(t *testing.T) {
	cache := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cache", "list", "--cache-dir", cache}, `unknown cache subcommand "list": did you mean "ls"?`},
		{[]string{"toolchain", "lst", "--cache-dir", cache}, `unknown toolchain subcommand "lst": did you mean "list"?`},
		{[]string{"export", "argx", "r.yaml"}, `unknown export subcommand "argx": did you mean "argo"?`},
		{[]string{"toolchain", "install", "--json", "--cache-dir", cache}, "toolchain install prints no data to format: --json applies to toolchain list"},
		{[]string{"cache", "gc", "--json", "--cache-dir", cache}, "cache gc prints no data to format: --json applies to cache ls"},
	} {
		if code, _, stderr := runMain(t, nil, tc.args...); code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %q; want %q", tc.args, code, stderr, tc.want)
		}
	}
	var entries []struct {
		Name      string `json:"name"`
		Kind      string `json:"kind"`
		SizeBytes int64  `json:"size_bytes"`
	}
	if code, _ := mainJSON(t, &entries, "toolchain", "list", "--json", "--cache-dir", cache); code != ExitOK || len(entries) < 5 || entries[0].Name != "uv" {
		t.Errorf("toolchain list --json: exit %d, %+v", code, entries)
	}
}
