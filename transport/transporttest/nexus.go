package transporttest

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/nexus-rpc/sdk-go/nexus"
)

// asyncOperation starts operations that never complete on their own and
// accepts cancelation of any token.
type asyncOperation struct {
	nexus.UnimplementedOperation[json.RawMessage, json.RawMessage]
}

func (*asyncOperation) Name() string { return OpAsync }

func (*asyncOperation) Start(_ context.Context, _ json.RawMessage, opts nexus.StartOperationOptions) (nexus.HandlerStartOperationResult[json.RawMessage], error) {
	return &nexus.HandlerStartOperationResultAsync{OperationToken: "op-" + opts.RequestID}, nil
}

func (*asyncOperation) Cancel(context.Context, string, nexus.CancelOperationOptions) error {
	return nil
}

func newNexusHandler() (http.Handler, error) {
	svc := nexus.NewService(Service)
	err := svc.Register(
		nexus.NewSyncOperation(OpEcho, func(_ context.Context, in json.RawMessage, _ nexus.StartOperationOptions) (json.RawMessage, error) {
			return in, nil
		}),
		nexus.NewSyncOperation(OpFail, func(context.Context, json.RawMessage, nexus.StartOperationOptions) (json.RawMessage, error) {
			return nil, nexus.NewOperationFailedError("requested failure")
		}),
		&asyncOperation{},
	)
	if err != nil {
		return nil, err
	}
	reg := nexus.NewServiceRegistry()
	if err := reg.Register(svc); err != nil {
		return nil, err
	}
	h, err := reg.NewHandler()
	if err != nil {
		return nil, err
	}
	return nexus.NewHTTPHandler(nexus.HandlerOptions{Handler: h, Logger: slog.New(slog.DiscardHandler)}), nil
}

// acceptAll accepts every well-formed completion.
type acceptAll struct{}

func (acceptAll) CompleteOperation(_ context.Context, r *nexus.CompletionRequest) error {
	if r.Result != nil {
		var v any
		return r.Result.Consume(&v)
	}
	return nil
}

func newCompletionHandler() http.Handler {
	return nexus.NewCompletionHTTPHandler(nexus.CompletionHandlerOptions{
		Handler: acceptAll{},
		Logger:  slog.New(slog.DiscardHandler),
	})
}
