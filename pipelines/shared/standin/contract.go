package standin

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/edgepipe/edgepipe/internal/gguf"
	"github.com/edgepipe/edgepipe/internal/standin"
	"github.com/edgepipe/edgepipe/pipelines/shared/report"
)

func init() { standin.Tools["contract.py"] = contract }

// contract: contract.py --source DIR --artifact PATH --reader R --corpus
// FILE [--source-gguf FILE] [--llama-tokenize PATH]. It reads what the
// real helper reads and judges the same way, but compares the tokenizer
// files' bytes where the real one tokenizes the corpus: a folder's
// tokenizer files, or the digest of them the stand-in converter writes
// into its GGUF (standin.GGUFTokenizerKeys). The source's GGUF it only
// reads, and says the comparison was skipped: the stand-in cannot
// tokenize with it.
func contract(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("contract", flag.ContinueOnError)
	src := fs.String("source", "", "")
	art := fs.String("artifact", "", "")
	reader := fs.String("reader", "", "")
	corpus := fs.String("corpus", "", "")
	srcGGUF := fs.String("source-gguf", "", "")
	fs.String("llama-tokenize", "", "")
	if err := standin.ParseFlags(fs, args); err != nil {
		return err
	}
	if *src == "" || *art == "" || *corpus == "" {
		return errors.New("usage: contract.py --source DIR --artifact PATH --reader gguf|mlc|folder --corpus FILE")
	}
	text, err := os.ReadFile(*corpus)
	if err != nil {
		return err
	}
	texts := 1
	for _, line := range strings.Split(string(text), "\n") {
		if line != "" {
			texts++
		}
	}
	s, err := readSide(*src)
	if err != nil {
		return err
	}
	var a side
	switch *reader {
	case "gguf":
		a, err = ggufSide(*art)
	case "mlc":
		a, err = mlcSide(*art)
	case "folder":
		a, err = readSide(*art)
		if err == nil && a.tok.Digest == "" {
			a.tokErr = noTokenizer()
		}
	default:
		return fmt.Errorf("--reader %q: gguf, mlc or folder", *reader)
	}
	if err != nil {
		return err
	}
	r := report.Contract{Artifact: *reader, Path: *art, CorpusTexts: texts,
		Tokenizer: tokenizerCheck(s, a, texts), EOS: eosCheck(s, a), BOS: bosCheck(s, a), ChatTemplate: templateCheck(s, a)}
	if *srcGGUF != "" {
		h, err := gguf.ReadFile(*srcGGUF)
		if err != nil {
			return err
		}
		model, _ := h.Str("tokenizer.ggml.model")
		r.SourceGGUF = &report.ContractCheck{Status: report.ContractSkipped, Differing: []report.DifferingText{},
			Source: fmt.Sprintf("%s: tokenizer.ggml.model %q", filepath.Base(*srcGGUF), model), Artifact: "not compared",
			Detail: "the stand-in cannot tokenize with a GGUF: llama.cpp's reading of the source's GGUF was not compared"}
	}
	return json.NewEncoder(stdout).Encode(r)
}

// idFrom is one id of a stop set and where it was declared.
type idFrom struct {
	id    int
	where string
}

// side is what the contract reads of a source or an artifact.
type side struct {
	tok    standin.Tokenizer
	tokErr string
	stops  []idFrom
	prefix []int
	bos    *int
	where  string
	note   string
	// convNamed is an MLC conversation template mlc-chat-config.json only
	// names (mlc_llm's registry's): how it renders a chat is unknown.
	convNamed string
}

