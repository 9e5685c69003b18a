package transport_test

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"fusebox/breakerpool"
	"fusebox/transport"
)

func TestSecretHeader(t *testing.T) {
	for name, want := range map[string]bool{
		"Authorization": true, "authorization": true, "Proxy-Authorization": true, "Cookie": true,
		"X-Api-Key": true, "X-Auth-Token": true, "X-Client-Secret": true, "X-Hub-Signature-256": true,
		"Idempotency-Key": true, "X-AUTHZ": true, "X-Custom": false, "Accept": false, "User-Agent": false,
		"X-Tenant": false, "X-Password": true, "X-Upstream-Passwd": true, "X-Amz-Security-Credential": true,
		"X-Session": true, "Session-Id": true, "X-Session-Cookie": true, "X-Jwt-Assertion": true, "Content-Type": false,
		"Nexus-Request-Id": false,
	} {
		if got := transport.SecretHeader(name, nil); got != want {
			t.Errorf("SecretHeader(%q) = %v, want %v", name, got, want)
		}
	}
	if !transport.SecretHeader("X-Tenant", []string{"x-tenant"}) {
		t.Error("an extra name (from dynamic config) is not redacted")
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://h.example/cb?sig=abc&x=1": "https://h.example/cb?<redacted>",
		"http://user:pw@h.example:8080/p":  "http://<redacted>@h.example:8080/p",
		"https://h.example/cb":             "https://h.example/cb",
		"https://h.example/cb?":            "https://h.example/cb?<redacted>",
		"https://h.example/cb#frag":        "https://h.example/cb#<redacted>",
		"my-endpoint":                      "my-endpoint",
		"weird?token=1":                    "weird?<redacted>",
		"http://[::1]:9/a%20b?q":           "http://[::1]:9/a%20b?<redacted>",
		"http://bad host/x?sig=1":          "<redacted>",
		"https://u@h/x?a=b":                "https://<redacted>@h/x?<redacted>",
	} {
		if got := transport.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRequestRedacted(t *testing.T) {
	r := transport.Request{
		TaskGroup: breakerpool.TaskGroupNexusInvocation, URL: "https://h/nexus?key=1",
		Header:         map[string]string{"Authorization": "Bearer s3cr3t", "X-Api-Key": "k3y", "X-Plain": "visible", "X-Custom": "c"},
		CallbackURL:    "https://me/cb?sig=abc",
		CallbackHeader: map[string]string{"X-Callback-Token": "t0k3n"},
	}
	red := r.Redacted([]string{"X-CUSTOM"})
	b, _ := json.Marshal(red)
	for _, secret := range []string{"s3cr3t", "k3y", "t0k3n", "sig=abc", "key=1", `"c"`} {
		if strings.Contains(string(b), secret) {
			t.Errorf("redacted request still shows %q: %s", secret, b)
		}
	}
	if red.Header["X-Plain"] != "visible" || red.Header["Authorization"] != transport.Redacted {
		t.Errorf("headers = %v", red.Header)
	}
	if r.Header["Authorization"] != "Bearer s3cr3t" {
		t.Error("Redacted modified the original request (it is still what is sent)")
	}
}

func TestBreakerDestination(t *testing.T) {
	cb := breakerpool.TaskGroupCallback
	for _, c := range []struct{ group, in, want string }{
		{cb, "https://Hooks.Example.com/a/b?sig=1", "https://hooks.example.com"},
		{cb, "http://127.0.0.1:9000/cb/123", "http://127.0.0.1:9000"},
		{cb, "http://127.0.0.1:9000", "http://127.0.0.1:9000"},
		{cb, "HTTPS://[::1]:8443/x", "https://[::1]:8443"},
		{cb, "http://u:p@h/x", "http://h"},
		{cb, "not a url?sig=1", "not a url?<redacted>"},
		{breakerpool.TaskGroupNexusInvocation, "my-endpoint", "my-endpoint"},
	} {
		if got := transport.BreakerDestination(c.group, c.in); got != c.want {
			t.Errorf("BreakerDestination(%s, %q) = %q, want %q", c.group, c.in, got, c.want)
		}
	}
}

// FuzzRedactURL: whatever the input, a shown URL carries no query and no
// credentials — anything after '?' is exactly "<redacted>" (and a redacted
// fragment), and a URL with credentials shows "<redacted>@" instead.
func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"https://u:p@h/cb?sig=1#f", "http://h/a@b?x", "ep-name", "a?b?c", "http://[::1]:80/?", "::", "http://h%20/x?y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out := transport.RedactURL(raw)
		if i := strings.IndexByte(out, '?'); i >= 0 {
			rest := out[i+1:]
			if rest != transport.Redacted && rest != transport.Redacted+"#"+transport.Redacted {
				t.Fatalf("RedactURL(%q) = %q: the query is not redacted", raw, out)
			}
		}
		if u, err := url.Parse(raw); err == nil && u.Host != "" && strings.Contains(raw, "://") && u.User != nil {
			if !strings.Contains(out, transport.Redacted+"@") {
				t.Fatalf("RedactURL(%q) = %q: credentials not redacted", raw, out)
			}
			if p, ok := u.User.Password(); ok && len(p) > 3 && !strings.Contains(u.Host+u.EscapedPath(), p) && strings.Contains(out, p) {
				t.Fatalf("RedactURL(%q) = %q shows the password", raw, out)
			}
		}
	})
}

// FuzzBreakerDestination: the key BreakerDestination gives a callback URL
// is the one url.Parse gives (its fast path for plain URLs agrees with the
// parse on every input).
func FuzzBreakerDestination(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:8080/cb?sig=1", "https://h/p#f", "http://h:/x", "HTTP://H/x",
		"http://h:8x/", "http://u@h/", "http://h/%zz", "http://[::1]:80/", "a+b.c-d://h.example", "1http://h/", "http://h?q", "http://:80/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		want := transport.RedactURL(raw)
		if u, err := url.Parse(raw); err == nil && u.Host != "" && u.Scheme != "" {
			want = strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
		}
		if got := transport.BreakerDestination(breakerpool.TaskGroupCallback, raw); got != want {
			t.Fatalf("BreakerDestination(%q) = %q, url.Parse gives %q", raw, got, want)
		}
	})
}
