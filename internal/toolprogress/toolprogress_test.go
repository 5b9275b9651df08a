package toolprogress

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

type pair struct{ done, total int64 }

func scanAll(chunks ...string) []pair {
	var got []pair
	s := &Scanner{Report: func(d, t int64) { got = append(got, pair{d, t}) }}
	for _, c := range chunks {
		if n, err := s.Write([]byte(c)); n != len(c) || err != nil {
			panic("short write")
		}
	}
	return got
}

func TestLlamaQuantize(t *testing.T) {
	got := scanAll("main: quantizing 'f16.gguf' to 'q4.gguf' as Q4_K_M\n",
		"[   1/ 272]                   output_norm.weight - [  576,     1,     1,     1], type =    f32, size =    0.002 MB\n",
		"[   2/ 272]                    token_embd.weight - [  576, 49152,     1,     1], type =    f16, converting to q6_K .. size =    54.00 MiB ->    22.15 MiB\n[ 272/ 272] blk.29.ffn_up.weight\n")
	if want := []pair{{1, 272}, {2, 272}, {272, 272}}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// llama-perplexity announces its chunks, then writes their scores on one
// line, flushing each: the line is read as it grows.
func TestLlamaPerplexityChunks(t *testing.T) {
	got := scanAll("perplexity: tokenizing the input ..\n",
		"perplexity: calculating perplexity over 16 chunks, n_ctx=512, batch_size=2048, n_seq=4\n",
		"[1]4.5316,", "[2]5.0132,[3]5.2", "1,[4]6.0,", "\nFinal estimate: PPL = 17.1\n")
	if want := []pair{{1, 16}, {3, 16}, {4, 16}}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// Without the announcement a "[3]" is not a chunk.
	if got := scanAll("[3]5.0 is not progress\n"); len(got) != 0 {
		t.Errorf("unannounced chunks: %v", got)
	}
}

func TestTqdmRedraws(t *testing.T) {
	got := scanAll("Quantizing:  10%|█         | 2/20 [00:01<00:09,  1.9it/s]\r",
		"Quantizing:  15%|█▌        | 3/20 [00:01<00:08,  2.0it/s]\r",
		"Quantizing:  15%|█▌        | 3/20 [00:02<00:08,  2.0it/s]\r")
	if want := []pair{{2, 20}, {3, 20}}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// Nonsense is not progress, and an endless line costs bounded memory.
func TestRefusesNonsenseAndBoundsMemory(t *testing.T) {
	if got := scanAll("[ 9/ 3] more done than there is\n[ 1/ 0]\n|5/4 [\n"); len(got) != 0 {
		t.Errorf("got %v", got)
	}
	s := &Scanner{Report: func(int64, int64) {}}
	big := strings.Repeat("x", 1<<20)
	for i := 0; i < 8; i++ {
		s.Write([]byte(big))
	}
	if len(s.line) > maxLine {
		t.Errorf("kept %d bytes of one line", len(s.line))
	}
}

// Real output of llama.cpp 0c1e57098 (the llamacpp toolchain): quantizing
// a small F16 GGUF, and llama-perplexity's two passes on SmolLM2-135M (16
// chunks; the second with --kl-divergence prints a table).
func TestRealLlamaCppLogs(t *testing.T) {
	for _, tc := range []struct {
		file        string
		first, last pair
		n           int
	}{
		{"llama-quantize.log", pair{1, 11}, pair{11, 11}, 11},
		{"llama-perplexity.log", pair{16, 16}, pair{16, 16}, 1},
		{"llama-perplexity-kl.log", pair{1, 16}, pair{16, 16}, 16},
	} {
		b, err := os.ReadFile(filepath.Join("testdata", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got := scanAll(string(b))
		if len(got) != tc.n || got[0] != tc.first || got[len(got)-1] != tc.last {
			t.Errorf("%s: %d reports, %v .. %v; want %d, %v .. %v", tc.file, len(got), got[0], got[len(got)-1], tc.n, tc.first, tc.last)
		}
	}
}
