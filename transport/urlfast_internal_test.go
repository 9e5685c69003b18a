package transport

import (
	"mime"
	"net/url"
	"strings"
	"testing"
)

// urlSeeds are URLs at the edges of plainOrigin's fast path.
var urlSeeds = []string{
	"http://127.0.0.1:8080/cb?sig=1", "https://h.example/p", "https://h/p#f", "https://h/p#", "http://h:/x",
	"HTTP://H/x", "http://h:8x/", "http://u@h/", "http://u:p@h/", "http://h/%zz", "http://h/a%20b",
	"http://[::1]:80/", "ftp://h/", "a+b.c-d://h.example", "1http://h/", "http://h?q#", "http://h?x@y/",
	"http://:80/", "https://:443", "http://[::1%25lo]:80/", "http://h/a b", "http://h/\x7f", "http://h/é", "http://-./", "//h/x", "http:///x", "",
}

// FuzzValidateURL: validateURL's fast path gives the answer url.Parse
// gives, on every input (accepted or refused; the reason may differ only
// in wording).
func FuzzValidateURL(f *testing.F) {
	for _, s := range urlSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if !plainHTTPURL(raw) {
			return // validateURL parses it
		}
		u, err := url.Parse(raw)
		switch {
		case err != nil:
			t.Fatalf("plainHTTPURL(%q) accepts what url.Parse refuses: %v", raw, err)
		case u.Scheme != "http" && u.Scheme != "https", u.Host == "", u.Hostname() == "", u.User != nil, u.Fragment != "":
			t.Fatalf("plainHTTPURL(%q) accepts what validateURL refuses: %#v", raw, u)
		}
	})
}

// FuzzSchemeHost: Allowed's scheme and host, read without url.Parse for
// the common form, are url.Parse's (lower case) on every input; a URL
// without a host name (http://:80/) has none.
func FuzzSchemeHost(f *testing.F) {
	for _, s := range urlSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var wantScheme, wantHost string
		u, err := url.Parse(raw)
		wantOK := err == nil && u.Hostname() != ""
		if wantOK {
			wantScheme, wantHost = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
		}
		scheme, host, ok := schemeHost(raw)
		if ok != wantOK || scheme != wantScheme || host != wantHost {
			t.Fatalf("schemeHost(%q) = %q, %q, %v; url.Parse gives %q, %q, %v", raw, scheme, host, ok, wantScheme, wantHost, wantOK)
		}
	})
}

// TestPlainHTTPURLTakesTheCommonForm: the fast path is taken for the URLs
// callbacks use, and left for the ones it cannot judge alone.
func TestPlainHTTPURLTakesTheCommonForm(t *testing.T) {
	for raw, want := range map[string]bool{
		"http://127.0.0.1:8080/cb?sig=1": true, "https://cb.example.com/x/y": true, "http://h": true,
		"https://h/p#f": false, "HTTP://h/": false, "http://u@h/": false, "ftp://h/": false, "http://h/%41": false,
	} {
		if got := plainHTTPURL(raw); got != want {
			t.Errorf("plainHTTPURL(%q) = %v, want %v", raw, got, want)
		}
	}
}

// FuzzPlainMediaType: a content type the fast path accepts is one
// mime.ParseMediaType accepts.
func FuzzPlainMediaType(f *testing.F) {
	for _, s := range []string{"application/json", "text/plain; charset=utf-8", "a/b/c", "/json", "json", "a /b", "a/b ", "Application/JSON", "a/é", "a/b;", "x-y/z.w+json"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if !plainMediaType(v) {
			return
		}
		if _, _, err := mime.ParseMediaType(v); err != nil {
			t.Fatalf("plainMediaType(%q) accepts what mime.ParseMediaType refuses: %v", v, err)
		}
	})
}

// FuzzMemberTarget: the host and port CheckMembers compares, read without
// url.Parse for the common form, are the parse's on every input, and a URL
// without a host name is refused.
func FuzzMemberTarget(f *testing.F) {
	for _, s := range append(urlSeeds, "http://h:0/", "http://h:65536/", "https://h/", "http://h:0080/", "http://h:99999999999999999999/") {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		var wantHost string
		var wantPort int
		var wantErr string
		u, err := url.Parse(raw)
		switch {
		case err != nil || u.Host == "":
			wantErr = "not an absolute URL"
		case u.Hostname() == "":
			wantErr = errNoHostName
		default:
			if wantPort, err = urlPort(u); err != nil {
				wantErr, wantPort = err.Error(), 0
			} else {
				wantHost = u.Hostname()
			}
		}
		host, port, derr := memberTarget(raw)
		gotErr := ""
		if derr != nil {
			gotErr = derr.Reason
		}
		if host != wantHost || port != wantPort || gotErr != wantErr {
			t.Fatalf("memberTarget(%q) = %q, %d, %q; url.Parse gives %q, %d, %q", raw, host, port, gotErr, wantHost, wantPort, wantErr)
		}
	})
}
