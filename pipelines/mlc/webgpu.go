package mlc

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/edgepipe/edgepipe/internal/boundedfile"
	"github.com/edgepipe/edgepipe/pipelines/mlc/report"
	"github.com/edgepipe/edgepipe/steps"
)

// mlcWebGPUCheck decodes the weight shards in headless Chromium with a
// WGSL kernel on real WebGPU (SwiftShader on a host without a GPU) and
// requires every decoded float32 tensor to equal, bit for bit, what
// mlc-gate dequantized and scored. The step serves the shards on
// 127.0.0.1, starts the browser offline, waits for the page's result and
// stops both; a crash or a hang fails this step after its timeout, with
// the browser's log, and nothing else.
type mlcWebGPUCheck struct{}

// ToolChromium is the browser the check drives.
const ToolChromium = "chromium"

// DefaultWebGPUTimeoutS bounds one browser run (start, load, decode).
const DefaultWebGPUTimeoutS = 300

//go:embed webgpu/index.html
var webgpuPage []byte

// WebGPUParams are an mlc-webgpu-check step's.
type WebGPUParams struct {
	Quantization string `json:"quantization"`
	TimeoutS     int    `json:"timeout_s"`
	// Page is the sha256 of the page and its WGSL kernel, so that a new
	// kernel reruns the check.
	Page string `json:"page"`
}

// PageDigest is the sha256 of the embedded page.
func PageDigest() string {
	sum := sha256.Sum256(webgpuPage)
	return hex.EncodeToString(sum[:])
}

func (mlcWebGPUCheck) Name() string       { return "mlc-webgpu-check" }
func (mlcWebGPUCheck) Version() int       { return 1 }
func (mlcWebGPUCheck) NewParams() any     { return &WebGPUParams{} }
func (mlcWebGPUCheck) Tools(any) []string { return []string{ToolChromium} }
func (mlcWebGPUCheck) Resources(any) steps.Resources {
	// Chromium with SwiftShader: the shards, one decoded tensor (113 MB
	// for the embedding) and its read-back copy.
	// ru_maxrss sees one process, and Chromium runs several: the weight is
	// the largest one's (docs/results/memory-weights.md).
	return steps.Resources{Cores: 2, MemoryMB: 250}
}

// BrowserFlags start Chromium headless with WebGPU on SwiftShader, with
// nothing reaching the network: every host but 127.0.0.1 fails to resolve.
func BrowserFlags(profile string) []string {
	return []string{"--headless=new", "--enable-unsafe-webgpu", "--enable-features=Vulkan",
		"--use-vulkan=swiftshader", "--use-webgpu-adapter=swiftshader", "--no-sandbox",
		"--disable-background-networking", "--disable-component-update", "--no-first-run",
		"--disable-default-apps", "--disable-sync", "--metrics-recording-only", "--no-default-browser-check",
		"--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--user-data-dir=" + profile}
}

// webgpuResult is what the page posts back.
type webgpuResult struct {
	OK        bool              `json:"ok"`
	Error     string            `json:"error"`
	UserAgent string            `json:"user_agent"`
	Adapter   map[string]any    `json:"adapter"`
	Features  []string          `json:"features"`
	ShaderF16 bool              `json:"shader_f16"`
	DecodeS   float64           `json:"decode_s"`
	Tensors   map[string]string `json:"tensors"`
}

// server serves the page and the shards and takes the page's reports.
type server struct {
	dir    string
	files  map[string]bool
	log    io.Writer
	mu     sync.Mutex
	result chan webgpuResult
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/")
	switch {
	case r.Method == http.MethodGet && (name == "" || name == "index.html"):
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write(webgpuPage)
	case r.Method == http.MethodGet && s.files[name]:
		http.ServeFile(w, r, filepath.Join(s.dir, name))
	case r.Method == http.MethodPost && name == "log":
		b, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		s.mu.Lock()
		fmt.Fprintf(s.log, "[page] %s\n", b)
		s.mu.Unlock()
	case r.Method == http.MethodPost && name == "result":
		var res webgpuResult
		if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&res); err != nil {
			res = webgpuResult{Error: "the page's result is not JSON: " + err.Error()}
		}
		select {
		case s.result <- res:
		default:
		}
	default:
		http.NotFound(w, r)
	}
}

