package openvino

import "embed"

// locks pin the family's Python toolchains: each lock and the requirements
// it was compiled from (uv pip compile --universal --generate-hashes).
//
//go:embed openvino.in openvino.lock
var locks embed.FS

// python holds the family's helper scripts (python/*.py); their tests are
// under python/tests.
//
//go:embed python/*.py
var python embed.FS
