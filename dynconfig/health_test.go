package dynconfig

import (
	"encoding/json"
	"testing"
)

func TestHealthPathValidation(t *testing.T) {
	for _, ok := range []string{`""`, `"/healthz"`, `"/v1/health?deep=1"`, `"/a/b-c_d.e"`} {
		if _, err := Canonical(Entry{Key: KeyDestinationHealthPath, Destination: "https://h", Value: json.RawMessage(ok)}); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	for _, bad := range []string{`"healthz"`, `"//evil.example/x"`, `"http://h/x"`, `"/a#frag"`, `"/a\u0000"`, `"/a\\b"`, `5`, `{"path":"/x"}`} {
		if _, err := Canonical(Entry{Key: KeyDestinationHealthPath, Destination: "https://h", Value: json.RawMessage(bad)}); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	c := NewCollection(nil)
	defer func() { _ = c.Close() }()
	c.Update([]Entry{{Key: KeyDestinationHealthPath, Destination: "https://h", Value: json.RawMessage(`"/healthz"`)}})
	if got := c.Current().HealthPath("ns", "https://h"); got != "/healthz" {
		t.Fatalf("HealthPath = %q", got)
	}
	if got := c.Current().HealthPath("ns", "https://other"); got != "" {
		t.Fatalf("HealthPath of another destination = %q", got)
	}
}
