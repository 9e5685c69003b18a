package dynconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"fusebox/breakerpool"
)

// settingsField is one JSON field of breakerpool.Settings.
type settingsField struct {
	index int
	kind  string // "duration", "uint32", "float", "bool"
}

var durationType = reflect.TypeFor[breakerpool.Duration]()

// settingsFields maps the JSON names of breakerpool.Settings to its struct
// fields, read from the struct tags so a field added there is decoded here
// without a second list to keep in sync.
var settingsFields = func() map[string]settingsField {
	t := reflect.TypeFor[breakerpool.Settings]()
	m := make(map[string]settingsField, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		var kind string
		switch {
		case f.Type == durationType:
			kind = "duration"
		case f.Type.Kind() == reflect.Uint32:
			kind = "uint32"
		case f.Type.Kind() == reflect.Float64:
			kind = "float"
		case f.Type.Kind() == reflect.Bool:
			kind = "bool"
		default:
			panic(fmt.Sprintf("dynconfig: breakerpool.Settings.%s has type %s, which the decoder does not know", f.Name, f.Type))
		}
		m[name] = settingsField{index: i, kind: kind}
	}
	return m
}()

// settingsKey registers a breakerpool.Settings object key.
func settingsKey(name string, scope Scope, desc string) *definition {
	def := breakerpool.DefaultSettings().Normalized()
	encode := func(v any) json.RawMessage { return mustMarshal(v.(breakerpool.Settings)) }
	return newDefinition(name, "object", desc, scope, def, decodeSettings, encode)
}

// decodeSettings decodes a JSON object on top of breakerpool.DefaultSettings
// (omitted fields keep their defaults), refusing unknown, duplicate and null
// fields, then validates and normalizes the result. Field names match
// case-insensitively (Temporal's reading); two spellings of one field are a
// duplicate, not a silent override.
func decodeSettings(raw []byte) (any, *ValidationError) {
	if raw[0] != '{' {
		return nil, bad("want a JSON object, got %s", echo(raw))
	}
	s := breakerpool.DefaultSettings()
	sv := reflect.ValueOf(&s).Elem()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // '{'
		return nil, bad("value is not valid JSON")
	}
	seen := make(map[string]bool, len(settingsFields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, bad("value is not valid JSON")
		}
		name, _ := tok.(string)
		var fraw json.RawMessage
		if err := dec.Decode(&fraw); err != nil {
			return nil, bad("value is not valid JSON")
		}
		// Names match case-insensitively, as Temporal's mapstructure
		// decoding does: {"timeout": "30s"} is Timeout. Two spellings of one
		// field are a duplicate.
		canon, ok := settingsFieldNames[strings.ToLower(name)]
		if !ok {
			return nil, &ValidationError{Field: truncate(name, maxEcho), Reason: unknownFieldReason()}
		}
		field := settingsFields[canon]
		if seen[canon] {
			return nil, &ValidationError{Field: canon, Reason: "set more than once"}
		}
		seen[canon] = true
		name = canon
		if err := decodeSettingsField(sv.Field(field.index), field.kind, bytes.TrimSpace(fraw)); err != nil {
			err.Field = name
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, bad("value is not valid JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, bad("unexpected data after the object")
	}
	if err := s.Validate(); err != nil {
		var se *breakerpool.SettingsError
		if errors.As(err, &se) {
			return nil, &ValidationError{Field: se.Field, Reason: se.Reason}
		}
		return nil, bad("%v", err)
	}
	return s.Normalized(), nil
}

// settingsFieldNames maps the lower-cased JSON names of
// breakerpool.Settings to their exact names.
var settingsFieldNames = func() map[string]string {
	m := make(map[string]string, len(settingsFields))
	for name := range settingsFields {
		m[strings.ToLower(name)] = name
	}
	return m
}()

// unknownFieldReason says a field is unknown and lists the known ones.
func unknownFieldReason() string {
	names := make([]string, 0, len(settingsFields))
	for name := range settingsFields {
		names = append(names, name)
	}
	slices.Sort(names)
	return "unknown field (known: " + strings.Join(names, ", ") + ")"
}

func decodeSettingsField(v reflect.Value, kind string, raw []byte) *ValidationError {
	if isNull(raw) {
		return bad("must not be null (omit the field to keep its default)")
	}
	switch kind {
	case "duration":
		d, err := decodeDuration(raw)
		if err != nil {
			return err
		}
		v.SetInt(int64(d))
	case "uint32":
		n, err := decodeInt(raw, 0, math.MaxUint32)
		if err != nil {
			return bad("want an integer in [0, %d], got %s", uint32(math.MaxUint32), echo(raw))
		}
		v.SetUint(uint64(n))
	case "float":
		if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
			return bad("want a number, got %s", echo(raw))
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return bad("want a finite number, got %s", echo(raw))
		}
		v.SetFloat(f)
	case "bool":
		switch string(raw) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			return bad("want true or false, got %s", echo(raw))
		}
	}
	return nil
}