func readSide(dir string) (side, error) {
	var s side
	t, err := standin.ReadTokenizer(dir)
	if err != nil {
		return s, err
	}
	s.tok = t
	for _, f := range []string{"config.json", "generation_config.json"} {
		ids, err := standin.IDs(dir, f, "eos_token_id")
		if err != nil {
			return s, err
		}
		for _, id := range ids {
			s.stops = append(s.stops, idFrom{id, fmt.Sprintf("%s eos_token_id %d", f, id)})
		}
	}
	if t.EOS != nil {
		s.stops = append(s.stops, idFrom{*t.EOS, fmt.Sprintf("the tokenizer's eos_token %q = %d", t.EOSText, *t.EOS)})
	}
	s.bos, s.where = t.BOS, "the tokenizer"
	if t.BOS == nil {
		ids, err := standin.IDs(dir, "config.json", "bos_token_id")
		if err != nil {
			return s, err
		}
		s.where = ""
		if len(ids) == 1 {
			s.bos, s.where = &ids[0], "config.json"
		}
	}
	s.prefix = []int{}
	if t.AddBOS && s.bos != nil {
		s.prefix = []int{*s.bos}
	}
	return s, nil
}

// ggufSide reads a stand-in GGUF: "GGUF", a version, the header's length
// and the header (JSON), whose tokenizer holds the converter's keys.
func ggufSide(path string) (side, error) {
	s := side{prefix: []int{}}
	b, err := os.ReadFile(path)
	if err != nil {
		return s, err
	}
	var h struct {
		StandIn   bool           `json:"standin"`
		Tokenizer map[string]any `json:"tokenizer"`
	}
	if len(b) < 12 || string(b[:4]) != "GGUF" {
		return s, fmt.Errorf("%s is not a GGUF file", path)
	}
	n := int(binary.LittleEndian.Uint32(b[8:12]))
	if n > len(b)-12 || json.Unmarshal(b[12:12+n], &h) != nil || !h.StandIn {
		return s, fmt.Errorf("%s is not a stand-in GGUF: the stand-in reads the tokenizer digest the stand-in converter writes", path)
	}
	k := h.Tokenizer
	if k == nil {
		s.tokErr = filepath.Base(path) + " holds no tokenizer (no tokenizer.ggml.model): an app cannot tokenize with it"
		return s, nil
	}
	s.tok.Digest, _ = k["tokenizer.stand_in.sha256"].(string)
	for _, kind := range []string{"eos", "eot", "eom"} {
		key := "tokenizer.ggml." + kind + "_token_id"
		if v, ok := k[key].(float64); ok {
			s.stops = append(s.stops, idFrom{int(v), fmt.Sprintf("%s %d", key, int(v))})
		}
	}
	if v, ok := k["tokenizer.ggml.bos_token_id"].(float64); ok {
		id := int(v)
		s.bos, s.where = &id, "tokenizer.ggml.bos_token_id"
		if k["tokenizer.ggml.add_bos_token"] == true {
			s.prefix = []int{id}
		}
	}
	s.tok.Templates = map[string]string{}
	for key, v := range k {
		t, ok := v.(string)
		switch {
		case !ok:
		case key == "tokenizer.chat_template":
			s.tok.Templates["default"] = t
		case strings.HasPrefix(key, "tokenizer.chat_template."):
			s.tok.Templates[strings.TrimPrefix(key, "tokenizer.chat_template.")] = t
		}
	}
	s.tok.Where = "tokenizer.chat_template"
	return s, nil
}

// mlcSide reads an MLC folder: its tokenizer files and mlc-chat-config.json.
func mlcSide(dir string) (side, error) {
	t, err := standin.ReadTokenizer(dir)
	if err != nil {
		return side{}, err
	}
	s := side{tok: t, prefix: []int{}, where: "mlc-chat-config.json"}
	if t.Digest == "" {
		s.tokErr = noTokenizer()
	}
	b, err := os.ReadFile(filepath.Join(dir, "mlc-chat-config.json"))
	if err != nil {
		return s, fmt.Errorf("%s has no mlc-chat-config.json: it is not an MLC model folder", dir)
	}
	var chat map[string]any
	if err := json.Unmarshal(b, &chat); err != nil {
		return s, err
	}
	for _, id := range standin.IDList(chat["eos_token_id"]) {
		s.stops = append(s.stops, idFrom{id, fmt.Sprintf("mlc-chat-config.json eos_token_id %d", id)})
	}
	if conv, ok := chat["conv_template"].(map[string]any); ok {
		for _, id := range standin.IDList(conv["stop_token_ids"]) {
			s.stops = append(s.stops, idFrom{id, fmt.Sprintf("conv_template %q stop_token_ids %d", conv["name"], id)})
		}
		if p := standin.IDList(conv["system_prefix_token_ids"]); p != nil {
			s.prefix = p
		}
		s.note = fmt.Sprintf("; mlc-chat-config.json's conv_template is %q", conv["name"])
		if _, written := conv["roles"]; !written {
			s.convNamed, _ = conv["name"].(string)
		}
	}
	if ids := standin.IDList(chat["bos_token_id"]); len(ids) == 1 {
		s.bos = &ids[0]
	}
	return s, nil
}

