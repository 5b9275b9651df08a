package shared

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/digest"
	"github.com/edgepipe/edgepipe/internal/proc"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

func TestIsLocalSource(t *testing.T) {
	for src, want := range map[string]bool{
		"./model":                  true,
		"model":                    true,
		"/abs/model":               true,
		"../models/smol.gguf":      true,
		"":                         false,
		"builtin:smollm2-135m":     false,
		"hf://org/name":            false,
		"https://example.com/m.gz": false,
		"s3::https://b/k":          false,
		"git::ssh://git@host/r":    false,
	} {
		if got := IsLocalSource(src); got != want {
			t.Errorf("IsLocalSource(%q) = %v, want %v", src, got, want)
		}
	}
}

func TestIsGGUFSource(t *testing.T) {
	for src, want := range map[string]bool{
		"./smol.gguf": true,
		"./SMOL.GGUF": true,
		"https://example.com/m.gguf?checksum=sha256:ab": true,
		"https://example.com/m.gguf#frag":               true,
		"s3::https://bucket/m.gguf?aws_access_key_id=x": true,
		"https://example.com/m.tar.gz":                  false,
		"https://example.com/m.tar.gz?name=x.gguf":      false,
		"./model":            false,
		"hf://org/name-GGUF": false,
		// A local name keeps what follows '?': it is part of the file name.
		"./odd?.gguf": true,
		"./m.gguf?x":  false,
	} {
		if got := IsGGUFSource(src); got != want {
			t.Errorf("IsGGUFSource(%q) = %v, want %v", src, got, want)
		}
	}
}

func TestCheckModelFilesRefusesPickleAndCode(t *testing.T) {
	dir := t.TempDir()
	for _, ext := range pickleExts {
		name := "weights" + strings.ToUpper(ext)
		err := CheckModelFiles(dir, []string{"config.json", name}, false, false)
		if err == nil || !strings.Contains(err.Error(), name+" is a pickle file") || !strings.Contains(err.Error(), "model.allow_pickle: true") {
			t.Errorf("%s: %v", name, err)
		}
		if err := CheckModelFiles(dir, []string{name}, true, false); err != nil {
			t.Errorf("%s with allow_pickle: %v", name, err)
		}
	}
	err := CheckModelFiles(dir, []string{"model.safetensors", "sub/modeling_x.PY"}, false, false)
	if err == nil || !strings.Contains(err.Error(), "ships code (sub/modeling_x.PY)") || !strings.Contains(err.Error(), "trust_remote_code: true") {
		t.Errorf("model code: %v", err)
	}
	if err := CheckModelFiles(dir, []string{"model.safetensors", "modeling_x.py"}, false, true); err != nil {
		t.Errorf("model code trusted: %v", err)
	}
	if err := CheckModelFiles(dir, []string{"model.safetensors", "tokenizer.json", "README.md"}, false, false); err != nil {
		t.Errorf("a safetensors checkpoint: %v", err)
	}
}

func TestCheckModelFilesReadsEveryCodeConfig(t *testing.T) {
	for _, name := range []string{"config.json", "tokenizer_config.json", "preprocessor_config.json"} {
		dir := t.TempDir()
		writeFiles(t, dir, map[string]string{name: `{"auto_map": {"AutoModel": "m.M"}}`})
		err := CheckModelFiles(dir, []string{name, "model.safetensors"}, false, false)
		if err == nil || !strings.Contains(err.Error(), name+" has auto_map") {
			t.Errorf("%s: %v", name, err)
		}
		if err := CheckModelFiles(dir, []string{name}, false, true); err != nil {
			t.Errorf("%s trusted: %v", name, err)
		}
		// Only the files listed are read: the walk's list is the truth.
		if err := CheckModelFiles(dir, []string{"model.safetensors"}, false, false); err != nil {
			t.Errorf("%s not listed: %v", name, err)
		}
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"config.json": `{"model_type": "llama"}`})
	if err := CheckModelFiles(dir, []string{"config.json"}, false, false); err != nil {
		t.Errorf("a plain config: %v", err)
	}
	// Listed but unreadable: refused, never assumed clean.
	err := CheckModelFiles(t.TempDir(), []string{"config.json"}, false, false)
	if err == nil || !strings.Contains(err.Error(), "config.json cannot be checked for model code") {
		t.Errorf("unreadable config: %v", err)
	}
}

