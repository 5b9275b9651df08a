package rayexec

import (
	"embed"

	"github.com/edgepipe/edgepipe/internal/toolchain"
)

// Toolchain is the pinned Ray environment (ray.lock beside this file):
// the bridge runs in it, and its `ray` command starts local clusters.
const Toolchain = "ray"

// ToolBridge is the bridge script the orchestrator drives.
const ToolBridge = "ray_bridge.py"

//go:embed ray.in ray.lock
var locks embed.FS

//go:embed python/*.py
var helpers embed.FS

func init() {
	toolchain.RegisterHelpers("internal/rayexec", toolchain.Dir(helpers, "python"))
	toolchain.Register(toolchain.Python(Toolchain, locks, []string{ToolBridge},
		"Ray 2.60.0 (core, no dashboard): `edgepipe run --engine ray` drives a Ray cluster through internal/rayexec/python/ray_bridge.py, and its `ray` command starts one (`go tool task ray:cluster`)"))
}
