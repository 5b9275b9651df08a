package shared

import (
	"context"
	"errors"
	"fmt"
	"github.com/edgepipe/edgepipe/steps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/getter"
	"github.com/edgepipe/edgepipe/internal/hf"
	"github.com/edgepipe/edgepipe/internal/proc"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// fetch brings the model named by the recipe's model.source into a folder
// holding a Hugging Face checkpoint (config, tokenizer, safetensors).
type fetch struct{}

// Fetch is the kind of the step that brings model.source.
var Fetch steps.Kind = fetch{}

// FetchParams are the source step's: the recipe's model section.
type FetchParams struct {
	Source          string `json:"source"`
	AllowPickle     bool   `json:"allow_pickle"`
	TrustRemoteCode bool   `json:"trust_remote_code"`
	// GGUF is set for a local folder whose one GGUF file is the source
	// (the planner finds it; the file is the step's DataGGUF).
	GGUF bool `json:"gguf,omitempty"`
}

func init() { steps.Register(fetch{}) }

func (fetch) Name() string   { return "fetch" }
func (fetch) Version() int   { return 1 }
func (fetch) NewParams() any { return &FetchParams{} }
func (fetch) Resources(any) steps.Resources {
	return steps.Resources{Cores: 1, MemoryMB: 2048, Network: true}
}
func (fetch) Tools(p any) []string {
	src := steps.ParamsOf[FetchParams](p).Source
	if IsGGUFSource(src) || steps.ParamsOf[FetchParams](p).GGUF {
		return []string{toolchain.ToolGGUFToHF}
	}
	return Fetchers.tools(src)
}
func (fetch) Run(ctx context.Context, sc *steps.Context) error {
	p := steps.ParamsOf[FetchParams](sc.Params)
	src := p.Source
	fetchFn := Fetchers.fetch
	if IsGGUFSource(src) || p.GGUF {
		fetchFn = fetchGGUF
	}
	if err := fetchFn(ctx, sc, src); err != nil {
		if !strings.HasPrefix(err.Error(), "fetch ") {
			err = fmt.Errorf("fetch %s: %w", getter.Redact(src), err)
		}
		return scrubbedError(src, err)
	}
	var files []string
	err := filepath.WalkDir(sc.Out, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(sc.Out, p)
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	return CheckModelFiles(sc.Out, files, p.AllowPickle, p.TrustRemoteCode)
}

// scrubbedError is err with src's credentials removed from its text. Only
// whether a retry may succeed survives of its chain, so no wrapped error
// can print them later.
func scrubbedError(src string, err error) error {
	out := errors.New(getter.Scrub(src, err.Error()))
	if proc.IsTransient(err) {
		out = proc.Transient(out)
	}
	return out
}

// ExternalDir: a local folder is used in place, never copied.
func (fetch) ExternalDir(params any, recipeDir string) (string, bool, error) {
	src := steps.ParamsOf[FetchParams](params).Source
	if !IsLocalSource(src) || IsGGUFSource(src) || steps.ParamsOf[FetchParams](params).GGUF {
		// A GGUF is converted by the step, not used in place.
		return "", false, nil
	}
	dir := src
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(recipeDir, dir)
	}
	st, err := os.Stat(dir)
	if err != nil {
		return "", true, fmt.Errorf("model.source %s: %w: point it at a folder holding a Hugging Face checkpoint", src, err)
	}
	if !st.IsDir() {
		return "", true, fmt.Errorf("model.source %s is a file: point it at the folder that holds config.json and the weights", src)
	}
	return dir, true, nil
}

func (fetch) CheckExternal(params any, dir string, files []digest.FileDigest) error {
	p := steps.ParamsOf[FetchParams](params)
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Path
	}
	return CheckModelFiles(dir, names, p.AllowPickle, p.TrustRemoteCode)
}

// IsLocalSource reports whether a model source is a local folder.
func IsLocalSource(src string) bool {
	if strings.Contains(src, "::") || strings.Contains(src, "://") || strings.HasPrefix(src, "builtin:") {
		return false
	}
	return src != ""
}