func TestSourceLookupSaysWhatToWrite(t *testing.T) {
	for src, want := range map[string]string{
		"http://example.com/m.gguf": "write https://example.com/m.gguf",
		"file:///data/model":        "write the folder's path itself (/data/model)",
		"ftp://example.com/m":       "no fetcher for this source",
	} {
		_, err := Fetchers.lookup(src)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", src, err, want)
			continue
		}
		for _, scheme := range []string{"builtin:", "hf://", "https://", "s3::", "gcs::", "git::"} {
			if !strings.Contains(err.Error(), scheme) {
				t.Errorf("%s: the error does not list %s: %v", src, scheme, err)
			}
		}
	}
	for _, src := range []string{"builtin:x", "hf://o/n", "https://h/f", "s3::https://b/k", "gcs::https://b/k", "git::https://h/r"} {
		if f, err := Fetchers.lookup(src); err != nil || !strings.HasPrefix(src, f.Scheme) {
			t.Errorf("%s: fetcher %q, %v", src, f.Scheme, err)
		}
	}
}

func TestCheckSource(t *testing.T) {
	for src, want := range map[string]string{
		"./model":                  "",
		"builtin:smollm2-135m":     "",
		"builtin:gpt-5":            `no built-in model "gpt-5"`,
		"hf://org/name":            "",
		"hf://org":                 "hf://",
		"https://example.com/m.gz": "",
		"https://example.com/dir/": "names a directory",
		"http://example.com/m.gz":  "plain http://",
		"git::https://h/r.git?checksum=sha256:" + strings.Repeat("0", 64): "cannot carry ?checksum=",
		"https://example.com/m-00002-of-00003.gguf?checksum=sha256:00":    "part 2 of a split GGUF of 3 parts",
	} {
		err := CheckSource(src)
		switch {
		case want == "" && err != nil:
			t.Errorf("CheckSource(%q) = %v", src, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("CheckSource(%q) = %v, want %q", src, err, want)
		}
	}
}

// A fetcher's check may quote the source; CheckSource's error never
// carries its credentials.
func TestCheckSourceScrubsCredentials(t *testing.T) {
	withFetcher(t, Fetcher{Scheme: "test://", Check: func(src string) error { return fmt.Errorf("cannot use %s", src) }})
	err := CheckSource("test://user:s3cret@example.com/m?token=t0ken")
	if err == nil {
		t.Fatal("the check's error was lost")
	}
	if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "t0ken") {
		t.Errorf("credentials in %q", err)
	}
	if !strings.Contains(err.Error(), "cannot use test://user:redacted@example.com") {
		t.Errorf("err = %v", err)
	}
}

func TestFetchTools(t *testing.T) {
	for _, tc := range []struct {
		p    FetchParams
		want []string
	}{
		{FetchParams{Source: "./smol.gguf"}, []string{toolchain.ToolGGUFToHF}},
		{FetchParams{Source: "./folder", GGUF: true}, []string{toolchain.ToolGGUFToHF}},
		{FetchParams{Source: "https://h/m.gguf?checksum=sha256:00"}, []string{toolchain.ToolGGUFToHF}},
		{FetchParams{Source: "builtin:smollm2-135m"}, []string{toolchain.ToolGGUFToHF}},
		{FetchParams{Source: "builtin:mobilenetv3-small-digits"}, []string{toolchain.ToolVisionTrain}},
		{FetchParams{Source: "builtin:efficientnet-lite0"}, []string{toolchain.ToolVisionImport}},
		// A tiny model is made by tiny_model.py with the tokenizer of a
		// model gguf_to_hf.py converts.
		{FetchParams{Source: "builtin:tiny-gemma3"}, []string{toolchain.ToolTinyModel, toolchain.ToolGGUFToHF}},
		{FetchParams{Source: "hf://org/name"}, nil},
		{FetchParams{Source: "https://h/m.tar.gz"}, nil},
		{FetchParams{Source: "./folder"}, nil},
	} {
		p := tc.p
		if got := Fetch.Tools(&p); !slices.Equal(got, tc.want) {
			t.Errorf("%+v: tools %v, want %v", tc.p, got, tc.want)
		}
	}
	if r := Fetch.Resources(&FetchParams{}); !r.Network {
		t.Error("a fetch is not marked as network: its failures would not be retried")
	}
}

func TestExternalDir(t *testing.T) {
	recipeDir := t.TempDir()
	writeFiles(t, recipeDir, map[string]string{"model/config.json": "{}", "weights.bin": "x", "smol.gguf": "GGUF"})
	ext := Fetch.(steps.External)
	for _, tc := range []struct {
		p       FetchParams
		dir     string
		ok      bool
		wantErr string
	}{
		{p: FetchParams{Source: "model"}, dir: filepath.Join(recipeDir, "model"), ok: true},
		{p: FetchParams{Source: filepath.Join(recipeDir, "model")}, dir: filepath.Join(recipeDir, "model"), ok: true},
		{p: FetchParams{Source: "missing"}, ok: true, wantErr: "point it at a folder holding a Hugging Face checkpoint"},
		{p: FetchParams{Source: "weights.bin"}, ok: true, wantErr: "is a file: point it at the folder"},
		// A GGUF is converted by the step, never used in place.
		{p: FetchParams{Source: "smol.gguf"}},
		{p: FetchParams{Source: "model", GGUF: true}},
		{p: FetchParams{Source: "hf://org/name"}},
		{p: FetchParams{Source: "builtin:smollm2-135m"}},
	} {
		p := tc.p
		dir, ok, err := ext.ExternalDir(&p, recipeDir)
		if dir != tc.dir || ok != tc.ok || (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%+v: %q, %v, %v; want %q, %v, error %q", tc.p, dir, ok, err, tc.dir, tc.ok, tc.wantErr)
		}
	}
}

