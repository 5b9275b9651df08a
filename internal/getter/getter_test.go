package getter

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/edgepipe/edgepipe/internal/proc"
)

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type entry struct {
	name     string
	body     string
	size     int64 // when set, a body of this many zero bytes
	typ      byte
	linkname string
}

func tarGz(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: e.typ, Linkname: e.linkname}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		var body io.Reader = strings.NewReader(e.body)
		hdr.Size = int64(len(e.body))
		if e.size > 0 {
			hdr.Size, body = e.size, io.LimitReader(zeros{}, e.size)
		}
		if hdr.Typeflag != tar.TypeReg {
			hdr.Size, body = 0, strings.NewReader("")
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fileServer serves fixed bodies and records what clients asked for.
type fileServer struct {
	*httptest.Server
	mu    sync.Mutex
	files map[string][]byte
	seen  []*http.Request
}

func newFileServer(t *testing.T, files map[string][]byte) *fileServer {
	fs := &fileServer{files: files}
	fs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fs.mu.Lock()
		fs.seen = append(fs.seen, r.Clone(context.Background()))
		fs.mu.Unlock()
		body, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Accept-Ranges", "bytes")
		w.Header().Set("X-Terraform-Get", "git::https://attacker.invalid/repo")
		_, _ = w.Write(body)
	}))
	t.Cleanup(fs.Close)
	return fs
}

// leftovers lists what a fetch left in dst's parent besides dst.
func leftovers(t *testing.T, dst string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(dst))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if e.Name() != filepath.Base(dst) {
			out = append(out, e.Name())
		}
	}
	return out
}

func fetchErr(t *testing.T, src string, opts Options) (string, error) {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "out")
	_, err := Fetch(context.Background(), src, dst, opts)
	if err == nil {
		t.Fatalf("Fetch(%s) succeeded, want an error", src)
	}
	if _, statErr := os.Lstat(dst); !os.IsNotExist(statErr) {
		t.Errorf("a failed fetch left %s behind", dst)
	}
	if l := leftovers(t, dst); len(l) > 0 {
		t.Errorf("a failed fetch left %v behind", l)
	}
	return dst, err
}

func TestLocalFileIsCopied(t *testing.T) {
	src := t.TempDir()
	data := []byte("gguf bytes")
	writeFile(t, filepath.Join(src, "model.gguf"), data)
	dst := filepath.Join(t.TempDir(), "out")

	res, err := Fetch(context.Background(), "./model.gguf", dst, Options{Pwd: src})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 1 || res.Files[0] != (File{Path: "model.gguf", Size: int64(len(data)), SHA256: sha(data)}) {
		t.Fatalf("files %+v", res.Files)
	}
	fi, err := os.Lstat(filepath.Join(dst, "model.gguf"))
	if err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("dst/model.gguf is not a regular file: %v %v", fi, err)
	}
}

func TestLocalDirectoryIsCopiedNotLinked(t *testing.T) {
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "config.json"), []byte("{}"))
	writeFile(t, filepath.Join(src, "sub", "weights.safetensors"), []byte("weights"))
	// A Hugging Face snapshot folder is links into its blobs.
	blobs := t.TempDir()
	writeFile(t, filepath.Join(blobs, "abc"), []byte("tokenizer"))
	if err := os.Symlink(filepath.Join(blobs, "abc"), filepath.Join(src, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "out")

	res, err := Fetch(context.Background(), src, dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range res.Files {
		paths = append(paths, f.Path)
	}
	if strings.Join(paths, " ") != "config.json sub/weights.safetensors tokenizer.json" {
		t.Fatalf("files %v", paths)
	}
	if fi, err := os.Lstat(dst); err != nil || fi.Mode()&os.ModeSymlink != 0 {
		t.Fatalf("dst must be a real directory: %v %v", fi, err)
	}
	if fi, err := os.Lstat(filepath.Join(dst, "tokenizer.json")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("a symlinked local file must arrive as a copy: %v %v", fi, err)
	}
	writeFile(t, filepath.Join(dst, "config.json"), []byte("changed"))
	if b, _ := os.ReadFile(filepath.Join(src, "config.json")); string(b) != "{}" {
		t.Fatal("writing into the fetched copy changed the source")
	}
}

func TestHTTPFileWithChecksum(t *testing.T) {
	data := []byte("model weights over http")
	srv := newFileServer(t, map[string][]byte{"/m/model.gguf": data})
	dst := filepath.Join(t.TempDir(), "out")
	var progressed int64
	res, err := Fetch(context.Background(), srv.URL+"/m/model.gguf?checksum=sha256:"+sha(data), dst, Options{
		Progress: func(_ string, done, _ int64) { progressed = done },
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dst, "model.gguf")); string(got) != string(data) || res.Files[0].SHA256 != sha(data) {
		t.Fatalf("content %q, files %+v", got, res.Files)
	}
	if progressed != int64(len(data)) {
		t.Fatalf("progress reached %d of %d bytes", progressed, len(data))
	}
	// Fresh download every time: no HEAD probe, no Range (go-getter's resume
	// sends Range without If-Range).
	for _, r := range srv.seen {
		if r.Method != http.MethodGet || r.Header.Get("Range") != "" {
			t.Fatalf("unexpected request %s Range=%q", r.Method, r.Header.Get("Range"))
		}
	}
}

func TestChecksumMismatchDeletesTheFile(t *testing.T) {
	data := []byte("tampered")
	srv := newFileServer(t, map[string][]byte{"/model.gguf": data})
	_, err := fetchErr(t, srv.URL+"/model.gguf?checksum=sha256:"+sha([]byte("original")), Options{})
	if !strings.Contains(err.Error(), "failed its checksum") || !strings.Contains(err.Error(), "deleted") {
		t.Fatalf("got %v", err)
	}
}

func TestChecksumMismatchOnArchiveDeletesItBeforeUnpacking(t *testing.T) {
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "m.tar.gz"), tarGz(t, entry{name: "a.txt", body: "a"}))
	_, err := fetchErr(t, "./m.tar.gz?checksum=sha256:"+sha([]byte("x")), Options{Pwd: src})
	if !strings.Contains(err.Error(), "failed its checksum") {
		t.Fatalf("got %v", err)
	}
}

