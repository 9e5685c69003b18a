package breakerpool

// Task groups known to fusebox. The pool accepts any string; these are the
// ones the queue produces.
const (
	TaskGroupNexusInvocation  = "nexusoperations.Invocation"
	TaskGroupNexusCancelation = "nexusoperations.Cancelation"
	TaskGroupCallback         = "callbacks.Invocation"
)

// Key identifies one breaker: Temporal's TaskGroupNamespaceIDAndDestination.
// Destination is the Nexus endpoint name (not its URL), or the callback
// destination.
type Key struct {
	TaskGroup   string `json:"task_group"`
	NamespaceID string `json:"namespace"`
	Destination string `json:"destination"`
}

func (k Key) String() string { return k.TaskGroup + "/" + k.NamespaceID + "/" + k.Destination }
