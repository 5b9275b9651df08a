package edge_test

import (
	"strings"
	"testing"

	"github.com/edgepipe/edgepipe/internal/plan"

	"github.com/edgepipe/edgepipe/internal/recipe"

	"github.com/edgepipe/edgepipe/internal/edge"
)

// Every platform's pick renders to a recipe the real parser and validator
// accept, with the pick's device, format and budgets, and expands through
// its format's pipeline and passes the pre-flight.
func TestRenderedRecipesValidate(t *testing.T) {
	model := edge.ResolveModel("builtin:smollm2-135m", "")
	for _, platform := range edge.Platforms() {
		p, err := edge.PickTarget(edge.PickRequest{Platform: platform, Model: model, Context: 8192, MinTokensPerS: 5, MaxMemoryGB: 3.5})
		if err != nil {
			t.Fatal(err)
		}
		data := edge.RenderRecipe(p, edge.RecipeOptions{Name: "x-" + platform, Source: "builtin:smollm2-135m", Command: "edgepipe init --platform " + platform})
		if !strings.HasPrefix(string(data), edge.SchemaComment+"\n") {
			t.Errorf("%s: first line is not the schema comment:\n%s", platform, data)
		}
		r, err := recipe.Parse("recipes/x.yaml", data)
		if err != nil {
			t.Fatalf("%s: %v\n%s", platform, err, data)
		}
		if diags := recipe.Validate(r, plan.Catalog{}, nil); len(diags) > 0 {
			t.Fatalf("%s: %v\n%s", platform, diags, data)
		}
		if len(r.Targets) != 1 {
			t.Fatalf("%s: %d targets", platform, len(r.Targets))
		}
		tg := r.Targets[0]
		if r.Name != "x-"+platform || r.Model.Source != "builtin:smollm2-135m" || tg.Name != platform || tg.Device != p.Device || tg.Format != p.Format ||
			tg.Context != 8192 || tg.KVDtype != p.KVDtype || tg.MinTokensPerS != 5 || tg.MaxMemoryGB != 3.5 {
			t.Errorf("%s: recipe %+v target %+v, pick %s on %s", platform, r, tg, p.Format, p.Device)
		}
		pl, err := plan.Expand(r)
		if err != nil {
			t.Errorf("%s: %s does not expand: %v", platform, p.Format, err)
		}
		if err == nil {
			if diags, fits := edge.Preflight(pl.Recipe); len(diags) > 0 || len(fits) != 1 || fits[0].Memory == nil {
				t.Errorf("%s: pre-flight %v %+v", platform, diags, fits)
			}
		}
	}
}

func TestRenderQuotesWhatYAMLWouldMisread(t *testing.T) {
	p, err := edge.PickTarget(edge.PickRequest{Platform: "laptop", Model: edge.Model{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"./my models/llama #3", "../llama-3-8b", "/abs/model", ".", "true", "123", "hf://org/name@main", "./a: b", "s3::https://bucket/key"} {
		data := edge.RenderRecipe(p, edge.RecipeOptions{Name: "q", Source: src})
		r, err := recipe.Parse("q.yaml", data)
		if err != nil || r.Model.Source != src {
			t.Errorf("source %q came back as %q (%v):\n%s", src, r.Model.Source, err, data)
		}
	}
}

func TestRecipeName(t *testing.T) {
	for in, want := range map[string]string{
		"x.yaml": "x", "My Phone.yml": "my-phone", "_.yaml": "model", "iphone_16.yaml": "iphone_16", "ios": "ios",
		"..hidden.yaml": "hidden",
	} {
		got := edge.RecipeName(in)
		if got != want {
			t.Errorf("RecipeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// One model for several platforms: a target per pick, in order, each
// named after its platform and explained in the header.
func TestRenderRecipesOneTargetPerPick(t *testing.T) {
	model := edge.ResolveModel("builtin:smollm2-135m", "")
	var picks []edge.Pick
	for _, platform := range []string{"ios", "android", "laptop"} {
		p, err := edge.PickTarget(edge.PickRequest{Platform: platform, Model: model})
		if err != nil {
			t.Fatal(err)
		}
		picks = append(picks, p)
	}
	data := edge.RenderRecipes(picks, edge.RecipeOptions{Name: "apps", Source: "builtin:smollm2-135m"})
	r, err := recipe.Parse("recipes/apps.yaml", data)
	if err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	if diags := recipe.Validate(r, plan.Catalog{}, nil); len(diags) > 0 {
		t.Fatalf("%v\n%s", diags, data)
	}
	if len(r.Targets) != len(picks) {
		t.Fatalf("%d targets for %d picks:\n%s", len(r.Targets), len(picks), data)
	}
	for i, p := range picks {
		tg := r.Targets[i]
		if tg.Name != p.Platform || tg.Device != p.Device || tg.Format != p.Format {
			t.Errorf("target %d: %+v, pick %s %s on %s", i, tg, p.Platform, p.Format, p.Device)
		}
		if !strings.Contains(string(data), "# "+p.Platform+": "+p.Format+" on "+p.Device) {
			t.Errorf("the header does not explain %s:\n%s", p.Platform, data)
		}
	}
}
