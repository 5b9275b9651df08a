package standin

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/mlc/report"
)

// Stand-ins for the native backend's helpers and for Chromium. They do
// the real work in Go where it is cheap (the q4 weights, their decoding,
// the digests); only the perplexity (a function of the text and the bits
// per parameter) and the browser's WebGPU are simulated, and the chromium
// stand-in reads the page it is sent to and the shards it serves.
func init() {
	standin.Tools["mlc_native.py"] = mlcNative
	standin.Tools["mlc_gate.py"] = mlcGate
	standin.Tools["chromium"] = chromium
}

// mlcNative: mlc_native.py convert-weight|gen-config --model DIR --quantization Q --out DIR ...
func mlcNative(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: mlc_native.py convert-weight|gen-config --model DIR --quantization Q --out DIR")
	}
	_, flags, err := standin.Args(args[1:])
	if err != nil {
		return err
	}
	model, q, out := flags["--model"], flags["--quantization"], flags["--out"]
	if model == "" || q == "" || out == "" {
		return errors.New("usage: mlc_native.py " + args[0] + " --model DIR --quantization Q --out DIR")
	}
	switch args[0] {
	case "convert-weight":
		scales := flags["--scales"]
		if scales == "" {
			scales = "mlc"
		}
		calibTokens := 0
		switch scales {
		case "mlc", "mse":
		case "imatrix":
			// No forward pass here: the stand-in checks the calibration text it
			// is given and counts its words, then weighs every column alike
			// (the mse search); the real converter weighs them by activations.
			b, err := os.ReadFile(flags["--calibration"])
			if err != nil {
				return fmt.Errorf("mlc_native.py: --scales imatrix needs --calibration FILE: %w", err)
			}
			if calibTokens = len(strings.Fields(string(b))); calibTokens == 0 {
				return fmt.Errorf("mlc_native.py: calibration text %s is empty", flags["--calibration"])
			}
			scales = "mse"
			// GPTQ needs the Hessian of a forward pass the stand-in cannot make:
			// it checks the flag and rounds to nearest.
			if r := flags["--rounding"]; r != "" && r != "rtn" && r != "gptq" && r != "gptq-embedding" {
				return fmt.Errorf("mlc_native.py: --rounding %q: want rtn, gptq or gptq-embedding", r)
			}
		default:
			return fmt.Errorf("mlc_native.py: --scales %q: want mlc, mse or imatrix", scales)
		}
		// AWQ's rescaling needs the activations of that forward pass too: the
		// stand-in checks the flag and its preconditions, and rescales nothing.
		switch a := flags["--awq"]; a {
		case "", "off":
		case "on":
			if flags["--scales"] != "imatrix" || flags["--rounding"] == "gptq" {
				return errors.New("mlc_native.py: --awq on needs --scales imatrix and --rounding rtn or gptq-embedding (its statistics come from the same calibration pass)")
			}
		default:
			return fmt.Errorf("mlc_native.py: --awq %q: want on or off", a)
		}
		var log bytes.Buffer
		if err := mlcConvertWeight(model, q, scales, out, &log); err != nil {
			return err
		}
		stderr.Write(log.Bytes())
		var c MLCTensorCache
		b, err := os.ReadFile(filepath.Join(out, "tensor-cache.json"))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &c); err != nil {
			return err
		}
		var total int64
		if c.Metadata.BitsPerParam > 0 {
			total = int64(math.Round(c.Metadata.ParamBytes * 8 / c.Metadata.BitsPerParam))
		}
		return standin.PrintJSON(stdout, report.Native{ConvertWeight: &report.NativeConvert{Quantization: q, Scales: flags["--scales"],
			Rounding: flags["--rounding"], EmbeddingRounding: "rtn (stand-in: no forward pass, so no Hessian)",
			LinearRounding: "rtn (stand-in: no forward pass, so no Hessian)", CalibrationTokens: calibTokens, Shards: len(c.Records),
			Params: c.Metadata.ParamSize, ParamBytes: c.Metadata.ParamBytes, TotalParams: total, BitsPerParam: c.Metadata.BitsPerParam,
			Torch: "stand-in"}})
	case "gen-config":
		f := map[string]string{"--quantization": q, "--conv-template": flags["--conv-template"],
			"--context-window-size": flags["--context-window-size"], "-o": out}
		var log bytes.Buffer
		if err := mlcGenConfig(model, f, &log); err != nil {
			return err
		}
		stderr.Write(log.Bytes())
		b, err := os.ReadFile(filepath.Join(out, "mlc-chat-config.json"))
		if err != nil {
			return err
		}
		var chat struct {
			Context   int      `json:"context_window_size"`
			Tokenizer []string `json:"tokenizer_files"`
		}
		if err := json.Unmarshal(b, &chat); err != nil {
			return err
		}
		return standin.PrintJSON(stdout, report.Native{GenConfig: &report.NativeGenConfig{ContextWindowSize: chat.Context,
			TokenizerFiles: chat.Tokenizer, ConvTemplate: flags["--conv-template"]}})
	}
	return fmt.Errorf("mlc_native.py: unknown command %q", args[0])
}

