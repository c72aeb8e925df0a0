// Package rabbitmq decodes the on-disk files of RabbitMQ classic queues:
// the shared message store (.rdq record framing, the Erlang External Term
// Format bodies inside it, the msg_store_index.ets and file_summary.ets
// disk_log dumps and clean.dot) and the per-queue indexes.
//
// The byte-level description with upstream sources is
// docs/formats/rabbitmq-classic.md; section numbers in comments (§2.1,
// §3.2, ...) refer to it. All integers
// are big-endian. Decoders never open files, never print and never panic:
// corruption is a *format.CorruptError naming the field and the byte offset.
package rabbitmq
