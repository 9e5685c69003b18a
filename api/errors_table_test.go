package api

import (
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"fusebox/errcode"
)

// The API's status map covers exactly package errcode's table, every bare
// status it reads back maps to a code with that status, and docs/api.md's
// error table documents every code with the status the API answers.
func TestErrorCodeTable(t *testing.T) {
	for _, c := range errcode.All() {
		if _, ok := httpStatus[c]; !ok {
			t.Errorf("code %s has no HTTP status in httpStatus", c)
		}
	}
	for c := range httpStatus {
		if !errcode.Known(c) {
			t.Errorf("httpStatus maps %s, which package errcode does not know", c)
		}
	}
	for st, c := range statusCodes {
		if httpStatus[c] != st {
			t.Errorf("status %d reads back as %s, whose status is %d", st, c, httpStatus[c])
		}
	}

	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	// Rows like: | `no_leader`, `not_leader`, `unavailable` | 503 | ...
	row := regexp.MustCompile("(?m)^\\| ((?:`[a-z_]+`(?:, )?)+) \\| (\\d{3}) \\|")
	documented := map[string][]int{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		st, _ := strconv.Atoi(m[2])
		for _, c := range strings.Split(m[1], ", ") {
			c = strings.Trim(c, "`")
			documented[c] = append(documented[c], st)
		}
	}
	for _, c := range errcode.All() {
		sts, ok := documented[c]
		if !ok {
			t.Errorf("docs/api.md's error table does not list %s", c)
			continue
		}
		found := false
		for _, st := range sts {
			found = found || st == httpStatus[c]
		}
		if !found {
			t.Errorf("docs/api.md gives %s status %v; the API answers %d", c, sts, httpStatus[c])
		}
	}
	for c := range documented {
		if !errcode.Known(c) {
			t.Errorf("docs/api.md documents %s, which package errcode does not know", c)
		}
	}
	if statusOf("no_such_code") != http.StatusInternalServerError || codeForStatus(http.StatusTeapot) != CodeInternal {
		t.Error("an unknown code or status must read as internal")
	}
}
