package standin

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/edgepipe/edgepipe/internal/standin"
	onnxstandin "github.com/edgepipe/edgepipe/pipelines/onnx/standin"
	"github.com/edgepipe/edgepipe/pipelines/vision/report"
)

func init() {
	standin.Tools["vision_bench.py"] = visionBench
	standin.Tools["litert_bench.py"] = litertBench
	standin.Tools["openvino_vision_bench.py"] = ovBench
}

// visionBench: vision_bench.py --model F.onnx --config DIR --warmup W
// --runs R --batch B --threads T, on a stand-in ONNX model.
func visionBench(args []string, stdout, stderr io.Writer) error {
	return bench("vision_bench", args, stdout, stderr, func(path string) ([]byte, error) {
		_, payload, err := onnxstandin.ReadONNX(path)
		return payload, err
	})
}

// litertBench: litert_bench.py with the same arguments, on a stand-in
// .tflite.
func litertBench(args []string, stdout, stderr io.Writer) error {
	return bench("litert_bench", args, stdout, stderr, func(path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if !strings.HasPrefix(string(b), tfliteMagic) {
			return nil, fmt.Errorf("%s: not a stand-in .tflite (the stand-in times only what litert_convert.py's stand-in wrote)", path)
		}
		return b[len(tfliteMagic):], nil
	})
}

// ovBench: openvino_vision_bench.py with the same arguments, on the
// stand-in IR openvino_vision_quantize.py's stand-in wrote: the header in
// model.xml says it is one, and the weights timed are model.bin's.
func ovBench(args []string, stdout, stderr io.Writer) error {
	return bench("openvino_vision_bench", args, stdout, stderr, func(path string) ([]byte, error) {
		if _, err := readIRHeader(path); err != nil {
			return nil, err
		}
		return os.ReadFile(strings.TrimSuffix(path, ".xml") + ".bin")
	})
}

// bench follows the bench protocol (vision_benchlib.py) for real, on a
// trivial model: each run folds the input batch into the model's bytes,
// and is timed with the clock; the memory figures are this process's.
// Nothing it prints is a fixed number, and none of it measures a model.
func bench(name string, args []string, stdout, stderr io.Writer, load func(string) ([]byte, error)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	model, config := fs.String("model", "", ""), fs.String("config", "", "")
	warmup, runs, batch, threads := fs.Int("warmup", 10, ""), fs.Int("runs", 50, ""), fs.Int("batch", 1, ""), fs.Int("threads", 0, "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *config == "" || *warmup < 0 || *runs < 1 || *batch < 1 || *threads < 1 {
		return errors.New("usage (stand-in): " + name + ".py --model F --config DIR --warmup W --runs R --batch B --threads T")
	}
	var cfg struct {
		InputSize  int `json:"input_size"`
		InChannels int `json:"in_channels"`
	}
	raw, err := os.ReadFile(filepath.Join(*config, "config.json"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.InputSize < 1 || cfg.InChannels < 1 {
		return fmt.Errorf("%s/config.json has no input_size and in_channels: not an image classifier's config", *config)
	}
	before := residentBytes()
	weights, err := load(*model)
	if err != nil {
		return err
	}
	if len(weights) == 0 {
		return fmt.Errorf("%s holds no weights", *model)
	}
	shape := []int{*batch, cfg.InChannels, cfg.InputSize, cfg.InputSize}
	input := make([]float32, *batch*cfg.InChannels*cfg.InputSize*cfg.InputSize)
	for i := range input {
		input[i] = float32(weights[i%len(weights)]) / 255
	}
	latency := make([]float64, 0, *warmup+*runs)
	var sink float32
	for range *warmup + *runs {
		start := time.Now()
		for i, x := range input {
			sink += x * float32(weights[(i*7)%len(weights)])
		}
		latency = append(latency, float64(max(time.Since(start).Nanoseconds(), 1)))
	}
	after := residentBytes()
	fmt.Fprintf(stderr, "%s (stand-in): %d runs over %d input values and %d model bytes (checksum %g)\n", name, len(latency), len(input), len(weights), sink)
	return standin.PrintJSON(stdout, report.Bench{LatencyNS: latency, Batch: *batch, Threads: *threads,
		InputShape: shape, InputDtype: "float32", RuntimeVersion: name + " stand-in (" + runtime.Version() + "), not a runtime",
		PeakRSS: max(peakResidentBytes(), after, before), RSSBeforeLoad: before, RSSAfterRuns: after})
}

// residentBytes is this process's resident set now (Linux), else its
// peak so far.
func residentBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if f := strings.Fields(string(b)); err == nil && len(f) > 1 {
		if pages, err := strconv.ParseInt(f[1], 10, 64); err == nil {
			return pages * int64(os.Getpagesize())
		}
	}
	return peakResidentBytes()
}

// peakResidentBytes is VmHWM (Linux), else ru_maxrss (which Linux
// carries over an execve from the parent: see vision_benchlib.py).
func peakResidentBytes() int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" && f[2] == "kB" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) * 1024
}
