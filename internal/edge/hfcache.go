package edge

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/hf"
)

var commitSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// hfCachedSnapshot finds an hf:// source's snapshot folder in the local
// Hugging Face cache (huggingface_hub's layout, which edgepipe's own client
// writes too): models--org--name/refs/<revision> holds the commit,
// snapshots/<commit>/ the files. It reads no network.
func hfCachedSnapshot(source string) (string, error) {
	repo, err := hf.ParseURI(source)
	if err != nil {
		return "", err
	}
	cacheDir := hf.FromEnv().CacheDir
	kind := "models--"
	if repo.Type == hf.TypeDataset {
		kind = "datasets--"
	}
	root := filepath.Join(cacheDir, kind+strings.ReplaceAll(repo.ID, "/", "--"))
	commit := repo.Revision
	if !commitSHA.MatchString(commit) {
		b, err := boundedfile.Read(filepath.Join(root, "refs", filepath.FromSlash(repo.Revision)), 4<<10)
		if err != nil {
			return "", fmt.Errorf("%s is not in the local Hugging Face cache (%s)", source, cacheDir)
		}
		commit = strings.TrimSpace(string(b))
	}
	dir := filepath.Join(root, "snapshots", commit)
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		return "", fmt.Errorf("%s: config.json is not in the local Hugging Face cache (%s)", source, cacheDir)
	}
	return dir, nil
}
