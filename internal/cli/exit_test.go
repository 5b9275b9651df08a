package cli

import (
	"regexp"
	"strconv"
	"testing"
)

// Every exit code the help documents has the words the run's report
// and job summary give it.
func TestExitMeaningCoversEveryCode(t *testing.T) {
	codes := regexp.MustCompile(`(?m)^  (\d+)\s+\S`).FindAllStringSubmatch(exitCodesHelp, -1)
	if len(codes) < 9 {
		t.Fatalf("exit codes help lists %d codes:\n%s", len(codes), exitCodesHelp)
	}
	for _, m := range codes {
		code, _ := strconv.Atoi(m[1])
		if exitMeaning[code] == "" {
			t.Errorf("exit code %d has no meaning for the run's report", code)
		}
	}
}
