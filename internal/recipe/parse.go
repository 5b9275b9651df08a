package recipe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/internal/recipe/yamlsyntax"
	"github.com/edgepipe/edgepipe/internal/suggest"
)

// FormatVersion is the recipe format version this parser reads.
const FormatVersion = 1

// SchemaID is the recipe schema's $id: where docs/recipe.schema.json of
// the main branch is served. A recipe written outside a checkout points
// its editor modeline here.
const SchemaID = "https://raw.githubusercontent.com/edgepipe/edgepipe/main/docs/recipe.schema.json"

// SchemaFile is the schema's path in a checkout.
const SchemaFile = "docs/recipe.schema.json"

// Data references used when a recipe has no data section.
const (
	DefaultCalibration = "builtin:calibration"
	DefaultEval        = "builtin:eval"
)

// KVDtypes are the KV-cache element types a target may ask for.
var KVDtypes = []string{"f16", "q8", "q4", "fp8"}

// MaxNameLen bounds recipe, target and step names: they become folder and
// file names, which file systems limit.
const MaxNameLen = 64

// Limits on what one recipe may expand to through YAML aliases, so a small
// file cannot unfold into billions of values (or loop through a
// self-referencing anchor).
const (
	maxNesting   = 64
	maxExpansion = 20_000
)

// extensionPrefix marks top-level keys the parser ignores, as in Compose
// files: a place to define YAML anchors that targets then merge (<<: *x).
const extensionPrefix = "x-"

// ParseFile reads and parses the recipe at path; see Parse.
func ParseFile(path string) (*Recipe, error) {
	data, err := boundedfile.Read(path, boundedfile.RecipeLimit)
	if err != nil {
		return nil, fmt.Errorf("read recipe: %w", err)
	}
	return Parse(path, data)
}

// Parse reads a recipe in format version 1 strictly: unknown keys, wrong
// types, duplicate keys and missing fields are all errors, reported together
// as Diagnostics with file:line:col positions (path is used only for those
// positions and Recipe.Path). Top-level keys starting with "x-" are
// ignored, so anchors that targets share have a place to live. Defaults
// are applied and every target carries its effective quality gate.
//
// When the file is readable YAML, the recipe is returned even alongside an
// error, holding whatever parsed cleanly, so a caller can still Validate it
// and show every problem at once.
func Parse(path string, data []byte) (*Recipe, error) {
	p := &parser{file: path, entriesOf: map[*yaml.Node][]entry{}, merging: map[*yaml.Node]bool{}}
	root := p.document(data)
	if root == nil {
		p.finish()
		return nil, p.diags
	}
	r := p.recipe(root)
	r.Path = path
	p.finish()
	if p.versionError != nil {
		// Nothing else in a recipe of another version means what it says.
		return nil, p.diags
	}
	return r, p.diags.Err()
}

type parser struct {
	file  string
	diags Diagnostics
	// dropped counts the problems found past MaxDiagnostics, from
	// droppedAt on.
	dropped   int
	droppedAt Pos
	// expanded counts the values built for with: maps, and tooMany and
	// tooDeep record why one was cut short; see maxExpansion.
	expanded         int
	tooMany, tooDeep bool
	versionError     *Diagnostic
	// entriesOf memoizes entries: merge keys can point many times at one
	// anchored mapping, which would otherwise be expanded each time (and
	// exponentially through merges of merges). merging holds the mappings
	// being expanded, to catch one merged into itself.
	entriesOf map[*yaml.Node][]entry
	merging   map[*yaml.Node]bool
	// taskKeys are keys only one task takes (parse_task.go).
	taskKeys []taskKey
}

func (p *parser) pos(n *yaml.Node) Pos {
	return Pos{File: p.file, Line: n.Line, Col: n.Column}
}

func (p *parser) report(n *yaml.Node, hint, format string, args ...any) {
	p.add(Diagnostic{Pos: p.pos(n), Msg: fmt.Sprintf(format, clipArgs(args)...), Hint: hint})
}

// add keeps a diagnostic, up to MaxDiagnostics: a recipe that merges one
// anchor of 2,000 bad keys into 2,000 targets has 4,000,000 problems, and
// listing them helps nobody. The rest are counted.
func (p *parser) add(d Diagnostic) {
	if p.full() {
		p.drop(d.Pos)
		return
	}
	p.diags = append(p.diags, d)
}

// drop counts a problem past the cap; the first one's place is where the
// "and N more" line points.
func (p *parser) drop(at Pos) {
	if p.dropped == 0 {
		p.droppedAt = at
	}
	p.dropped++
}

// full reports whether no more diagnostics are kept, so callers can skip
// the work of building one (a did-you-mean search).
func (p *parser) full() bool { return len(p.diags) >= MaxDiagnostics }

// finish sorts the diagnostics and drops repeats, which arise when one
// anchored mapping is merged into several places.
func (p *parser) finish() {
	if p.versionError != nil {
		// A recipe written for another format version would drown the one
		// useful message in unknown-key errors.
		p.diags = Diagnostics{*p.versionError}
		return
	}
	p.diags.Sort()
	out := p.diags[:0]
	for i, d := range p.diags {
		if i > 0 && d == p.diags[i-1] {
			continue
		}
		out = append(out, d)
	}
	p.diags = out
	if p.dropped > 0 {
		p.diags = append(p.diags, Diagnostic{Pos: p.droppedAt, More: p.dropped})
	}
}