func noTokenizer() string {
	return "the artifact ships no tokenizer (its folder holds none of " + strings.Join(standin.TokenizerFiles, ", ") + "): an app cannot tokenize with it"
}

func check(status, source, artifact, detail string) report.ContractCheck {
	return report.ContractCheck{Status: status, Source: source, Artifact: artifact, Detail: detail, Differing: []report.DifferingText{}}
}

func tokenizerCheck(s, a side, texts int) report.ContractCheck {
	if s.tok.Digest == "" {
		return check(report.ContractSkipped, "no tokenizer", "not compared", "the source ships no tokenizer ("+
			"no "+strings.Join(standin.TokenizerFiles, ", ")+"): there is nothing to compare")
	}
	src := "tokenizer files sha256 " + s.tok.Digest[:16]
	if a.tok.Digest == "" {
		return check(report.ContractFailed, src, "no tokenizer", a.tokErr)
	}
	art := "tokenizer files sha256 " + a.tok.Digest[:16]
	if a.tok.Digest != s.tok.Digest {
		return check(report.ContractFailed, src, art, "the artifact's tokenizer files differ from the source's (the stand-in compares their bytes, it does not tokenize)")
	}
	return check(report.ContractPassed, src, art, fmt.Sprintf("%d corpus texts: the same tokenizer files (the stand-in compares their bytes, it does not tokenize)", texts))
}

func describeSet(found []idFrom) string {
	ids := map[int]bool{}
	var where []string
	for _, f := range found {
		ids[f.id] = true
		where = append(where, f.where)
	}
	return idSet(ids) + " (" + strings.Join(where, ", ") + ")"
}

func idSet(ids map[int]bool) string {
	var l []string
	for _, id := range sortedIDs(ids) {
		l = append(l, fmt.Sprint(id))
	}
	return "{" + strings.Join(l, ", ") + "}"
}

func sortedIDs(ids map[int]bool) []int {
	out := make([]int, 0, len(ids))
	for id := range ids {
		out = append(out, id)
	}
	sort.Ints(out)
	return out
}

func eosCheck(s, a side) report.ContractCheck {
	art := "no EOS declared"
	if len(a.stops) > 0 {
		art = describeSet(a.stops)
	}
	if len(s.stops) == 0 {
		return check(report.ContractSkipped, "no EOS declared", art,
			"the source declares no EOS (no eos_token_id in config.json or generation_config.json, no eos_token in the tokenizer): there is no stop set to keep")
	}
	src, declared := map[int]bool{}, map[int]bool{}
	for _, f := range s.stops {
		src[f.id] = true
	}
	for _, f := range a.stops {
		declared[f.id] = true
	}
	var missing, extra []string
	for _, id := range sortedIDs(src) {
		if !declared[id] {
			missing = append(missing, fmt.Sprint(id))
		}
	}
	for _, id := range sortedIDs(declared) {
		if !src[id] {
			extra = append(extra, fmt.Sprint(id))
		}
	}
	var problems []string
	if len(missing) > 0 {
		problems = append(problems, "the artifact does not stop on "+strings.Join(missing, ", ")+", which the source stops on")
	}
	if len(extra) > 0 {
		problems = append(problems, "the artifact declares "+strings.Join(extra, ", ")+" as EOS, which the source does not")
	}
	if len(problems) > 0 {
		return check(report.ContractFailed, describeSet(s.stops), art, strings.Join(problems, "; "))
	}
	return check(report.ContractPassed, describeSet(s.stops), art, "the same stop set")
}

