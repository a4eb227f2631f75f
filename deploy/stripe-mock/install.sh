#!/usr/bin/env bash
# Build stripe-mock, Stripe's OpenAPI-validating API mock, and print the binary's path.
#
# The Stripe adapter's conformance test (tests/integration/test_stripe_conformance.py) runs
# against it; without it that test fails, and .ci/run stops before the suite. Needs Go and
# the Go module proxy. A cold build (empty module and build caches) takes 30-50 s on two cores.
#
#   deploy/stripe-mock/install.sh            # build once, reuse afterwards
#   STRIPE_MOCK_REBUILD=1 deploy/stripe-mock/install.sh
#
# Environment: STRIPE_MOCK_VERSION (default below), GOBIN (default: $(go env GOPATH)/bin).
set -euo pipefail

version="${STRIPE_MOCK_VERSION:-v0.203.0}"

if ! command -v go >/dev/null 2>&1; then
    echo "install.sh: go is not on PATH; install Go 1.21+ to build stripe-mock" >&2
    exit 1
fi

bindir="${GOBIN:-$(go env GOPATH)/bin}"
binary="$bindir/stripe-mock"

# stripe-mock reports its version as "master", so an existing binary is trusted as is.
if [ -x "$binary" ] && [ -z "${STRIPE_MOCK_REBUILD:-}" ]; then
    echo "$binary"
    exit 0
fi

GOBIN="$bindir" GOFLAGS=-mod=mod go install "github.com/stripe/stripe-mock@${version}" >&2
echo "$binary"