func (mlcWebGPUCheck) Run(ctx context.Context, sc *steps.Context) error {
	weights, err := firstInput(sc, mlcNativeConvert{}, mlcConvertWeight{})
	if err != nil {
		return err
	}
	gate, err := sc.Input(mlcGate{})
	if err != nil {
		return err
	}
	want, err := readDigests(filepath.Join(gate.Dir, DecodedDigests))
	if err != nil {
		return fmt.Errorf("mlc-webgpu-check: the gate's decoded weights: %w", err)
	}
	cache, err := readMLCCache(weights.Dir)
	if err != nil {
		return err
	}
	files := map[string]bool{MLCTensorCache: true}
	for _, sh := range cache.Records {
		if strings.Contains(sh.DataPath, "/") || strings.Contains(sh.DataPath, "..") {
			return fmt.Errorf("mlc-webgpu-check: %s names a shard outside its folder: %q", MLCTensorCache, sh.DataPath)
		}
		files[sh.DataPath] = true
	}
	p := steps.ParamsOf[WebGPUParams](sc.Params)
	timeout := time.Duration(max(p.TimeoutS, 10)) * time.Second

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("mlc-webgpu-check: listen on 127.0.0.1: %w", err)
	}
	srv := &server{dir: weights.Dir, files: files, log: sc.Log, result: make(chan webgpuResult, 1)}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()

	profile := filepath.Join(sc.Scratch, "chromium-profile")
	if err := os.MkdirAll(profile, 0o700); err != nil {
		return err
	}
	url := "http://" + ln.Addr().String() + "/"
	bctx, stop := context.WithTimeout(ctx, timeout)
	defer stop()
	exited := make(chan error, 1)
	go func() { exited <- sc.RunTool(bctx, ToolChromium, append(BrowserFlags(profile), url)...) }()

	var res webgpuResult
	select {
	case res = <-srv.result:
		stop() // the browser is stopped by the step, whatever it was doing
		<-exited
	case err := <-exited:
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("mlc-webgpu-check: %s exited before the page reported (%v): see %s", ToolChromium, err, sc.LogPath)
	case <-bctx.Done():
		<-exited
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("mlc-webgpu-check: no result from the page within %s: the browser hung or crashed; its log is %s", timeout, sc.LogPath)
	}
	return judgeWebGPU(sc, res, want)
}

// judgeWebGPU records the browser's adapter and compares its digests with
// the gate's.
func judgeWebGPU(sc *steps.Context, res webgpuResult, want map[string]string) error {
	if !res.OK {
		sc.Result.Checks = append(sc.Result.Checks, steps.Check{Name: "WebGPU decode", Passed: false,
			Detail: "the page failed: " + firstLine(res.Error)})
		fmt.Fprintf(sc.Log, "page error: %s\n", res.Error)
		return nil
	}
	adapter := describeAdapter(res.Adapter)
	var missing, differ []string
	for name, w := range want {
		g, ok := res.Tensors[name]
		switch {
		case !ok:
			missing = append(missing, name)
		case g != w:
			differ = append(differ, name)
		}
	}
	extra := 0
	for name := range res.Tensors {
		if _, ok := want[name]; !ok {
			extra++
		}
	}
	sort.Strings(missing)
	sort.Strings(differ)
	var problems []string
	for _, n := range differ {
		problems = append(problems, n+" decodes to other float32 bytes")
	}
	for _, n := range missing {
		problems = append(problems, n+" not decoded")
	}
	if extra > 0 {
		problems = append(problems, fmt.Sprintf("%d tensors the gate did not score", extra))
	}
	ok := len(problems) == 0 && len(want) > 0
	sc.Result.Checks = append(sc.Result.Checks, steps.Check{Name: "WebGPU decode equals the gated weights", Passed: ok,
		Detail: summarize(fmt.Sprintf("%d tensors decoded by a WGSL kernel on %s are bit-identical (sha256 of their float32 bytes) to the weights mlc-gate scored",
			len(want), adapter), problems)})
	sc.Result.SetFact("webgpu_adapter", adapter)
	sc.Result.SetFact("browser", res.UserAgent)
	sc.Result.SetFact("shader_f16", fmt.Sprint(res.ShaderF16))
	sc.Result.SetFact("adapter_features", strings.Join(res.Features, " "))
	sc.Result.SetMetric("webgpu_decode_s", res.DecodeS)
	sc.Result.SetMetric("webgpu_tensors", float64(len(res.Tensors)))
	if len(differ) > 0 {
		fmt.Fprintf(sc.Log, "tensors that differ: %s\n", strings.Join(differ, ", "))
	}
	return nil
}

func describeAdapter(a map[string]any) string {
	var parts []string
	for _, k := range []string{"vendor", "architecture", "device", "description"} {
		if v, ok := a[k].(string); ok && v != "" {
			parts = append(parts, k+" "+v)
		}
	}
	if fb, ok := a["is_fallback"].(bool); ok && fb {
		parts = append(parts, "fallback adapter")
	}
	if len(parts) == 0 {
		return "an adapter that reports no info"
	}
	return strings.Join(parts, ", ")
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func readDigests(path string) (map[string]string, error) {
	b, err := boundedfile.Read(path, boundedfile.SidecarLimit)
	if err != nil {
		return nil, err
	}
	var d report.Digests
	if err := steps.DecodeReport(ToolGate+" --digests", b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(d.Tensors) == 0 {
		return nil, errors.New(path + " lists no tensors")
	}
	return d.Tensors, nil
}
