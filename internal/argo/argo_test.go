package argo

import (
	"archive/tar"
	"bytes"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/edgepipe/edgepipe/steps"
)

func TestTaskNamesAreValidAndUnique(t *testing.T) {
	long := "bench:gguf-quantize:q8_0+prompt_tokens=32+runs=30+warmup=5+and+a+long+tail+of+options"
	ss := []Step{{ID: "source"}, {ID: "gguf-convert:f16"}, {ID: "gguf-convert/f16"}, {ID: long}, {ID: "edgepipe"}, {ID: "::"}}
	names := taskNames(ss)
	seen := map[string]string{}
	for _, s := range ss {
		n := names[s.ID]
		if n == "" || len(n) > 63 || !validName(n) {
			t.Errorf("%q -> %q: not a valid Argo task name", s.ID, n)
		}
		if other, dup := seen[n]; dup {
			t.Errorf("%q and %q both -> %q", s.ID, other, n)
		}
		seen[n] = s.ID
		if n == entrypoint {
			t.Errorf("%q takes the entrypoint's name", s.ID)
		}
	}
	if names["source"] != "source" || !strings.HasPrefix(names["gguf-convert:f16"], "gguf-convert-f16") {
		t.Errorf("simple ids should map plainly: %v", names)
	}
}

func validName(n string) bool {
	for i, r := range n {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || (r == '-' && i > 0)
		if !ok {
			return false
		}
	}
	return true
}

func TestArmorRoundTrip(t *testing.T) {
	b := bytes.Repeat([]byte{0, 1, 2, 255, 'x'}, 100)
	a := Armor(b)
	for _, line := range strings.Split(strings.TrimSpace(a), "\n") {
		if len(line) > 76 {
			t.Fatalf("armor line of %d characters", len(line))
		}
	}
	got, ok := Dearmor([]byte(a))
	if !ok || !bytes.Equal(got, b) {
		t.Fatalf("dearmor: ok=%v, equal=%v", ok, bytes.Equal(got, b))
	}
	if _, ok := Dearmor([]byte("ustar\x00 not base64")); ok {
		t.Fatal("a tar is not armor")
	}
}

func TestExportPlacesGPUStepsAndRetries(t *testing.T) {
	out, err := Export(Options{Recipe: "jetson_thor", Image: "img", RemoteCache: "s3::http://127.0.0.1:1/b/p", Secret: "s",
		Bundle: []byte("bundle bytes"),
		Steps: []Step{
			{ID: "source", Kind: "fetch", MemoryMB: 2048, Cores: 1, Network: true},
			{ID: "build@x", Kind: "edgellm-build", Needs: []string{"source"}, MemoryMB: 8192, Cores: 2,
				Host: steps.HostNeeds{NvidiaGPU: true, Device: "jetson-thor"}},
			{ID: "publish:thor", Kind: "publish", Target: "thor", Needs: []string{"build@x"}, Publish: true},
		}})
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.Unmarshal(out, &wf); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.HasPrefix(wf.Metadata.GenerateName, "edgepipe-jetson-thor-") {
		t.Errorf("generateName %q", wf.Metadata.GenerateName)
	}
	byName := map[string]template{}
	for _, tm := range wf.Spec.Templates {
		byName[tm.Name] = tm
	}
	dag := byName[entrypoint].DAG
	if dag == nil || len(dag.Tasks) != 3 {
		t.Fatalf("DAG: %+v", dag)
	}
	if got := dag.Tasks[1].Dependencies; len(got) != 1 || got[0] != "source" {
		t.Errorf("build's dependencies %v", got)
	}
	src, build, pub := byName["source"], byName["build-x"], byName["publish-thor"]
	if src.RetryStrategy.RetryPolicy != "Always" || build.RetryStrategy.RetryPolicy != "OnError" {
		t.Errorf("retry policies: source %+v, build %+v", src.RetryStrategy, build.RetryStrategy)
	}
	if build.Container.Resources.Limits[GPUResource] != "1" || build.NodeSelector[GPULabel] != "true" ||
		build.NodeSelector[DeviceLabel] != "jetson-thor" || len(build.Tolerations) != 1 {
		t.Errorf("GPU placement: %+v %+v", build.Container.Resources, build.NodeSelector)
	}
	if build.Container.Resources.Requests["memory"] != "8192Mi" || build.Container.Resources.Requests["cpu"] != "2" {
		t.Errorf("requests %+v", build.Container.Resources.Requests)
	}
	if src.Container.Resources.Limits != nil || src.NodeSelector != nil {
		t.Errorf("a CPU step asks for a GPU: %+v", src)
	}
	if pub.Outputs == nil || !strings.Contains(strings.Join(pub.Container.Args, " "), "--out "+OutPath) {
		t.Errorf("publish task: %+v", pub)
	}
	raw := wf.Spec.Arguments.Artifacts[0].Raw
	if got, ok := Dearmor([]byte(raw.Data)); !ok || string(got) != "bundle bytes" {
		t.Errorf("bundle artifact %q", raw.Data)
	}
}

