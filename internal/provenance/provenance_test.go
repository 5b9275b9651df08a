package provenance

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/manifest"
)

// artifact writes a small published-style folder with its manifest and
// returns it with the manifest as written.
func artifact(t *testing.T) (string, *manifest.Manifest) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"model-q4_k_m.gguf":         "quantized weights",
		"logs/gguf-quantize_q4.log": "quantize: ok\n",
	}
	for rel, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m := &manifest.Manifest{
		EdgepipeVersion: "0.1.0-test",
		Recipe:          manifest.Recipe{Name: "demo", Path: "recipes/demo.yaml", SHA256: strings.Repeat("a1", 32)},
		Target:          manifest.Target{Name: "laptop-q4km", Device: "x86-laptop", Format: "gguf-q4_k_m", Context: 4096, KVDtype: "f16"},
		Source: manifest.Source{URI: "hf://HuggingFaceTB/SmolLM2-135M", ResolvedRevision: "12fd25f77366fa6b3b4b768ec3050bf629380bac",
			Files: []manifest.File{{Path: "config.json", SHA256: strings.Repeat("b2", 32), Size: 861}}},
		Toolchains: map[string]manifest.Toolchain{
			"llama": {LockDigest: "sha256:" + strings.Repeat("c3", 32) + "+sha256:" + strings.Repeat("d4", 32), Versions: map[string]string{"llama-quantize": "b6000"}},
		},
	}
	if err := manifest.Write(dir, m); err != nil {
		t.Fatal(err)
	}
	return dir, m
}

func statement(t *testing.T, dir string, m *manifest.Manifest) *Statement {
	t.Helper()
	t0 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	st, err := New(dir, m, Run{InvocationID: "urn:uuid:test", StartedOn: t0, FinishedOn: t0.Add(time.Minute)},
		[]ResourceDescriptor{DataFile("eval", "builtin:wikitext-2", strings.Repeat("e5", 32)),
			Tool("llama-quantize", "sha256:"+strings.Repeat("f6", 32), "stand-in 1", "tool-path")})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func ecdsaSigner(t *testing.T) *Signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStatementShape(t *testing.T) {
	dir, m := artifact(t)
	st := statement(t, dir, m)
	if err := Write(dir, st, nil); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, manifest.ProvenanceFile))
	if err != nil {
		t.Fatal(err)
	}
	// Read it back as plain JSON: the field names are the contract.
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	if doc["_type"] != StatementType || doc["predicateType"] != PredicateType {
		t.Fatalf("statement header: %v %v", doc["_type"], doc["predicateType"])
	}
	var names []string
	for _, s := range doc["subject"].([]any) {
		names = append(names, s.(map[string]any)["name"].(string))
	}
	if got := strings.Join(names, ","); got != "logs/gguf-quantize_q4.log,manifest.json,model-q4_k_m.gguf" {
		t.Fatalf("subjects %s", got)
	}
	pred := doc["predicate"].(map[string]any)
	bd := pred["buildDefinition"].(map[string]any)
	if bd["buildType"] != BuildType {
		t.Fatalf("buildType %v", bd["buildType"])
	}
	ext := bd["externalParameters"].(map[string]any)
	if ext["recipe"].(map[string]any)["sha256"] != m.Recipe.SHA256 || ext["target"].(map[string]any)["format"] != "gguf-q4_k_m" {
		t.Fatalf("externalParameters %v", ext)
	}
	internal := bd["internalParameters"].(map[string]any)
	if internal["edgepipeVersion"] != "0.1.0-test" || internal["toolchains"].(map[string]any)["llama"] == nil {
		t.Fatalf("internalParameters %v", internal)
	}
	deps := map[string]map[string]any{}
	for _, d := range bd["resolvedDependencies"].([]any) {
		d := d.(map[string]any)
		deps[d["name"].(string)] = d
	}
	for name, digest := range map[string]string{
		"source":              "12fd25f77366fa6b3b4b768ec3050bf629380bac",
		"source/config.json":  strings.Repeat("b2", 32),
		"toolchain/llama":     strings.Repeat("c3", 32),
		"data/eval":           strings.Repeat("e5", 32),
		"tool/llama-quantize": strings.Repeat("f6", 32),
	} {
		d, ok := deps[name]
		if !ok {
			t.Fatalf("no dependency %s in %v", name, deps)
		}
		var got string
		for _, v := range d["digest"].(map[string]any) {
			got = v.(string)
		}
		if got != digest {
			t.Errorf("dependency %s digest %s, want %s", name, got, digest)
		}
	}
	meta := pred["runDetails"].(map[string]any)["metadata"].(map[string]any)
	if meta["invocationId"] != "urn:uuid:test" || meta["startedOn"] != "2026-05-01T10:00:00Z" || meta["finishedOn"] != "2026-05-01T10:01:00Z" {
		t.Fatalf("metadata %v", meta)
	}

	res, err := Check(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !res.HasProvenance || res.Signed || len(res.Problems) > 0 || res.Subjects != 3 {
		t.Fatalf("check: %+v", res)
	}
	// The manifest's own verification ignores the sidecars.
	if ps, err := manifest.Verify(dir); err != nil || len(ps) > 0 {
		t.Fatalf("manifest.Verify with provenance beside it: %v %v", ps, err)
	}
}

