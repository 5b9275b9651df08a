package hf

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// The script loads, with the network off, files that edgepipe downloaded.
const interopScript = `
import hashlib, json, sys
from huggingface_hub import hf_hub_download, snapshot_download
repo = sys.argv[1]
model = hf_hub_download(repo, "model.safetensors", revision="main")
notes = hf_hub_download(repo, "onnx/nested/notes.txt")
with open(model, "rb") as f:
    digest = hashlib.sha256(f.read()).hexdigest()
with open(notes) as f:
    text = f.read()
print(json.dumps({"model": model, "sha256": digest, "notes": text, "snapshot": snapshot_download(repo)}))
`

// TestRealPythonHuggingFaceHubReadsOurCache needs a Python with huggingface_hub
// (tested with huggingface_hub 2.4.0; pip install huggingface_hub). It uses
// $EDGEPIPE_TEST_PYTHON, else python3.
func TestRealPythonHuggingFaceHubReadsOurCache(t *testing.T) {
	python := os.Getenv("EDGEPIPE_TEST_PYTHON")
	real := os.Getenv("EDGEPIPE_REAL") == "1"
	if python == "" && real {
		// The real tier has the llama toolchain, whose transformers brings
		// huggingface_hub: the Python tools edgepipe runs are the readers
		// that matter.
		cache := os.Getenv("EDGEPIPE_CACHE")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache", "edgepipe")
		}
		in, err := toolchain.Resolve(cache, toolchain.Llama)
		if err != nil {
			t.Fatalf("real tier: %v", err)
		}
		python = in.Python
	}
	if python == "" {
		python = "python3"
	}
	if err := exec.Command(python, "-c", "import huggingface_hub").Run(); err != nil {
		if real {
			t.Fatalf("real tier: %s cannot import huggingface_hub: %v", python, err)
		}
		t.Skipf("%s cannot import huggingface_hub (%v): pip install huggingface_hub, or point EDGEPIPE_TEST_PYTHON at a Python that has it", python, err)
	}

	h := newFakeHub(t)
	files := modelFiles()
	h.addRepo(TypeModel, "org/tiny", files, "model.safetensors", "onnx/nested/model.onnx")
	c := testClient(t, h)
	snap, err := c.Snapshot(context.Background(), mustParse(t, "hf://org/tiny"), SnapshotOptions{})
	if err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command(python, "-c", interopScript, "org/tiny")
	cmd.Env = append(os.Environ(),
		"HF_HUB_OFFLINE=1",
		"HF_HUB_CACHE="+c.CacheDir,
		"HUGGINGFACE_HUB_CACHE="+c.CacheDir, // huggingface_hub before 0.17 reads only this name
		"HF_HOME="+t.TempDir(),
		"HF_ENDPOINT=http://127.0.0.1:1", // any request it tried would fail
		"HF_TOKEN=",
		"HF_HUB_DISABLE_TELEMETRY=1",
	)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("huggingface_hub could not load edgepipe's download offline: %v\n%s", err, stderr)
	}
	var got struct{ Model, SHA256, Notes, Snapshot string }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("script output %q: %v", out, err)
	}
	if got.Model != filepath.Join(snap.Dir, "model.safetensors") || got.Snapshot != snap.Dir {
		t.Errorf("huggingface_hub found %s and %s, want them under %s", got.Model, got.Snapshot, snap.Dir)
	}
	if got.SHA256 != sha256Hex(files["model.safetensors"]) || got.Notes != string(files["onnx/nested/notes.txt"]) {
		t.Errorf("huggingface_hub read different content: %+v", got)
	}
}
