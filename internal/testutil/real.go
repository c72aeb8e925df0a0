package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// RequireRealEnv is the environment variable under which a test that needs
// a real component (Debian's rabbitmq-server, erlang-base's escript) fails
// instead of skipping when the component is missing. CI sets it, so CI can
// never pass on a skipped oracle.
const RequireRealEnv = "STORECTL_REQUIRE_REAL"

// RabbitMQLib is where Debian's rabbitmq-server package installs the
// broker (its beams and scripts).
const RabbitMQLib = "/usr/lib/rabbitmq"

// RequireReal skips t, saying why, when a real component is missing
// (missing != ""), or fails it when STORECTL_REQUIRE_REAL=1.
func RequireReal(t testing.TB, missing string) {
	t.Helper()
	if missing == "" {
		return
	}
	if os.Getenv(RequireRealEnv) == "1" {
		t.Fatalf("%s, and %s=1 requires it: install it (Debian: erlang-base rabbitmq-server)", missing, RequireRealEnv)
	}
	t.Skipf("%s: skipped (set %s=1 to make this a failure)", missing, RequireRealEnv)
}

// RequireEscript returns the path of escript (Debian's erlang-base), or
// skips or fails t as RequireReal does.
func RequireEscript(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("escript")
	if err != nil {
		RequireReal(t, "escript not found (Debian package erlang-base)")
	}
	return p
}

// RequireRabbitMQ skips or fails t as RequireReal does unless Debian's
// rabbitmq-server is installed (RabbitMQLib exists).
func RequireRabbitMQ(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(RabbitMQLib); err != nil {
		RequireReal(t, RabbitMQLib+" missing (Debian package rabbitmq-server)")
	}
}
