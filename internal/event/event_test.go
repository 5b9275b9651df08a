package event

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestStepSeconds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		jsonl string
		want  map[string]float64
	}{
		{"empty", "", map[string]float64{}},
		{"finished steps only", `{"event":"step-started","step":"a"}
{"event":"step-finished","step":"a","seconds":1.5}
{"event":"step-cached","step":"b","seconds":0.1}
{"event":"step-failed","step":"c","seconds":2}
{"event":"step-finished","step":"d","seconds":3}
`, map[string]float64{"a": 1.5, "d": 3}},
		{"publishing excluded", `{"event":"step-finished","step":"publish:laptop","seconds":4}
{"event":"step-finished","step":"gguf-quantize:q4_k_m","seconds":5}`, map[string]float64{"gguf-quantize:q4_k_m": 5}},
		{"the last report of a step wins", `{"event":"step-finished","step":"a","seconds":1}
{"event":"step-finished","step":"a","seconds":2}`, map[string]float64{"a": 2}},
		{"lines that are not events are skipped", `progress 10%
{"event":"step-finished","step":"a","seconds":1}
{not json
{"event":"run-finished","recipe":"r","exit_code":0,"seconds":9}
`, map[string]float64{"a": 1}},
		{"CRLF line ends", "{\"event\":\"step-finished\",\"step\":\"a\",\"seconds\":1}\r\n", map[string]float64{"a": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := StepSeconds([]byte(tc.jsonl)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// The --json stream's field names are what CI scripts read: an event
// encodes to them, leaves out what is unset, and reads back the same.
func TestEventJSON(t *testing.T) {
	ev := Event{Time: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC), Type: Failed, Step: "gguf-quantize:q4_k_m", Kind: "gguf-quantize",
		Target: "laptop", Seconds: 1.25, Message: "exited 1", Path: "logs/q.log", Key: "abc",
		Phases: map[string]float64{"tools": 3}, MappedBytes: 42}
	b, err := json.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"time":"2026-03-04T05:06:07Z","event":"step-failed","step":"gguf-quantize:q4_k_m","kind":"gguf-quantize","target":"laptop",` +
		`"seconds":1.25,"message":"exited 1","path":"logs/q.log","cache_key":"abc","phases":{"tools":3},"mapped_bytes":42}`
	if string(b) != want {
		t.Errorf("got\n%s\nwant\n%s", b, want)
	}
	var back Event
	if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, ev) {
		t.Errorf("read back %+v (%v)", back, err)
	}
	b, _ = json.Marshal(Event{Time: ev.Time, Type: Started})
	if string(b) != `{"time":"2026-03-04T05:06:07Z","event":"step-started"}` {
		t.Errorf("unset fields are written: %s", b)
	}
}
