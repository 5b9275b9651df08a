package cli

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/edge"
	"github.com/edgepipe/edgepipe/internal/lock"
	"github.com/edgepipe/edgepipe/internal/lockfile"
	"github.com/edgepipe/edgepipe/internal/plan"
	"github.com/edgepipe/edgepipe/internal/progress"
	"github.com/edgepipe/edgepipe/internal/provenance"
	"github.com/edgepipe/edgepipe/internal/recipe"
	"github.com/edgepipe/edgepipe/internal/reproduce"
)

func TestPickFlagsTask(t *testing.T) {
	for _, tc := range []struct {
		name   string
		pf     pickFlags
		vision bool
		want   string
	}{
		{"llm", pickFlags{task: "llm", context: edge.DefaultContext}, false, ""},
		{"llm with --params", pickFlags{task: "llm", params: "2M", context: edge.DefaultContext}, false, "--params is for --task vision"},
		{"vision", pickFlags{task: "vision", params: "2M", context: edge.DefaultContext}, true, ""},
		{"vision with --model", pickFlags{task: "vision", model: "hf://o/n", context: edge.DefaultContext}, true, "--task vision takes --platform and --params only"},
		{"vision with --context", pickFlags{task: "vision", context: 8192}, true, "--task vision takes"},
		{"vision with --min-tok-s", pickFlags{task: "vision", minTokS: 5, context: edge.DefaultContext}, true, "--task vision takes"},
		{"vision with --format", pickFlags{task: "vision", format: "gguf-q8_0", context: edge.DefaultContext}, true, "--task vision takes"},
		{"vision with --max-memory", pickFlags{task: "vision", maxMemGB: 4, context: edge.DefaultContext}, true, "--task vision takes"},
		{"audio", pickFlags{task: "audio"}, false, `--task "audio": use llm or vision`},
	} {
		vision, err := tc.pf.vision()
		code, msg := usageCode(err)
		if vision != tc.vision || tc.want == "" && err != nil || tc.want != "" && (code != ExitUsage || !strings.Contains(msg, tc.want)) {
			t.Errorf("%s: vision %v, %v; want %v, %q", tc.name, vision, err, tc.vision, tc.want)
		}
	}
}

func TestPickRefusals(t *testing.T) {
	for _, tc := range []struct {
		pf   pickFlags
		want string
	}{
		{pickFlags{model: "builtin:smollm2-135m", context: 4096}, "name a --platform (" + strings.Join(edge.Platforms(), ", ") + ") and a --model"},
		{pickFlags{platform: "laptop", context: 4096}, "and a --model"},
		{pickFlags{platform: "laptop", model: "builtin:smollm2-135m"}, "--context must be positive"},
		{pickFlags{platform: "laptop", model: "builtin:smollm2-135m", context: 4096, maxMemGB: -1}, "--max-memory and --min-tok-s not negative"},
		{pickFlags{platform: "laptop", model: "builtin:smollm2-135m", context: 4096, minTokS: -1}, "not negative"},
		{pickFlags{platform: "toaster", model: "builtin:smollm2-135m", context: 4096}, "toaster"},
		{pickFlags{platform: "laptop", model: "builtin:smollm2-135m", context: 4096, format: "gguf-q3_nope"}, "gguf-q3_nope"},
	} {
		_, err := tc.pf.pick()
		if code, msg := usageCode(err); code != ExitUsage || !strings.Contains(msg, tc.want) {
			t.Errorf("%+v: %d %q, want usage %q", tc.pf, code, msg, tc.want)
		}
	}
	for _, tc := range []struct {
		pf   pickFlags
		want string
	}{
		{pickFlags{task: "vision", platform: "laptop"}, "name a --platform"},
		{pickFlags{task: "vision", platform: "laptop", params: "lots"}, "lots"},
		{pickFlags{task: "vision", platform: "toaster", params: "2M"}, "toaster"},
	} {
		_, err := tc.pf.pickVision()
		if code, msg := usageCode(err); code != ExitUsage || !strings.Contains(msg, tc.want) {
			t.Errorf("%+v: %d %q, want usage %q", tc.pf, code, msg, tc.want)
		}
	}
	if pk, err := (&pickFlags{platform: "laptop", model: "builtin:smollm2-135m", context: 4096}).pick(); err != nil || pk.Format == "" {
		t.Errorf("pick: %+v, %v", pk, err)
	}
}

