package edge

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/pipelines/shared"
)

// maxSourceNames bounds the walk of a local model folder: a checkpoint
// holds tens of files, MLC-sized shard sets thousands. A folder past it is
// checked by the run, which hashes every file anyway.
const maxSourceNames = 100_000

// errEnoughNames stops the walk at maxSourceNames.
var errEnoughNames = errors.New("enough names")

// LocalSourceProblems refuses, at model.source, a local model folder whose
// files no run would load: pickle weights or model code the recipe did not
// opt into (model.allow_pickle, model.trust_remote_code). It reads file
// names and the small config files only, never weight bytes, so validate
// says at once what the run's source step would refuse an hour in. A
// folder that is not there is not its business (MissingLocalSource).
func LocalSourceProblems(r *recipe.Recipe) recipe.Diagnostics {
	dir, ok := localFolder(r)
	if !ok {
		return nil
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return nil
	}
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if len(names) >= maxSourceNames {
			return errEnoughNames
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil && !errors.Is(err, errEnoughNames) {
		return recipe.Diagnostics{{Pos: r.Model.SourcePos, Msg: fmt.Sprintf("model.source %s cannot be listed: %v", r.Model.Source, err),
			Hint: "make the folder readable, or point model.source at a copy that is"}}
	}
	if err := shared.CheckModelFiles(dir, names, r.Model.AllowPickle, r.Model.TrustRemoteCode); err != nil {
		return recipe.Diagnostics{{Pos: r.Model.SourcePos, Msg: fmt.Sprintf("model.source %s: %v", r.Model.Source, err)}}
	}
	return nil
}

// MissingLocalSource refuses a local model folder or .gguf file that is
// not there. validate, plan and run ask it; `step run` does not, since a
// worker takes the source step's output from the remote cache and need
// not hold the folder.
func MissingLocalSource(r *recipe.Recipe) recipe.Diagnostics {
	src := r.Model.Source
	if src == "" || !shared.IsLocalSource(src) {
		return nil
	}
	p := src
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.Dir(), p)
	}
	if _, err := os.Lstat(p); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	what := "folder"
	if shared.IsGGUFSource(src) {
		what = "file"
	}
	return recipe.Diagnostics{{Pos: r.Model.SourcePos,
		Msg:  fmt.Sprintf("model.source %s: no such %s (%s)", src, what, p),
		Hint: "a relative source is from the recipe's folder: point model.source at the model's folder (config.json and safetensors weights) or its .gguf file, or use builtin:NAME or hf://org/name"}}
}

// localFolder is the folder a local checkpoint source names, relative
// sources from the recipe's folder; ok is false for anything else (a GGUF,
// builtin:, a URL).
func localFolder(r *recipe.Recipe) (string, bool) {
	src := r.Model.Source
	if src == "" || !shared.IsLocalSource(src) || shared.IsGGUFSource(src) {
		return "", false
	}
	if _, gguf, _ := shared.LocalGGUF(src, r.Dir()); gguf {
		return "", false // a folder holding one .gguf: the GGUF is the model
	}
	if !filepath.IsAbs(src) {
		src = filepath.Join(r.Dir(), src)
	}
	return src, true
}
