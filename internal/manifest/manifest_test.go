package manifest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite testdata/manifest.golden.json")

func ptr[T any](v T) *T { return &v }

// fullManifest sets every field, so the golden file shows the whole shape.
func fullManifest() *Manifest {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	return &Manifest{
		ManifestVersion: Version,
		EdgepipeVersion: "0.1.0",
		Created:         t0.Add(2 * time.Minute),
		Recipe:          Recipe{Name: "smollm2-laptop", Path: "recipes/smollm2.yaml", SHA256: strings.Repeat("a1", 32)},
		Target:          Target{Name: "laptop-q4km", Device: "apple-m3-max", Format: "gguf-q4_k_m", Context: 8192, KVDtype: "f16"},
		Source: Source{
			URI:              "hf://HuggingFaceTB/SmolLM2-135M-Instruct@main",
			ResolvedRevision: "12fd25f77366fa6b3b4b768ec3050bf629380bac",
			Files: []File{
				{Path: "config.json", SHA256: strings.Repeat("b2", 32), Size: 861},
				{Path: "model.safetensors", SHA256: strings.Repeat("c3", 32), Size: 269060552},
			},
		},
		Files: []File{
			{Path: "logs/convert.log", SHA256: strings.Repeat("d4", 32), Size: 5120},
			{Path: "model.gguf", SHA256: strings.Repeat("e5", 32), Size: 105454848},
		},
		Steps: []Step{
			{
				ID: "download", Kind: "download", KindVersion: 1,
				Argv:     [][]string{},
				CacheKey: strings.Repeat("0f", 32), CacheHit: true,
				Note: "cached from an earlier run",
			},
			{
				ID: "convert-f16", Kind: "gguf-convert", KindVersion: 2,
				Argv: [][]string{
					{"python3", "convert_hf_to_gguf.py", "--outtype", "f16", "--outfile", "model-f16.gguf", "src"},
					{"llama-quantize", "model-f16.gguf", "model.gguf", "Q4_K_M"},
				},
				ToolVersions: map[string]string{"llama-quantize": "b6000", "gguf": "0.17.1"},
				Toolchain:    "llama-cpp",
				CacheKey:     strings.Repeat("1e", 32),
				Started:      t0,
				Finished:     t0.Add(90*time.Second + 250*time.Millisecond),
				DurationS:    90.25,
				StandIn:      true,
				Note:         "stand-in <tool> for tests",
			},
		},
		Metrics: Metrics{
			Perplexity: &Perplexity{
				Baseline: 10, Converted: 10.25, Delta: 0.25, Ratio: 1.025, Verdict: VerdictExcellent,
				WarnDelta: 0.5, MaxDelta: 2, EvalTokens: 40960, Context: 512, Chunks: 80, Backend: "llama.cpp",
			},
			KLDivergence:      ptr(0.0123),
			Top1Agreement:     ptr(0.975),
			SizeBytes:         ptr(int64(105454848)),
			DecodeCeilingTokS: ptr(3814.5),
			MemoryFit: &MemoryFit{
				Device: "apple-m3-max", WeightsBytes: 105454848, KVCacheBytes: 188743680, OverheadBytes: 536870912,
				TotalBytes: 831069440, AvailableBytes: 103079215104, Context: 8192, KVDtype: "f16", Fits: true,
			},
			Bench: &Bench{
				Backend: "llama.cpp", WarmupRuns: 10, TimedRuns: 50, PromptTokens: 128, DecodeTokens: 128,
				TokenP50MS: 4.5, TokenP95MS: 5.25, TokenP99MS: 6, FirstTokenMS: 35.5, PromptTokS: 2100, DecodeTokS: 220,
				HostBandwidthGBs: ptr(18.5), HostCeilingTokS: ptr(175.25),
			},
			Checks: []Check{
				{Name: "gguf-header", Passed: true},
				{Name: "perplexity-gate", Passed: true, Detail: "delta 0.25 < warn 0.5"},
			},
		},
		Budgets: &Budgets{
			MinTokensPerS:   &Budget{Limit: 20, Predicted: ptr(3814.5), Actual: ptr(220.0)},
			MaxMemoryGB:     &Budget{Limit: 4, Predicted: ptr(0.83)},
			MaxFirstTokenMS: &Budget{Limit: 500},
		},
		Toolchains: map[string]Toolchain{
			"llama-cpp": {LockDigest: strings.Repeat("2d", 32), Versions: map[string]string{"llama.cpp": "b6000", "cmake": "3.31.6"}},
		},
	}
}

func TestGoldenJSON(t *testing.T) {
	m := fullManifest()
	if err := m.Validate(); err != nil {
		t.Fatalf("the golden manifest is invalid: %v", err)
	}
	got, err := marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "manifest.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestGoldenJSON -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("manifest JSON differs from %s (if the change is intended, rerun with -update and review the diff):\n%s", golden, got)
	}
}

