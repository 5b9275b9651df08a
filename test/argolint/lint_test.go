// Package argolint checks what `edgepipe export argo` prints with Argo
// Workflows' own code: the offline, strict lint that `argo lint --offline
// --strict` runs, and the validation the workflow controller runs on
// submission. It is a module of its own so that Argo's dependency tree
// (and the advisories reported against v4.0.5) stays out of edgepipe's
// go.mod and binary; Taskfile.yml's test task runs it.
package argolint

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/argoproj/argo-workflows/v4/cmd/argo/lint"
	"github.com/argoproj/argo-workflows/v4/pkg/apiclient"
	wfv1 "github.com/argoproj/argo-workflows/v4/pkg/apis/workflow/v1alpha1"
	"github.com/argoproj/argo-workflows/v4/util/logging"
	"github.com/argoproj/argo-workflows/v4/workflow/common"
	"github.com/argoproj/argo-workflows/v4/workflow/templateresolution"
	"github.com/argoproj/argo-workflows/v4/workflow/validate"
)

// repoRoot is edgepipe's checkout: this module lives in test/argolint.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "edgepipe")); err != nil {
		t.Fatalf("not in edgepipe's test/argolint: %v", err)
	}
	return root
}

// exportAll builds edgepipe from the checkout and exports every recipe
// under recipes/, each to a file of its own.
func exportAll(t *testing.T) map[string]string {
	t.Helper()
	root := repoRoot(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "edgepipe")
	build := exec.Command("go", "build", "-o", bin, "./cmd/edgepipe")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build edgepipe: %v\n%s", err, out)
	}
	recipes, err := filepath.Glob(filepath.Join(root, "recipes", "*.yaml"))
	if err != nil || len(recipes) == 0 {
		t.Fatalf("no recipes under %s/recipes: %v", root, err)
	}
	cache := filepath.Join(dir, "cache") // an empty cache: every step a miss
	files := map[string]string{}
	for _, r := range recipes {
		name := strings.TrimSuffix(filepath.Base(r), ".yaml")
		cmd := exec.Command(bin, "export", "argo", "--image", "ghcr.io/edgepipe/edgepipe:test",
			"--remote-cache", "s3::https://s3.example.com/edgepipe-cache/ci", r)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "EDGEPIPE_CACHE="+cache)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("edgepipe export argo %s: %v\n%s", r, err, stderr.String())
		}
		out := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(out, stdout.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		files[name] = out
	}
	return files
}

func withLogger() context.Context {
	// Argo's lint and validation take their logger from the context and
	// panic without one.
	return logging.WithLogger(context.Background(), logging.NewSlogLogger(logging.Warn, logging.Text))
}

func TestExportsLintAndValidate(t *testing.T) {
	files := exportAll(t)
	for name, path := range files {
		t.Run(name, func(t *testing.T) {
			lintStrict(t, path)
			wf := validateForSubmission(t, path)
			if name == "jetson-thor" {
				checkGPU(t, wf)
			}
		})
	}
}

// lintStrict is `argo lint --offline --strict FILE`: strict parsing
// (unknown fields are errors) and the server-side lint, offline.
func lintStrict(t *testing.T, path string) {
	t.Helper()
	ctx := withLogger()
	ctx, client, err := apiclient.NewClientFromOptsWithContext(ctx, apiclient.Opts{Offline: true, OfflineFiles: []string{path}})
	if err != nil {
		t.Fatalf("offline client: %v", err)
	}
	var printed bytes.Buffer
	res, err := lint.Lint(ctx, &lint.LintOptions{
		Files:          []string{path},
		Strict:         true,
		ServiceClients: lint.ServiceClients{WorkflowsClient: client.NewWorkflowServiceClient(ctx)},
		Printer:        &printed,
	})
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	if !res.Success {
		t.Fatalf("argo lint --offline --strict %s failed:\n%s", path, printed.String())
	}
	linted := false
	for _, r := range res.Results {
		linted = linted || r.Linted
	}
	if !linted {
		t.Fatalf("argo lint found no Workflow in %s:\n%s", path, printed.String())
	}
}

// validateForSubmission runs the controller's validation in submission
// mode (not lint mode, which forgives missing parameters), and checks the
// shape edgepipe promises: one DAG, a task per step, a final publish.
func validateForSubmission(t *testing.T, path string) *wfv1.Workflow {
	t.Helper()
	ctx := withLogger()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs := common.ParseObjects(ctx, data, true)
	if len(objs) != 1 {
		t.Fatalf("%s holds %d objects, want one Workflow", path, len(objs))
	}
	wf, ok := objs[0].Object.(*wfv1.Workflow)
	if objs[0].Err != nil || !ok {
		t.Fatalf("%s: not a Workflow: %v", path, objs[0].Err)
	}
	err = validate.ValidateWorkflow(ctx, templateresolution.WrapWorkflowTemplateInterface(nil),
		templateresolution.WrapClusterWorkflowTemplateInterface(nil), wf, nil, validate.ValidateOpts{})
	if err != nil {
		t.Fatalf("workflow/validate %s: %v", path, err)
	}
	checkShape(t, wf)
	return wf
}

