package shared

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
	"github.com/edgepipe/edgepipe/steps"
)

// contract checks that a converted artifact behaves like its source where
// an app sees it before any weight is used: the tokenizer (the same ids for
// every text of a built-in corpus, and the text back), the stop set (EOS),
// the BOS handling and the chat template, each read from the artifact's own
// files or metadata, the way its runtime reads them (contract.py says how
// for each format). Perplexity cannot see any of these: a model that stops
// on the wrong token, or is prompted with another template, scores the same.
type contract struct{}

// Contract is the kind of the behavioural contract step.
var Contract steps.Kind = contract{}

// DataTokenizerCorpus is the contract step's data role: the texts both
// tokenizers encode (builtin:tokenizer-corpus).
const DataTokenizerCorpus = "tokenizer-corpus"

// The ways the contract reads an artifact.
const (
	// ContractGGUF: the model step's model file is a GGUF, read by
	// llama.cpp (llama-tokenize) and gguf-py.
	ContractGGUF = "gguf"
	// ContractMLC: an MLC folder, whose runtime reads mlc-chat-config.json
	// and tokenizer.json.
	ContractMLC = "mlc"
	// ContractFolder: any other artifact folder, read like a checkpoint's
	// (tokenizer files, config.json, generation_config.json).
	ContractFolder = "folder"
)

// Where the source's own GGUF is, for a GGUF source (ContractParams.GGUFSource).
const (
	// GGUFSourceLocal: a local GGUF, the step's DataGGUF.
	GGUFSourceLocal = "local"
	// GGUFSourceDownload: a downloaded GGUF, which the source step does
	// not keep: llama.cpp's reading of it cannot be compared.
	GGUFSourceDownload = "download"
	// A built-in model's is "builtin:NAME".
)

// ContractParams are a contract step's.
type ContractParams struct {
	// Artifact is how the model step's output is read: ContractGGUF,
	// ContractMLC or ContractFolder.
	Artifact string `json:"artifact"`
	// GGUFSource says where the source's own GGUF is when model.source is
	// one: GGUFSourceLocal, GGUFSourceDownload or "builtin:NAME"; "" for
	// a checkpoint.
	GGUFSource string `json:"gguf_source"`
}

// Names of the contract's checks, as the manifest lists them.
const (
	CheckTokenizer    = "tokenizer round trip"
	CheckSourceGGUF   = "source GGUF tokenizer"
	CheckEOS          = "EOS set"
	CheckBOS          = "BOS"
	CheckChatTemplate = "chat template"
)

// FactContractSkipped records the checks that could not apply, and why:
// the manifest keeps it in the step's note, so nothing is skipped unsaid.
const FactContractSkipped = "contract_skipped"

func init() { steps.Register(contract{}) }

func (contract) Name() string   { return "contract" }
func (contract) Version() int   { return 1 }
func (contract) NewParams() any { return &ContractParams{} }

func (contract) Tools(p any) []string {
	cp := steps.ParamsOf[ContractParams](p)
	if cp.Artifact == ContractGGUF || cp.GGUFSource != "" && cp.GGUFSource != GGUFSourceDownload {
		return []string{toolchain.ToolContract, toolchain.ToolTokenize}
	}
	return []string{toolchain.ToolContract}
}

func (contract) Resources(any) steps.Resources {
	// transformers and its tokenizers, no weights; llama-tokenize loads
	// only a GGUF's vocabulary.
	return steps.Resources{Cores: 1, MemoryMB: 1024}
}

func (contract) Run(ctx context.Context, sc *steps.Context) error {
	p := steps.ParamsOf[ContractParams](sc.Params)
	src, err := sc.Input(Fetch)
	if err != nil {
		return err
	}
	model, err := contractModel(sc)
	if err != nil {
		return err
	}
	corpus, err := sc.Data(DataTokenizerCorpus)
	if err != nil {
		return err
	}
	args, err := contractArgs(ctx, sc, p, src, model, corpus)
	if err != nil {
		return err
	}
	if err := sc.RunTool(ctx, toolchain.ToolContract, args...); err != nil {
		return err
	}
	var r report.Contract
	if err := steps.ReadReport(toolchain.ToolContract, sc.LogPath, &r); err != nil {
		return err
	}
	return recordContract(sc.Result, r, p.GGUFSource == GGUFSourceDownload)
}

// contractModel is the step's input that is not the source: the model
// step whose output is published.
func contractModel(sc *steps.Context) (steps.Input, error) {
	for _, in := range sc.Inputs {
		if in.Kind != Fetch.Name() {
			return in, nil
		}
	}
	return steps.Input{}, fmt.Errorf("step %s needs the model step whose artifact it checks, besides the source", sc.StepID)
}