// document decodes the single YAML document of a recipe and returns its
// root node, or nil after reporting why there is none.
func (p *parser) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.add(Diagnostic{Pos: Pos{File: p.file, Line: 1, Col: 1},
				Msg:  "the recipe is empty",
				Hint: "a recipe needs at least edgepipe: 1, name:, model: source: and targets:"})
			return nil
		}
		p.syntaxError(err, data)
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case err == nil:
		p.report(&extra, "remove the '---' line and what follows it, or move that part into a recipe file of its own",
			"a recipe file holds one YAML document, but a second one starts here")
	case errors.Is(err, io.EOF):
	default:
		p.syntaxError(err, data)
	}
	if len(doc.Content) == 0 {
		return nil
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		p.report(root, "start with edgepipe: 1, then name:, model: and targets:",
			"a recipe is a mapping of keys (edgepipe:, name:, model:, targets:, ...), but this file holds %s", describeRoot(root))
		return nil
	}
	return root
}

// syntaxError turns a YAML syntax error into diagnostics where the
// mistake is (see yamlsyntax.Explain).
func (p *parser) syntaxError(err error, data []byte) {
	for _, pr := range yamlsyntax.Explain(err, data) {
		p.add(Diagnostic{Pos: Pos{File: p.file, Line: pr.Line, Col: pr.Col}, Msg: pr.Msg, Hint: pr.Hint})
	}
}

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < maxNesting; i++ {
		n = n.Alias
	}
	return n
}

// describe names a node's type and value for "must be X, got Y" messages.
func describe(n *yaml.Node) string {
	n = deref(n)
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		v := n.Value
		if r := []rune(v); len(r) > 40 {
			v = string(r[:37]) + "..."
		}
		switch n.ShortTag() {
		case "!!null":
			return "an empty value"
		case "!!str":
			return fmt.Sprintf("string %q", v)
		case "!!int":
			return "integer " + v
		case "!!float":
			return "number " + v
		case "!!bool":
			return "boolean " + v
		case "!!timestamp":
			return "date " + v
		default:
			return fmt.Sprintf("a value tagged %s", n.ShortTag())
		}
	}
	return "an unreadable value"
}

// describeRoot names what a file that is not a recipe holds without
// quoting it: a file that parses as one bare value is often not YAML at
// all (a token, a key, a .env file), and its bytes must not reach a
// terminal or a CI log.
func describeRoot(n *yaml.Node) string {
	n = deref(n)
	if n.Kind == yaml.ScalarNode {
		return "a single value, not keys (its text is not shown: check that this is the recipe you meant)"
	}
	return describe(n)
}

func isNull(n *yaml.Node) bool {
	n = deref(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

// entry is one key of a mapping after merge keys (<<) are expanded.
type entry struct {
	name     string
	key, val *yaml.Node
}

// entries lists a mapping's keys in file order, expanding YAML merge keys
// the standard way (keys written in the mapping win over merged ones,
// earlier merged mappings win over later ones) and reporting duplicates.
func (p *parser) entries(m *yaml.Node, path string) []entry {
	if out, done := p.entriesOf[m]; done {
		return out
	}
	if p.merging[m] {
		p.report(m, "an anchored mapping cannot be merged into itself", "a merge key (<<) %s merges the mapping that holds it", where(path))
		return nil
	}
	p.merging[m] = true
	defer delete(p.merging, m)
	explicit := map[string]*yaml.Node{}
	var firstMerge *yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k := m.Content[i]
		if isMergeKey(k) {
			// Readers disagree on a second << (edgepipe kept the first,
			// PyYAML keeps the last, go-yaml's decoder refuses it): it is
			// a duplicate key.
			if firstMerge != nil {
				p.report(k, "merge several anchors with one key: <<: [*a, *b] (earlier ones win)",
					"duplicate merge key << %s (first set on line %d)", where(path), firstMerge.Line)
			} else {
				firstMerge = k
			}
			continue
		}
		name, ok := p.keyName(k, path)
		if !ok {
			continue
		}
		if first, dup := explicit[name]; dup {
			p.report(k, "remove one of them; YAML would silently keep only the last",
				"duplicate key %q %s (first set on line %d)", name, where(path), first.Line)
			continue
		}
		explicit[name] = k
	}
	var out []entry
	merged := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if isMergeKey(k) {
			for _, src := range p.mergeSources(v, path) {
				for _, e := range p.entries(src, path) {
					if explicit[e.name] == nil && !merged[e.name] {
						merged[e.name] = true
						out = append(out, e)
					}
				}
			}
			continue
		}
		name, ok := p.keyName(k, path)
		if !ok || explicit[name] != k {
			continue
		}
		out = append(out, entry{name: name, key: k, val: v})
	}
	p.entriesOf[m] = out
	return out
}

func isMergeKey(k *yaml.Node) bool {
	return k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge"
}

