package architecture

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/edgepipe/edgepipe"

// layer is a set of packages; a package may import packages of lower
// layers, and of its own layer only when peers is set.
type layer struct {
	name  string
	peers bool
	// packages are module-relative paths or path.Match patterns (a *
	// stays within one folder); a trailing /** matches any depth.
	packages []string
}

// layers are the import graph's layers, lowest first. A recipe goes
// recipe -> plan -> engine -> publish: the contract and the step SDK are
// at the bottom, the format families above the planner that registers
// them, the executor above the families it runs (it knows them only
// through the step SDK), the commands on top.
var layers = []layer{
	{name: "base: utilities that know nothing of edgepipe's records", peers: true, packages: []string{
		"data", "internal/atomicfile", "internal/boundedfile", "internal/jsonfile", "internal/suggest", "internal/event",
		"internal/dag", "internal/benchstat", "internal/buildinfo", "internal/termstatus", "internal/proctree",
		"internal/recipe/yamlsyntax", "internal/digest", "internal/proc", "internal/host", "internal/runstats",
		"internal/safetext", "internal/standin", "internal/testregistry", "internal/pplstat", "internal/gguf", "internal/gguf/gguftest", "internal/npz", "internal/toolprogress",
	}},
	{name: "records: what edgepipe reads and writes, and where", peers: true, packages: []string{
		"internal/manifest", "internal/lockfile", "internal/cache", "internal/catalog", "internal/hf", "internal/getter",
		"internal/oci", "internal/remote", "internal/provenance", "internal/provenance/sigstorecheck", "internal/report",
	}},
	{name: "contract: the recipe format and the toolchains", peers: true, packages: []string{
		"internal/recipe", "internal/recipewrite", "internal/tools", "internal/toolchain",
	}},
	{name: "step SDK", peers: true, packages: []string{"steps", "steps/steptest"}},
	{name: "remote cache: step outputs shared between machines", packages: []string{"internal/remotecache"}},
	{name: "shared kinds: fetch, the baseline, bench, run and the Python library", peers: true, packages: []string{
		"pipelines/pylib", "pipelines/shared", "pipelines/shared/report",
	}},
	{name: "publish: the gate, the manifest, provenance and pushes", packages: []string{"internal/publish"}},
	{name: "planning: expansion, the pre-flight and the picker", peers: true, packages: []string{
		"internal/edge", "internal/edgetext", "internal/complete", "internal/plan",
	}},
	{name: "format families", peers: true, packages: []string{"pipelines/*", "pipelines/*/report", "pipelines/mlc/webgpu"}},
	{name: "stand-ins: tests and benchmarks only", peers: true, packages: []string{"pipelines/*/standin", "pipelines/standins"}},
	{name: "registry: every family", peers: true, packages: []string{"pipelines", "internal/schema"}},
	{name: "execution: the executor", packages: []string{"internal/engine"}},
	{name: "orchestration: what drives the executor", peers: true, packages: []string{
		"internal/bundle", "internal/argo", "internal/lock", "internal/reproduce", "internal/rayexec", "internal/runreport",
		"internal/progress", "internal/cachegc", "internal/testray", "internal/testseaweed",
	}},
	{name: "commands", peers: true, packages: []string{
		"internal/cli", "cmd/*", "internal/*/cmd/*", "internal/schema/cmd/genschema", "pipelines/standins/cmd/standin",
		"bench", "bench/*",
	}},
}

// forbidden are imports the layers would allow that the design does not:
// the publisher reads only its request.
var forbidden = map[string][]string{
	"internal/publish": {"internal/recipe", "internal/edge", "internal/plan"},
	"steps":            {"internal/toolchain", "internal/recipe"},
}

func match(pattern, pkg string) bool {
	if p, ok := strings.CutSuffix(pattern, "/**"); ok {
		return strings.HasPrefix(pkg, p+"/")
	}
	ok, _ := path.Match(pattern, pkg)
	return ok
}

// layerOf is the layer of pkg: the exact name first, then patterns.
func layerOf(pkg string) (int, bool) {
	for i, l := range layers {
		for _, p := range l.packages {
			if p == pkg {
				return i, true
			}
		}
	}
	found := -1
	for i, l := range layers {
		for _, p := range l.packages {
			if match(p, pkg) && found < 0 {
				found = i
			}
		}
	}
	return found, found >= 0
}

// imports reads the module-internal imports of every package's non-test
// Go files under root.
func imports(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	graph := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != root && (name == "testdata" || name == "bin" || name == "artifacts" || strings.HasPrefix(name, ".")) {
				return filepath.SkipDir
			}
			if p != root {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // a nested module (test/argolint)
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		pkg := filepath.ToSlash(rel)
		if graph[pkg] == nil {
			graph[pkg] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(ip, module+"/"); ok {
				graph[pkg][rest] = true
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return graph
}

func TestLayers(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	graph := imports(t, root)
	if len(graph) < 40 {
		t.Fatalf("found %d packages under %s: the walk looks in the wrong place", len(graph), root)
	}
	pkgs := make([]string, 0, len(graph))
	for p := range graph {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, pkg := range pkgs {
		li, ok := layerOf(pkg)
		if !ok {
			t.Errorf("package %s is in no layer: add it to the table in internal/architecture/layers_test.go (and docs/layout.md)", pkg)
			continue
		}
		deps := make([]string, 0, len(graph[pkg]))
		for d := range graph[pkg] {
			deps = append(deps, d)
		}
		sort.Strings(deps)
		for _, dep := range deps {
			di, ok := layerOf(dep)
			if !ok {
				continue // reported as its own package
			}
			switch {
			case di > li:
				t.Errorf("%s (%s) imports %s (%s): a layer imports only the layers below it", pkg, layers[li].name, dep, layers[di].name)
			case di == li && !layers[li].peers:
				t.Errorf("%s imports %s, of its own layer (%s), whose packages do not import each other", pkg, dep, layers[li].name)
			}
			for _, f := range forbidden[pkg] {
				if dep == f {
					t.Errorf("%s imports %s, which the design forbids", pkg, dep)
				}
			}
		}
	}
}

// The checks above can fail: a made-up upward import is caught.
func TestLayersCatchAnUpwardImport(t *testing.T) {
	li, _ := layerOf("internal/toolchain")
	di, _ := layerOf("pipelines/onnx")
	if di <= li {
		t.Fatalf("pipelines/onnx (layer %d) is not above internal/toolchain (layer %d)", di, li)
	}
	for _, tc := range []struct {
		pkg   string
		layer string
	}{
		{"pipelines/qnn/standin", "stand-ins: tests and benchmarks only"},
		{"pipelines/qnn/report", "format families"},
		{"pipelines/shared/report", "shared kinds: fetch, the baseline, bench, run and the Python library"},
		{"internal/testseaweed/cmd/seaweed-serve", "commands"},
		{"cmd/edgepipe", "commands"},
	} {
		i, ok := layerOf(tc.pkg)
		if !ok || layers[i].name != tc.layer {
			t.Errorf("%s: layer %v, want %q", tc.pkg, fmt.Sprint(i, ok), tc.layer)
		}
	}
}
