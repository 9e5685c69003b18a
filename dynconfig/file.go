package dynconfig

import (
	"slices"
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
