package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"testing"

	"github.com/edgepipe/edgepipe/internal/manifest"
	"github.com/edgepipe/edgepipe/internal/publish"
	"github.com/edgepipe/edgepipe/steps"
)

const publishRecipe = `edgepipe: 1
name: et
model: {source: ./model}
data: {eval: eval.txt}
targets:
  t1:
    device: x86-laptop
    format: enginetest-fmt
    publish:
      - {url: "oci://127.0.0.1:5000/models/et:t1", insecure: true}
      - "oci://127.0.0.1:5001/mirror/et:t1"
  t2:
    device: x86-laptop
    format: enginetest-fmt
    publish: ["oci://127.0.0.1:5000/models/et:t2"]
steps:
  extra: {uses: enginetest, needs: [convert], with: {content: x, tools: [helper]}}
  publish:t1: {needs: [extra]}
  other: {uses: enginetest, with: {content: o, tools: [unrelated]}}
`

func stepIDs(outs []*steps.Output) []string {
	var ids []string
	for _, o := range outs {
		ids = append(ids, o.StepID)
	}
	return ids
}

// The publish request carries the plan step's params as they are, the
// target's remotes from the recipe, the recipe's path and digest, the
// model and its checks (a need the recipe added included), and every step
// upstream of the target, in plan order, each with the tools it ran.
func TestPublishRequest(t *testing.T) {
	f := newFixture(t, publishRecipe)
	e := f.engine(Options{Jobs: 1, NoPush: true})
	if _, err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	pub, _ := e.plan.Step("publish:t1")
	req, err := e.publishRequest(context.Background(), pub)
	if err != nil {
		t.Fatal(err)
	}
	if req.StepID != "publish:t1" || req.Params != pub.Params.(*publish.Params) {
		t.Errorf("step %s, params %+v: want publish:t1's own params", req.StepID, req.Params)
	}
	if req.Params.Target != "t1" || req.Params.Format != testFormat || req.Params.Recipe != "et" {
		t.Errorf("params %+v", req.Params)
	}
	wantRemotes := []publish.Remote{{URL: "oci://127.0.0.1:5000/models/et:t1", Insecure: true}, {URL: "oci://127.0.0.1:5001/mirror/et:t1"}}
	if !slices.Equal(req.Remotes, wantRemotes) {
		t.Errorf("remotes %+v, want %+v", req.Remotes, wantRemotes)
	}
	b, err := os.ReadFile(f.recipe)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if req.RecipePath != f.recipe || req.RecipeSHA256 != hex.EncodeToString(sum[:]) || req.SourceURI != "./model" {
		t.Errorf("recipe %s sha256 %s source %s", req.RecipePath, req.RecipeSHA256, req.SourceURI)
	}
	if req.Model.StepID != "convert" || !slices.Equal(stepIDs(req.Checks), []string{"check:t1", "extra"}) {
		t.Errorf("model %s, checks %v", req.Model.StepID, stepIDs(req.Checks))
	}
	if req.Source == nil || req.Source.StepID != "source" {
		t.Errorf("source %+v", req.Source)
	}
	if want := []string{"source", "convert", "check:t1", "extra"}; !slices.Equal(stepIDs(req.Upstream), want) {
		t.Errorf("upstream %v, want %v", stepIDs(req.Upstream), want)
	}
	wantTool := map[string]string{"convert": "converter", "check:t1": "scorer", "extra": "helper"}
	for _, out := range req.Upstream {
		name, ok := wantTool[out.StepID]
		if !ok {
			continue
		}
		if len(out.Tools) != 1 || out.Tools[0].Name != name || out.Tools[0].Origin != "toolchain testchain" {
			t.Errorf("%s's tools %+v, want %s from testchain", out.StepID, out.Tools, name)
		}
	}
	var evalDep bool
	for _, d := range req.Deps {
		if d.Name == "data/eval" && d.URI == "eval.txt" && d.Digest["sha256"] != "" {
			evalDep = true
		}
		if d.Name == "tool/converter" || d.Name == "tool/unrelated" {
			t.Errorf("deps list %s, which a toolchain (or no upstream step) provides", d.Name)
		}
	}
	if !evalDep {
		t.Errorf("deps %+v lack the evaluation text", req.Deps)
	}
	if req.Key == "" {
		t.Error("no publish key")
	}
	other, _ := e.plan.Step("publish:t2")
	req2, err := e.publishRequest(context.Background(), other)
	if err != nil {
		t.Fatal(err)
	}
	if len(req2.Remotes) != 1 || req2.Remotes[0].URL != "oci://127.0.0.1:5000/models/et:t2" || req2.Key == req.Key {
		t.Errorf("t2: remotes %+v, key %s (t1's %s)", req2.Remotes, req2.Key, req.Key)
	}
}

// A step whose output carries no tools (a need `step run` took from the
// cache without keying it) gets them from the resolver in the request,
// without the engine's own record being changed.
func TestPublishRequestResolvesMissingTools(t *testing.T) {
	f := newFixture(t, publishRecipe)
	e := f.engine(Options{Jobs: 1, NoPush: true})
	if _, err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	bare := *e.output("convert")
	bare.Tools = nil
	e.record(&bare)
	pub, _ := e.plan.Step("publish:t1")
	req, err := e.publishRequest(context.Background(), pub)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(req.Upstream, func(o *steps.Output) bool { return o.StepID == "convert" })
	if i < 0 || len(req.Upstream[i].Tools) != 1 || req.Upstream[i].Tools[0].Name != "converter" {
		t.Fatalf("convert in the request: %+v", req.Upstream)
	}
	if e.output("convert").Tools != nil {
		t.Error("publishRequest wrote the resolved tools into the engine's record")
	}
}

// The published manifest holds what the request carried: the upstream
// steps (no other target's) and the toolchain their tools came from.
func TestPublishedManifestRecordsUpstream(t *testing.T) {
	f := newFixture(t, publishRecipe)
	res, err := f.engine(Options{Jobs: 1, NoPush: true}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m, err := manifest.Read(res.Published["t1"])
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, s := range m.Steps {
		ids = append(ids, s.ID)
	}
	if want := []string{"source", "convert", "check:t1", "extra", "publish:t1"}; !slices.Equal(ids, want) {
		t.Errorf("manifest steps %v, want %v", ids, want)
	}
	tc, ok := m.Toolchains["testchain"]
	if !ok || tc.Versions["converter"] != "1.0-converter" || tc.Versions["helper"] != "1.0-helper" || tc.Versions["unrelated"] != "" {
		t.Errorf("toolchains %+v", m.Toolchains)
	}
}
