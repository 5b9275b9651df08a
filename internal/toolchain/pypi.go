package toolchain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// defaultIndex is PyPI's simple index (PEP 503/691). EDGEPIPE_PYPI_INDEX,
// UV_DEFAULT_INDEX, UV_INDEX_URL or PIP_INDEX_URL point elsewhere (a mirror).
const defaultIndex = "https://pypi.org/simple"

func pypiIndex() string {
	for _, k := range []string{"EDGEPIPE_PYPI_INDEX", "UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"} {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return strings.TrimRight(v, "/")
		}
	}
	return defaultIndex
}

var httpClient = &http.Client{
	Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
	},
}

// fetchPin returns the path of the pinned file under CACHE/downloads,
// downloading it from the index when it is not there yet. The file is
// written under a temporary name and renamed only after its sha256 matches
// the pin, so a corrupt or partial download is never found later.
func fetchPin(ctx context.Context, cacheDir string, p Pin, progress io.Writer) (string, error) {
	dir := filepath.Join(cacheDir, "downloads")
	dst := filepath.Join(dir, p.Filename)
	if got, err := fileDigest(dst); err == nil {
		if got == p.SHA256 {
			// Reused: its modification time is its last use, for cache gc.
			now := time.Now()
			_ = os.Chtimes(dst, now, now)
			return dst, nil
		}
		// Not what the pin says: replaced below.
		_ = os.Remove(dst)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	link, err := findFile(ctx, pypiIndex(), p)
	if err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "download %s\n", p.Filename)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return "", err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("download %s: %w", p.Filename, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("download %s: %s answered %s", p.Filename, redact(link), resp.Status)
	}
	tmp, err := os.CreateTemp(dir, "."+p.Filename+".part-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), resp.Body)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("download %s: %w", p.Filename, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != p.SHA256 {
		return "", fmt.Errorf("download %s: sha256 is %s but edgepipe pins %s (%d bytes received); the index or a proxy served different bytes, so nothing was kept", p.Filename, got, p.SHA256, n)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return "", err
	}
	fmt.Fprintf(progress, "downloaded %s (%.1f MB, sha256 verified)\n", p.Filename, float64(n)/1e6)
	return dst, nil
}

// findFile looks the file up on the project's index page and returns its
// absolute URL. An index that publishes a different sha256 for the file is
// refused before anything is downloaded.
func findFile(ctx context.Context, index string, p Pin) (string, error) {
	page := index + "/" + normalizeProject(p.Project) + "/"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, page, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/vnd.pypi.simple.v1+json, text/html;q=0.1")
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("look up %s on %s: %w (is the network or the index reachable? set EDGEPIPE_PYPI_INDEX to use a mirror)", p.Project, redact(index), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("look up %s on %s: %s", p.Project, redact(index), resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return "", fmt.Errorf("look up %s: %w", p.Project, err)
	}
	base, _ := url.Parse(page)
	if resp.Request != nil && resp.Request.URL != nil {
		base = resp.Request.URL
	}
	var href, published string
	if strings.Contains(resp.Header.Get("Content-Type"), "json") {
		var doc struct {
			Files []struct {
				Filename string            `json:"filename"`
				URL      string            `json:"url"`
				Hashes   map[string]string `json:"hashes"`
			} `json:"files"`
		}
		if err := json.Unmarshal(body, &doc); err != nil {
			return "", fmt.Errorf("look up %s: index page is not valid JSON: %w", p.Project, err)
		}
		for _, f := range doc.Files {
			if f.Filename == p.Filename {
				href, published = f.URL, f.Hashes["sha256"]
				break
			}
		}
	} else {
		href, published = findAnchor(string(body), p.Filename)
	}
	if href == "" {
		return "", fmt.Errorf("%s is not on %s: the pinned file %s is missing (yanked, or a mirror without it)", p.Project, redact(index), p.Filename)
	}
	if published != "" && !strings.EqualFold(published, p.SHA256) {
		return "", fmt.Errorf("%s on %s has sha256 %s but edgepipe pins %s: refusing to download it", p.Filename, redact(index), published, p.SHA256)
	}
	u, err := base.Parse(href)
	if err != nil {
		return "", fmt.Errorf("look up %s: bad link %q: %w", p.Project, href, err)
	}
	u.Fragment = ""
	return u.String(), nil
}

var anchorRE = regexp.MustCompile(`<a\s[^>]*href="([^"]+)"[^>]*>([^<]*)</a>`)

// findAnchor finds the file's link on a PEP 503 HTML page and the sha256
// in its fragment.
func findAnchor(page, filename string) (href, sha string) {
	for _, m := range anchorRE.FindAllStringSubmatch(page, -1) {
		if strings.TrimSpace(m[2]) != filename {
			continue
		}
		link := strings.ReplaceAll(m[1], "&amp;", "&")
		if _, frag, ok := strings.Cut(link, "#sha256="); ok {
			sha = frag
		}
		return link, sha
	}
	return "", ""
}

// normalizeProject is PEP 503 name normalization.
func normalizeProject(name string) string {
	return strings.ToLower(regexp.MustCompile(`[-_.]+`).ReplaceAllString(name, "-"))
}

// redact drops credentials from an index URL before it reaches a message.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	u.User = nil
	return u.String()
}