// The pick's command line says only what differs from the defaults, each
// word quoted for a shell when it must be.
func TestCommandLine(t *testing.T) {
	pf := pickFlags{platform: "ios", model: "./my model", context: edge.DefaultContext}
	if got := pf.commandLine("init"); got != "edgepipe init --platform ios --model './my model'" {
		t.Errorf("defaults: %s", got)
	}
	pf = pickFlags{platform: "laptop", model: "hf://org/name@main", context: 8192, maxMemGB: 1.5, minTokS: 20, format: "gguf-q8_0"}
	if got := pf.commandLine("pick"); got != "edgepipe pick --platform laptop --model hf://org/name@main --context 8192 --max-memory 1.5 --min-tok-s 20 --format gguf-q8_0" {
		t.Errorf("every flag: %s", got)
	}
	for in, want := range map[string]string{
		"builtin:smollm2-135m": "builtin:smollm2-135m",
		"a b":                  "'a b'",
		"it's":                 `'it'\''s'`,
		"$HOME":                "'$HOME'",
		"x;rm -rf /":           "'x;rm -rf /'",
		"":                     "",
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestDiagText(t *testing.T) {
	d := recipe.Diagnostics{{Msg: "format x has no pipeline", Hint: "use gguf-q4_k_m"}, {Msg: "second"}}
	if got := diagText(fmt.Errorf("load: %w", d)); got != "format x has no pipeline (use gguf-q4_k_m); second" {
		t.Errorf("diagText = %q", got)
	}
	if got := diagText(errors.New("plain")); got != "plain" {
		t.Errorf("diagText = %q", got)
	}
}

// init never replaces a file unless told to, and never writes through a
// path that is not a regular file.
func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "sub", "r.yaml")
	if err := writeNew(p, []byte("one"), false); err != nil {
		t.Fatal(err)
	}
	code, msg := usageCode(writeNew(p, []byte("two"), false))
	if code != ExitUsage || !strings.Contains(msg, "already exists; pass --force to overwrite it") {
		t.Errorf("existing file: %d %q", code, msg)
	}
	if b, _ := os.ReadFile(p); string(b) != "one" {
		t.Errorf("the refused write changed the file: %q", b)
	}
	if err := writeNew(p, []byte("three"), true); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "three" {
		t.Errorf("--force wrote %q", b)
	}
	if code, msg := usageCode(writeNew(dir, []byte("x"), true)); code != ExitUsage || !strings.Contains(msg, "-o: "+dir+" is a folder") {
		t.Errorf("a folder: %d %q", code, msg)
	}
}

func TestSmallHelpers(t *testing.T) {
	if got := dedupe([]string{"a", "b", "a", "c", "b"}); strings.Join(got, " ") != "a b c" {
		t.Errorf("dedupe = %v", got)
	}
	for n, want := range map[int]string{0: "0 targets", 1: "1 target", 2: "2 targets"} {
		if got := plural(n, "target"); got != want {
			t.Errorf("plural(%d) = %q", n, got)
		}
	}
	if got := noteLine(false, "kept /tmp/x"); got != "note: kept /tmp/x" {
		t.Errorf("noteLine = %q", got)
	}
	var ev map[string]string
	if err := json.Unmarshal([]byte(noteLine(true, `a "quoted" note`)), &ev); err != nil || ev["event"] != "note" || ev["message"] != `a "quoted" note` {
		t.Errorf("noteLine --json: %v, %v", ev, err)
	}
	inner := errors.New("the recipe's sha256 differs")
	if code, msg := usageCode(refusal(fmt.Errorf("x: %w", &reproduce.RefusedError{Err: inner}))); code != ExitUsage || msg != inner.Error() {
		t.Errorf("refusal: %d %q", code, msg)
	}
	other := errors.New("disk full")
	if refusal(other) != other {
		t.Error("refusal changed an error that is not one")
	}
	if code, _ := usageCode(runFailure(context.Background(), other)); code != ExitStepFailed {
		t.Errorf("runFailure: exit %d", code)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := runFailure(ctx, other); !errors.Is(err, context.Canceled) {
		t.Errorf("runFailure after an interruption: %v", err)
	}
	l := &lockfile.Lock{Source: lockfile.Source{URI: "hf://o/n", Revision: "abc", Files: make([]lockfile.File, 3)},
		Data: map[string]string{"eval": "x"}, Tools: map[string]lockfile.Tool{"a": {}, "b": {}}, Toolchains: map[string]lockfile.Toolchain{"llama": {}}}
	if got := lockSummary(l); got != "source hf://o/n at abc, 3 file(s); 1 data file(s); 2 tool(s) from 1 toolchain(s)" {
		t.Errorf("lockSummary = %q", got)
	}
	l.Source.Revision = ""
	if got := lockSummary(l); !strings.HasPrefix(got, "source hf://o/n, 3 file(s)") {
		t.Errorf("lockSummary = %q", got)
	}
}

func TestSelectTargetsIsUsage(t *testing.T) {
	pl := testPlan(t, twoTargets)
	sel, err := selectTargets(pl, []string{"laptop-q8"})
	if err != nil || len(sel.Recipe.Targets) != 1 || sel.Recipe.Targets[0].Name != "laptop-q8" {
		t.Fatalf("selected %v, %v", sel, err)
	}
	if all, err := selectTargets(pl, nil); err != nil || all != pl {
		t.Errorf("no patterns: %v", err)
	}
	for _, pats := range [][]string{{"phone"}, {"laptop-["}} {
		if code, _ := usageCode(func() error { _, err := selectTargets(pl, pats); return err }()); code != ExitUsage {
			t.Errorf("%v: exit %d", pats, code)
		}
	}
}

// A step run that could not share its output is refused up front;
// publishing needs no write access.
func TestCheckSharing(t *testing.T) {
	convert := &plan.Step{ID: "convert", Kind: "gguf-convert"}
	pub := &plan.Step{ID: "publish:q8", Kind: "publish"}
	for _, tc := range []struct {
		url, mode string
		step      *plan.Step
		refused   bool
	}{
		{"", "read", convert, false},
		{"s3::https://h/b", "read", convert, true},
		{"s3::https://h/b", "read", pub, false},
		{"s3::https://h/b", "write", convert, false},
		{"s3::https://h/b", "", convert, false},
		{"s3::https://h/b", "readwrite", convert, false},
	} {
		var c common
		c.remote.URL, c.remote.Mode = tc.url, tc.mode
		code, msg := usageCode(c.checkSharing(tc.step))
		if tc.refused != (code == ExitUsage) || tc.refused && !strings.Contains(msg, "give --remote-cache-mode readwrite") {
			t.Errorf("%+v: %d %q", tc, code, msg)
		}
	}
}

func pemKeys(t *testing.T) (priv, pub string) {
	t.Helper()
	pk, sk, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	skDER, err := x509.MarshalPKCS8PrivateKey(sk)
	if err != nil {
		t.Fatal(err)
	}
	pkDER, err := x509.MarshalPKIXPublicKey(pk)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: skDER})), string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkDER}))
}

