package recipe

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/edgepipe/edgepipe/internal/suggest"
)

// Options structs are how a format family declares the with: keys its
// targets take. Each exported field with a `yaml:"key"` tag is one option;
// its Go type is the option's type (bool, int, float64, string, []string,
// or a pointer to one of them for an option that may be left unset), and
// these tags constrain it:
//
//	doc:"..."      what the option does (the JSON schema's description)
//	enum:"a,b,c"   the values a string option may take
//	min:"N"        the smallest value a number option may take
//
// DecodeOptions is strict: an unknown key is an error naming the closest
// valid one, and a value of the wrong type or out of range is an error too.

// OptionField is one option of an options struct, as the schema and
// messages describe it.
type OptionField struct {
	Key  string
	Doc  string
	Type reflect.Type // the value's type, pointers removed
	Enum []string
	Min  *float64
	// index is the field's index path in the struct.
	index []int
}

// Index is the field's index path in its struct (for FieldByIndex).
func (f OptionField) Index() []int { return f.index }

// OptionFields lists the options of an options struct (or a pointer to
// one), in field order.
func OptionFields(opts any) []OptionField {
	t := reflect.TypeOf(opts)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return optionFields(t, nil)
}

func optionFields(t reflect.Type, at []int) []OptionField {
	var out []OptionField
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		key, flags, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		index := append(append([]int{}, at...), i)
		if f.Anonymous && flags == "inline" && f.Type.Kind() == reflect.Struct {
			// Options shared by several formats, embedded.
			out = append(out, optionFields(f.Type, index)...)
			continue
		}
		if key == "" || key == "-" || !f.IsExported() {
			continue
		}
		of := OptionField{Key: key, Doc: f.Tag.Get("doc"), Type: f.Type, index: index}
		for of.Type.Kind() == reflect.Pointer {
			of.Type = of.Type.Elem()
		}
		if e := f.Tag.Get("enum"); e != "" {
			of.Enum = strings.Split(e, ",")
		}
		if m := f.Tag.Get("min"); m != "" {
			v, err := strconv.ParseFloat(m, 64)
			if err != nil {
				panic(fmt.Sprintf("recipe: %s.%s: bad min tag %q", t.Name(), f.Name, m))
			}
			of.Min = &v
		}
		out = append(out, of)
	}
	return out
}

// DecodeOptions decodes the plain values of a with: mapping (as the parser
// reads them) into opts, a pointer to an options struct. at gives each
// key's position ("" for the with: key itself); what names the mapping in
// messages (targets.phone.with).
func DecodeOptions(with map[string]any, at map[string]Pos, what string, opts any) Diagnostics {
	fields := OptionFields(opts)
	byKey := map[string]OptionField{}
	var keys []string
	for _, f := range fields {
		byKey[f.Key] = f
		keys = append(keys, f.Key)
	}
	v := reflect.ValueOf(opts).Elem()
	var diags Diagnostics
	names := make([]string, 0, len(with))
	for k := range with {
		names = append(names, k)
	}
	// In file order, so the messages read top to bottom.
	sort.Slice(names, func(i, j int) bool {
		a, b := at[names[i]], at[names[j]]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return names[i] < names[j]
	})
	for _, k := range names {
		pos, ok := at[k]
		if !ok {
			pos = at[""]
		}
		f, ok := byKey[k]
		if !ok {
			diags = append(diags, Diagnostic{Pos: pos, Msg: fmt.Sprintf("%s: unknown option %q", what, k), Hint: optionHint(k, keys)})
			continue
		}
		if d := setOption(v.FieldByIndex(f.index), f, with[k]); d != "" {
			diags = append(diags, Diagnostic{Pos: pos, Msg: fmt.Sprintf("%s.%s %s", what, k, d), Hint: typeHint(f)})
		}
	}
	if c, ok := opts.(OptionsChecker); ok && len(diags) == 0 {
		for _, p := range c.CheckOptions() {
			pos, ok := at[p.Key]
			if !ok {
				pos = at[""]
			}
			diags = append(diags, Diagnostic{Pos: pos, Msg: fmt.Sprintf("%s.%s %s", what, p.Key, p.Msg), Hint: p.Hint})
		}
	}
	return diags
}

