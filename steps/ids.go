package steps

import (
	"fmt"
	"regexp"
	"strings"
)

// The forms of step ids and kinds a plan makes. A user step is named like
// a recipe's names; a generated step is KIND:REST, where REST is built
// from formats, devices and target options (gguf-quantize:q4_k_m,
// perplexity:baseline@c1024, mlc-compile:webgpu/native-config:q4f16_1,
// qnn-compile:...+hub_device=Samsung Galaxy S24 (Family)): printable
// ASCII, spaces included, nothing else.
var (
	kindRE   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	idHeadRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
)

// maxIDLen bounds a step id: a generated id with every option a target
// can set stays well under it.
const maxIDLen = 512

// CheckID reports an id that no plan could have made (a step id read from
// somewhere else: a remote cache's record). The error quotes the id, so a
// hostile one cannot write control characters to a terminal.
func CheckID(id string) error {
	if len(id) > maxIDLen {
		return fmt.Errorf("step id %.40q... is %d bytes long, more than a step id may be (%d)", id, len(id), maxIDLen)
	}
	head, rest, generated := strings.Cut(id, ":")
	if !idHeadRE.MatchString(head) {
		return fmt.Errorf("%q is not a step id: a step is NAME or KIND:NAME, NAME and KIND lowercase letters, digits, '.', '_' and '-'", id)
	}
	if generated {
		for i := 0; i < len(rest); i++ {
			if rest[i] < 0x20 || rest[i] > 0x7e {
				return fmt.Errorf("%q is not a step id: it holds a byte (%#02x) that is not printable ASCII", id, rest[i])
			}
		}
	}
	return nil
}

// CheckKind reports a step kind no plan could hold.
func CheckKind(kind string) error {
	if !kindRE.MatchString(kind) {
		return fmt.Errorf("%q is not a step kind: kinds are lowercase letters, digits, '.', '_' and '-'", kind)
	}
	return nil
}