func TestExportRefusesAnOversizedBundle(t *testing.T) {
	noise := make([]byte, MaxBundleBytes)
	rand.New(rand.NewSource(1)).Read(noise) // incompressible
	_, err := Export(Options{Recipe: "r", Image: "i", RemoteCache: "u", Bundle: noise})
	if err == nil || !strings.Contains(err.Error(), "remote cache") {
		t.Fatalf("err = %v", err)
	}
}

func TestDearmorFileGivesBackTheTar(t *testing.T) {
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	tw.WriteHeader(&tar.Header{Name: "plan.json", Mode: 0o644, Size: 2})
	tw.Write([]byte("{}"))
	tw.Close()
	dir := t.TempDir()
	armored := filepath.Join(dir, "plan.bundle")
	os.WriteFile(armored, []byte(Armor(tb.Bytes())), 0o644)
	got, err := DearmorFile(armored)
	if err != nil || got == armored {
		t.Fatalf("DearmorFile = %q, %v", got, err)
	}
	defer os.Remove(got)
	if b, _ := os.ReadFile(got); !bytes.Equal(b, tb.Bytes()) {
		t.Fatal("not the same tar")
	}
	plain := filepath.Join(dir, "plan.json")
	os.WriteFile(plain, []byte(`{"steps": []}`), 0o644)
	if got, err := DearmorFile(plain); err != nil || got != plain {
		t.Fatalf("a plan is not armor: %q, %v", got, err)
	}
	// Armor of something that is not a tar is left alone too.
	other := filepath.Join(dir, "other")
	os.WriteFile(other, []byte(Armor([]byte("hello"))), 0o644)
	if got, err := DearmorFile(other); err != nil || got != other {
		t.Fatalf("armored non-tar: %q, %v", got, err)
	}
}

// --image must be an image reference and --secret a Secret name
// Kubernetes takes: a bad one is refused with the fix, not written into a
// Workflow that fails once submitted.
func TestOptionsCheck(t *testing.T) {
	good := Options{Image: "edgepipe:latest", Secret: "edgepipe-remote-cache"}
	for _, img := range []string{"edgepipe", "edgepipe:latest", "registry.example.com:5000/team/edgepipe:v1.2-rc_3",
		"ghcr.io/org/edgepipe@sha256:" + strings.Repeat("ab", 32), "localhost/edgepipe:dev"} {
		o := good
		o.Image = img
		if err := o.Check(); err != nil {
			t.Errorf("image %q: %v", img, err)
		}
	}
	for _, img := range []string{"", "Edgepipe:latest", "edgepipe:latest --privileged", "edgepipe:", "-edgepipe", "edgepipe@sha256:12",
		"reg.example.com/a//b", "edgepipe:" + strings.Repeat("t", 129), "$(touch x)"} {
		o := good
		o.Image = img
		if err := o.Check(); err == nil || !strings.Contains(err.Error(), "is not a container image reference") || !strings.Contains(err.Error(), "registry.example.com/team/edgepipe:v1") {
			t.Errorf("image %q: %v", img, err)
		}
	}
	for _, s := range []string{"", "s", "edgepipe-remote-cache", "team.edgepipe", "a1-b2.c3", strings.Repeat("a", 253)} {
		o := good
		o.Secret = s
		if err := o.Check(); err != nil {
			t.Errorf("secret %q: %v", s, err)
		}
	}
	for _, s := range []string{"Edgepipe", "-edgepipe", "edgepipe-", "edge_pipe", "a..b", "edgepipe cache", strings.Repeat("a", 254), "a/b"} {
		o := good
		o.Secret = s
		if err := o.Check(); err == nil || !strings.Contains(err.Error(), "is not a Kubernetes Secret name") {
			t.Errorf("secret %q: %v", s, err)
		}
	}
	o := good
	o.Secret, o.RemoteCache = "Bad_Secret", "s3::http://127.0.0.1:9/b/p"
	if _, err := Export(o); err == nil {
		t.Error("Export wrote a Workflow with a bad Secret name")
	}
}
