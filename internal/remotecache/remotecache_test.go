package remotecache

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/edgepipe/edgepipe/internal/cache"
	"github.com/edgepipe/edgepipe/internal/provenance"
	"github.com/edgepipe/edgepipe/internal/remote"
	"github.com/edgepipe/edgepipe/internal/testseaweed"
)

// useCreds points the AWS SDK at c and nothing else (no shared files, no
// instance metadata).
func useCreds(t *testing.T, c testseaweed.Credentials) {
	t.Setenv("AWS_ACCESS_KEY_ID", c.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", c.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// commitEntry makes a local entry for key with the given files.
func commitEntry(t *testing.T, c *cache.Cache, key string, files map[string]string) *cache.Entry {
	t.Helper()
	tmp, err := c.TempDir(key)
	if err != nil {
		t.Fatal(err)
	}
	for p, body := range files {
		fp := filepath.Join(tmp, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(fp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ent, err := c.Commit(key, tmp, cache.Entry{Kind: "test", StepID: "step:" + key[:4], Tools: map[string]string{"t": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	return ent
}

// stepOf is the step commitEntry records for key.
func stepOf(key string) Step { return Step{ID: "step:" + key[:4], Kind: "test"} }

func openCache(t *testing.T) *cache.Cache {
	c, err := cache.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRoundTripCorruptionAndPermissions(t *testing.T) {
	srv := testseaweed.StartT(t)
	ctx := context.Background()
	url := srv.URL("ci/cache")
	useCreds(t, srv.Writer)
	w, err := Open(ctx, url, Options{Mode: ReadWrite, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	local := openCache(t)
	key := "aaaa1111"
	ent := commitEntry(t, local, key, map[string]string{"model.gguf": "weights weights", "sub/result.json": `{"ok":true}`})
	if err := w.Upload(ctx, ent, true); err != nil {
		t.Fatal(err)
	}
	if got := w.Stats.ObjectsUp.Load(); got != 2 {
		t.Fatalf("uploaded %d objects, want 2", got)
	}
	// A second upload finds the record and sends nothing.
	if err := w.Upload(ctx, ent, true); err != nil || w.Stats.ObjectsUp.Load() != 2 || w.Stats.EntriesKnown.Load() != 1 {
		t.Fatalf("second upload: err %v, objects %d", err, w.Stats.ObjectsUp.Load())
	}

	// A reader with read-only credentials and an empty cache gets the
	// same bytes, committed locally.
	useCreds(t, srv.Reader)
	r, err := Open(ctx, url, Options{Mode: Read})
	if err != nil {
		t.Fatal(err)
	}
	fresh := openCache(t)
	got, err := r.Fetch(ctx, fresh, key, stepOf(key))
	if err != nil || got == nil {
		t.Fatalf("fetch: %v, %v", got, err)
	}
	if got.Tree.SHA256 != ent.Tree.SHA256 || got.Kind != "test" || got.StepID != ent.StepID {
		t.Fatalf("fetched entry %+v, want tree %s", got, ent.Tree.SHA256)
	}
	if e, hit, _ := fresh.Lookup(key); !hit || e.Tree.SHA256 != ent.Tree.SHA256 {
		t.Fatal("the fetched entry is not a local hit")
	}
	b, _ := os.ReadFile(filepath.Join(got.Dir, "model.gguf"))
	if string(b) != "weights weights" {
		t.Fatalf("fetched %q", b)
	}
	// A miss is nil, nil.
	if e, err := r.Fetch(ctx, openCache(t), "bbbb2222", stepOf("bbbb2222")); e != nil || err != nil {
		t.Fatalf("miss: %v %v", e, err)
	}
	// The reader may not write.
	other := commitEntry(t, openCache(t), "cccc3333", map[string]string{"x": "y"})
	rw, _ := Open(ctx, url, Options{Mode: ReadWrite})
	if err := rw.Upload(ctx, other, false); err == nil || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("read-only credentials uploaded: %v", err)
	}

	// A remote object replaced by other bytes of the same size: the
	// fetch is refused and leaves nothing in the local cache.
	useCreds(t, srv.Writer)
	overwrite(t, url, "cas/sha256/"+fileSum(ent, "model.gguf"), "weights WEIGHTS")
	fresh2 := openCache(t)
	got, err = r.Fetch(ctx, fresh2, key, stepOf(key))
	if got != nil || err == nil || !strings.Contains(err.Error(), "model.gguf: its object is corrupt") {
		t.Fatalf("corrupt object: got %v, err %v", got, err)
	}
	if _, hit, _ := fresh2.Lookup(key); hit {
		t.Fatal("a corrupt download became a local entry")
	}
	// A record rewritten to name another key is not trusted either.
	overwrite(t, url, "ac/dddd4444.json", mustRead(t, url, "ac/"+key+".json"))
	if got, err := r.Fetch(ctx, openCache(t), "dddd4444", stepOf("dddd4444")); got != nil || err == nil || !strings.Contains(err.Error(), "not of dddd4444") {
		t.Fatalf("record of another key: %v %v", got, err)
	}
}

func TestRacingWritersFirstRecordWins(t *testing.T) {
	srv := testseaweed.StartT(t)
	ctx := context.Background()
	useCreds(t, srv.Writer)
	url := srv.URL("race")
	key := "eeee5555"
	var wg sync.WaitGroup
	stores := make([]*Store, 4)
	errs := make([]error, 4)
	for i := range stores {
		s, err := Open(ctx, url, Options{Mode: Write})
		if err != nil {
			t.Fatal(err)
		}
		stores[i] = s
		ent := commitEntry(t, openCache(t), key, map[string]string{"out.bin": "same bytes from every writer"})
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = s.Upload(ctx, ent, false) }()
	}
	wg.Wait()
	won := int64(0)
	for i, s := range stores {
		if errs[i] != nil {
			t.Fatalf("writer %d: %v", i, errs[i])
		}
		won += s.Stats.RecordsUp.Load()
	}
	if won != 1 {
		t.Fatalf("%d writers wrote the record, want exactly 1 (If-None-Match: *)", won)
	}
	rd, _ := Open(ctx, url, Options{Mode: Read})
	if got, err := rd.Fetch(ctx, openCache(t), key, stepOf(key)); err != nil || got == nil {
		t.Fatalf("fetch after the race: %v %v", got, err)
	}
	// The store itself refuses a second record: SeaweedFS honours
	// If-None-Match: * (the check before the upload is only a shortcut).
	err := rd.be.put(ctx, recordName(key), bytes.NewReader([]byte("x")), 1, strings.Repeat("0", 64), true)
	if !errors.Is(err, errExists) {
		t.Fatalf("a second conditional record write: %v, want errExists", err)
	}
}

func TestSignedRecords(t *testing.T) {
	srv := testseaweed.StartT(t)
	ctx := context.Background()
	useCreds(t, srv.Writer)
	url := srv.URL("signed")
	signer, pub := newSigner(t)
	_, otherPub := newSigner(t)
	plain, _ := Open(ctx, url, Options{Mode: ReadWrite})
	signed, _ := Open(ctx, url, Options{Mode: ReadWrite, Signer: signer})
	if err := plain.Upload(ctx, commitEntry(t, openCache(t), "ffff0001", map[string]string{"a": "unsigned"}), false); err != nil {
		t.Fatal(err)
	}
	if err := signed.Upload(ctx, commitEntry(t, openCache(t), "ffff0002", map[string]string{"a": "signed"}), false); err != nil {
		t.Fatal(err)
	}
	strict, _ := Open(ctx, url, Options{Mode: Read, VerifyKey: pub})
	if e, err := strict.Fetch(ctx, openCache(t), "ffff0001", stepOf("ffff0001")); e != nil || err == nil || !strings.Contains(err.Error(), "unsigned") {
		t.Fatalf("unsigned record under a verify key: %v %v", e, err)
	}
	if e, err := strict.Fetch(ctx, openCache(t), "ffff0002", stepOf("ffff0002")); e == nil || err != nil {
		t.Fatalf("signed record: %v %v", e, err)
	}
	wrongKey, _ := Open(ctx, url, Options{Mode: Read, VerifyKey: otherPub})
	if e, err := wrongKey.Fetch(ctx, openCache(t), "ffff0002", stepOf("ffff0002")); e != nil || err == nil {
		t.Fatalf("record signed by another key: %v %v", e, err)
	}
}

func TestParseMode(t *testing.T) {
	for in, want := range map[string]Mode{"": ReadWrite, "read": Read, "write": Write, "readwrite": ReadWrite} {
		if got, err := ParseMode(in); err != nil || got != want {
			t.Errorf("ParseMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseMode("rw"); err == nil {
		t.Error("ParseMode(rw) accepted")
	}
	if _, err := Open(context.Background(), "s3::http://u:p@127.0.0.1:1/b/p", Options{}); err == nil || strings.Contains(err.Error(), "u:p") {
		t.Errorf("credentials in the URL: %v", err)
	}
}

func TestDecodeRefusesBadRecords(t *testing.T) {
	s := &Store{}
	step := Step{ID: "gguf-quantize:q8_0", Kind: "gguf-quantize"}
	head := `{"key":"k1","kind":"gguf-quantize","step_id":"gguf-quantize:q8_0",`
	good := head + `"tree":{"sha256":"x","files":[{"path":"x","sha256":"` + strings.Repeat("a", 64) + `","size":1}],"size":1}}`
	env, _ := jsonEnvelope(good)
	if _, err := s.decode("k1", step, env); err != nil {
		t.Fatalf("a good record: %v", err)
	}
	for name, payload := range map[string]string{
		"escape":   head + `"tree":{"sha256":"x","files":[{"path":"../x","sha256":"` + strings.Repeat("a", 64) + `","size":1}],"size":1}}`,
		"abs":      head + `"tree":{"sha256":"x","files":[{"path":"/etc/x","sha256":"` + strings.Repeat("a", 64) + `","size":1}],"size":1}}`,
		"size":     head + `"tree":{"sha256":"x","files":[{"path":"x","sha256":"` + strings.Repeat("a", 64) + `","size":1}],"size":5}}`,
		"dirfile":  head + `"tree":{"sha256":"x","files":[{"path":"d","sha256":"` + strings.Repeat("a", 64) + `","size":1},{"path":"d/x","sha256":"` + strings.Repeat("b", 64) + `","size":1}],"size":2}}`,
		"digest":   head + `"tree":{"sha256":"x","files":[{"path":"x","sha256":"../../etc","size":1}],"size":1}}`,
		"overflow": head + `"tree":{"sha256":"x","files":[{"path":"x","sha256":"` + strings.Repeat("a", 64) + `","size":9223372036854775807},{"path":"y","sha256":"` + strings.Repeat("a", 64) + `","size":9223372036854775807}],"size":-2}}`,
	} {
		env, _ := jsonEnvelope(payload)
		if _, err := s.decode("k1", step, env); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func jsonEnvelope(payload string) ([]byte, error) {
	return []byte(`{"payloadType":"` + RecordType + `","payload":"` + b64(payload) + `","signatures":[]}`), nil
}

func newSigner(t *testing.T) (*provenance.Signer, any) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := provenance.NewSigner(k)
	if err != nil {
		t.Fatal(err)
	}
	return s, s.Public()
}

func fileSum(e *cache.Entry, rel string) string {
	for _, f := range e.Tree.Files {
		if f.Path == rel {
			return f.SHA256
		}
	}
	return ""
}

func bucket(t *testing.T, url string) *remote.Bucket {
	d, err := remote.Parse(url, false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.OpenS3(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func overwrite(t *testing.T, url, name, body string) {
	b := bucket(t, url)
	_, err := b.Client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &b.Name, Key: aws.String(b.Prefix + "/" + name), Body: bytes.NewReader([]byte(body))})
	if err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, url, name string) string {
	b := bucket(t, url)
	out, err := b.Client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &b.Name, Key: aws.String(b.Prefix + "/" + name)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	raw, err := readAll(out.Body, recordLimit)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
