package rabbitmq

// Test hooks for the external tests (package rabbitmq_test, which may
// import internal/gen/rabbitmq).
var (
	BasicMessageShape = basicMessageShape
	ExactBody         = exactBody
)