func TestSignedFolderVerifies(t *testing.T) {
	for _, kind := range []string{"ecdsa-p256", "ed25519"} {
		t.Run(kind, func(t *testing.T) {
			dir, m := artifact(t)
			var s *Signer
			if kind == "ed25519" {
				_, k, err := ed25519.GenerateKey(rand.Reader)
				if err != nil {
					t.Fatal(err)
				}
				if s, err = NewSigner(k); err != nil {
					t.Fatal(err)
				}
			} else {
				s = ecdsaSigner(t)
			}
			if err := Write(dir, statement(t, dir, m), s); err != nil {
				t.Fatal(err)
			}
			res, err := Check(dir, s.Public())
			if err != nil {
				t.Fatal(err)
			}
			if !res.SignatureChecked || len(res.Problems) > 0 || res.KeyHint != s.Hint {
				t.Fatalf("check: %+v", res)
			}
			// Without a key the payload is still compared, the signature not.
			res, err = Check(dir, nil)
			if err != nil || !res.Signed || res.SignatureChecked || len(res.Problems) > 0 {
				t.Fatalf("check without key: %+v %v", res, err)
			}
		})
	}
}

func TestCheckFindsTampering(t *testing.T) {
	other := ecdsaSigner(t)
	tests := []struct {
		name   string
		key    func(s *Signer) any
		change func(t *testing.T, dir string)
		want   string
	}{
		{
			name: "statement edited after signing",
			change: func(t *testing.T, dir string) {
				p := filepath.Join(dir, manifest.ProvenanceFile)
				b, _ := os.ReadFile(p)
				b = []byte(strings.Replace(string(b), `"laptop-q4km"`, `"laptop-q8"`, 1))
				must(t, os.WriteFile(p, b, 0o644))
			},
			want: "one of them was changed after signing",
		},
		{
			name:   "wrong key",
			key:    func(*Signer) any { return other.Public() },
			change: func(*testing.T, string) {},
			want:   "it was made by the key with hint",
		},
		{
			name: "signature bytes flipped",
			change: func(t *testing.T, dir string) {
				p := filepath.Join(dir, manifest.SignatureFile)
				var b Bundle
				data, _ := os.ReadFile(p)
				must(t, json.Unmarshal(data, &b))
				b.DSSEEnvelope.Signatures[0].Sig[10] ^= 0xff
				out, _ := json.Marshal(b)
				must(t, os.WriteFile(p, out, 0o644))
			},
			want: "does not verify with this public key",
		},
		{
			name: "manifest changed (subject digest)",
			change: func(t *testing.T, dir string) {
				p := filepath.Join(dir, manifest.FileName)
				b, _ := os.ReadFile(p)
				must(t, os.WriteFile(p, append(b, '\n'), 0o644))
			},
			want: "subject manifest.json has sha256",
		},
		{
			name:   "unsigned but a key is required",
			change: func(t *testing.T, dir string) { must(t, os.Remove(filepath.Join(dir, manifest.SignatureFile))) },
			want:   "the folder is not signed",
		},
		{
			name: "bundle of another kind",
			change: func(t *testing.T, dir string) {
				must(t, os.WriteFile(filepath.Join(dir, manifest.SignatureFile), []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle+json;version=0.1"}`), 0o644))
			},
			want: "is not application/vnd.dev.sigstore.bundle.v0.3+json",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir, m := artifact(t)
			s := ecdsaSigner(t)
			must(t, Write(dir, statement(t, dir, m), s))
			tt.change(t, dir)
			key := any(s.Public())
			if tt.key != nil {
				key = tt.key(s)
			}
			res, err := Check(dir, key)
			if err != nil {
				t.Fatal(err)
			}
			// The signature itself still holds when only the folder changed.
			sigBroken := tt.key != nil || strings.Contains(tt.want, "verify") || strings.Contains(tt.want, "signed") || strings.Contains(tt.want, "v0.3")
			if res.SignatureChecked == sigBroken {
				t.Errorf("SignatureChecked = %v", res.SignatureChecked)
			}
			if !strings.Contains(strings.Join(res.Problems, "\n"), tt.want) {
				t.Fatalf("problems %q, want one containing %q", res.Problems, tt.want)
			}
		})
	}
}

func TestWriteUnsignedRemovesStaleBundle(t *testing.T) {
	dir, m := artifact(t)
	must(t, Write(dir, statement(t, dir, m), ecdsaSigner(t)))
	must(t, Write(dir, statement(t, dir, m), nil))
	if _, err := os.Stat(filepath.Join(dir, manifest.SignatureFile)); !os.IsNotExist(err) {
		t.Fatalf("a stale bundle was left: %v", err)
	}
}

func TestLoadSigner(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	must(t, err)
	pkcs8 := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	sec1der, err := x509.MarshalECPrivateKey(k)
	must(t, err)
	sec1 := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1der}))
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	must(t, err)
	der384, err := x509.MarshalPKCS8PrivateKey(p384)
	must(t, err)

	dir := t.TempDir()
	path := filepath.Join(dir, "key.pem")
	must(t, os.WriteFile(path, []byte(pkcs8), 0o600))
	want, err := KeyHint(&k.PublicKey)
	must(t, err)
	oneLine := strings.ReplaceAll(strings.TrimSpace(pkcs8), "\n", `\n`)
	for name, ref := range map[string]string{"path": path, "inline pkcs8": pkcs8, "inline sec1": sec1, "one line": oneLine} {
		s, err := LoadSigner(ref)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Hint != want {
			t.Fatalf("%s: hint %s, want %s", name, s.Hint, want)
		}
	}

	secretish := "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nc2VjcmV0IGJ5dGVz\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"
	for name, tc := range map[string]struct{ ref, want string }{
		"encrypted": {secretish, "is encrypted"},
		"p384":      {string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der384})), "use P-256"},
		"public":    {string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), "not a private key"},
		"no file":   {filepath.Join(dir, "absent.pem"), "no such file"},
	} {
		_, err := LoadSigner(tc.ref)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: error %v, want %q", name, err, tc.want)
		}
		// Key material must never reach an error message.
		if strings.Contains(err.Error(), "c2VjcmV0") || strings.Contains(err.Error(), "BEGIN") {
			t.Fatalf("%s: the error shows the key: %v", name, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
