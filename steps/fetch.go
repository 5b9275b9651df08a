package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/digest"
)

// fetch brings the model named by the recipe's model.source into a folder
// holding a Hugging Face checkpoint (config, tokenizer, safetensors).
type fetch struct{}

// Fetch is the kind of the step that brings model.source.
var Fetch Kind = fetch{}

// FetchParams are the source step's: the recipe's model section.
type FetchParams struct {
	Source          string `json:"source"`
	AllowPickle     bool   `json:"allow_pickle"`
	TrustRemoteCode bool   `json:"trust_remote_code"`
}

func init() { Register(fetch{}) }

func (fetch) Name() string            { return "fetch" }
func (fetch) Version() int            { return 1 }
func (fetch) NewParams() any          { return &FetchParams{} }
func (fetch) Resources(any) Resources { return Resources{Cores: 1, MemoryMB: 2048, Network: true} }
func (fetch) Tools(p any) []string    { return Fetchers.tools(ParamsOf[FetchParams](p).Source) }
func (fetch) Run(ctx context.Context, sc *Context) error {
	p := ParamsOf[FetchParams](sc.Params)
	src := p.Source
	if err := Fetchers.fetch(ctx, sc, src); err != nil {
		return fmt.Errorf("fetch %s: %w", src, err)
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

// ExternalDir: a local folder is used in place, never copied.
func (fetch) ExternalDir(params any, recipeDir string) (string, bool, error) {
	src := ParamsOf[FetchParams](params).Source
	if !IsLocalSource(src) {
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
	p := ParamsOf[FetchParams](params)
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
	Fetch  func(ctx context.Context, sc *Context, src string) error
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

func (fs fetcherSet) fetch(ctx context.Context, sc *Context, src string) error {
	f, ok := fs.find(src)
	if !ok {
		var schemes []string
		for _, f := range fs {
			schemes = append(schemes, f.Scheme)
		}
		return fmt.Errorf("no fetcher for this source; sources may start with %s, or be a local folder", strings.Join(schemes, ", "))
	}
	return f.Fetch(ctx, sc, src)
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
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil // not every source has a config (a GGUF-only folder)
	}
	var cfg struct {
		AutoMap map[string]any `json:"auto_map"`
	}
	if json.Unmarshal(b, &cfg) == nil && len(cfg.AutoMap) > 0 {
		return fmt.Errorf("config.json has auto_map: the model needs its own code to load; set model.trust_remote_code: true in the recipe if you trust this source")
	}
	return nil
}
