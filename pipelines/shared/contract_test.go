package shared

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps"
)

// contractGolden is contract.py's golden report, decoded.
func contractGolden(t *testing.T) report.Contract {
	t.Helper()
	b, err := os.ReadFile("python/reports/contract.json")
	if err != nil {
		t.Fatal(err)
	}
	var r report.Contract
	if err := steps.DecodeReport(toolchain.ToolContract, b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// contractContext is a steps.Context whose contract.py does not run: Exec
// records its argv and logs line as the helper's report.
func contractContext(t *testing.T, p *ContractParams, line string, model steps.Input, tool func(string) ([]string, error)) (*steps.Context, *[][]string) {
	t.Helper()
	dir := t.TempDir()
	log := filepath.Join(dir, "step.log")
	var argv [][]string
	if tool == nil {
		tool = func(name string) ([]string, error) { return []string{"/opt/tools/" + name}, nil }
	}
	sc := &steps.Context{StepID: "contract:m", Params: p, Out: dir, Scratch: dir, CacheDir: dir,
		Inputs: []steps.Input{{StepID: "source", Kind: "fetch", Dir: "/models/src"}, model},
		Tool:   tool,
		Exec: func(_ context.Context, a []string, _ []string) error {
			argv = append(argv, a)
			return os.WriteFile(log, []byte("contract: reading\n"+line+"\n"), 0o644)
		},
		Data:   func(role string) (string, error) { return "/data/" + role, nil },
		Result: &steps.Result{}, LogPath: log, Log: io.Discard}
	return sc, &argv
}

func ggufModel() steps.Input {
	return steps.Input{StepID: "gguf-quantize:q4_k_m", Kind: "gguf-quantize", Dir: "/cache/q4",
		Result: &steps.Result{Files: map[string]string{"model": "model-q4_k_m.gguf"}}}
}

func TestContractArgv(t *testing.T) {
	line, _ := json.Marshal(contractGolden(t))
	folder := steps.Input{StepID: "onnx-export:fp32", Kind: "onnx-export", Dir: "/cache/onnx",
		Result: &steps.Result{Files: map[string]string{"model": "model.onnx"}}}
	for _, c := range []struct {
		name  string
		p     ContractParams
		model steps.Input
		want  []string
		tools []string
	}{
		{"gguf artifact, checkpoint source", ContractParams{Artifact: ContractGGUF}, ggufModel(),
			[]string{"--source", "/models/src", "--artifact", "/cache/q4/model-q4_k_m.gguf", "--reader", "gguf", "--corpus", "/data/tokenizer-corpus",
				"--llama-tokenize", "/opt/tools/llama-tokenize"},
			[]string{toolchain.ToolContract, toolchain.ToolTokenize}},
		{"folder artifact, local GGUF source", ContractParams{Artifact: ContractFolder, GGUFSource: GGUFSourceLocal}, folder,
			[]string{"--source", "/models/src", "--artifact", "/cache/onnx", "--reader", "folder", "--corpus", "/data/tokenizer-corpus",
				"--source-gguf", "/data/gguf", "--llama-tokenize", "/opt/tools/llama-tokenize"},
			[]string{toolchain.ToolContract, toolchain.ToolTokenize}},
		{"mlc artifact, downloaded GGUF source", ContractParams{Artifact: ContractMLC, GGUFSource: GGUFSourceDownload}, folder,
			[]string{"--source", "/models/src", "--artifact", "/cache/onnx", "--reader", "mlc", "--corpus", "/data/tokenizer-corpus"},
			[]string{toolchain.ToolContract}},
	} {
		sc, argv := contractContext(t, &c.p, string(line), c.model, nil)
		if err := Contract.Run(context.Background(), sc); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(*argv) != 1 || (*argv)[0][0] != "/opt/tools/contract.py" || !slices.Equal((*argv)[0][1:], c.want) {
			t.Errorf("%s: argv %q\nwant %q", c.name, *argv, c.want)
		}
		if got := Contract.Tools(&c.p); !slices.Equal(got, c.tools) {
			t.Errorf("%s: tools %v, want %v", c.name, got, c.tools)
		}
	}
}

// Each check of the report becomes one of the step's checks, a failed
// one saying what differs with the first differing text; a skipped one
// is no check but the step's note; the downloaded GGUF's missing
// comparison is said too.
func TestContractChecksFromTheReport(t *testing.T) {
	r := contractGolden(t)
	line, _ := json.Marshal(r)
	p := &ContractParams{Artifact: ContractGGUF, GGUFSource: "builtin:smollm2-135m"}
	sc, _ := contractContext(t, p, string(line), ggufModel(), nil)
	// A built-in source's GGUF is the provisioned model's: one this cache
	// lacks (its source step came from a remote cache) is provisioned,
	// which here, with no llama toolchain, fails saying so.
	if err := Contract.Run(context.Background(), sc); err == nil || !strings.Contains(err.Error(), "built-in model smollm2-135m is made with the llama toolchain") {
		t.Fatalf("a built-in source that is not provisioned: %v", err)
	}
	p.GGUFSource = GGUFSourceDownload
	sc, argv := contractContext(t, p, string(line), ggufModel(), nil)
	if err := Contract.Run(context.Background(), sc); err != nil {
		t.Fatal(err)
	}
	if len(*argv) != 1 {
		t.Fatalf("argv %q", *argv)
	}
	got := map[string]steps.Check{}
	for _, c := range sc.Result.Checks {
		got[c.Name] = c
	}
	if len(got) != 4 {
		t.Errorf("checks %+v, want tokenizer, source GGUF, EOS and BOS (the chat template was skipped)", sc.Result.Checks)
	}
	if c := got[CheckTokenizer]; c.Passed || !strings.Contains(c.Detail, `line 27 "0123456789 00000000000000000000": source ids [32 33`) ||
		!strings.Contains(c.Detail, "3 of 49 corpus texts differ") {
		t.Errorf("tokenizer check %+v", c)
	}
	if c := got[CheckEOS]; c.Passed || !strings.Contains(c.Detail, "the artifact declares 5 as EOS, which the source does not (source: {2}") {
		t.Errorf("EOS check %+v", c)
	}
	if c := got[CheckBOS]; !c.Passed || !strings.Contains(c.Detail, "the same BOS handling (source: adds no BOS") {
		t.Errorf("BOS check %+v", c)
	}
	if c := got[CheckSourceGGUF]; !c.Passed {
		t.Errorf("source GGUF check %+v", c)
	}
	note := sc.Result.Facts[FactContractSkipped]
	if !strings.Contains(note, "chat template (the source has no chat template") || !strings.Contains(note, "source GGUF tokenizer (the source is a downloaded GGUF") {
		t.Errorf("skipped note %q", note)
	}
	if sc.Result.Metrics["contract_texts"] != 49 {
		t.Errorf("metrics %v", sc.Result.Metrics)
	}
}

func TestContractRefuses(t *testing.T) {
	good, _ := json.Marshal(contractGolden(t))
	bad := contractGolden(t)
	bad.EOS.Status = "maybe"
	badLine, _ := json.Marshal(bad)
	noFile := steps.Input{StepID: "gguf-quantize:q8_0", Kind: "gguf-quantize", Dir: "/cache/q8", Result: &steps.Result{}}
	twoWords := func(name string) ([]string, error) { return []string{"python3", "/opt/" + name}, nil }
	for _, c := range []struct {
		name  string
		p     ContractParams
		line  string
		model steps.Input
		tool  func(string) ([]string, error)
		want  string
	}{
		{"unknown reader", ContractParams{Artifact: "zip"}, string(good), ggufModel(), nil, `artifact "zip" is not one the contract reads: gguf, mlc or folder`},
		{"unknown gguf source", ContractParams{Artifact: ContractFolder, GGUFSource: "s3"}, string(good), ggufModel(), nil, `gguf_source "s3" is not local, download or builtin:NAME`},
		{"no model file", ContractParams{Artifact: ContractGGUF}, string(good), noFile, nil, "gguf-quantize:q8_0 recorded no model file to read"},
		{"a status it does not know", ContractParams{Artifact: ContractGGUF}, string(badLine), ggufModel(), nil, `reported check "EOS set" as "maybe"`},
		{"a report of another shape", ContractParams{Artifact: ContractGGUF}, `{"eos": {}}`, ggufModel(), nil, "does not match what edgepipe reads"},
		{"llama-tokenize run by another program", ContractParams{Artifact: ContractGGUF}, string(good), ggufModel(), twoWords, "not as one program contract.py can start"},
	} {
		sc, _ := contractContext(t, &c.p, c.line, c.model, c.tool)
		err := Contract.Run(context.Background(), sc)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// Without the model step it names what it needs.
	sc, _ := contractContext(t, &ContractParams{Artifact: ContractGGUF}, string(good), ggufModel(), nil)
	sc.Inputs = sc.Inputs[:1]
	if err := Contract.Run(context.Background(), sc); err == nil || !strings.Contains(err.Error(), "needs the model step whose artifact it checks") {
		t.Errorf("no model input: %v", err)
	}
}