func (p *parser) mergeSources(v *yaml.Node, path string) []*yaml.Node {
	const hint = "write <<: *anchor, or <<: [*a, *b], where each anchor names a mapping"
	d := deref(v)
	switch d.Kind {
	case yaml.MappingNode:
		return []*yaml.Node{d}
	case yaml.SequenceNode:
		var out []*yaml.Node
		for _, item := range d.Content {
			if m := deref(item); m.Kind == yaml.MappingNode {
				out = append(out, m)
			} else {
				p.report(item, hint, "a merge key (<<) %s takes mappings, got %s", where(path), describe(item))
			}
		}
		return out
	}
	p.report(v, hint, "a merge key (<<) %s takes a mapping or a list of mappings, got %s", where(path), describe(v))
	return nil
}

func (p *parser) keyName(k *yaml.Node, path string) (string, bool) {
	d := deref(k)
	if d.Kind != yaml.ScalarNode {
		p.report(k, "use a plain name as the key", "a key %s must be a name, got %s", where(path), describe(k))
		return "", false
	}
	return d.Value, true
}

// where names a place in the recipe for messages.
func where(path string) string {
	if path == "" {
		return "at the top level of the recipe"
	}
	return "in " + path
}

// field is one key a mapping accepts and what to do with its value.
type field struct {
	name string
	set  func(key, val *yaml.Node)
}

