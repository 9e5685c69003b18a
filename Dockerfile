# fusebox container image: a static binary on distroless (CA certificates,
# no shell), running as the non-root user 65532.
#
#   docker build -t fusebox:latest .          # or: podman build -t fusebox:latest .
#   docker run --rm fusebox:latest --help     # the entrypoint is `fusebox serve`
#
# deploy/kubernetes/fusebox.yaml runs this image (fusebox:latest); push it to
# your registry under that name or edit the manifest's image.

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath \
      -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/fusebox ./cmd/node

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/fusebox /usr/local/bin/fusebox
# 65532 is distroless's "nonroot"; the manifest's runAsUser matches.
USER 65532:65532
# The HTTP API, gossip (TCP and UDP) and Raft.
EXPOSE 8470 8471/tcp 8471/udp 8472
ENTRYPOINT ["/usr/local/bin/fusebox", "serve"]
