package shared

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgepipe/edgepipe/internal/gguf/gguftest"
	"github.com/edgepipe/edgepipe/internal/toolchain"
	"github.com/edgepipe/edgepipe/steps"
)

func writeGGUF(t *testing.T, path string, m gguftest.Model) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := m.File().Write(path); err != nil {
		t.Fatal(err)
	}
}

func splitPart(no, count int) gguftest.Model {
	m := gguftest.Tiny()
	m.Split = [2]int{no, count}
	return m
}

func TestLocalGGUF(t *testing.T) {
	dir := t.TempDir()
	writeGGUF(t, filepath.Join(dir, "one/smol.gguf"), gguftest.Tiny())
	writeGGUF(t, filepath.Join(dir, "two/a.gguf"), gguftest.Tiny())
	writeGGUF(t, filepath.Join(dir, "two/b.gguf"), gguftest.Tiny())
	writeGGUF(t, filepath.Join(dir, "ckpt/extra.gguf"), gguftest.Tiny())
	writeFiles(t, dir, map[string]string{"ckpt/config.json": "{}", "empty/README.md": "", "file.txt": ""})
	writeGGUF(t, filepath.Join(dir, "parts/m-00001-of-00002.gguf"), splitPart(0, 2))
	writeGGUF(t, filepath.Join(dir, "parts/m-00002-of-00002.gguf"), splitPart(1, 2))
	writeGGUF(t, filepath.Join(dir, "half/m-00001-of-00003.gguf"), splitPart(0, 3))

	for _, tc := range []struct {
		src, path string
		ok        bool
		wantErr   []string
	}{
		{src: "one", path: filepath.Join("one", "smol.gguf"), ok: true},
		{src: filepath.Join(dir, "one"), path: filepath.Join(dir, "one", "smol.gguf"), ok: true},
		// A file named directly is the source as written, there or not:
		// the data role reads (and reports) it.
		{src: "one/smol.gguf", path: "one/smol.gguf", ok: true},
		{src: "missing.gguf", path: "missing.gguf", ok: true},
		{src: "ckpt"},
		{src: "empty"},
		{src: "file.txt"},
		{src: "nowhere"},
		{src: "hf://org/name"},
		{src: "https://example.com/m.gguf"},
		{src: "builtin:smollm2-135m"},
		{src: "two", ok: true, wantErr: []string{"holds 2 GGUF files (a.gguf, b.gguf)", "point model.source at one of them"}},
		{src: "parts", ok: true, wantErr: []string{"holds m-00001-of-00002.gguf, m-00002-of-00002.gguf", "all here", "llama-gguf-split --merge"}},
		{src: "half", ok: true, wantErr: []string{"2 of them are not here", "m-00002-of-00003.gguf, m-00003-of-00003.gguf"}},
		{src: "parts/m-00002-of-00002.gguf", ok: true, wantErr: []string{"model.source parts/m-00002-of-00002.gguf", "split GGUF of 2 parts"}},
	} {
		path, ok, err := LocalGGUF(tc.src, dir)
		if path != tc.path || ok != tc.ok {
			t.Errorf("LocalGGUF(%q) = %q, %v; want %q, %v", tc.src, path, ok, tc.path, tc.ok)
		}
		if (err == nil) != (len(tc.wantErr) == 0) {
			t.Errorf("LocalGGUF(%q): error %v, want %q", tc.src, err, tc.wantErr)
			continue
		}
		for _, w := range tc.wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("LocalGGUF(%q): %v, want %q", tc.src, err, w)
			}
		}
	}
}

func TestOneSplitSet(t *testing.T) {
	for _, tc := range []struct {
		paths  []string
		prefix string
		count  int
		ok     bool
	}{
		{[]string{"/d/m-00001-of-00002.gguf", "/d/m-00002-of-00002.gguf"}, "m", 2, true},
		{[]string{"/d/m-00002-of-00003.gguf"}, "m", 3, true},
		{[]string{"/d/m-00001-of-00002.gguf", "/d/n-00002-of-00002.gguf"}, "", 0, false},
		{[]string{"/d/m-00001-of-00002.gguf", "/d/m-00002-of-00003.gguf"}, "", 0, false},
		{[]string{"/d/m-00001-of-00002.gguf", "/d/m.gguf"}, "", 0, false},
		{[]string{"/d/m-00001-of-00001.gguf"}, "", 0, false},
		{nil, "", 0, false},
	} {
		prefix, count, ok := oneSplitSet(tc.paths)
		if prefix != tc.prefix || count != tc.count || ok != tc.ok {
			t.Errorf("oneSplitSet(%v) = %q, %d, %v; want %q, %d, %v", tc.paths, prefix, count, ok, tc.prefix, tc.count, tc.ok)
		}
	}
}

