package shared

import (
	"embed"

	"github.com/edgepipe/edgepipe/internal/toolchain"
	_ "github.com/edgepipe/edgepipe/pipelines/pylib" // the library the helpers import
)

//go:embed python/*.py
var helpers embed.FS

func init() { toolchain.RegisterHelpers("pipelines/shared", toolchain.Dir(helpers, "python")) }
