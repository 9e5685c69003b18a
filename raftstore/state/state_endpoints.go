package state

import (
	"net/url"
	"regexp"
)

var endpointNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// ValidateEndpointName checks a Nexus endpoint name: 1–128 of [A-Za-z0-9_.-].
func ValidateEndpointName(name string) *Error {
	if !endpointNameRE.MatchString(name) {
		return invalidArg("name", "must be 1-128 characters of [A-Za-z0-9_.-], got %q", name)
	}
	return nil
}

// ValidateEndpointURL checks an endpoint target: an absolute http or https URL
// with a host.
func ValidateEndpointURL(raw string) *Error {
	if len(raw) > 2048 {
		return invalidArg("url", "longer than 2048 bytes")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return invalidArg("url", "not a URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return invalidArg("url", "scheme must be http or https, got %q", u.Scheme)
	}
	if u.Hostname() == "" {
		return invalidArg("url", "must have a host")
	}
	return nil
}

func (c *PutEndpointCommand) Validate() *Error {
	if err := checkMeta(c.CommandMeta); err != nil {
		return err
	}
	if err := ValidateEndpointName(c.Name); err != nil {
		return err
	}
	if err := ValidateEndpointURL(c.URL); err != nil {
		return err
	}
	if len(c.Description) > 1024 {
		return invalidArg("description", "longer than 1024 bytes")
	}
	return nil
}

func applyPutEndpoint(w *writer, payload []byte) (any, *Error) {
	var c PutEndpointCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	e := &Endpoint{Name: c.Name, URL: c.URL, Description: c.Description, Health: c.Health, Index: w.index, UpdatedAt: c.At, Author: c.Author}
	if err := w.insert(string(TableEndpoints), e); err != nil {
		return nil, err
	}
	return e, nil
}

func applyDeleteEndpoint(w *writer, payload []byte) (any, *Error) {
	var c DeleteEndpointCommand
	if err := DecodePayload(payload, &c); err != nil {
		return nil, err
	}
	if err := checkMeta(c.CommandMeta); err != nil {
		return nil, err
	}
	if err := ValidateEndpointName(c.Name); err != nil {
		return nil, err
	}
	old := w.get(string(TableEndpoints), c.Name)
	if old == nil {
		return nil, notFound("endpoint %q does not exist", c.Name)
	}
	return nil, w.delete(string(TableEndpoints), old)
}
