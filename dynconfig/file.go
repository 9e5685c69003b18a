package dynconfig

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Temporal's dynamic-config file (common/dynamicconfig/yaml_loader.go): a
// YAML mapping from key to a list of constrained values,
//
//	component.callbacks.retryPolicy.maxInterval:
//	  - value: 10m
//	  - value: 1h
//	    constraints: {namespace: payments}
//
// Keys match case-insensitively (Temporal's MakeKey lowercases them), as do
// the constraint names. fusebox knows the constraints namespace and
// destination; a value under another constraint of Temporal's
// (taskQueueName, shardID…) is refused, since applying it without its
// constraint would widen it.

// Limits on an imported file.
const (
	// MaxFileBytes bounds the file.
	MaxFileBytes = 1 << 20
	// MaxFileValues bounds the values of registered keys in one file (one
	// Raft entry).
	MaxFileValues = 1000
	// maxFileProblems bounds the problems one FileError lists.
	maxFileProblems = 50
)

// FileValue is one value of a registered key read from a file, canonical.
type FileValue struct {
	// Index is the value's position in its key's list; Line its line.
	Index int
	Line  int
	Entry
}

// UnknownKey is a key of the file that fusebox does not register: reported,
// never applied.
type UnknownKey struct {
	Name   string `json:"name"`
	Line   int    `json:"line"`
	Values int    `json:"values"`
}

// File is a parsed, validated dynamic-config file.
type File struct {
	// Keys are the registered keys the file sets, sorted: an import
	// replaces every value of each of them.
	Keys []string
	// Values are the file's values of those keys, canonical, in file order.
	Values []FileValue
	// Unknown are the keys fusebox does not know, in file order.
	Unknown []UnknownKey
}

// Entries returns the file's values as entries.
func (f *File) Entries() []Entry {
	out := make([]Entry, len(f.Values))
	for i, v := range f.Values {
		out[i] = v.Entry
	}
	return out
}

// FileProblem is one reason a file is refused. Index is the value's
// position in its key's list, -1 when the problem is the key's (or the
// file's, with Key empty).
type FileProblem struct {
	Key    string `json:"key,omitempty"`
	Index  int    `json:"index"`
	Line   int    `json:"line,omitempty"`
	Field  string `json:"field,omitempty"`
	Reason string `json:"reason"`
}

func (p FileProblem) String() string {
	var b strings.Builder
	if p.Key != "" {
		b.WriteString(p.Key)
		if p.Index >= 0 {
			fmt.Fprintf(&b, "[%d]", p.Index)
		}
	} else {
		b.WriteString("file")
	}
	if p.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", p.Line)
	}
	b.WriteString(": ")
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Reason)
	return b.String()
}

// FileError refuses a whole file: nothing of it may be applied.
type FileError struct {
	Problems []FileProblem
	// More counts problems beyond those listed.
	More int
}

func (e *FileError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	s := "dynamic config file refused: " + strings.Join(parts, "; ")
	if e.More > 0 {
		s += fmt.Sprintf(" (and %d more)", e.More)
	}
	return s
}

// fileParser collects problems while reading a file.
type fileParser struct {
	problems []FileProblem
	more     int
}

func (p *fileParser) add(key string, index, line int, field, format string, args ...any) {
	if len(p.problems) >= maxFileProblems {
		p.more++
		return
	}
	p.problems = append(p.problems, FileProblem{Key: key, Index: index, Line: line, Field: field,
		Reason: truncate(fmt.Sprintf(format, args...), 4*maxEcho)})
}