func TestHTTPArchiveIsUnpacked(t *testing.T) {
	archive := tarGz(t,
		entry{name: "model/", typ: tar.TypeDir},
		entry{name: "model/config.json", body: "{}"},
		entry{name: "model/weights.bin", body: "0123456789"},
	)
	srv := newFileServer(t, map[string][]byte{"/model.tar.gz": archive})
	dst := filepath.Join(t.TempDir(), "out")
	res, err := Fetch(context.Background(), srv.URL+"/model.tar.gz?checksum="+sha(archive), dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 2 || res.Files[1] != (File{Path: "model/weights.bin", Size: 10, SHA256: sha([]byte("0123456789"))}) {
		t.Fatalf("files %+v", res.Files)
	}
	if l := leftovers(t, dst); len(l) > 0 {
		t.Fatalf("staging left behind: %v", l)
	}
}

func TestZipArchiveIsUnpacked(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, _ := zw.Create("dir/a.txt")
	_, _ = w.Write([]byte("zipped"))
	_ = zw.Close()
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "m.zip"), buf.Bytes())
	dst := filepath.Join(t.TempDir(), "out")
	if _, err := Fetch(context.Background(), "./m.zip", dst, Options{Pwd: src}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "dir", "a.txt")); string(b) != "zipped" {
		t.Fatalf("content %q", b)
	}
}

func TestArchiveBombsAreRefused(t *testing.T) {
	src := t.TempDir()
	// 2 MiB of zeros compresses to about 2 KiB.
	writeFile(t, filepath.Join(src, "big.tar.gz"), tarGz(t, entry{name: "zeros.bin", size: 2 << 20}))
	var many []entry
	for i := range 50 {
		many = append(many, entry{name: strings.Repeat("f", i+1), body: "x"})
	}
	writeFile(t, filepath.Join(src, "many.tar.gz"), tarGz(t, many...))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = io.Copy(zw, io.LimitReader(zeros{}, 2<<20))
	_ = zw.Close()
	writeFile(t, filepath.Join(src, "model.bin.gz"), gz.Bytes())

	opts := Options{Pwd: src, MaxBytes: 256 << 10, MaxFiles: 20}
	cases := map[string]string{
		"./big.tar.gz":   "more than 262144 bytes",
		"./many.tar.gz":  "more than 20 entries",
		"./model.bin.gz": "possible decompression bomb",
	}
	for src, want := range cases {
		_, err := fetchErr(t, src, opts)
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", src, err, want)
		}
	}
	// Over HTTP too.
	srv := newFileServer(t, map[string][]byte{"/big.tar.gz": tarGz(t, entry{name: "zeros.bin", size: 2 << 20})})
	if _, err := fetchErr(t, srv.URL+"/big.tar.gz", opts); !strings.Contains(err.Error(), "decompression bomb") {
		t.Errorf("http bomb: %v", err)
	}
}