func TestCheckSplitURL(t *testing.T) {
	for src, want := range map[string]string{
		"https://h/m/model-00001-of-00004.gguf":                   "model-00001-of-00004.gguf is part 1 of a split GGUF of 4 parts",
		"https://h/m/model-00003-of-00004.gguf?checksum=sha256:0": "part 3 of a split GGUF of 4 parts",
		"s3::https://b/model-00002-of-00002.gguf#x":               "part 2 of a split GGUF of 2 parts",
		"https://h/m/model-00001-of-00001.gguf":                   "",
		"https://h/m/model.gguf":                                  "",
		"https://h/m/model-00001-of-00004.tar.gz":                 "",
	} {
		err := checkSplitURL(src)
		if (err == nil) != (want == "") || err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("checkSplitURL(%q) = %v, want %q", src, err, want)
		}
	}
}

func ggufInfoGolden(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("python", "reports", "gguf_to_hf.json"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRecordGGUFInfo(t *testing.T) {
	var r steps.Result
	if err := recordGGUFInfo(&r, ggufInfoGolden(t)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{FactSourceFormat: "gguf", FactSourceQuantization: "Q4_1",
		FactSourceTensorTypes: "F32:61 Q4_1:211", FactTokenizer: "rebuilt-from-gguf"}
	for k, v := range want {
		if r.Facts[k] != v {
			t.Errorf("fact %s = %q, want %q", k, r.Facts[k], v)
		}
	}
	// What the converter could not say is left out, not recorded empty.
	var bare steps.Result
	line := `{"add_bos": true, "architecture": "A", "file_type": "", "files": [], "out": "/o", "parameters": 1, "tensor_types": {}, "tokenizer": ""}`
	if err := recordGGUFInfo(&bare, []byte(line)); err != nil {
		t.Fatal(err)
	}
	if len(bare.Facts) != 1 || bare.Facts[FactSourceFormat] != "gguf" {
		t.Errorf("facts %v", bare.Facts)
	}
	// A report that does not match its type is refused, naming the helper.
	err := recordGGUFInfo(&steps.Result{}, []byte(`{"out": "/o"}`))
	var re *steps.ReportError
	if !errors.As(err, &re) || re.Helper != toolchain.ToolGGUFToHF {
		t.Errorf("partial report: %v", err)
	}
}

// converter plays gguf_to_hf.py: a checkpoint in --out and the golden
// report in --info.
func converter(t *testing.T, f *fakeStep, info []byte) {
	f.tool = func(argv []string) error {
		writeFiles(t, argAfter(argv, "--out"), map[string]string{"config.json": `{"architectures": ["LlamaForCausalLM"]}`, "model.safetensors": "w"})
		if info != nil {
			return os.WriteFile(argAfter(argv, "--info"), info, 0o644)
		}
		return nil
	}
}

func TestFetchLocalGGUF(t *testing.T) {
	f := newFakeStep(t, &FetchParams{Source: "./smol.gguf"})
	src := filepath.Join(f.sc.RecipeDir, "smol.gguf")
	writeGGUF(t, src, gguftest.Tiny())
	f.data[DataGGUF] = src
	converter(t, f, ggufInfoGolden(t))
	if err := Fetch.Run(context.Background(), f.sc); err != nil {
		t.Fatal(err)
	}
	want := []string{"/opt/tools/" + toolchain.ToolGGUFToHF, "--gguf", src, "--out", f.sc.Out, "--info", filepath.Join(f.sc.Scratch, "gguf-info.json")}
	if len(f.argv) != 1 || !slices.Equal(f.argv[0], want) {
		t.Errorf("argv %q\nwant %q", f.argv, want)
	}
	if !slices.Equal(f.sc.Result.Argv[0], want) {
		t.Errorf("recorded argv %q", f.sc.Result.Argv)
	}
	if f.sc.Result.Facts[FactSourceQuantization] != "Q4_1" || f.sc.Result.Facts[FactSourceFormat] != "gguf" {
		t.Errorf("facts %v", f.sc.Result.Facts)
	}
	// The params' GGUF flag (a folder whose one GGUF the planner found)
	// takes the same path.
	f = newFakeStep(t, &FetchParams{Source: "./folder", GGUF: true})
	f.data[DataGGUF] = src
	converter(t, f, ggufInfoGolden(t))
	if err := Fetch.Run(context.Background(), f.sc); err != nil || len(f.argv) != 1 {
		t.Errorf("GGUF folder: %v, argv %q", err, f.argv)
	}
}

func TestFetchGGUFRefusals(t *testing.T) {
	dir := t.TempDir()
	part := filepath.Join(dir, "renamed.gguf")
	writeGGUF(t, part, splitPart(1, 3))
	html := filepath.Join(dir, "page.gguf")
	writeFiles(t, dir, map[string]string{"page.gguf": "<html>404 Not Found</html>"})
	good := filepath.Join(dir, "good.gguf")
	writeGGUF(t, good, gguftest.Tiny())

	for _, tc := range []struct {
		name, path string
		info       []byte
		toolErr    error
		wantErr    string
		ran        bool
	}{
		{name: "a part renamed", path: part, wantErr: "renamed.gguf is part 2 of a split GGUF of 3 parts (its split.no and split.count say so)"},
		{name: "not a GGUF", path: html, wantErr: "page.gguf"},
		{name: "no data", wantErr: "the recipe has no gguf data"},
		{name: "converter fails", path: good, toolErr: errors.New("exit status 1"), wantErr: "dequantize the GGUF into a checkpoint: exit status 1", ran: true},
		{name: "converter writes no info", path: good, wantErr: "gguf_to_hf.py wrote no gguf-info.json", ran: true},
		{name: "info of another shape", path: good, info: []byte(`{"ppl": 1}`), wantErr: "does not match what edgepipe reads", ran: true},
	} {
		f := newFakeStep(t, &FetchParams{Source: "./x.gguf"})
		if tc.path != "" {
			f.data[DataGGUF] = tc.path
		}
		converter(t, f, tc.info)
		if tc.toolErr != nil {
			f.tool = func([]string) error { return tc.toolErr }
		}
		err := Fetch.Run(context.Background(), f.sc)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		}
		if ran := len(f.argv) > 0; ran != tc.ran {
			t.Errorf("%s: converter ran %v, want %v", tc.name, ran, tc.ran)
		}
	}
}

// A downloaded GGUF lands in the scratch folder and is converted from
// there; the output holds only the checkpoint.
func TestFetchRemoteGGUF(t *testing.T) {
	b, err := gguftest.Tiny().File().Bytes()
	if err != nil {
		t.Fatal(err)
	}
	part, err := splitPart(0, 2).File().Bytes()
	if err != nil {
		t.Fatal(err)
	}
	srv := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/smol.gguf":
			_, _ = w.Write(b)
		case "/renamed.gguf":
			_, _ = w.Write(part)
		case "/two.gguf":
			_, _ = w.Write(tarGz(t, map[string][]byte{"a.gguf": b, "b.gguf": b}))
		case "/none.gguf":
			_, _ = w.Write(tarGz(t, map[string][]byte{"README.md": []byte("no model")}))
		default:
			http.NotFound(w, r)
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	f := newFakeStep(t, &FetchParams{Source: srv.URL + "/smol.gguf?checksum=sha256:" + sha256Hex(b)})
	converter(t, f, ggufInfoGolden(t))
	if err := Fetch.Run(ctx, f.sc); err != nil {
		t.Fatal(err)
	}
	if len(f.argv) != 1 || argAfter(f.argv[0], "--gguf") != filepath.Join(f.sc.Scratch, "fetched", "smol.gguf") || argAfter(f.argv[0], "--out") != f.sc.Out {
		t.Errorf("argv %q", f.argv)
	}
	if got := listFiles(t, f.sc.Out); !slices.Equal(got, []string{"config.json", "model.safetensors"}) {
		t.Errorf("output holds %v", got)
	}
	if f.sc.Result.Facts[FactSourceFormat] != "gguf" {
		t.Errorf("facts %v", f.sc.Result.Facts)
	}

	// An archive named like a GGUF must hold exactly one.
	for name, want := range map[string]string{"two": "the download holds 2 .gguf files, not one", "none": "the download holds 0 .gguf files"} {
		f = newFakeStep(t, &FetchParams{Source: srv.URL + "/" + name + ".gguf?archive=tar.gz"})
		converter(t, f, ggufInfoGolden(t))
		if err := Fetch.Run(ctx, f.sc); err == nil || !strings.Contains(err.Error(), want) || len(f.argv) != 0 {
			t.Errorf("%s: %v, argv %q", name, err, f.argv)
		}
	}

	f = newFakeStep(t, &FetchParams{Source: srv.URL + "/renamed.gguf"})
	converter(t, f, ggufInfoGolden(t))
	if err := Fetch.Run(ctx, f.sc); err == nil || !strings.Contains(err.Error(), "part 1 of a split GGUF of 2 parts") || len(f.argv) != 0 {
		t.Errorf("a downloaded part: %v, argv %q", err, f.argv)
	}
}

func tarGz(t *testing.T, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, b := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Error(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Error(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Error(err)
	}
	if err := gz.Close(); err != nil {
		t.Error(err)
	}
	return buf.Bytes()
}
