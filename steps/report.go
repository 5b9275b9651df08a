package steps

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
)

// A helper script reports what it did as one JSON object on a line of its
// own (pylib's edgepipe_report.emit), the last such line of its output.
// Each helper's report has one named Go type; decoding is strict both ways,
// so the Python writer, the Go reader and the stand-in cannot drift apart
// unnoticed: a field the type does not know is an error, and so is a field
// the type has that the line lacks (every field is required: a value a
// helper cannot give is null, decoded into a pointer).

// ReportError is a report that does not match its helper's type.
type ReportError struct {
	Helper string
	Log    string
	Err    error
}

func (e *ReportError) Error() string {
	msg := fmt.Sprintf("%s's report does not match what edgepipe reads: %v", e.Helper, e.Err)
	if e.Log != "" {
		msg += " (see " + e.Log + ")"
	}
	return msg + "; the helper and edgepipe come from different versions, or the helper is broken"
}

func (e *ReportError) Unwrap() error { return e.Err }

// DecodeReport decodes a helper's report line into v (a pointer to the
// helper's report type), strictly.
func DecodeReport(helper string, line []byte, v any) error {
	if err := decodeStrict(line, v); err != nil {
		return &ReportError{Helper: helper, Err: err}
	}
	return nil
}

func decodeStrict(line []byte, v any) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return err
	}
	t := reflect.TypeOf(v)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("report type %T is not a pointer to a struct", v)
	}
	if missing := missingFields(t.Elem(), fields); len(missing) > 0 {
		return fmt.Errorf("missing field(s) %s", strings.Join(missing, ", "))
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("more than one JSON value on the report line")
	}
	return nil
}

// missingFields lists the JSON names of t's fields absent from fields;
// embedded structs count as their fields, and a nested struct's (or a
// pointer to one's) own fields are checked when its value is an object.
func missingFields(t reflect.Type, fields map[string]json.RawMessage) []string {
	var missing []string
	for _, f := range reportFields(t) {
		raw, ok := fields[f.name]
		if !ok {
			missing = append(missing, f.name)
			continue
		}
		inner := f.typ
		for inner.Kind() == reflect.Pointer || inner.Kind() == reflect.Slice || inner.Kind() == reflect.Map {
			inner = inner.Elem()
		}
		if inner.Kind() != reflect.Struct || len(raw) == 0 || raw[0] != '{' || f.typ.Kind() == reflect.Map {
			continue
		}
		var sub map[string]json.RawMessage
		if json.Unmarshal(raw, &sub) == nil {
			for _, m := range missingFields(inner, sub) {
				missing = append(missing, f.name+"."+m)
			}
		}
	}
	sort.Strings(missing)
	return missing
}

type reportField struct {
	name string
	typ  reflect.Type
}

func reportFields(t reflect.Type) []reportField {
	var out []reportField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, reportFields(f.Type)...)
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, reportField{name: name, typ: f.Type})
	}
	return out
}

// ReportFields are the JSON names a report type requires, sorted (for
// tests that compare a helper's writer with its type).
func ReportFields(v any) []string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var names []string
	for _, f := range reportFields(t) {
		names = append(names, f.name)
	}
	sort.Strings(names)
	return names
}

// LastJSONLine is the last line of a helper's output that is a JSON
// object: its report (the tools print progress before it).
func LastJSONLine(logPath string) ([]byte, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var last []byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) > 1 && line[0] == '{' && line[len(line)-1] == '}' && json.Valid(line) {
			last = append(last[:0], line...)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", logPath, err)
	}
	if last == nil {
		return nil, fmt.Errorf("no JSON result line in its output (see %s)", logPath)
	}
	return last, nil
}

// ReadReport reads helper's report from the log its output went to and
// decodes it strictly into v.
func ReadReport(helper, logPath string, v any) error {
	line, err := LastJSONLine(logPath)
	if err != nil {
		return fmt.Errorf("%s: %w", helper, err)
	}
	if err := decodeStrict(line, v); err != nil {
		return &ReportError{Helper: helper, Log: logPath, Err: err}
	}
	return nil
}