// A small archive that expands far past its size is refused by ratio, at
// once, even under the default absolute cap: a 1 MB gzip of a 300 MiB
// file never reaches the disk.
func TestArchiveRatioCap(t *testing.T) {
	src := t.TempDir()
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	_, _ = io.Copy(zw, io.LimitReader(zeros{}, 300<<20))
	_ = zw.Close()
	writeFile(t, filepath.Join(src, "model.bin.gz"), gz.Bytes())
	writeFile(t, filepath.Join(src, "big.tar.gz"), tarGz(t, entry{name: "zeros.bin", size: 300 << 20}))
	for _, name := range []string{"./model.bin.gz", "./big.tar.gz"} {
		_, err := fetchErr(t, name, Options{Pwd: src})
		if err == nil || !strings.Contains(err.Error(), "possible decompression bomb (an archive may expand to 20x its size") {
			t.Errorf("%s (%d bytes compressed): %v", name, gz.Len(), err)
		}
	}
	// Under the floor, any ratio is fine.
	var small bytes.Buffer
	zw = gzip.NewWriter(&small)
	_, _ = io.Copy(zw, io.LimitReader(zeros{}, 8<<20))
	_ = zw.Close()
	writeFile(t, filepath.Join(src, "ok.bin.gz"), small.Bytes())
	if _, err := Fetch(context.Background(), "./ok.bin.gz", filepath.Join(t.TempDir(), "out"), Options{Pwd: src}); err != nil {
		t.Errorf("8 MiB of zeros: %v", err)
	}
}

func TestArchiveEscapesAndLinksAreRefused(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	cases := map[string]struct {
		archive []byte
		want    string
	}{
		"dotdot.tar.gz":   {tarGz(t, entry{name: "../escaped.txt", body: "x"}), "climbs out"},
		"nested.tar.gz":   {tarGz(t, entry{name: "a/../../escaped.txt", body: "x"}), "climbs out"},
		"absolute.tar.gz": {tarGz(t, entry{name: "/tmp/escaped.txt", body: "x"}), "absolute path"},
		"symlink.tar.gz":  {tarGz(t, entry{name: "link", typ: tar.TypeSymlink, linkname: "/etc/passwd"}), "is a link"},
		"hardlink.tar.gz": {tarGz(t, entry{name: "hard", typ: tar.TypeLink, linkname: "/etc/passwd"}), "is a link"},
		"fifo.tar.gz":     {tarGz(t, entry{name: "pipe", typ: tar.TypeFifo}), "not a regular file"},
	}
	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	hdr := &zip.FileHeader{Name: "link"}
	hdr.SetMode(os.ModeSymlink | 0o777)
	w, _ := zw.CreateHeader(hdr)
	_, _ = w.Write([]byte("/etc/passwd"))
	_ = zw.Close()
	cases["symlink.zip"] = struct {
		archive []byte
		want    string
	}{zbuf.Bytes(), "is a symlink"}

	for name, c := range cases {
		writeFile(t, filepath.Join(src, name), c.archive)
		_, err := fetchErr(t, "./"+name, Options{Pwd: src})
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want %q", name, err, c.want)
		}
	}
	for _, p := range []string{filepath.Join(base, "escaped.txt"), "/tmp/escaped.txt"} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("an archive wrote %s", p)
		}
	}
}

func TestGitSource(t *testing.T) {
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
	writeFile(t, filepath.Join(repo, "config.json"), []byte("{}"))
	writeFile(t, filepath.Join(repo, "weights", "model.safetensors"), []byte("weights"))
	git(work, "init", "-q", repo)
	git(repo, "add", ".")
	git(repo, "commit", "-q", "-m", "model")
	commit := git(repo, "rev-parse", "HEAD")
	bare := filepath.Join(work, "model.git")
	git(work, "clone", "-q", "--bare", repo, bare)

	dst := filepath.Join(t.TempDir(), "out")
	res, err := Fetch(context.Background(), "git::file://"+bare+"?ref=main", dst, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.GitCommit != commit {
		t.Fatalf("commit %s, want %s", res.GitCommit, commit)
	}
	if len(res.Files) != 2 || res.Files[1].Path != "weights/model.safetensors" {
		t.Fatalf("files %+v", res.Files)
	}
	if _, err := os.Stat(filepath.Join(dst, ".git")); !os.IsNotExist(err) {
		t.Fatal(".git was kept")
	}

	// A repository that ships a symlink is refused.
	if err := os.Symlink("/etc/passwd", filepath.Join(repo, "passwd")); err != nil {
		t.Fatal(err)
	}
	git(repo, "add", ".")
	git(repo, "commit", "-q", "-m", "link")
	git(repo, "push", "-q", bare, "HEAD:main")
	if _, err := fetchErr(t, "git::file://"+bare+"?ref=main", Options{}); !strings.Contains(err.Error(), "symlink") {
		t.Fatalf("got %v", err)
	}
	if _, err := fetchErr(t, "git::file://"+bare+"?checksum=sha256:"+sha(nil), Options{}); !strings.Contains(err.Error(), "cannot carry ?checksum=") {
		t.Fatalf("got %v", err)
	}
}

func TestUnsupportedSourcesAreRefused(t *testing.T) {
	cases := map[string]string{
		"hg::https://example.com/repo":                 "not supported",
		"ftp://example.com/model.bin":                  "not supported",
		"ssh://git@example.com/repo":                   "not supported",
		"https://example.com/models/":                  "names a directory",
		"https://example.com/m.bin?checksum=md5:00":    "not accepted",
		"https://example.com/m.bin?checksum=file:x":    "checksum files are not supported",
		"https://example.com/m.bin?checksum=sha256:zz": "hex digits",
		"https://example.com/m.tar.gz?archive=rar":     "not supported",
		"https://example.com/m.tar.gz//sub":            "//subdir of an archive",
		"":                                             "empty source",
	}
	for src, want := range cases {
		_, err := fetchErr(t, src, Options{})
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q: got %v, want %q", src, err, want)
		}
	}
}