// DecodeFolder reads an MLC folder's tensor-cache.json and shards
// (checking sizes and md5sums) and returns the sha256 of every tensor
// decoded to little-endian float32, keyed as mlc_gate.py keys them.
func DecodeFolder(dir string) (map[string]string, *MLCTensorCache, error) {
	b, err := os.ReadFile(filepath.Join(dir, "tensor-cache.json"))
	if err != nil {
		return nil, nil, err
	}
	var c MLCTensorCache
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, nil, err
	}
	raw := map[string][]byte{}
	recs := map[string]MLCRecord{}
	for _, sh := range c.Records {
		data, err := os.ReadFile(filepath.Join(dir, sh.DataPath))
		if err != nil {
			return nil, nil, err
		}
		if sum := md5.Sum(data); hex.EncodeToString(sum[:]) != sh.MD5 || int64(len(data)) != sh.NBytes {
			return nil, nil, fmt.Errorf("%s does not match tensor-cache.json", sh.DataPath)
		}
		for _, r := range sh.Records {
			raw[r.Name] = data[r.ByteOffset : r.ByteOffset+r.NBytes]
			recs[r.Name] = r
		}
	}
	return DecodeRecords(raw, recs), &c, nil
}

// DecodeRecords decodes every tensor to float32 and digests it.
func DecodeRecords(raw map[string][]byte, recs map[string]MLCRecord) map[string]string {
	half := func(r MLCRecord, b []byte, i int) float32 {
		h := binary.LittleEndian.Uint16(b[2*i:])
		if r.Dtype == "float16" {
			return F16ToF32(h)
		}
		return math.Float32frombits(uint32(h) << 16) // f32-to-bf16 or bfloat16
	}
	out := map[string]string{}
	for name, r := range recs {
		var vals []float32
		switch {
		case strings.HasSuffix(name, ".q_scale"):
			continue
		case strings.HasSuffix(name, ".q_weight"):
			base := strings.TrimSuffix(name, ".q_weight")
			sr, sb := recs[base+".q_scale"], raw[base+".q_scale"]
			rows, words, groups := r.Shape[0], r.Shape[1], sr.Shape[1]
			b := raw[name]
			for i := 0; i < rows*words; i++ {
				word := binary.LittleEndian.Uint32(b[4*i:])
				s := half(sr, sb, (i/words)*groups+(i%words)*8/32)
				for e := 0; e < 8; e++ {
					vals = append(vals, (float32((word>>(4*e))&0xf)-7)*s)
				}
			}
			name = base + ".weight"
		default:
			for i := 0; i < len(raw[name])/2; i++ {
				vals = append(vals, half(r, raw[name], i))
			}
		}
		h := sha256.New()
		buf := make([]byte, 4)
		for _, v := range vals {
			binary.LittleEndian.PutUint32(buf, math.Float32bits(v))
			h.Write(buf)
		}
		out[name] = hex.EncodeToString(h.Sum(nil))
	}
	return out
}