func TestCheckExternal(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"config.json": `{"auto_map": {}}`})
	ext := Fetch.(steps.External)
	files := []digest.FileDigest{{Path: "config.json"}, {Path: "pytorch_model.bin"}}
	if err := ext.CheckExternal(&FetchParams{}, dir, files); err == nil || !strings.Contains(err.Error(), "pytorch_model.bin is a pickle file") {
		t.Errorf("pickle: %v", err)
	}
	if err := ext.CheckExternal(&FetchParams{AllowPickle: true}, dir, files); err == nil || !strings.Contains(err.Error(), "auto_map") {
		t.Errorf("auto_map: %v", err)
	}
	if err := ext.CheckExternal(&FetchParams{AllowPickle: true, TrustRemoteCode: true}, dir, files); err != nil {
		t.Errorf("both allowed: %v", err)
	}
}

// The step's error names the source without its credentials, keeps
// whether a retry may help, and holds no chain a later %+v could print.
func TestFetchRunErrorsAreScrubbed(t *testing.T) {
	src := "test://user:s3cret@example.com/model?sig=abcdef"
	var failWith error
	withFetcher(t, Fetcher{Scheme: "test://", Fetch: func(_ context.Context, _ *steps.Context, src string) error { return failWith }})
	for _, tc := range []struct {
		err       error
		transient bool
		prefix    string
	}{
		{proc.Transient(fmt.Errorf("connection reset reaching %s", src)), true, "fetch test://user:redacted@example.com/model?sig=redacted: "},
		{fmt.Errorf("404 for %s", src), false, "fetch test://user:redacted@example.com/model?sig=redacted: 404 for"},
		// Already says what it fetched: not prefixed twice.
		{fmt.Errorf("fetch %s: refused", src), false, "fetch test://user:redacted@example.com/model?sig=redacted: refused"},
	} {
		failWith = tc.err
		f := newFakeStep(t, &FetchParams{Source: src})
		err := Fetch.Run(context.Background(), f.sc)
		if err == nil {
			t.Fatal("the fetcher's error was lost")
		}
		if msg := err.Error(); strings.Contains(msg, "s3cret") || strings.Contains(msg, "abcdef") || !strings.HasPrefix(msg, tc.prefix) {
			t.Errorf("err = %q, want the prefix %q and no credentials", msg, tc.prefix)
		}
		if proc.IsTransient(err) != tc.transient {
			t.Errorf("%v: transient %v, want %v", err, proc.IsTransient(err), tc.transient)
		}
		if errors.Is(err, tc.err) || errors.Is(err, errors.Unwrap(tc.err)) {
			t.Errorf("%v: the chain keeps the fetcher's error, credentials and all", err)
		}
	}
}