func TestCredentialsNeverAppearInErrors(t *testing.T) {
	srv := newFileServer(t, nil)
	src := strings.Replace(srv.URL, "http://", "http://user:hunter2pass@", 1) + "/missing.bin?X-Amz-Signature=sigsecret123&x=1"
	_, err := fetchErr(t, src, Options{})
	if strings.Contains(err.Error(), "hunter2pass") || strings.Contains(err.Error(), "sigsecret123") {
		t.Fatalf("credentials leaked: %v", err)
	}
	if !strings.Contains(err.Error(), "redacted") || !strings.Contains(err.Error(), "404") {
		t.Fatalf("want a redacted source and the status in %v", err)
	}
}

func TestDestinationMustBeNewOrEmpty(t *testing.T) {
	src := t.TempDir()
	writeFile(t, filepath.Join(src, "a.txt"), []byte("a"))
	dst := t.TempDir()
	writeFile(t, filepath.Join(dst, "old.txt"), []byte("old"))
	if _, err := Fetch(context.Background(), src, dst, Options{}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("got %v", err)
	}
	empty := t.TempDir()
	if _, err := Fetch(context.Background(), src, empty, Options{}); err != nil {
		t.Fatalf("an empty destination must be accepted: %v", err)
	}
}

// Only failures a retry can fix are marked transient: the engine retries
// those and nothing else.
func TestFetchErrorsSayWhetherARetryMayHelp(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/503/m.safetensors":
			http.Error(w, "busy", http.StatusServiceUnavailable)
		case "/429/m.safetensors":
			http.Error(w, "slow down", http.StatusTooManyRequests)
		case "/junk.tar.gz":
			w.Write([]byte("not gzip"))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	refused := closed.URL
	closed.Close()
	for _, tc := range []struct {
		src       string
		transient bool
	}{
		{srv.URL + "/404/m.safetensors", false},
		{srv.URL + "/junk.tar.gz", false},
		{srv.URL + "/m.safetensors?checksum=sha256:" + strings.Repeat("0", 64), false},
		{srv.URL + "/503/m.safetensors", true},
		{srv.URL + "/429/m.safetensors", true},
		{refused + "/m.safetensors", true},
	} {
		_, err := fetchErr(t, tc.src, Options{})
		if got := proc.IsTransient(err); got != tc.transient {
			t.Errorf("%s: transient=%v, want %v (%v)", tc.src, got, tc.transient, err)
		}
	}
}

func TestCheckValidatesWithoutFetching(t *testing.T) {
	for src, want := range map[string]string{
		"https://example.invalid/m.tar.gz":                    "",
		"git::https://example.invalid/r.git?ref=main":         "",
		"ftp://example.invalid/m.tar.gz":                      "not supported",
		"https://example.invalid/dir/":                        "names a directory",
		"https://example.invalid/m.tar.gz?checksum=md5:abc":   "md5",
		"https://u:pw-secret@example.invalid/m.zip?archive=x": "not supported",
	} {
		err := Check(src)
		switch {
		case want == "" && err != nil:
			t.Errorf("Check(%s) = %v, want ok", src, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("Check(%s) = %v, want an error with %q", src, err, want)
		case err != nil && strings.Contains(err.Error(), "pw-secret"):
			t.Errorf("Check(%s) quotes the password: %v", src, err)
		}
	}
}
