package hf

import (
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
)

// pickleExts are formats that deserialise with Python's pickle, which runs
// arbitrary code on load.
var pickleExts = map[string]bool{".bin": true, ".pt": true, ".pth": true, ".ckpt": true, ".pkl": true, ".pickle": true}

func isPickle(p string) bool { return pickleExts[strings.ToLower(path.Ext(p))] }

// codeConfigs are the files whose auto_map makes transformers import code
// from the repository (or another one): AutoConfig/AutoModel read
// config.json, AutoTokenizer tokenizer_config.json, AutoProcessor and its
// kin the processor configs.
var codeConfigs = []string{"config.json", "tokenizer_config.json", "processor_config.json",
	"preprocessor_config.json", "image_processor_config.json", "feature_extractor_config.json"}

// CodeConfigs lists the files CheckAutoMap must see before any tool loads
// a model folder.
func CodeConfigs() []string { return slices.Clone(codeConfigs) }

// nonFiniteRE finds the NaN and Infinity literals Python's json accepts
// and Go's does not, outside strings.
var nonFiniteRE = regexp.MustCompile(`("(?:[^"\\]|\\.)*")|-?\b(?:NaN|Infinity)\b`)

// autoMapRE finds an auto_map key however it is spelled in JSON (with
// \u escapes), for a file no JSON reader here can parse.
var autoMapRE = regexp.MustCompile(`(?i)"auto(?:_|\\u005f)map"\s*:`)

// DeclaresAutoMap reports whether a config declares auto_map, which makes
// transformers import model code, the way Python would read it: any type
// of value (a string too), NaN and Infinity accepted. A file that still does
// not parse is searched for the key itself.
func DeclaresAutoMap(b []byte) bool {
	var cfg map[string]json.RawMessage
	err := json.Unmarshal(b, &cfg)
	if err != nil {
		lenient := nonFiniteRE.ReplaceAllFunc(b, func(m []byte) []byte {
			if m[0] == '"' {
				return m // a string, left as it is
			}
			return []byte("null")
		})
		err = json.Unmarshal(lenient, &cfg)
	}
	if err != nil {
		return autoMapRE.Match(b)
	}
	_, ok := cfg["auto_map"]
	return ok
}

// selectFiles applies allow and ignore patterns with huggingface_hub's
// semantics: fnmatch, where '*' also matches '/', and a pattern ending in '/'
// means everything below that folder.
func selectFiles(paths, allow, ignore []string) ([]string, error) {
	allowRe, err := compilePatterns(allow)
	if err != nil {
		return nil, err
	}
	ignoreRe, err := compilePatterns(ignore)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range paths {
		if len(allowRe) > 0 && !matchAny(allowRe, p) {
			continue
		}
		if matchAny(ignoreRe, p) {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

func matchAny(res []*regexp.Regexp, p string) bool {
	for _, re := range res {
		if re.MatchString(p) {
			return true
		}
	}
	return false
}

func compilePatterns(patterns []string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, pat := range patterns {
		if strings.HasSuffix(pat, "/") {
			pat += "*"
		}
		re, err := fnmatchRegexp(pat)
		if err != nil {
			return nil, fmt.Errorf("file pattern %q: %w", pat, err)
		}
		out = append(out, re)
	}
	return out, nil
}

func fnmatchRegexp(pat string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(pat); i++ {
		switch ch := pat[i]; ch {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			end := strings.IndexByte(pat[i+1:], ']')
			if end < 0 {
				b.WriteString(`\[`)
				continue
			}
			class := pat[i+1 : i+1+end]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(ch)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// applyPickleRule drops pickle files when the selection also has safetensors
// weights (transformers prefers those, the pickles are redundant copies), and
// refuses the repository when pickles are its only weights.
func applyPickleRule(repo Repo, selected []string, allow bool) (keep, skipped []string, err error) {
	if allow {
		return selected, nil, nil
	}
	hasSafetensors := false
	for _, p := range selected {
		if isPickle(p) {
			skipped = append(skipped, p)
		} else {
			keep = append(keep, p)
			hasSafetensors = hasSafetensors || strings.HasSuffix(strings.ToLower(p), ".safetensors")
		}
	}
	if len(skipped) > 0 && !hasSafetensors {
		return nil, nil, fmt.Errorf("%s ships weights only in pickle format (%s), which can run arbitrary code when loaded: "+
			"use a repository with .safetensors weights, or, if you trust this one, set `model.allow_pickle: true` in the recipe",
			repo, strings.Join(skipped, ", "))
	}
	return keep, skipped, nil
}

// refuseCodeFiles refuses a selection that brings Python files along.
func refuseCodeFiles(repo Repo, selected []string, trust bool) error {
	if trust {
		return nil
	}
	var code []string
	for _, p := range selected {
		if strings.HasSuffix(strings.ToLower(p), ".py") {
			code = append(code, p)
		}
	}
	if len(code) == 0 {
		return nil
	}
	return fmt.Errorf("%s ships model code (%s), which transformers would run when loading it: "+
		"if you trust this repository, set `model.trust_remote_code: true` in the recipe", repo, strings.Join(code, ", "))
}

// refuseAutoMap refuses a config that tells transformers to import code.
func refuseAutoMap(repo Repo, name, file string) error {
	b, err := boundedfile.Read(file, boundedfile.ModelJSONLimit)
	if err != nil {
		return fmt.Errorf("%s: read %s: %w", repo, name, err)
	}
	if DeclaresAutoMap(b) {
		return fmt.Errorf("%s: %s declares auto_map, so transformers would import model code from the Hub when loading it: "+
			"if you trust this repository, set `model.trust_remote_code: true` in the recipe", repo, name)
	}
	return nil
}
