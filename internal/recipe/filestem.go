package recipe

import (
	"net/url"
	"path"
	"regexp"
	"strings"
)

// ggufTypeSuffixRE matches the quantization a GGUF file's name ends with
// (Qwen2.5-0.5B-Instruct-Q4_K_M, model.f16, x-IQ4_XS): a file converted
// from it gets its own type, and two types in one name would say neither.
var ggufTypeSuffixRE = regexp.MustCompile(`(?i)[-._](f16|f32|bf16|q[0-9]+(_[a-z0-9]+)*|iq[0-9]+(_[a-z0-9]+)*|tq[0-9]+_[0-9]+)$`)

// unsafeFileRE is what a name may not carry into a file name on any
// filesystem a release lands on.
var unsafeFileRE = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// FileStem is the model's name as published files carry it
// (NAME-q8_0.gguf): model.name when the recipe sets it, else the source's
// own name: a builtin's, a Hugging Face repository's, the file or folder a
// path or URL names (a GGUF's quantization suffix dropped). It never is
// empty, and is safe in a file name.
func (m Model) FileStem() string {
	if m.Name != "" {
		return m.Name
	}
	return SourceFileStem(m.Source)
}

// SourceFileStem is FileStem for a source alone.
func SourceFileStem(source string) string {
	s := strings.TrimSpace(source)
	switch {
	case strings.HasPrefix(s, "builtin:"):
		s = strings.TrimPrefix(s, "builtin:")
	case strings.HasPrefix(s, "hf://"):
		s = strings.TrimPrefix(s, "hf://")
		if i := strings.IndexByte(s, '@'); i >= 0 {
			s = s[:i]
		}
		s = path.Base(strings.TrimSuffix(s, "/"))
	default:
		// go-getter forms: s3::https://..., git::https://host/org/repo.git//sub?ref=v1
		if i := strings.Index(s, "::"); i >= 0 {
			s = s[i+2:]
		}
		if u, err := url.Parse(s); err == nil && u.Scheme != "" && u.Host != "" {
			s = u.Path
		} else if i := strings.IndexAny(s, "?#"); i >= 0 {
			s = s[:i]
		}
		if i := strings.Index(s, "//"); i >= 0 && strings.Contains(s[:i], ".git") {
			s = s[:i] // a subfolder of a repository: the repository names it
		}
		s = path.Base(strings.TrimRight(strings.ReplaceAll(s, "\\", "/"), "/"))
		for _, ext := range []string{".gguf", ".git", ".tar.gz", ".tgz", ".tar", ".zip"} {
			if strings.HasSuffix(strings.ToLower(s), ext) {
				s = s[:len(s)-len(ext)]
				break
			}
		}
		s = ggufTypeSuffixRE.ReplaceAllString(s, "")
	}
	s = strings.Trim(unsafeFileRE.ReplaceAllString(s, "-"), ".-_")
	if len(s) > 100 {
		s = strings.TrimRight(s[:100], ".-_")
	}
	if s == "" {
		return "model"
	}
	return s
}