// object walks a mapping against the keys it accepts, reporting unknown
// keys with the closest valid spelling. It returns the keys present. A
// missing or empty value is an empty object: the caller reports what it
// required.
func (p *parser) object(v *yaml.Node, path string, fields []field) map[string]*yaml.Node {
	got := map[string]*yaml.Node{}
	if isNull(v) {
		return got
	}
	m := deref(v)
	if m.Kind != yaml.MappingNode {
		p.report(v, "", "%s must be a mapping of keys, got %s", path, describe(v))
		return nil
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	for _, e := range p.entries(m, path) {
		if path == "" && strings.HasPrefix(e.name, extensionPrefix) {
			continue
		}
		var f *field
		for i := range fields {
			if fields[i].name == e.name {
				f = &fields[i]
				break
			}
		}
		if f == nil {
			if p.full() {
				p.drop(p.pos(e.key))
				continue
			}
			p.report(e.key, keyHint(e.name, names), "unknown key %q %s", e.name, where(path))
			continue
		}
		got[e.name] = e.key
		f.set(e.key, e.val)
	}
	return got
}

func keyHint(word string, valid []string) string {
	if c := suggest.Closest(word, valid); c != "" {
		return fmt.Sprintf("did you mean %q?", c)
	}
	return "valid keys here: " + strings.Join(valid, ", ")
}

// str reads a string value. Numbers and dates are taken as written
// (python: 3.11 means the text "3.11"); booleans, lists, mappings and empty
// values are errors.
func (p *parser) str(v *yaml.Node, path string) (string, bool) {
	d := deref(v)
	if isNull(d) {
		p.report(v, "", "%s is empty", path)
		return "", false
	}
	if d.Kind == yaml.ScalarNode {
		switch d.ShortTag() {
		case "!!str", "!!int", "!!float", "!!timestamp":
			if d.Value == "" {
				p.report(v, "", "%s is empty", path)
				return "", false
			}
			return d.Value, true
		case "!!bool":
			p.report(v, fmt.Sprintf("quote it if you mean the text: \"%s\"", d.Value), "%s must be a string, got %s", path, describe(v))
			return "", false
		}
	}
	p.report(v, "", "%s must be a string, got %s", path, describe(v))
	return "", false
}

// integer reads a whole number.
func (p *parser) integer(v *yaml.Node, path string) (int, bool) {
	d := deref(v)
	if d.Kind == yaml.ScalarNode && d.ShortTag() == "!!int" {
		var i int64
		if err := d.Decode(&i); err != nil || i > math.MaxInt32 || i < math.MinInt32 {
			p.report(v, "", "%s is out of range: %s", path, d.Value)
			return 0, false
		}
		return int(i), true
	}
	if d.Kind == yaml.ScalarNode && d.ShortTag() == "!!float" && wholeNumberRE.MatchString(d.Value) {
		// YAML reads an integer too large for 64 bits as a float.
		p.report(v, "", "%s is out of range: %s", path, d.Value)
		return 0, false
	}
	p.report(v, numberHint(d, "integer"), "%s must be an integer, got %s", path, describe(v))
	return 0, false
}

var wholeNumberRE = regexp.MustCompile(`^[-+]?[0-9_]+$`)

// number reads a finite number.
func (p *parser) number(v *yaml.Node, path string) (float64, bool) {
	d := deref(v)
	if d.Kind == yaml.ScalarNode && (d.ShortTag() == "!!int" || d.ShortTag() == "!!float") {
		var f float64
		if err := d.Decode(&f); err != nil {
			p.report(v, "", "%s is not a number: %s", path, d.Value)
			return 0, false
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			p.report(v, "", "%s must be a finite number, got %s", path, d.Value)
			return 0, false
		}
		return f, true
	}
	p.report(v, numberHint(d, "number"), "%s must be a number, got %s", path, describe(v))
	return 0, false
}

func numberHint(d *yaml.Node, what string) string {
	if d.Kind != yaml.ScalarNode {
		return ""
	}
	if d.ShortTag() == "!!str" {
		if _, err := strconv.ParseFloat(strings.TrimSpace(d.Value), 64); err == nil {
			return "remove the quotes so YAML reads it as a number"
		}
	}
	if what == "integer" && d.ShortTag() == "!!float" {
		return "write a whole number, without a decimal point"
	}
	return ""
}

// nonNegative reads a number that may not be below zero (zero means unset).
func (p *parser) nonNegative(v *yaml.Node, path string) (float64, bool) {
	f, ok := p.number(v, path)
	if ok && f < 0 {
		p.report(v, "", "%s must not be negative, got %s", path, deref(v).Value)
		return 0, false
	}
	return f, ok
}

func (p *parser) positiveInt(v *yaml.Node, path string) (int, bool) {
	i, ok := p.integer(v, path)
	if ok && i <= 0 {
		p.report(v, "", "%s must be greater than 0, got %d", path, i)
		return 0, false
	}
	return i, ok
}

func (p *parser) nonNegativeInt(v *yaml.Node, path string) (int, bool) {
	i, ok := p.integer(v, path)
	if ok && i < 0 {
		p.report(v, "", "%s must not be negative, got %d", path, i)
		return 0, false
	}
	return i, ok
}

func (p *parser) boolean(v *yaml.Node, path string) (bool, bool) {
	d := deref(v)
	if d.Kind == yaml.ScalarNode && d.ShortTag() == "!!bool" {
		var b bool
		if err := d.Decode(&b); err == nil {
			return b, true
		}
	}
	p.report(v, "", "%s must be true or false, got %s", path, describe(v))
	return false, false
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*$`)

// modelNameRE: a model's name becomes part of a published file's name on
// every filesystem a release lands on.
var modelNameRE = regexp.MustCompile(ModelNamePattern)

// ModelNamePattern is what model.name may be.
const ModelNamePattern = `^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`

// checkName reports a recipe, target or step name that could not safely be
// a folder name: only lowercase letters, digits, '.', '_' and '-', starting
// with a letter or digit (so never ".", ".." or a path).
func (p *parser) checkName(at *yaml.Node, what, name string) bool {
	if len(name) > MaxNameLen {
		p.report(at, fmt.Sprintf("shorten it to %d characters or fewer", MaxNameLen),
			"%s %q is %d characters long; the limit is %d", what, name, len(name), MaxNameLen)
		return false
	}
	if nameRE.MatchString(name) {
		if why := reservedName(name, what); why != "" {
			p.report(at, "choose another name", "%s %q %s", what, name, why)
			return false
		}
		return true
	}
	hint := "use lowercase letters, digits, '.', '_' and '-', starting with a letter or digit"
	if s := sanitizeName(name); s != "" {
		hint += fmt.Sprintf(", for example %q", s)
	}
	p.report(at, hint, "%s %q is not a valid name: it becomes a folder name, so it may hold only lowercase letters, digits, '.', '_' and '-', and must start with a letter or digit", what, name)
	return false
}

// windowsDevices are names Windows reserves in every folder, with any
// extension: an artifact named nul cannot be copied to a Windows machine.
var windowsDevices = map[string]bool{"con": true, "prn": true, "aux": true, "nul": true,
	"com1": true, "com2": true, "com3": true, "com4": true, "com5": true, "com6": true, "com7": true, "com8": true, "com9": true,
	"lpt1": true, "lpt2": true, "lpt3": true, "lpt4": true, "lpt5": true, "lpt6": true, "lpt7": true, "lpt8": true, "lpt9": true}

// runFiles are what a run writes beside its target folders.
var runFiles = map[string]bool{"report.html": true, "report.md": true}

// reservedName says why a well-formed name still cannot be a folder name,
// or "".
func reservedName(name, what string) string {
	base, _, _ := strings.Cut(name, ".")
	switch {
	case windowsDevices[base]:
		return fmt.Sprintf("is a device name Windows reserves (%s), so the folder could not be copied there", base)
	case strings.HasSuffix(name, "."):
		return "ends with '.', which Windows drops, so it would clash with the name without it"
	case what == "target name" && runFiles[name]:
		return "is the name of the report every run writes beside the target folders"
	}
	return ""
}

// sanitizeName proposes a valid name close to an invalid one.
func sanitizeName(name string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(name) {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
			b.WriteRune(c)
			dash = false
		default:
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	s := strings.TrimLeft(strings.TrimRight(b.String(), "-"), "._-")
	if len(s) > MaxNameLen {
		s = s[:MaxNameLen]
	}
	if !nameRE.MatchString(s) {
		return ""
	}
	return s
}

// recipe walks the root mapping.
func (p *parser) recipe(root *yaml.Node) *Recipe {
	r := &Recipe{
		Data: Data{Calibration: DefaultCalibration, Eval: DefaultEval},
		Quality: Quality{Perplexity: PerplexityGate{
			Context: DefaultPPLContext, WarnDelta: DefaultWarnDelta, MaxDelta: DefaultMaxDelta},
			Generation: DefaultGeneration()},
	}
	var targetsKey, targetsVal *yaml.Node
	got := p.object(root, "", []field{
		{"edgepipe", func(_, v *yaml.Node) { p.version(v, r) }},
		{"name", func(_, v *yaml.Node) {
			if s, ok := p.str(v, "name"); ok && p.checkName(v, "recipe name", s) {
				r.Name, r.NamePos = s, p.pos(v)
			}
		}},
		{"description", func(_, v *yaml.Node) {
			if !isNull(v) {
				r.Description, _ = p.str(v, "description")
			}
		}},
		{"task", func(_, v *yaml.Node) { p.task(v, r) }},
		{"model", func(k, v *yaml.Node) { p.model(k, v, &r.Model) }},
		{"data", func(k, v *yaml.Node) { p.data(k, v, &r.Data) }},
		{"quality", func(k, v *yaml.Node) { p.quality(v, "quality", &r.Quality, false) }},
		{"resources", func(k, v *yaml.Node) { p.resources(v, &r.Resources) }},
		{"bench", func(k, v *yaml.Node) {
			p.onlyFor(k, "bench", true, hintRecipeBench)
			r.Bench, r.BenchPos = p.bench(v, "bench", nil), p.pos(k)
		}},
		{"targets", func(k, v *yaml.Node) { targetsKey, targetsVal = k, v }},
		{"steps", func(k, v *yaml.Node) { r.Steps = p.steps(v) }},
		{"toolchains", func(k, v *yaml.Node) { r.Toolchains = p.toolchains(v) }},
	})
	missing := func(key, msg, hint string) {
		if _, ok := got[key]; !ok {
			p.add(Diagnostic{Pos: p.pos(root), Msg: msg, Hint: hint})
		}
	}
	missing("edgepipe", `missing "edgepipe:", the recipe format version`,
		"add edgepipe: 1 as the first line")
	missing("name", `missing "name:", which names the recipe and its artifact folder`,
		"add a line like name: my-model (lowercase letters, digits, '.', '_' and '-')")
	missing("model", `missing "model:", the weights to convert`,
		"add model: {source: hf://OWNER/REPO} (or builtin:NAME, https://..., ./dir)")
	missing("targets", `missing "targets:", the artifacts to build`,
		"add targets: {NAME: {device: DEVICE, format: FORMAT}}; `edgepipe devices` lists the devices")
	if r.Traits().Images {
		p.applyTask(r) // the defaults targets start from
	}
	if targetsKey != nil {
		r.Targets = p.targets(targetsKey, targetsVal, r.Quality, r.Bench, r.BenchPos)
	}
	p.applyTask(r)
	return r
}

func (p *parser) version(v *yaml.Node, r *Recipe) {
	n, ok := p.integer(v, "edgepipe")
	if !ok {
		return
	}
	if n != FormatVersion {
		p.versionError = &Diagnostic{Pos: p.pos(v),
			Msg: fmt.Sprintf("recipe format version %d is not supported", n),
			Hint: fmt.Sprintf("this edgepipe reads format version %d: write edgepipe: %d, or use an edgepipe release that reads version %d",
				FormatVersion, FormatVersion, n)}
		return
	}
	r.Edgepipe = n
}

func (p *parser) model(k, v *yaml.Node, m *Model) {
	got := p.object(v, "model", []field{
		{"source", func(_, v *yaml.Node) {
			if s, ok := p.str(v, "model.source"); ok {
				m.Source, m.SourcePos = s, p.pos(v)
			}
		}},
		{"name", func(_, v *yaml.Node) {
			if s, ok := p.str(v, "model.name"); ok {
				if !modelNameRE.MatchString(s) {
					p.report(v, "use letters, digits, '.', '_' and '-' (up to 100, starting with a letter or digit), e.g. name: SmolLM2-135M-Instruct",
						"model.name %q cannot name a file", s)
					return
				}
				m.Name = s
			}
		}},
		{"allow_pickle", func(_, v *yaml.Node) { m.AllowPickle, _ = p.boolean(v, "model.allow_pickle") }},
		{"trust_remote_code", func(_, v *yaml.Node) { m.TrustRemoteCode, _ = p.boolean(v, "model.trust_remote_code") }},
	})
	if got != nil && got["source"] == nil {
		p.report(k, "add source: hf://OWNER/REPO (or builtin:NAME, https://..., s3::https://..., git::https://..., ./dir)",
			"model has no source")
	}
}

func (p *parser) data(k, v *yaml.Node, d *Data) {
	d.Pos = p.pos(k)
	p.object(v, "data", []field{
		{"calibration", func(_, v *yaml.Node) {
			if s, ok := p.str(v, "data.calibration"); ok {
				d.Calibration = s
			}
		}},
		{"eval", func(_, v *yaml.Node) {
			if s, ok := p.str(v, "data.eval"); ok {
				d.Eval = s
			}
		}},
		{"allow_overlap", func(_, v *yaml.Node) { d.AllowOverlap, _ = p.boolean(v, "data.allow_overlap") }},
	})
}

// quality reads a quality section into q, which holds the defaults to
// override. A target's section may set only max_delta: the baseline and
// the verdict bands are shared, so every target is scored the same way.
func (p *parser) quality(v *yaml.Node, path string, q *Quality, target bool) {
	ppath := path + ".perplexity"
	g := &q.Perplexity
	var warnAt, maxAt *yaml.Node
	perTarget := func(key string, set func(v *yaml.Node)) func(k, v *yaml.Node) {
		return func(k, v *yaml.Node) {
			if target {
				p.report(k, fmt.Sprintf("a target may override only max_delta; set %s under the top-level quality.perplexity", key),
					"%s.%s cannot be set per target", ppath, key)
				return
			}
			set(v)
		}
	}
	p.object(v, path, []field{
		{"accuracy", func(k, v *yaml.Node) { p.accuracy(k, v, path+".accuracy", q) }},
		{"agreement", func(k, v *yaml.Node) { p.agreement(k, v, path+".agreement", q) }},
		{"generation", func(k, v *yaml.Node) { p.generation(k, v, path+".generation", q) }},
		{"perplexity", func(k, v *yaml.Node) {
			p.onlyFor(k, ppath, false, hintVisionGate)
			p.object(v, ppath, []field{
				{"context", perTarget("context", func(v *yaml.Node) {
					if n, ok := p.positiveInt(v, ppath+".context"); ok {
						g.Context = n
					}
				})},
				{"warn_delta", perTarget("warn_delta", func(v *yaml.Node) {
					if f, ok := p.nonNegative(v, ppath+".warn_delta"); ok {
						g.WarnDelta, warnAt = f, v
					}
				})},
				{"max_delta", func(_, v *yaml.Node) {
					if f, ok := p.nonNegative(v, ppath+".max_delta"); ok {
						g.MaxDelta, maxAt = f, v
					}
				}},
				{"max_chunks", perTarget("max_chunks", func(v *yaml.Node) {
					if n, ok := p.nonNegativeInt(v, ppath+".max_chunks"); ok {
						g.MaxChunks = n
					}
				})},
			})
		}},
	})
	if target {
		// A target stricter than the shared warning band: its "excellent"
		// band ends where its failure starts.
		g.WarnDelta = min(g.WarnDelta, g.MaxDelta)
		return
	}
	if g.WarnDelta > g.MaxDelta {
		at := warnAt
		if at == nil {
			at = maxAt
		}
		p.report(at, "the warning threshold cannot exceed the failure threshold: lower warn_delta or raise max_delta",
			"%s.warn_delta (%s) is greater than max_delta (%s)", ppath,
			strconv.FormatFloat(g.WarnDelta, 'g', -1, 64), strconv.FormatFloat(g.MaxDelta, 'g', -1, 64))
	}
}

func (p *parser) resources(v *yaml.Node, res *Resources) {
	p.object(v, "resources", []field{
		{"max_memory_gb", func(_, v *yaml.Node) { res.MaxMemoryGB, _ = p.nonNegative(v, "resources.max_memory_gb") }},
		{"jobs", func(_, v *yaml.Node) { res.Jobs, _ = p.nonNegativeInt(v, "resources.jobs") }},
	})
}

// section returns the entries of a name -> settings mapping such as
// targets: or steps:, or nil after reporting what is wrong with it.
func (p *parser) section(v *yaml.Node, path, example string) []entry {
	if isNull(v) {
		return nil
	}
	m := deref(v)
	if m.Kind != yaml.MappingNode {
		p.report(v, "write it as "+example, "%s must be a mapping from names to settings, got %s", path, describe(v))
		return nil
	}
	return p.entries(m, path)
}

// targets reads the targets; each starts from the recipe's quality and
// bench (a copy of each: a target's override changes only its own).
func (p *parser) targets(k, v *yaml.Node, quality Quality, recipeBench *BenchSpec, benchPos Pos) []Target {
	const example = "targets: {NAME: {device: DEVICE, format: FORMAT}}"
	var out []Target
	for _, e := range p.section(v, "targets", example) {
		path := "targets." + e.name
		p.checkName(e.key, "target name", e.name)
		t := Target{Name: e.name, KVDtype: DefaultKVDtype, Quality: quality, Pos: p.pos(e.key)}
		if recipeBench != nil {
			b := *recipeBench
			t.Bench, t.BenchPos = &b, benchPos
		}
		got := p.object(e.val, path, []field{
			{"device", func(_, v *yaml.Node) {
				if s, ok := p.str(v, path+".device"); ok {
					t.Device, t.DevicePos = s, p.pos(v)
				}
			}},
			{"format", func(_, v *yaml.Node) {
				if s, ok := p.str(v, path+".format"); ok {
					t.Format, t.FormatPos = s, p.pos(v)
				}
			}},
			{"context", func(k, v *yaml.Node) {
				p.onlyFor(k, path+".context", false, hintNoContext)
				t.Context, _ = p.positiveInt(v, path+".context")
				t.ContextPos = p.pos(k)
			}},
			{"kv_dtype", func(k, v *yaml.Node) {
				p.onlyFor(k, path+".kv_dtype", false, hintNoContext)
				s, ok := p.str(v, path+".kv_dtype")
				if !ok {
					return
				}
				for _, k := range KVDtypes {
					if s == k {
						t.KVDtype, t.KVDtypePos = s, p.pos(v)
						return
					}
				}
				hint := "use one of: " + strings.Join(KVDtypes, ", ")
				if c := suggest.Closest(s, KVDtypes); c != "" {
					hint = fmt.Sprintf("did you mean %q? (one of: %s)", c, strings.Join(KVDtypes, ", "))
				}
				p.report(v, hint, "%s.kv_dtype %q is not a KV-cache type edgepipe knows", path, s)
			}},
			{"quality", func(_, v *yaml.Node) { p.quality(v, path+".quality", &t.Quality, true) }},
			{"with", func(k, v *yaml.Node) { t.With, t.WithPos = p.withMap(v, path+".with"), p.withPositions(k, v) }},
			{"min_tokens_per_s", func(k, v *yaml.Node) {
				p.onlyFor(k, path+".min_tokens_per_s", false, hintNoContext)
				t.MinTokensPerS, _ = p.nonNegative(v, path+".min_tokens_per_s")
			}},
			{"max_memory_gb", func(k, v *yaml.Node) {
				p.onlyFor(k, path+".max_memory_gb", false, hintNoContext)
				t.MaxMemoryGB, _ = p.nonNegative(v, path+".max_memory_gb")
			}},
			{"max_first_token_ms", func(k, v *yaml.Node) {
				p.onlyFor(k, path+".max_first_token_ms", false, hintNoContext)
				t.MaxFirstTokenMS, _ = p.nonNegative(v, path+".max_first_token_ms")
			}},
			{"bench", func(k, v *yaml.Node) {
				t.Bench, t.BenchPos = p.bench(v, path+".bench", recipeBench), p.pos(k)
			}},
			{"publish", func(_, v *yaml.Node) { t.Publish = p.publishList(v, path+".publish") }},
		})
		if got != nil {
			if got["device"] == nil {
				p.report(e.key, "add device: DEVICE; `edgepipe devices` lists the devices", "target %q has no device", e.name)
			}
			if got["format"] == nil {
				p.report(e.key, "add format: FORMAT, for example gguf-q4_k_m, mlc-q4f16_1 or coreml-int4", "target %q has no format", e.name)
			}
		}
		out = append(out, t)
	}
	if len(out) == 0 && (isNull(v) || deref(v).Kind == yaml.MappingNode) {
		p.report(k, "add at least one: "+example, "targets is empty: a recipe needs at least one target")
	}
	p.checkPublishClashes(out)
	return out
}

// bench reads a bench section over base (the recipe's, for a target of
// an image-classification recipe; nil: the defaults); an empty one
// (bench: or bench: {}) turns the bench on with what base holds. Which
// keys a task takes is judged once the task is known (applyTask).
func (p *parser) bench(v *yaml.Node, path string, base *BenchSpec) *BenchSpec {
	b := &BenchSpec{Warmup: DefaultBenchWarmup, Runs: DefaultBenchRuns,
		PromptTokens: DefaultBenchPromptTokens, ProbeMiB: DefaultBenchProbeMiB, Batch: DefaultBenchBatch}
	if base != nil {
		*b = *base
	}
	p.object(v, path, []field{
		{"warmup", func(_, v *yaml.Node) {
			if n, ok := p.nonNegativeInt(v, path+".warmup"); ok {
				b.Warmup = n
			}
		}},
		{"runs", func(_, v *yaml.Node) {
			if n, ok := p.positiveInt(v, path+".runs"); ok {
				b.Runs = n
			}
		}},
		{"prompt_tokens", func(k, v *yaml.Node) {
			p.onlyFor(k, path+".prompt_tokens", false, hintBenchTextKey)
			if n, ok := p.positiveInt(v, path+".prompt_tokens"); ok {
				b.PromptTokens = n
			}
		}},
		{"batch", func(k, v *yaml.Node) {
			p.onlyFor(k, path+".batch", true, hintBenchBatch)
			if n, ok := p.positiveInt(v, path+".batch"); ok {
				b.Batch = n
			}
		}},
		{"threads", func(_, v *yaml.Node) { b.Threads, _ = p.nonNegativeInt(v, path+".threads") }},
		{"probe_mib", func(k, v *yaml.Node) {
			p.onlyFor(k, path+".probe_mib", false, hintBenchTextKey)
			if n, ok := p.positiveInt(v, path+".probe_mib"); ok {
				b.ProbeMiB = n
			}
		}},
	})
	return b
}

// overrideIDRE matches ids of generated steps (gguf-quantize:q4_k_m,
// perplexity:baseline@c1024); a user step with such an id overrides that
// step instead of adding one.
var overrideIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]*:[a-z0-9._:@+-]*$`)

func (p *parser) steps(v *yaml.Node) []StepSpec {
	var out []StepSpec
	for _, e := range p.section(v, "steps", "steps: {NAME: {uses: KIND, needs: [TARGET], with: {...}}}") {
		path := "steps." + e.name
		override := strings.Contains(e.name, ":")
		if override {
			if len(e.name) > MaxNameLen*2 || !overrideIDRE.MatchString(e.name) {
				p.report(e.key, "`edgepipe plan` lists the generated step ids", "step id %q is not a generated step id", e.name)
			}
		} else {
			p.checkName(e.key, "step name", e.name)
		}
		s := StepSpec{ID: e.name, Pos: p.pos(e.key)}
		got := p.object(e.val, path, []field{
			{"uses", func(_, v *yaml.Node) {
				if str, ok := p.str(v, path+".uses"); ok {
					s.Uses, s.UsesPos = str, p.pos(v)
				}
			}},
			{"needs", func(_, v *yaml.Node) { s.Needs, s.NeedsPos = p.needs(v, path+".needs") }},
			{"with", func(k, v *yaml.Node) { s.With, s.WithPos = p.withMap(v, path+".with"), p.withPositions(k, v) }},
			{"timeout_s", func(_, v *yaml.Node) { s.TimeoutS, _ = p.nonNegative(v, path+".timeout_s") }},
		})
		// An override changes a generated step, whose kind is fixed.
		if got != nil && got["uses"] == nil && !override {
			p.report(e.key, "add uses: KIND, for example uses: run", "step %q has no uses (the kind of step to run)", e.name)
		}
		out = append(out, s)
	}
	return out
}

func (p *parser) needs(v *yaml.Node, path string) ([]string, []Pos) {
	d := deref(v)
	if isNull(d) {
		return nil, nil
	}
	if d.Kind != yaml.SequenceNode {
		hint := ""
		if d.Kind == yaml.ScalarNode {
			hint = fmt.Sprintf("write a list, even of one: needs: [%s]", d.Value)
		}
		p.report(v, hint, "%s must be a list of target or step names, got %s", path, describe(v))
		return nil, nil
	}
	var names []string
	var at []Pos
	for _, item := range d.Content {
		if s, ok := p.str(item, path+" entry"); ok {
			names = append(names, s)
			at = append(at, p.pos(item))
		}
	}
	return names, at
}

func (p *parser) toolchains(v *yaml.Node) map[string]ToolchainOverride {
	entries := p.section(v, "toolchains", "toolchains: {NAME: {python: PATH, tools: {TOOL: PATH}}}")
	if len(entries) == 0 {
		return nil
	}
	out := map[string]ToolchainOverride{}
	for _, e := range entries {
		path := "toolchains." + e.name
		tc := ToolchainOverride{Pos: p.pos(e.key)}
		p.object(e.val, path, []field{
			{"python", func(_, v *yaml.Node) { tc.Python, _ = p.str(v, path+".python") }},
			{"tools", func(_, v *yaml.Node) {
				for _, t := range p.section(v, path+".tools", "tools: {TOOL: PATH}") {
					if s, ok := p.str(t.val, path+".tools."+t.name); ok {
						if tc.Tools == nil {
							tc.Tools = map[string]string{}
						}
						tc.Tools[t.name] = s
					}
				}
			}},
		})
		out[e.name] = tc
	}
	return out
}

// withMap decodes a with: mapping into plain Go values: string, int,
// float64, bool, nil, []any and map[string]any, the types a step's params
// hold and that survive a JSON round trip.
func (p *parser) withMap(v *yaml.Node, path string) map[string]any {
	if isNull(v) {
		return nil
	}
	if deref(v).Kind != yaml.MappingNode {
		p.report(v, "write it as with: {KEY: VALUE, ...}", "%s must be a mapping of options, got %s", path, describe(v))
		return nil
	}
	if p.tooMany {
		return nil // reported at the with: that used up the budget
	}
	p.tooDeep = false
	m, _ := p.plain(v, path, 0).(map[string]any)
	const hint = "use fewer aliases (*name), and no alias inside the anchor it names"
	switch {
	case p.tooDeep:
		p.report(v, hint, "%s nests more than %d levels deep, or an alias in it refers to a mapping that holds it", path, maxNesting)
		return nil
	case p.tooMany:
		p.report(v, hint, "%s expands to too many values through aliases (a recipe's with: maps may hold %d in all)", path, maxExpansion)
		return nil
	}
	return m
}

// withPositions maps each top-level key of a with: mapping to where its
// value is written ("" to the with: key itself), so option errors found
// after parsing still say FILE:LINE:COL.
func (p *parser) withPositions(k, v *yaml.Node) map[string]Pos {
	at := map[string]Pos{"": p.pos(k)}
	if d := deref(v); d.Kind == yaml.MappingNode && !p.tooMany && !p.tooDeep {
		for _, e := range p.entries(d, "") {
			at[e.name] = p.pos(e.key)
		}
	}
	return at
}

func (p *parser) plain(v *yaml.Node, path string, depth int) any {
	p.expanded++
	if p.expanded > maxExpansion {
		p.tooMany = true
	}
	if depth > maxNesting {
		p.tooDeep = true
	}
	if p.tooMany || p.tooDeep {
		return nil
	}
	d := deref(v)
	switch d.Kind {
	case yaml.MappingNode:
		m := map[string]any{}
		for _, e := range p.entries(d, path) {
			m[e.name] = p.plain(e.val, path+"."+e.name, depth+1)
		}
		return m
	case yaml.SequenceNode:
		l := make([]any, 0, len(d.Content))
		for i, item := range d.Content {
			l = append(l, p.plain(item, fmt.Sprintf("%s[%d]", path, i), depth+1))
		}
		return l
	case yaml.ScalarNode:
		switch d.ShortTag() {
		case "!!str", "!!timestamp":
			return d.Value
		case "!!null":
			return nil
		case "!!bool":
			b, _ := p.boolean(v, path)
			return b
		case "!!int":
			var i int
			if err := d.Decode(&i); err == nil {
				return i
			}
			p.report(v, "", "%s is out of range: %s", path, d.Value)
			return nil
		case "!!float":
			f, _ := p.number(v, path)
			return f
		}
		p.report(v, "remove the tag, or quote the value", "%s has an unsupported YAML tag %s", path, d.ShortTag())
		return nil
	}
	p.report(v, "", "%s holds an unreadable value", path)
	return nil
}
