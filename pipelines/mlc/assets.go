package mlc

import "embed"

// python holds the family's helper scripts (python/*.py); their tests are
// under python/tests.
//
//go:embed python/*.py
var python embed.FS