func describeBOS(prefix []int, bos *int, where string) string {
	added := "adds no BOS"
	if len(prefix) > 0 {
		added = fmt.Sprintf("adds %v before a text", prefix)
	}
	if where != "" {
		return fmt.Sprintf("%s; BOS id %s (%s)", added, idOrNone(bos), where)
	}
	return fmt.Sprintf("%s; BOS id %s", added, idOrNone(bos))
}

func idOrNone(id *int) string {
	if id == nil {
		return "none"
	}
	return fmt.Sprint(*id)
}

func bosCheck(s, a side) report.ContractCheck {
	art := describeBOS(a.prefix, a.bos, a.where)
	if s.tok.Digest == "" {
		return check(report.ContractSkipped, "no tokenizer", art, "the source ships no tokenizer: how it encodes BOS is unknown")
	}
	src := describeBOS(s.prefix, s.bos, s.where)
	if a.tokErr != "" {
		return check(report.ContractFailed, src, "no tokenizer", a.tokErr)
	}
	var problems []string
	if !slices.Equal(s.prefix, a.prefix) {
		problems = append(problems, fmt.Sprintf("encoding a text puts %v before it in the artifact, %v in the source", a.prefix, s.prefix))
	}
	if s.bos != nil && (a.bos == nil || *a.bos != *s.bos) {
		problems = append(problems, fmt.Sprintf("the artifact declares BOS id %s, the source %d", idOrNone(a.bos), *s.bos))
	}
	if len(problems) > 0 {
		return check(report.ContractFailed, src, art, strings.Join(problems, "; "))
	}
	return check(report.ContractPassed, src, art, "the same BOS handling")
}

func describeTemplates(t map[string]string, where string) string {
	if len(t) == 0 {
		return "no chat template"
	}
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	sort.Strings(names)
	var parts []string
	for _, n := range names {
		sum := sha256.Sum256([]byte(t[n]))
		parts = append(parts, fmt.Sprintf("%s: sha256 %s (%d bytes)", n, hex.EncodeToString(sum[:8]), len(t[n])))
	}
	return strings.Join(parts, "; ") + " (" + where + ")"
}

func templateCheck(s, a side) report.ContractCheck {
	src, art := describeTemplates(s.tok.Templates, s.tok.Where), describeTemplates(a.tok.Templates, a.tok.Where)+a.note
	if len(s.tok.Templates) == 0 {
		return check(report.ContractSkipped, src, art,
			"the source has no chat template (no chat_template.jinja, no chat_template in tokenizer_config.json): there is none to keep")
	}
	if a.convNamed != "" {
		// As contract.py says; where the template is written out, the
		// stand-in compares the folder's Jinja template, as it cannot
		// render one.
		return check(report.ContractSkipped, src, fmt.Sprintf("conv_template %q", a.convNamed),
			"mlc-chat-config.json names its conversation template without writing it out: it is mlc_llm's registry's, "+
				"which edgepipe does not have, so how it renders a chat was not compared")
	}
	names := map[string]bool{}
	for n := range s.tok.Templates {
		names[n] = true
	}
	for n := range a.tok.Templates {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	var problems []string
	for _, n := range sorted {
		st, inS := s.tok.Templates[n]
		at, inA := a.tok.Templates[n]
		switch {
		case !inA:
			problems = append(problems, fmt.Sprintf("the artifact has no %q chat template: the source's is lost", n))
		case !inS:
			problems = append(problems, fmt.Sprintf("the artifact has a %q chat template the source does not", n))
		case st != at:
			i := 0
			for i < len(st) && i < len(at) && st[i] == at[i] {
				i++
			}
			problems = append(problems, fmt.Sprintf("the %q chat template differs from byte %d: source %q, artifact %q", n, i, clip(st[i:]), clip(at[i:])))
		}
	}
	if len(problems) > 0 {
		return check(report.ContractFailed, src, art, strings.Join(problems, "; "))
	}
	return check(report.ContractPassed, src, art, "the same chat template, byte for byte")
}

func clip(s string) string {
	if len(s) > 40 {
		return string(bytes.ToValidUTF8([]byte(s[:40]), nil))
	}
	return s
}
