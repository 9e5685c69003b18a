package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"fusebox/api"
	"fusebox/dynconfig"
)

// Errors name what a person typed: the flag, not the API's JSON field. A
// value the CLI can check itself is refused here as bad usage (exit 2,
// nothing sent); what only the cluster can judge (an unknown endpoint, a
// limit from its config) keeps the API's exit code, with the field the
// API names replaced by the flag that supplied it (flagNamed).

// fieldFlag pairs an API field with the flag that sets it.
type fieldFlag struct{ field, flag string }

// submitFields are tasks submit's flags and the fields of the submit body
// (POST /v1/tasks) they set.
var submitFields = []fieldFlag{
	{"namespace_id", "namespace"}, {"workflow_id", "workflow"}, {"task_group", "task-group"},
	{"destination", "destination"}, {"request_id", "request-id"},
	{"schedule_to_close_timeout", "schedule-to-close"}, {"request", "request"},
}

// forceFields are breakers force's flags and the fields of its body.
var forceFields = []fieldFlag{
	{"task_group", "task-group"}, {"namespace", "namespace"}, {"destination", "destination"},
	{"duration", "duration"}, {"reason", "reason"},
}

// listFields are tasks list's and dlq list's flags and the query
// parameters they set.
var listFields = []fieldFlag{{"shard", "shard"}, {"status", "status"}, {"limit", "limit"}, {"after", "after"}}

// fieldNamer names an API field as the person gave it: "--namespace" when
// the flag set it (or nothing did: the flag is how to), "namespace_id in
// --file" when the --file body did. Fields below one (request.completion)
// keep their tail: "--request (completion)". "" for a field no flag sets.
type fieldNamer struct {
	cmd    *cobra.Command
	fields []fieldFlag
	file   bool // a --file body was given
}

func (n fieldNamer) name(field string) string {
	for _, ff := range n.fields {
		tail, ok := strings.CutPrefix(field, ff.field)
		if !ok || (tail != "" && tail[0] != '.' && tail[0] != '[') {
			continue
		}
		if n.file && !n.cmd.Flags().Changed(ff.flag) {
			return field + " in --file"
		}
		if tail = strings.TrimPrefix(tail, "."); tail != "" {
			return "--" + ff.flag + " (" + tail + ")"
		}
		return "--" + ff.flag
	}
	return ""
}

// flagNamed returns err with the field of an API error replaced by the
// flag that supplied it (same code, same exit): "invalid_argument:
// destination: unknown nexus endpoint" reads "invalid_argument:
// --destination: unknown nexus endpoint".
func flagNamed(err error, n fieldNamer) error {
	var e *api.Error
	if !errors.As(err, &e) || e.Field == "" {
		return err
	}
	name := n.name(e.Field)
	if name == "" {
		return err
	}
	named := *e
	named.Field = name
	return &named
}

// usageFlagErr is bad usage naming the field as n names it.
func usageFlagErr(n fieldNamer, field, format string, args ...any) error {
	return usageErr(fmt.Sprintf("%s: %s", n.name(field), fmt.Sprintf(format, args...)))
}

// checkSubmit refuses locally what the cluster would refuse of a submit
// for its form alone: a required field left empty, a
// --schedule-to-close that is no duration or out of range.
func checkSubmit(n fieldNamer, body api.TaskSubmit) error {
	for _, f := range []struct{ field, v string }{
		{"namespace_id", body.NamespaceID}, {"workflow_id", body.WorkflowID},
		{"task_group", body.TaskGroup}, {"destination", body.Destination},
	} {
		if strings.TrimSpace(f.v) == "" {
			if n.file {
				// Neither the flag nor the file gave it: name both.
				flag := fieldNamer{cmd: n.cmd, fields: n.fields}.name(f.field)
				return usageErr(fmt.Sprintf("%s (%s in --file): required", flag, f.field))
			}
			return usageFlagErr(n, f.field, "required")
		}
	}
	if s := body.ScheduleToCloseTimeout; s != "" {
		d, err := dynconfig.ParseDuration(s)
		switch {
		case err != nil:
			return usageFlagErr(n, "schedule_to_close_timeout", "invalid duration %q: want a duration such as \"30s\", \"2h\" or \"1d\" (unitless: seconds)", s)
		case d <= 0:
			return usageFlagErr(n, "schedule_to_close_timeout", "must be positive, got %v (omit it for the default)", d)
		case d > dynconfig.MaxScheduleToCloseTimeout:
			return usageFlagErr(n, "schedule_to_close_timeout", "must be at most %v, got %v", dynconfig.MaxScheduleToCloseTimeout, d)
		}
	}
	return nil
}

// checkForce refuses locally a breakers force the cluster would refuse
// for its form: no --task-group or --destination, a mode that is none of
// the three, a --duration that is no positive duration or given with a
// mode other than open. (Its upper bound is the cluster's to say.)
func checkForce(n fieldNamer, f api.BreakerForce) error {
	switch f.Mode {
	case "open", "closed", "auto":
	default:
		return usageErr(fmt.Sprintf("mode %q: want open, closed or auto", f.Mode))
	}
	if strings.TrimSpace(f.TaskGroup) == "" {
		return usageFlagErr(n, "task_group", "required (nexusoperations.Invocation, nexusoperations.Cancelation or callbacks.Invocation)")
	}
	if strings.TrimSpace(f.Destination) == "" {
		return usageFlagErr(n, "destination", "required (the endpoint name or callback URL of the breaker key)")
	}
	if f.Duration != "" {
		if f.Mode != "open" {
			return usageFlagErr(n, "duration", "applies only to force open")
		}
		if d, err := time.ParseDuration(f.Duration); err != nil || d <= 0 {
			return usageFlagErr(n, "duration", "%q: want a positive duration such as 10m or 2h", f.Duration)
		}
	}
	return nil
}

// taskStatuses are what tasks list --status takes.
var taskStatuses = []string{"pending", "blocked", "succeeded", "failed", "dlq"}

// checkList refuses locally a --status, --limit or --shard the API would.
func checkList(n fieldNamer, status string, limit int, shard *int) error {
	if status != "" && !slices.Contains(taskStatuses, status) {
		return usageFlagErr(n, "status", "want %s, got %q", strings.Join(taskStatuses, ", "), status)
	}
	if limit < 0 || limit > api.MaxTaskListLimit { // 0: the API's default
		return usageFlagErr(n, "limit", "want 1..%d, got %d", api.MaxTaskListLimit, limit)
	}
	if shard != nil && *shard < 0 {
		return usageFlagErr(n, "shard", "must not be negative, got %d", *shard)
	}
	return nil
}