// checkGPU: the NVIDIA steps ask for a GPU and land on GPU nodes; the
// others do not.
func checkGPU(t *testing.T, wf *wfv1.Workflow) {
	t.Helper()
	gpu := 0
	for _, tmpl := range wf.Spec.Templates {
		if tmpl.Container == nil {
			continue
		}
		n := tmpl.Container.Resources.Limits["nvidia.com/gpu"]
		wants := tmpl.NodeSelector["nvidia.com/gpu.present"] == "true"
		if n.IsZero() != !wants {
			t.Errorf("%s: GPU limit %v but node selector %v", tmpl.Name, n.String(), tmpl.NodeSelector)
		}
		if wants {
			gpu++
		}
	}
	if gpu == 0 {
		t.Error("no step of jetson-thor asks for an NVIDIA GPU")
	}
}

func checkShape(t *testing.T, wf *wfv1.Workflow) {
	t.Helper()
	dag := wf.GetTemplateByName(wf.Spec.Entrypoint)
	if dag == nil || dag.DAG == nil {
		t.Fatalf("entrypoint %q is not a DAG template", wf.Spec.Entrypoint)
	}
	steps := 0
	for _, task := range dag.DAG.Tasks {
		tmpl := wf.GetTemplateByName(task.Template)
		if tmpl == nil || tmpl.Container == nil {
			t.Fatalf("task %s: template %q is not a container", task.Name, task.Template)
		}
		args := strings.Join(tmpl.Container.Args, " ")
		if strings.Contains(args, "step run") {
			steps++
			if tmpl.Container.Resources.Requests.Memory().IsZero() || tmpl.Container.Resources.Requests.Cpu().IsZero() {
				t.Errorf("task %s requests no memory or CPU", task.Name)
			}
			if tmpl.RetryStrategy == nil {
				t.Errorf("task %s has no retryStrategy", task.Name)
			}
		}
	}
	if steps == 0 {
		t.Fatalf("no task runs `edgepipe step run`")
	}
}

// TestTheChecksBite breaks a real export two ways and expects each check
// to refuse it: a test that cannot fail proves nothing.
func TestTheChecksBite(t *testing.T) {
	files := exportAll(t)
	good, err := os.ReadFile(files["demo"])
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// An unknown field: only strict parsing refuses it.
	unknown := filepath.Join(dir, "unknown-field.yaml")
	os.WriteFile(unknown, bytes.Replace(good, []byte("  entrypoint: edgepipe\n"), []byte("  entrypoint: edgepipe\n  entryPont: x\n"), 1), 0o644)
	if lintFails(t, unknown) == "" {
		t.Error("strict lint accepted an unknown field")
	}
	// A dependency on a task that does not exist: lint and validation.
	dangling := filepath.Join(dir, "dangling.yaml")
	os.WriteFile(dangling, bytes.Replace(good, []byte("              - source\n"), []byte("              - no-such-task\n"), 1), 0o644)
	if lintFails(t, dangling) == "" {
		t.Error("lint accepted a dependency on a missing task")
	}
	ctx := withLogger()
	data, _ := os.ReadFile(dangling)
	wf := common.ParseObjects(ctx, data, true)[0].Object.(*wfv1.Workflow)
	err = validate.ValidateWorkflow(ctx, templateresolution.WrapWorkflowTemplateInterface(nil),
		templateresolution.WrapClusterWorkflowTemplateInterface(nil), wf, nil, validate.ValidateOpts{})
	if err == nil {
		t.Error("validation accepted a dependency on a missing task")
	}
}

// lintFails lints path and returns what lint printed when it failed.
func lintFails(t *testing.T, path string) string {
	t.Helper()
	ctx := withLogger()
	ctx, client, err := apiclient.NewClientFromOptsWithContext(ctx, apiclient.Opts{Offline: true, OfflineFiles: []string{path}})
	if err != nil {
		return err.Error()
	}
	var printed bytes.Buffer
	res, err := lint.Lint(ctx, &lint.LintOptions{Files: []string{path}, Strict: true,
		ServiceClients: lint.ServiceClients{WorkflowsClient: client.NewWorkflowServiceClient(ctx)}, Printer: &printed})
	if err != nil {
		return err.Error()
	}
	if res.Success {
		return ""
	}
	return printed.String()
}