// What a fetcher brings is checked like a local folder: pickle weights and
// model code are refused, wherever in the tree they are.
func TestFetchRunChecksWhatArrived(t *testing.T) {
	var files map[string]string
	withFetcher(t, Fetcher{Scheme: "test://", Fetch: func(_ context.Context, sc *steps.Context, _ string) error {
		writeFiles(t, sc.Out, files)
		return nil
	}})
	for _, tc := range []struct {
		files   map[string]string
		p       FetchParams
		wantErr string
	}{
		{map[string]string{"config.json": "{}", "model.safetensors": "w"}, FetchParams{}, ""},
		{map[string]string{"config.json": "{}", "sub/dir/model.ckpt": "w"}, FetchParams{}, "sub/dir/model.ckpt is a pickle file"},
		{map[string]string{"config.json": "{}", "sub/dir/model.ckpt": "w"}, FetchParams{AllowPickle: true}, ""},
		{map[string]string{"config.json": `{"auto_map": {"AutoModel": "x.Y"}}`, "x.py": ""}, FetchParams{AllowPickle: true}, "ships code (x.py)"},
		{map[string]string{"config.json": `{"auto_map": {"AutoModel": "x.Y"}}`}, FetchParams{}, "config.json has auto_map"},
		{map[string]string{"config.json": `{"auto_map": {"AutoModel": "x.Y"}}`, "x.py": ""}, FetchParams{TrustRemoteCode: true}, ""},
	} {
		files = tc.files
		p := tc.p
		p.Source = "test://example.com/model"
		f := newFakeStep(t, &p)
		err := Fetch.Run(context.Background(), f.sc)
		if (err == nil) != (tc.wantErr == "") || err != nil && !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v %+v: %v, want %q", tc.files, tc.p, err, tc.wantErr)
		}
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// An https source is downloaded by the getter into the step's scratch
// folder, then moved into its output; ?checksum= is verified and a file
// that fails it is not kept.
func TestFetchHTTPS(t *testing.T) {
	weights := []byte("safetensors bytes")
	files := map[string][]byte{"/m/model.safetensors": weights, "/m/pytorch_model.bin": []byte("pickle")}
	srv := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(b)
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	f := newFakeStep(t, &FetchParams{Source: srv.URL + "/m/model.safetensors?checksum=sha256:" + sha256Hex(weights)})
	if err := Fetch.Run(ctx, f.sc); err != nil {
		t.Fatal(err)
	}
	if got := listFiles(t, f.sc.Out); !slices.Equal(got, []string{"model.safetensors"}) {
		t.Fatalf("output holds %v", got)
	}
	if b, _ := os.ReadFile(filepath.Join(f.sc.Out, "model.safetensors")); string(b) != string(weights) {
		t.Errorf("downloaded %q", b)
	}
	if left := listFiles(t, f.sc.Scratch); len(left) != 0 {
		t.Errorf("the scratch folder keeps %v", left)
	}
	if f.sc.Result.Revision != "" {
		t.Errorf("a URL has no revision, got %q", f.sc.Result.Revision)
	}
	if len(f.progress) == 0 || !strings.HasPrefix(f.progress[0], "download ") {
		t.Errorf("progress %v", f.progress)
	}

	f = newFakeStep(t, &FetchParams{Source: srv.URL + "/m/model.safetensors?checksum=sha256:" + sha256Hex([]byte("other"))})
	if err := Fetch.Run(ctx, f.sc); err == nil || !strings.Contains(err.Error(), "failed its checksum") || proc.IsTransient(err) {
		t.Errorf("bad checksum: %v (transient %v)", err, proc.IsTransient(err))
	}
	if got := listFiles(t, f.sc.Out); len(got) != 0 {
		t.Errorf("a file that failed its checksum was kept: %v", got)
	}

	f = newFakeStep(t, &FetchParams{Source: srv.URL + "/m/pytorch_model.bin"})
	if err := Fetch.Run(ctx, f.sc); err == nil || !strings.Contains(err.Error(), "pytorch_model.bin is a pickle file") {
		t.Errorf("pickle download: %v", err)
	}
}

// A failed download's error carries neither the password nor a signed
// URL's signature, though the server's answer may quote them.
func TestFetchHTTPSErrorIsRedacted(t *testing.T) {
	srv := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such key: "+r.URL.String(), http.StatusForbidden)
	}))
	host := strings.TrimPrefix(srv.URL, "https://")
	src := "https://user:pa55word@" + host + "/m/model.safetensors?X-Amz-Signature=deadbeef99"
	f := newFakeStep(t, &FetchParams{Source: src})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := Fetch.Run(ctx, f.sc)
	if err == nil {
		t.Fatal("a 403 was fetched")
	}
	if strings.Contains(err.Error(), "pa55word") || strings.Contains(err.Error(), "deadbeef99") {
		t.Errorf("credentials in %q", err)
	}
	if !strings.HasPrefix(err.Error(), "fetch https://user:redacted@"+host) {
		t.Errorf("err = %q", err)
	}
}

// A git source's commit is the step's revision (what the lock pins).
func TestFetchGitRecordsTheCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	work := t.TempDir()
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "init.defaultBranch=main"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	repo := filepath.Join(work, "repo")
	writeFiles(t, repo, map[string]string{"config.json": "{}", "model.safetensors": "w"})
	git(work, "init", "-q", repo)
	git(repo, "add", ".")
	git(repo, "commit", "-q", "-m", "model")
	commit := git(repo, "rev-parse", "HEAD")
	bare := filepath.Join(work, "model.git")
	git(work, "clone", "-q", "--bare", repo, bare)

	f := newFakeStep(t, &FetchParams{Source: "git::file://" + bare + "?ref=main"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := Fetch.Run(ctx, f.sc); err != nil {
		t.Fatal(err)
	}
	if f.sc.Result.Revision != commit {
		t.Errorf("revision %q, want %s", f.sc.Result.Revision, commit)
	}
	if got := listFiles(t, f.sc.Out); !slices.Equal(got, []string{"config.json", "model.safetensors"}) {
		t.Errorf("output holds %v", got)
	}
}