// mlcGate: mlc_gate.py --mlc DIR --model DIR --text FILE --ctx N [--chunks K] --digests OUT
// [--scores-out DIR] [--baseline-scores DIR]
func mlcGate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("mlc_gate", flag.ContinueOnError)
	dir := fs.String("mlc", "", "")
	model := fs.String("model", "", "")
	textFile := fs.String("text", "", "")
	nctx := fs.Int("ctx", 512, "")
	chunks := fs.Int("chunks", -1, "")
	digests := fs.String("digests", "", "")
	fs.Int("threads", 0, "")
	scores := standin.AddScoreFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *model == "" || *digests == "" {
		return errors.New("usage: mlc_gate.py --mlc DIR --model DIR --text FILE --digests OUT")
	}
	if _, err := standin.CheckpointDigest(*model); err != nil {
		return err
	}
	d, cache, err := DecodeFolder(*dir)
	if err != nil {
		return err
	}
	b, _ := json.MarshalIndent(report.Digests{Format: "stand-in", Tensors: d}, "", " ")
	if err := os.WriteFile(*digests, b, 0o644); err != nil {
		return err
	}
	ppl, _, n, err := standin.EvalChunks(*textFile, *nctx, *chunks)
	if err != nil {
		return err
	}
	ppl += standin.Drift(cache.Metadata.BitsPerParam)
	scored := n * (*nctx - 1 - *nctx/2)
	// The decoded tensors' digests: each model's scores its own.
	kl, top1, err := scores.Scores(ppl, scored, b)
	if err != nil {
		return err
	}
	return standin.PrintJSON(stdout, report.Gate{PPL: ppl, Chunks: n, Ctx: *nctx, Scored: scored,
		Tensors: len(d), DecodedSHA256: "stand-in", ParamBytes: &cache.Metadata.ParamBytes, Compute: "float32 (stand-in)",
		FloatFromCheckpoint: []string{}, Torch: "stand-in", KLDivergence: kl, Top1Agreement: top1})
}

// chromium: chromium --version, or chromium FLAGS... URL: the stand-in
// loads the page (which must carry the WGSL decoder), fetches the tensor
// cache and shards the step serves, decodes them in Go, posts the result
// like the page does and then stays up until the step stops it.
func chromium(args []string, stdout, stderr io.Writer) error {
	if len(args) == 1 && args[0] == "--version" {
		fmt.Fprintln(stdout, "Chromium stand-in (edgepipe test tier)")
		return nil
	}
	if len(args) == 0 || !strings.HasPrefix(args[len(args)-1], "http://127.0.0.1:") {
		return errors.New("usage: chromium FLAGS... http://127.0.0.1:PORT/")
	}
	for _, need := range []string{"--headless=new", "--enable-unsafe-webgpu", "--use-webgpu-adapter=swiftshader"} {
		found := false
		for _, a := range args {
			found = found || a == need
		}
		if !found {
			return fmt.Errorf("chromium stand-in: WebGPU needs %s", need)
		}
	}
	base := args[len(args)-1]
	get := func(p string) ([]byte, error) {
		resp, err := http.Get(base + p)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("GET %s: %s", p, resp.Status)
		}
		return io.ReadAll(resp.Body)
	}
	result := map[string]any{"user_agent": "HeadlessChrome stand-in", "shader_f16": false, "features": []string{},
		"adapter": map[string]any{"vendor": "edgepipe", "architecture": "stand-in", "is_fallback": true}}
	if hang := os.Getenv("EDGEPIPE_STANDIN_CHROMIUM_HANG"); hang != "" {
		fmt.Fprintln(stderr, "[stand-in] hanging, as asked")
		time.Sleep(time.Hour)
	}
	digests, err := func() (map[string]string, error) {
		page, err := get("")
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(page, []byte("unpack2x16float")) {
			return nil, errors.New("the page has no WGSL q4 decoder")
		}
		b, err := get("tensor-cache.json")
		if err != nil {
			return nil, err
		}
		var c MLCTensorCache
		if err := json.Unmarshal(b, &c); err != nil {
			return nil, err
		}
		raw, recs := map[string][]byte{}, map[string]MLCRecord{}
		for _, sh := range c.Records {
			data, err := get(sh.DataPath)
			if err != nil {
				return nil, err
			}
			for _, r := range sh.Records {
				raw[r.Name] = data[r.ByteOffset : r.ByteOffset+r.NBytes]
				recs[r.Name] = r
			}
		}
		return DecodeRecords(raw, recs), nil
	}()
	if err != nil {
		result["error"] = err.Error()
	} else {
		if flip := os.Getenv("EDGEPIPE_STANDIN_CHROMIUM_FLIP"); flip != "" {
			names := make([]string, 0, len(digests))
			for n := range digests {
				names = append(names, n)
			}
			sort.Strings(names)
			digests[names[0]] = strings.Repeat("0", 64) // a decoder that disagrees
		}
		result["ok"], result["tensors"] = true, digests
	}
	body, _ := json.Marshal(result)
	resp, err := http.Post(base+"result", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp.Body.Close()
	time.Sleep(time.Hour) // a browser stays open until it is stopped
	return nil
}