// OptionsChecker is implemented by options whose keys constrain each
// other (one only means something with a given value of another), which
// a key's own type and bounds cannot say.
type OptionsChecker interface {
	CheckOptions() []OptionProblem
}

// OptionProblem is one problem CheckOptions found: the key it is about
// (where the diagnostic points), what is wrong and the fix.
type OptionProblem struct {
	Key, Msg, Hint string
}

func optionHint(key string, valid []string) string {
	if len(valid) == 0 {
		return "this format takes no with: options; remove with:"
	}
	list := strings.Join(valid, ", ")
	if c := suggest.Closest(key, valid); c != "" {
		return fmt.Sprintf("did you mean %q? this format's options: %s", c, list)
	}
	return "this format's options: " + list
}

func typeHint(f OptionField) string {
	switch {
	case len(f.Enum) > 0:
		return "use one of: " + strings.Join(f.Enum, ", ")
	case f.Doc != "":
		return f.Key + ": " + f.Doc
	}
	return ""
}

// setOption stores a plain value in a field, or says what is wrong with it.
func setOption(dst reflect.Value, f OptionField, val any) string {
	if val == nil {
		return "is empty: give it a value, or remove the key"
	}
	x := reflect.New(f.Type).Elem()
	switch f.Type.Kind() {
	case reflect.Bool:
		b, ok := val.(bool)
		if !ok {
			return fmt.Sprintf("must be true or false, not %s", describeValue(val))
		}
		x.SetBool(b)
	case reflect.Int, reflect.Int64:
		var n int64
		switch t := val.(type) {
		case int:
			n = int64(t)
		case float64:
			if t != math.Trunc(t) || math.IsInf(t, 0) {
				return fmt.Sprintf("must be a whole number, not %v", t)
			}
			n = int64(t)
		default:
			return fmt.Sprintf("must be a whole number, not %s", describeValue(val))
		}
		if f.Min != nil && float64(n) < *f.Min {
			return fmt.Sprintf("must be at least %g, not %d", *f.Min, n)
		}
		x.SetInt(n)
	case reflect.Float64:
		var n float64
		switch t := val.(type) {
		case int:
			n = float64(t)
		case float64:
			n = t
		default:
			return fmt.Sprintf("must be a number, not %s", describeValue(val))
		}
		if math.IsNaN(n) || math.IsInf(n, 0) {
			return fmt.Sprintf("must be a finite number, not %v", n)
		}
		if f.Min != nil && n < *f.Min {
			return fmt.Sprintf("must be at least %g, not %g", *f.Min, n)
		}
		x.SetFloat(n)
	case reflect.String:
		s, ok := val.(string)
		if !ok {
			return fmt.Sprintf("must be a string, not %s", describeValue(val))
		}
		if len(f.Enum) > 0 && !contains(f.Enum, s) {
			if c := suggest.Closest(s, f.Enum); c != "" {
				return fmt.Sprintf("is %q, which is not one of its values (did you mean %q?)", s, c)
			}
			return fmt.Sprintf("is %q, which is not one of its values", s)
		}
		x.SetString(s)
	case reflect.Slice:
		items, ok := val.([]any)
		if !ok || f.Type.Elem().Kind() != reflect.String {
			return fmt.Sprintf("must be a list of strings, not %s", describeValue(val))
		}
		l := reflect.MakeSlice(f.Type, 0, len(items))
		for _, it := range items {
			s, ok := it.(string)
			if !ok {
				return fmt.Sprintf("must be a list of strings, but holds %s", describeValue(it))
			}
			l = reflect.Append(l, reflect.ValueOf(s))
		}
		x.Set(l)
	default:
		panic(fmt.Sprintf("recipe: option %s has unsupported type %s", f.Key, f.Type))
	}
	if dst.Kind() == reflect.Pointer {
		p := reflect.New(f.Type)
		p.Elem().Set(x)
		dst.Set(p)
		return ""
	}
	dst.Set(x)
	return ""
}

func describeValue(v any) string {
	switch t := v.(type) {
	case string:
		return fmt.Sprintf("the string %q", t)
	case bool:
		return fmt.Sprintf("the boolean %v", t)
	case int, float64:
		return fmt.Sprintf("the number %v", t)
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%v", v)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