// Fetcher brings one kind of source (by scheme) into a folder.
type Fetcher struct {
	Scheme string // "builtin:", "hf://", "https://", "s3::", ...
	Tools  func(src string) []string
	Fetch  func(ctx context.Context, sc *steps.Context, src string) error
	// Check validates a source without fetching it: what it refuses
	// would fail every run the same way.
	Check func(src string) error
}

type fetcherSet []Fetcher

// Fetchers are the registered source schemes; the packages that implement
// them (Hugging Face client, go-getter, built-in models) register here.
var Fetchers fetcherSet

func (fs fetcherSet) find(src string) (Fetcher, bool) {
	for _, f := range fs {
		if strings.HasPrefix(src, f.Scheme) {
			return f, true
		}
	}
	return Fetcher{}, false
}

func (fs fetcherSet) tools(src string) []string {
	if f, ok := fs.find(src); ok && f.Tools != nil {
		return f.Tools(src)
	}
	return nil
}

func (fs fetcherSet) fetch(ctx context.Context, sc *steps.Context, src string) error {
	f, err := fs.lookup(src)
	if err != nil {
		return err
	}
	return f.Fetch(ctx, sc, src)
}

func (fs fetcherSet) lookup(src string) (Fetcher, error) {
	if f, ok := fs.find(src); ok {
		return f, nil
	}
	var schemes []string
	for _, f := range fs {
		schemes = append(schemes, f.Scheme)
	}
	forms := fmt.Sprintf("sources start with %s, or are a local folder", strings.Join(schemes, ", "))
	switch {
	case strings.HasPrefix(src, "http://"):
		return Fetcher{}, fmt.Errorf("plain http:// is not fetched (anyone on the path can change the weights): write https://%s; %s", strings.TrimPrefix(src, "http://"), forms)
	case strings.HasPrefix(src, "file://"):
		return Fetcher{}, fmt.Errorf("file:// is not a source: write the folder's path itself (%s); %s", strings.TrimPrefix(src, "file://"), forms)
	}
	return Fetcher{}, fmt.Errorf("no fetcher for this source: %s", forms)
}

// CheckSource validates model.source without fetching anything, so a
// source no run could fetch is refused at validation (exit 2) rather than
// after a run started. A local folder is checked when the run reads it.
// The error never quotes the source's credentials.
func CheckSource(src string) error {
	if IsLocalSource(src) {
		return nil
	}
	if err := checkSplitURL(src); err != nil {
		return err
	}
	f, err := Fetchers.lookup(src)
	if err == nil && f.Check != nil {
		err = f.Check(src)
	}
	if err != nil {
		return errors.New(getter.Scrub(src, err.Error()))
	}
	return nil
}

// Pickle-format weight files execute code when loaded.
var pickleExts = []string{".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle"}

// CheckModelFiles refuses pickle weights and model code unless the recipe
// opted in, because loading either runs code from the download.
func CheckModelFiles(dir string, files []string, allowPickle, trustRemoteCode bool) error {
	for _, f := range files {
		lower := strings.ToLower(f)
		if !allowPickle {
			for _, ext := range pickleExts {
				if strings.HasSuffix(lower, ext) {
					return fmt.Errorf("%s is a pickle file, and loading pickle runs code from the download; use a safetensors checkpoint, or set model.allow_pickle: true in the recipe if you trust this source", f)
				}
			}
		}
		if !trustRemoteCode && strings.HasSuffix(lower, ".py") {
			return fmt.Errorf("the model ships code (%s); refusing to run it: set model.trust_remote_code: true in the recipe if you trust this source", f)
		}
	}
	if trustRemoteCode {
		return nil
	}
	for _, name := range hf.CodeConfigs() {
		if !slices.Contains(files, name) {
			continue // not every source has them (a GGUF-only folder)
		}
		b, err := boundedfile.Read(filepath.Join(dir, name), boundedfile.ModelJSONLimit)
		if err != nil {
			return fmt.Errorf("%s cannot be checked for model code: %w", name, err)
		}
		if hf.DeclaresAutoMap(b) {
			return fmt.Errorf("%s has auto_map: the model needs its own code to load; set model.trust_remote_code: true in the recipe if you trust this source", name)
		}
	}
	return nil
}
