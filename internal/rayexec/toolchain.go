package rayexec

import "github.com/edgepipe/edgepipe/internal/toolchain"

// Toolchain is the pinned Ray environment (steps/toolchains/ray.lock):
// the bridge runs in it, and its `ray` command starts local clusters.
const Toolchain = "ray"

// ToolBridge is the bridge script the orchestrator drives.
const ToolBridge = "ray_bridge.py"

func init() {
	toolchain.Register(toolchain.Python(Toolchain, []string{ToolBridge},
		"Ray 2.60.0 (core, no dashboard): `edgepipe run --engine ray` drives a Ray cluster through steps/python/ray_bridge.py, and its `ray` command starts one (`go tool task ray:cluster`)"))
}