func contractArgs(ctx context.Context, sc *steps.Context, p *ContractParams, src, model steps.Input, corpus string) ([]string, error) {
	artifact := model.Dir
	switch p.Artifact {
	case ContractGGUF:
		rel := ""
		if model.Result != nil {
			rel = model.Result.Files["model"]
		}
		if rel == "" {
			return nil, fmt.Errorf("step %s: %s recorded no model file to read", sc.StepID, model.StepID)
		}
		artifact = filepath.Join(model.Dir, rel)
	case ContractMLC, ContractFolder:
	default:
		return nil, fmt.Errorf("step %s: artifact %q is not one the contract reads: %s, %s or %s", sc.StepID, p.Artifact, ContractGGUF, ContractMLC, ContractFolder)
	}
	args := []string{"--source", src.Dir, "--artifact", artifact, "--reader", p.Artifact, "--corpus", corpus}
	gguf, err := sourceGGUF(ctx, sc, p.GGUFSource)
	if err != nil {
		return nil, err
	}
	if gguf != "" {
		args = append(args, "--source-gguf", gguf)
	}
	if p.Artifact == ContractGGUF || gguf != "" {
		tok, err := sc.Tool(toolchain.ToolTokenize)
		if err != nil {
			return nil, err
		}
		if len(tok) != 1 {
			return nil, fmt.Errorf("step %s: %s runs as %q, not as one program contract.py can start", sc.StepID, toolchain.ToolTokenize, strings.Join(tok, " "))
		}
		args = append(args, "--llama-tokenize", tok[0])
	}
	return args, nil
}

// sourceGGUF is the source's own GGUF file, or "" when the source is none
// the step can read (a checkpoint, or a download the source step did not
// keep). A built-in source is provisioned here when this cache has not
// made it: a step whose source came from a remote cache runs on a machine
// that never ran the source step.
func sourceGGUF(ctx context.Context, sc *steps.Context, where string) (string, error) {
	switch {
	case where == "" || where == GGUFSourceDownload:
		return "", nil
	case where == GGUFSourceLocal:
		return sc.Data(DataGGUF)
	case strings.HasPrefix(where, "builtin:"):
		if _, err := toolchain.BuiltinModel(ctx, sc.CacheDir, where); err != nil {
			return "", fmt.Errorf("step %s: %w", sc.StepID, err)
		}
		return toolchain.BuiltinGGUF(sc.CacheDir, where)
	}
	return "", fmt.Errorf("step %s: gguf_source %q is not %s, %s or builtin:NAME", sc.StepID, where, GGUFSourceLocal, GGUFSourceDownload)
}

// recordContract turns contract.py's report into the step's checks (a
// failed one fails the target's gate) and, for the checks that could not
// apply, the note that says which and why.
func recordContract(res *steps.Result, r report.Contract, downloadedGGUF bool) error {
	var skipped []string
	for _, c := range []struct {
		name  string
		check *report.ContractCheck
	}{
		{CheckTokenizer, &r.Tokenizer}, {CheckSourceGGUF, r.SourceGGUF}, {CheckEOS, &r.EOS},
		{CheckBOS, &r.BOS}, {CheckChatTemplate, &r.ChatTemplate},
	} {
		if c.check == nil {
			continue
		}
		switch c.check.Status {
		case report.ContractPassed, report.ContractFailed:
			res.Checks = append(res.Checks, steps.Check{Name: c.name, Passed: c.check.Status == report.ContractPassed, Detail: contractDetail(*c.check)})
		case report.ContractSkipped:
			skipped = append(skipped, c.name+" ("+c.check.Detail+")")
		default:
			return fmt.Errorf("%s reported check %q as %q, which is not passed, failed or skipped", toolchain.ToolContract, c.name, c.check.Status)
		}
	}
	if downloadedGGUF {
		skipped = append(skipped, CheckSourceGGUF+" (the source is a downloaded GGUF, which the source step does not keep: llama.cpp's reading of it was not compared with the checkpoint made from it)")
	}
	if len(skipped) > 0 {
		sort.Strings(skipped)
		res.SetFact(FactContractSkipped, strings.Join(skipped, "; "))
	}
	res.SetMetric("contract_texts", float64(r.CorpusTexts))
	return nil
}

// contractDetail says what the two sides hold and, for a failure, what
// differs, with the first text the tokenizers disagree on.
func contractDetail(c report.ContractCheck) string {
	d := fmt.Sprintf("%s (source: %s; artifact: %s)", c.Detail, c.Source, c.Artifact)
	if c.Status != report.ContractFailed || len(c.Differing) == 0 {
		return d
	}
	t := c.Differing[0]
	where := "the whole corpus"
	if t.Line > 0 {
		where = fmt.Sprintf("line %d %q", t.Line, t.Text)
	}
	d += fmt.Sprintf("; %s: source ids %v, artifact ids %v", where, t.SourceIDs, t.ArtifactIDs)
	if t.Decoded != nil {
		d += fmt.Sprintf(", artifact decodes to %q", *t.Decoded)
	}
	return d
}
