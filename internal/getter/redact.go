package getter

import (
	"net/url"
	"regexp"
	"strings"
)

var userinfoRE = regexp.MustCompile(`://[^/@]*@`)

// Redact returns a source with the credentials it may carry (a password
// in the user info, signed-URL and access-key query parameters) replaced
// by "redacted", for records that outlive the run: lock files and
// manifests. A source without credentials comes back unchanged.
func Redact(src string) string {
	forced, rest := "", src
	if m := forcedRe.FindStringSubmatch(src); m != nil {
		forced, rest = m[1], m[2]
	}
	u, err := url.Parse(rest)
	if err != nil {
		// Not a URL Go can parse (a bad escape, say): mask all user info
		// rather than risk a password.
		return userinfoRE.ReplaceAllString(src, "://redacted@")
	}
	secrets, out := secretsOf(forced, u, "")
	if len(secrets) == 0 {
		return src
	}
	return out
}

// Scrub removes from text every credential src carries (its password, its
// signed-URL and token query values), for messages that may quote the
// source or a tool's output about it.
func Scrub(src, text string) string {
	forced, rest := "", src
	if m := forcedRe.FindStringSubmatch(src); m != nil {
		forced, rest = m[1], m[2]
	}
	u, err := url.Parse(rest)
	if err != nil {
		return userinfoRE.ReplaceAllString(strings.ReplaceAll(text, src, Redact(src)), "://redacted@")
	}
	secrets, redacted := secretsOf(forced, u, "")
	text = strings.ReplaceAll(text, src, redacted)
	return (&source{secrets: secrets}).scrub(text)
}
