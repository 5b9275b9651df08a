package report_test

import (
	"testing"

	"github.com/edgepipe/edgepipe/pipelines/llmcompressor/report"
	"github.com/edgepipe/edgepipe/steps/steptest"
)

func TestGoldens(t *testing.T) {
	steptest.CheckReportGoldens(t, "../python/reports", report.Types)
}