// temporalAliases are the names newer Temporal releases give the same
// settings (chasm/lib/callback and chasm/lib/nexusoperation config.go),
// lower-cased, mapped to fusebox's registered key.
var temporalAliases = map[string]string{
	"callback.request.timeout":                    KeyCallbackRequestTimeout,
	"callback.retrypolicy.initialinterval":        KeyCallbackRetryInitialInterval,
	"callback.retrypolicy.maxinterval":            KeyCallbackRetryMaxInterval,
	"callback.allowedaddresses":                   KeyCallbackAllowedAddresses,
	"nexusoperation.request.timeout":              KeyNexusRequestTimeout,
	"nexusoperation.limit.request.timeout.min":    KeyNexusMinRequestTimeout,
	"nexusoperation.limit.scheduletoclosetimeout": KeyNexusMaxScheduleToCloseTimeout,
}

// lookupKeyFold returns the registered key whose name equals name up to
// case, or that name is Temporal's newer alias of.
func lookupKeyFold(name string) (string, bool) {
	if _, ok := byName[name]; ok {
		return name, true
	}
	for _, d := range registry {
		if strings.EqualFold(d.name, name) {
			return d.name, true
		}
	}
	k, ok := temporalAliases[strings.ToLower(name)]
	return k, ok
}

// ParseFile reads a Temporal dynamic-config YAML file and validates every
// value of the keys fusebox registers, canonicalising them. Any problem
// refuses the whole file: the error is a *FileError naming each key and
// index. Unknown keys are listed, not refused.
func ParseFile(data []byte) (*File, error) {
	p := &fileParser{}
	if len(data) > MaxFileBytes {
		p.add("", -1, 0, "", "file is %d bytes, limit %d", len(data), MaxFileBytes)
		return nil, &FileError{Problems: p.problems}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		p.add("", -1, 0, "", "not valid YAML: %v", err)
		return nil, &FileError{Problems: p.problems}
	}
	f := &File{}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return f, nil // an empty file sets nothing
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return f, nil
	}
	if root.Kind != yaml.MappingNode {
		p.add("", -1, root.Line, "", "want a mapping of key → list of {value, constraints}")
		return nil, &FileError{Problems: p.problems}
	}
	seen := map[string]int{} // registered or lower-cased unknown name → line
	type slot struct{ key, ns, dest string }
	at := map[slot]int{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		kn, vn := root.Content[i], root.Content[i+1]
		if kn.Kind != yaml.ScalarNode {
			p.add("", -1, kn.Line, "", "a key must be a string")
			continue
		}
		name := kn.Value
		key, known := lookupKeyFold(name)
		id := key
		if !known {
			id = strings.ToLower(name)
		}
		if line, dup := seen[id]; dup {
			p.add(truncate(name, maxKeyBytes), -1, kn.Line, "", "key set again (first at line %d; keys match case-insensitively)", line)
			continue
		}
		seen[id] = kn.Line
		if !known {
			n := 0
			if vn.Kind == yaml.SequenceNode {
				n = len(vn.Content)
			}
			f.Unknown = append(f.Unknown, UnknownKey{Name: truncate(name, maxKeyBytes), Line: kn.Line, Values: n})
			continue
		}
		f.Keys = append(f.Keys, key)
		if vn.Kind == yaml.ScalarNode && vn.Tag == "!!null" {
			continue // "key:" with no values: the key is cleared
		}
		if vn.Kind != yaml.SequenceNode {
			p.add(key, -1, vn.Line, "", "want a list of {value, constraints}")
			continue
		}
		for j, item := range vn.Content {
			fv, ok := p.readValue(key, j, item)
			if !ok {
				continue
			}
			s := slot{key, fv.Namespace, fv.Destination}
			if first, dup := at[s]; dup {
				p.add(key, j, item.Line, "constraints", "same constraints as value [%d]", first)
				continue
			}
			at[s] = j
			f.Values = append(f.Values, fv)
		}
	}
	if len(f.Values) > MaxFileValues {
		p.add("", -1, 0, "", "%d values of registered keys, limit %d per import", len(f.Values), MaxFileValues)
	}
	if len(p.problems) > 0 {
		return nil, &FileError{Problems: p.problems, More: p.more}
	}
	slices.Sort(f.Keys)
	return f, nil
}

