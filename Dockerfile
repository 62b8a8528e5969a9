# syntax=docker/dockerfile:1
# The worker image: the static worker binary and the example BPMN files on a
# distroless base (no shell, no package manager, runs as uid 65532).
#   docker build -t sutra-worker \
#     --build-arg VERSION="$(git describe --tags --always)" --build-arg REVISION="$(git rev-parse HEAD)" .
#   docker run --rm sutra-worker help
#   docker run --rm sutra-worker deploy /examples/order.bpmn
# Kubernetes probes the HTTP endpoints itself; docker-compose.yml's health
# check runs the one extra tool in the image, busybox's wget (see below).
# The web console's bundle (console/web, pinned by its package-lock.json),
# embedded by the build stage below.
FROM node:20-bookworm-slim AS console
# No install-time telemetry from @ibm/telemetry-js (scripts/console.sh sets it
# too; this covers any npm command added to this stage).
ENV IBM_TELEMETRY_DISABLED=true
WORKDIR /src
COPY console/web/package.json console/web/package-lock.json console/web/
COPY console/web/index.html console/web/notices.mjs console/web/favicon.ico console/web/
COPY console/web/src/ console/web/src/
COPY scripts/console.sh scripts/
RUN --mount=type=cache,target=/root/.npm scripts/console.sh

FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
COPY --from=console /src/console/dist/ console/dist/
# The context has no .git (.dockerignore), so Go cannot record the revision:
# sutra_build_info and the first log line take these instead.
ARG VERSION=unknown
ARG REVISION=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath \
      -ldflags="-s -w -X github.com/sutra-run/worker/internal/buildinfo.version=${VERSION} -X github.com/sutra-run/worker/internal/buildinfo.revision=${REVISION}" \
      -o /worker ./cmd/worker

# Static busybox, used only as `wget` for a container health check:
# busybox picks its applet from the name it runs under, so the copy below
# answers only as wget (no shell is reachable by name).
FROM busybox:1.37-musl AS wget

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /worker /worker
COPY --from=wget /bin/busybox /usr/bin/wget
COPY examples/ /examples/
USER 65532:65532
# 9464: /metrics, /healthz, /readyz (SUTRA_HTTP_ADDR); 8080: the task and admin API (SUTRA_API_ADDR);
# 26500: the Zeebe gateway (SUTRA_GATEWAY_ADDR).
EXPOSE 9464 8080 26500
ENTRYPOINT ["/worker"]
CMD ["run"]