func TestMinimalJSONOmitsUnmeasured(t *testing.T) {
	m := &Manifest{
		ManifestVersion: Version, EdgepipeVersion: "dev", Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Recipe: Recipe{Name: "r"}, Target: Target{Name: "t", Device: "x86-laptop", Format: "gguf-q8_0"},
		Source: Source{URI: "builtin:smollm2-135m"},
		Steps:  []Step{{ID: "convert", Kind: "gguf-convert", KindVersion: 1, Argv: [][]string{{"tool"}}, CacheKey: "k", CacheHit: true}},
	}
	data, err := marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"perplexity", "kl_divergence", "top1_agreement", "size_bytes", "decode_ceiling_tok_s",
		"memory_fit", "bench", "checks", "budgets", "toolchains", "started", "finished", "duration_s", "resolved_revision"} {
		if bytes.Contains(data, []byte(`"`+absent+`"`)) {
			t.Errorf("unmeasured %q is in the JSON:\n%s", absent, data)
		}
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{
		"model.gguf":       "weights",
		"logs/convert.log": "converted\n",
		"logs/deep/x.txt":  "x",
	})
	m := fullManifest()
	m.Created = time.Time{}
	if err := Write(dir, m); err != nil {
		t.Fatal(err)
	}
	if m.Created.IsZero() {
		t.Error("Write left created unset")
	}
	wantFiles := []File{
		{Path: "logs/convert.log", SHA256: "20d136c1ad5e73c08e18ae3d28511b8b03c277d15f3191e9b2e5018cbe1f90c9", Size: 10},
		{Path: "logs/deep/x.txt", SHA256: "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881", Size: 1},
		{Path: "model.gguf", SHA256: "9a129038d9a00aed0cf6a7ea059ca50a813449061ab87848cf1a13eafdf33b2c", Size: 7},
	}
	if !reflect.DeepEqual(m.Files, wantFiles) {
		t.Errorf("files = %+v\nwant %+v", m.Files, wantFiles)
	}
	got, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		a, _ := marshal(got)
		b, _ := marshal(m)
		t.Errorf("read back differs:\n%s\nwant\n%s", a, b)
	}
	// Writing again must not list the manifest itself.
	if err := Write(dir, m); err != nil {
		t.Fatal(err)
	}
	if len(m.Files) != 3 {
		t.Errorf("second Write lists %d files, want 3: %+v", len(m.Files), m.Files)
	}
}

func TestWriteUsesUTC(t *testing.T) {
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"model.gguf": "w"})
	m := fullManifest()
	zone := time.FixedZone("UTC+5", 5*3600)
	m.Created = time.Date(2026, 3, 1, 17, 0, 0, 0, zone)
	m.Steps[1].Started = time.Date(2026, 3, 1, 17, 1, 0, 0, zone)
	m.Steps[1].Finished = m.Steps[1].Started.Add(time.Second)
	must(t, Write(dir, m))
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	must(t, err)
	for _, want := range []string{`"created": "2026-03-01T12:00:00Z"`, `"started": "2026-03-01T12:01:00Z"`, `"finished": "2026-03-01T12:01:01Z"`} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("manifest lacks %s:\n%s", want, data)
		}
	}
}

func TestWriteRefuses(t *testing.T) {
	tests := []struct {
		name   string
		modify func(m *Manifest)
		link   bool
		want   string
	}{
		{name: "symlink in folder", link: true, want: "plain files only"},
		{name: "no recipe name", modify: func(m *Manifest) { m.Recipe.Name = "" }, want: "recipe.name is empty"},
		{name: "bad verdict", modify: func(m *Manifest) { m.Metrics.Perplexity.Verdict = "great" }, want: "not one of excellent, ok, fail"},
		{name: "delta not derived", modify: func(m *Manifest) { m.Metrics.Perplexity.Delta = 0 }, want: "delta 0 is not converted - baseline"},
		{name: "unknown toolchain", modify: func(m *Manifest) { m.Steps[1].Toolchain = "onnx" }, want: `names toolchain "onnx"`},
		{name: "duplicate step", modify: func(m *Manifest) { m.Steps[1].ID = "download" }, want: "appears twice"},
		{name: "bad source path", modify: func(m *Manifest) { m.Source.Files[0].Path = "../config.json" }, want: "not a relative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTree(t, dir, map[string]string{"model.gguf": "weights"})
			if tt.link {
				if err := os.Symlink("/etc/hostname", filepath.Join(dir, "link")); err != nil {
					t.Fatal(err)
				}
			}
			m := fullManifest()
			if tt.modify != nil {
				tt.modify(m)
			}
			err := Write(dir, m)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Write error = %v, want one containing %q", err, tt.want)
			}
			if _, err := os.Stat(filepath.Join(dir, FileName)); err == nil {
				t.Error("a refused manifest was written")
			}
		})
	}
}

func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestValidateArtifactListed(t *testing.T) {
	m := &Manifest{ManifestVersion: Version, EdgepipeVersion: "dev", Recipe: Recipe{Name: "r"},
		Target: Target{Name: "t", Artifact: "x.mlpackage"},
		Files:  []File{{Path: "x.mlpackage/Manifest.json", SHA256: strings.Repeat("a", 64), Size: 2}}}
	if err := m.Validate(); err != nil {
		t.Fatalf("a package's files list it: %v", err)
	}
	m.Target.Artifact = "missing.gguf"
	if err := m.Validate(); err == nil || !strings.Contains(err.Error(), "target.artifact") {
		t.Fatalf("an artifact not among files: %v", err)
	}
}