// readValue reads one {value, constraints} item of key and validates it.
func (p *fileParser) readValue(key string, index int, n *yaml.Node) (FileValue, bool) {
	fv := FileValue{Index: index, Line: n.Line, Entry: Entry{Key: key}}
	if n.Kind != yaml.MappingNode {
		p.add(key, index, n.Line, "", "want a mapping {value, constraints}")
		return fv, false
	}
	var valueNode *yaml.Node
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		switch kn.Value {
		case "value":
			valueNode = vn
		case "constraints":
			if !p.readConstraints(key, index, vn, &fv.Entry) {
				ok = false
			}
		default:
			p.add(key, index, kn.Line, truncate(kn.Value, maxEcho), "unknown field (want value and constraints)")
			ok = false
		}
	}
	if valueNode == nil {
		p.add(key, index, n.Line, "value", "required")
		return fv, false
	}
	if !ok {
		return fv, false
	}
	raw, err := yamlToJSON(valueNode)
	if err != nil {
		p.add(key, index, valueNode.Line, "value", "%v", err)
		return fv, false
	}
	fv.Value = raw
	canon, err := Canonical(fv.Entry)
	if err != nil {
		if ve, isVE := err.(*ValidationError); isVE {
			p.add(key, index, valueNode.Line, ve.Field, "%s", ve.Reason)
		} else {
			p.add(key, index, valueNode.Line, "", "%v", err)
		}
		return fv, false
	}
	fv.Value = canon
	return fv, true
}

// temporalConstraints are Temporal's constraint names fusebox has no
// equivalent for (lower case).
var temporalConstraints = []string{"namespaceid", "taskqueuename", "tasktype", "historytasktype", "shardid", "chasmtasktype"}

func (p *fileParser) readConstraints(key string, index int, n *yaml.Node, e *Entry) bool {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return true
	}
	if n.Kind != yaml.MappingNode {
		p.add(key, index, n.Line, "constraints", "want a mapping such as {namespace: ns, destination: ep}")
		return false
	}
	ok := true
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		name := strings.ToLower(kn.Value)
		var target *string
		switch {
		case name == "namespace":
			target = &e.Namespace
		case name == "destination":
			target = &e.Destination
		case slices.Contains(temporalConstraints, name):
			p.add(key, index, kn.Line, "constraints."+kn.Value, "fusebox supports only the namespace and destination constraints")
			ok = false
			continue
		default:
			p.add(key, index, kn.Line, "constraints."+truncate(kn.Value, maxEcho), "unknown constraint (want namespace or destination)")
			ok = false
			continue
		}
		if vn.Kind != yaml.ScalarNode || vn.Tag != "!!str" {
			p.add(key, index, vn.Line, "constraints."+name, "must be a string")
			ok = false
			continue
		}
		*target = vn.Value
	}
	return ok
}

// yamlToJSON converts a YAML value to JSON. Mappings need string keys.
func yamlToJSON(n *yaml.Node) (json.RawMessage, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, err
	}
	v, err := stringKeys(v, 0)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %v", err)
	}
	return b, nil
}

func stringKeys(v any, depth int) (any, error) {
	if depth > MaxValueDepth {
		return nil, fmt.Errorf("value nested too deeply: limit %d levels", MaxValueDepth)
	}
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			y, err := stringKeys(x, depth+1)
			if err != nil {
				return nil, err
			}
			t[k] = y
		}
		return t, nil
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("mapping key %s is not a string", strconv.Quote(truncate(fmt.Sprint(k), maxEcho)))
			}
			y, err := stringKeys(x, depth+1)
			if err != nil {
				return nil, err
			}
			m[ks] = y
		}
		return m, nil
	case []any:
		for i, x := range t {
			y, err := stringKeys(x, depth+1)
			if err != nil {
				return nil, err
			}
			t[i] = y
		}
		return t, nil
	}
	return v, nil
}