// --sign-key wins over EDGEPIPE_SIGNING_KEY; neither is no signing; a key
// that cannot be used is a usage error naming where it came from.
func TestSigner(t *testing.T) {
	priv, pub := pemKeys(t)
	dir := t.TempDir()
	keyFile := writeRecipe(t, dir, "key.pem", priv)
	pubFile := writeRecipe(t, dir, "pub.pem", pub)
	env := func(v string) *Env {
		return &Env{Getenv: func(k string) string {
			if k == provenance.SigningKeyEnv {
				return v
			}
			return ""
		}}
	}
	if s, err := (&common{}).signer(env("  ")); s != nil || err != nil {
		t.Errorf("no key: %v, %v", s, err)
	}
	if s, err := (&common{}).signer(env(priv)); s == nil || err != nil {
		t.Errorf("PEM in the environment: %v", err)
	}
	if s, err := (&common{signKey: keyFile}).signer(env("/no/such/key")); s == nil || err != nil {
		t.Errorf("--sign-key over the environment: %v", err)
	}
	code, msg := usageCode(func() error { _, err := (&common{}).signer(env("/no/such/key")); return err }())
	if code != ExitUsage || !strings.HasPrefix(msg, provenance.SigningKeyEnv+": ") {
		t.Errorf("bad key from the environment: %d %q", code, msg)
	}
	code, msg = usageCode(func() error { _, err := (&common{signKey: pubFile}).signer(env("")); return err }())
	if code != ExitUsage || !strings.HasPrefix(msg, "--sign-key: ") {
		t.Errorf("a public key to sign with: %d %q", code, msg)
	}
	if k, err := loadPublicKey(pubFile); err != nil || k == nil {
		t.Errorf("loadPublicKey: %v", err)
	}
	for path, want := range map[string]string{filepath.Join(dir, "none.pem"): "--key: ", keyFile: "--key " + keyFile + ": "} {
		code, msg := usageCode(func() error { _, err := loadPublicKey(path); return err }())
		if code != ExitUsage || !strings.HasPrefix(msg, want) {
			t.Errorf("loadPublicKey(%s): %d %q", path, code, msg)
		}
	}
}

