package qnn

import (
	"os"
	"path/filepath"
	"regexp"
)

var qnnVersionPat = regexp.MustCompile(`(?m)^qnn_version\s*=\s*['"]([0-9][0-9A-Za-z.+-]*)['"]`)

// qnnSDKVersion is the QNN SDK version onnxruntime-qnn was built with, as
// its build_and_package_info.py records it ("" when not found): the wheel's
// own version does not say which HTP backend it carries.
func qnnSDKVersion(dir string) (label, version string) {
	files, _ := filepath.Glob(filepath.Join(dir, "lib", "python3*", "site-packages", "onnxruntime_qnn", "build_and_package_info.py"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if m := qnnVersionPat.FindSubmatch(b); m != nil {
			return "QNN", string(m[1])
		}
	}
	return "QNN", ""
}
