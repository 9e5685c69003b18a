package transport

import (
	"net/url"
	"strings"

	"fusebox/breakerpool"
)

// Redacted replaces a secret wherever fusebox shows stored data back: header
// values, URL query strings and URL credentials.
const Redacted = "<redacted>"

// secretHeaders are always redacted (lower case).
var secretHeaders = map[string]bool{
	"authorization": true, "proxy-authorization": true, "cookie": true, "set-cookie": true, "x-api-key": true,
}

// secretWords redact any header whose lower-cased name contains one of them.
var secretWords = []string{"token", "secret", "key", "signature", "auth", "password", "passwd", "credential", "session", "cookie", "jwt"}

// SecretHeader reports whether the value of header name is a secret that
// must never be shown back: Authorization, Proxy-Authorization, Cookie,
// Set-Cookie, X-Api-Key, any name containing token, secret, key, signature,
// auth, password, passwd, credential, session, cookie or jwt, and any name
// in extra (dynconfig's fusebox.redaction.headerNames).
// Names compare case-insensitively. This is the only place that decides.
func SecretHeader(name string, extra []string) bool {
	ln := strings.ToLower(name)
	if secretHeaders[ln] {
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(ln, w) {
			return true
		}
	}
	for _, x := range extra {
		if strings.EqualFold(x, name) {
			return true
		}
	}
	return false
}

// RedactHeader returns a copy of h whose secret values (SecretHeader) are
// Redacted. Names are kept: they say what was sent, not what it was.
func RedactHeader(h map[string]string, extra []string) map[string]string {
	if h == nil {
		return nil
	}
	out := make(map[string]string, len(h))
	for k, v := range h {
		if SecretHeader(k, extra) {
			v = Redacted
		}
		out[k] = v
	}
	return out
}

// RedactURL renders a URL for display: credentials become "<redacted>@" and
// a query string becomes "?<redacted>", so https://u:p@h/cb?sig=x is shown as
// https://<redacted>@h/cb?<redacted>. The path is kept (it names the
// receiver; put secrets in headers or the query). A string that is not an
// absolute URL (a Nexus endpoint name) is returned as is, except that
// anything after a '?' is redacted; an unparsable URL is Redacted whole.
func RedactURL(raw string) string {
	if !strings.Contains(raw, "://") {
		if before, _, ok := strings.Cut(raw, "?"); ok {
			return before + "?" + Redacted
		}
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return Redacted
	}
	var b strings.Builder
	b.WriteString(u.Scheme)
	b.WriteString("://")
	if u.User != nil {
		b.WriteString(Redacted + "@")
	}
	b.WriteString(u.Host)
	b.WriteString(u.EscapedPath())
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteString("?" + Redacted)
	}
	if u.Fragment != "" {
		b.WriteString("#" + Redacted)
	}
	return b.String()
}

// Redacted returns a copy of r fit to show: header and callback_header
// values redacted by SecretHeader(name, extra), and url and callback_url by
// RedactURL. Bodies are kept (they are the caller's payload, not
// credentials).
func (r Request) Redacted(extra []string) Request {
	r.Header = RedactHeader(r.Header, extra)
	r.CallbackHeader = RedactHeader(r.CallbackHeader, extra)
	if r.URL != "" {
		r.URL = RedactURL(r.URL)
	}
	if r.CallbackURL != "" {
		r.CallbackURL = RedactURL(r.CallbackURL)
	}
	return r
}

// BreakerDestination is the Destination part of a task's breaker key, its
// scheduler group, its metric labels and its dynamic-config lookups: the
// Nexus endpoint name as given, and for a callback its URL's
// scheme://host[:port] (lower case), as Temporal keys callbacks. So every
// path and query on one host shares one breaker, and no path or query secret
// reaches a key, a label or a breaker view. A callback destination that is
// not a URL with a host (refused at submit) keys as its RedactURL form.
func BreakerDestination(taskGroup, destination string) string {
	if taskGroup != breakerpool.TaskGroupCallback {
		return destination
	}
	if origin, ok := plainOrigin(destination); ok {
		return origin
	}
	u, err := url.Parse(destination)
	if err != nil || u.Host == "" || u.Scheme == "" {
		return RedactURL(destination)
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Host)
}

// plainOrigin is BreakerDestination's answer for the common callback URL,
// without url.Parse: a lower-case scheme, "://", a lower-case host name or
// IPv4 address with an optional numeric port, then nothing url.Parse could
// refuse or read differently (no '%', no control byte). It returns the
// prefix up to the host's end, which is what the parse would give. Every
// other URL (upper case, credentials, IPv6, escapes) is left to url.Parse;
// FuzzBreakerDestination holds the two to the same answer. The queue keys
// every dispatch by it: url.Parse made 6 % of a delivered task's bytes, and
// this function two fifths of those.
func plainOrigin(s string) (string, bool) {
	i := strings.Index(s, "://")
	if i <= 0 {
		return "", false
	}
	for j := range i {
		c := s[j]
		if !isLowerAlpha(c) && (j == 0 || !isDigit(c) && c != '+' && c != '-' && c != '.') {
			return "", false
		}
	}
	start := i + len("://")
	end, colon := start, -1
	for ; end < len(s); end++ {
		c := s[end]
		if c == '/' || c == '?' || c == '#' {
			break
		}
		switch {
		case c == ':' && colon < 0 && end > start:
			colon = end
		case colon < 0 && (isLowerAlpha(c) || isDigit(c) || c == '-' || c == '.'):
		case colon >= 0 && isDigit(c):
		default:
			return "", false
		}
	}
	if end == start {
		return "", false
	}
	for j := end; j < len(s); j++ {
		if c := s[j]; c == '%' || c < ' ' || c == 0x7f {
			return "", false
		}
	}
	return s[:end], true
}

func isLowerAlpha(c byte) bool { return 'a' <= c && c <= 'z' }
func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