func TestProvenanceSummary(t *testing.T) {
	for _, tc := range []struct {
		r    provenance.Result
		want string
	}{
		{provenance.Result{}, "no provenance (published by an older edgepipe)"},
		{provenance.Result{HasProvenance: true, Subjects: 4}, "provenance matches (4 subjects); unsigned"},
		{provenance.Result{HasProvenance: true, Subjects: 4, Signed: true, KeyHint: "abc"}, "provenance matches (4 subjects); signed by key abc, signature not checked: pass --key PUB.pem"},
		{provenance.Result{HasProvenance: true, Subjects: 4, Signed: true, KeyHint: "abc", SignatureChecked: true}, "provenance matches (4 subjects); signature verified (key abc)"},
	} {
		if got := provenanceSummary(&tc.r); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.r, got, tc.want)
		}
	}
}

func reporter(asJSON bool) (*progress.Reporter, *bytes.Buffer, *bytes.Buffer) {
	var out, errb bytes.Buffer
	rep := progress.New(progress.Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}, asJSON, 1)
	return rep, &out, &errb
}

// What a run says about its lock: a line for people, an event for --json.
func TestRunLockReport(t *testing.T) {
	rl := &runLock{&lock.State{Path: "r.yaml.lock", Recipe: "r.yaml", Pinned: "abc123"}}
	changes := []lockfile.Change{{Field: "source.revision", Locked: "a", Now: "b"}}
	rep, out, errb := reporter(true)
	rl.report(rep, "updated", changes, "resolved again")
	rep.Done()
	var ev lockEvent
	line := strings.TrimSpace(out.String() + errb.String())
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatalf("%v: %q", err, line)
	}
	if ev.Event != "lock" || ev.Path != "r.yaml.lock" || ev.Status != "updated" || len(ev.Changes) != 1 || ev.Message != "resolved again; source pinned to abc123" {
		t.Errorf("event %+v", ev)
	}
	rep, out, errb = reporter(false)
	rl.report(rep, "matches", nil, "")
	rep.Done()
	if text := out.String() + errb.String(); !strings.HasSuffix(text, " lock     r.yaml.lock matches: source pinned to abc123\n") {
		t.Errorf("text %q", text)
	}
	// An update (never pinned: it resolves afresh) lists what changed.
	rl.Pinned = ""
	rep, out, errb = reporter(false)
	rl.report(rep, "updated", changes, "")
	rep.Done()
	if text := out.String() + errb.String(); !strings.HasSuffix(text, " lock     r.yaml.lock updated\n  source.revision: locked a, now b\n") {
		t.Errorf("text %q", text)
	}
}

// A run its lock stops says so on --json and in the job summary.
func TestRunLockFail(t *testing.T) {
	summary := filepath.Join(t.TempDir(), "summary.md")
	env := &Env{Getenv: func(k string) string {
		if k == "GITHUB_STEP_SUMMARY" {
			return summary
		}
		return ""
	}}
	rl := &runLock{&lock.State{Path: "r.yaml.lock", Recipe: "r.yaml", Have: &lockfile.Lock{}}}
	rep, out, errb := reporter(true)
	failure := &ExitError{Code: ExitLockMismatch, Err: errors.New("the lock differs")}
	err := rl.fail(env, rep, failure, []lockfile.Change{{Field: "tools.llama-quantize", Locked: "sha256:a|b", Now: ""}})
	rep.Done()
	if err != failure {
		t.Errorf("err = %v", err)
	}
	if line := out.String() + errb.String(); !strings.Contains(line, `"status":"differs"`) || !strings.Contains(line, `"field":"tools.llama-quantize"`) {
		t.Errorf("event %q", line)
	}
	md := string(mustReadFile(t, summary))
	for _, w := range []string{"## edgepipe: r.yaml.lock does not match", "Nothing was run (exit 4)", "`edgepipe run --update-lock r.yaml`", "| `tools.llama-quantize` | `sha256:a\\|b` | `(absent)` |"} {
		if !strings.Contains(md, w) {
			t.Errorf("summary lacks %q:\n%s", w, md)
		}
	}
	// No lock at all: "missing", and no table without changes.
	rl = &runLock{&lock.State{Path: "r.yaml.lock", Recipe: "r.yaml"}}
	rep, out, errb = reporter(true)
	_ = rl.fail(&Env{Getenv: func(string) string { return "" }}, rep, failure, nil)
	rep.Done()
	if line := out.String() + errb.String(); !strings.Contains(line, `"status":"missing"`) {
		t.Errorf("event %q", line)
	}
	// A summary that cannot be written is said too.
	env = &Env{Getenv: func(string) string { return t.TempDir() }}
	rep, _, _ = reporter(false)
	err = rl.fail(env, rep, failure, []lockfile.Change{{Field: "f"}})
	if code, msg := usageCode(err); code != ExitLockMismatch || !strings.Contains(msg, "the lock differs") || !strings.Contains(msg, "append the job summary to $GITHUB_STEP_SUMMARY") {
		t.Errorf("unwritable summary: %d %q", code, msg)
	}
}

func mustReadFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
