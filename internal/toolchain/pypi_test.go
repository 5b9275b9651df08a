package toolchain

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type indexFile struct {
	filename string
	body     []byte
}

// useIndex serves files by project on a PEP 503 HTML index on 127.0.0.1
// and points EDGEPIPE_PYPI_INDEX at it.
func useIndex(t *testing.T, files map[string]indexFile) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	for project, f := range files {
		mux.HandleFunc("/simple/"+project+"/", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `<a href="../../files/%s#sha256=%s">%s</a>`, f.filename, sha(f.body), f.filename)
		})
		mux.HandleFunc("/files/"+f.filename, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(f.body) })
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Setenv("EDGEPIPE_PYPI_INDEX", srv.URL+"/simple")
	return srv
}

func TestPypiIndexPrecedence(t *testing.T) {
	keys := []string{"EDGEPIPE_PYPI_INDEX", "UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"}
	for _, k := range keys {
		t.Setenv(k, "")
	}
	if got := pypiIndex(); got != defaultIndex {
		t.Errorf("no setting: %s", got)
	}
	// Each key wins over those after it; a blank value is no setting.
	for i := len(keys) - 1; i >= 0; i-- {
		t.Setenv(keys[i], " https://mirror"+fmt.Sprint(i)+".example/simple/ ")
		if got := pypiIndex(); got != "https://mirror"+fmt.Sprint(i)+".example/simple" {
			t.Errorf("with %s set: %s", keys[i], got)
		}
	}
	t.Setenv(keys[0], "   ")
	if got := pypiIndex(); got != "https://mirror1.example/simple" {
		t.Errorf("blank %s: %s", keys[0], got)
	}
}

func TestIndexHelpers(t *testing.T) {
	for in, want := range map[string]string{"My_Pkg": "my-pkg", "a.b--c__d": "a-b-c-d", "llama-cpp-python": "llama-cpp-python", "Gemma3.270M": "gemma3-270m"} {
		if got := normalizeProject(in); got != want {
			t.Errorf("normalizeProject(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{
		"https://user:secret@mirror.example/simple": "https://mirror.example/simple",
		"https://token@mirror.example/simple":       "https://mirror.example/simple",
		"https://mirror.example/simple":             "https://mirror.example/simple",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
	page := `<a href="/x/a-1.0.tar.gz#sha256=aa">a-1.0.tar.gz</a>
<a class="w" href="/x/pkg-1.0.whl?x=1&amp;y=2#sha256=bb" data-yanked="">  pkg-1.0.whl  </a>
<a href="/x/nohash-1.0.whl">nohash-1.0.whl</a>`
	for name, want := range map[string][2]string{
		"pkg-1.0.whl":    {"/x/pkg-1.0.whl?x=1&y=2#sha256=bb", "bb"},
		"nohash-1.0.whl": {"/x/nohash-1.0.whl", ""},
		"a-1.0":          {"", ""},
	} {
		href, sum := findAnchor(page, name)
		if href != want[0] || sum != want[1] {
			t.Errorf("findAnchor(%s) = %q, %q; want %q, %q", name, href, sum, want[0], want[1])
		}
	}
}

// The file's link is resolved against where the index page really was
// (after redirects), without its fragment; an index that cannot be read
// says where it looked, without the credentials in its URL.
func TestFindFile(t *testing.T) {
	body := []byte("wheel")
	pin := Pin{Project: "Pkg", Filename: "pkg-1.0.whl", SHA256: sha(body)}
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/pkg/", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mirror/deep/pkg/", http.StatusFound)
	})
	mux.HandleFunc("/mirror/deep/pkg/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<a href="../../files/pkg-1.0.whl#sha256=%s">pkg-1.0.whl</a>`, strings.ToUpper(sha(body)))
	})
	mux.HandleFunc("/broken/pkg/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.pypi.simple.v1+json")
		fmt.Fprint(w, "{not json")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	link, err := findFile(context.Background(), srv.URL+"/simple", pin)
	if err != nil {
		t.Fatal(err)
	}
	if link != srv.URL+"/mirror/files/pkg-1.0.whl" {
		t.Errorf("link %s", link)
	}
	withUser := strings.Replace(srv.URL, "http://", "http://me:s3cret@", 1)
	for index, want := range map[string]string{
		withUser + "/nothing": "look up Pkg on " + srv.URL + "/nothing: 404 Not Found",
		srv.URL + "/broken":   "look up Pkg: index page is not valid JSON",
		"http://127.0.0.1:1":  "is the network or the index reachable? set EDGEPIPE_PYPI_INDEX to use a mirror",
	} {
		_, err := findFile(context.Background(), index, pin)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: %v, want %q", index, err, want)
		}
	}
}

// A download the index lists but will not serve is an error naming the
// file, with the link's credentials removed.
func TestFetchPinRefusedDownload(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/pkg/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<a href="http://me:s3cret@`+r.Host+`/files/pkg-1.0.whl">pkg-1.0.whl</a>`)
	})
	mux.HandleFunc("/files/pkg-1.0.whl", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "gone", http.StatusGone)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Setenv("EDGEPIPE_PYPI_INDEX", srv.URL+"/simple")
	_, err := fetchPin(context.Background(), t.TempDir(), Pin{Project: "pkg", Filename: "pkg-1.0.whl", SHA256: sha(nil)}, nil2())
	if err == nil || !strings.Contains(err.Error(), "download pkg-1.0.whl: "+srv.URL+"/files/pkg-1.0.whl answered 410 Gone") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("err = %v", err)
	}
}
