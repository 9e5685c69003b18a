package dynconfig

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

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
