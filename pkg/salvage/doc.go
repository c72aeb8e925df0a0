// Package salvage exports messages from a stopped broker's store files
// (RabbitMQ .rdq shared message stores, RocketMQ commitlogs) and, for
// RabbitMQ, re-publishes them to a broker over AMQP 0-9-1.
//
// It never writes into the data dir. Selection reads the data dir through
// the scanners (pkg/scan/...), which open files read-only; the Writer
// writes only into the --out directory (it refuses an out dir inside the
// data dir, or the data dir itself), and Publish only reads that out
// directory, talks to the broker and appends to its confirm log inside
// the out directory.
//
// An export is a directory with one body file per message
// (bodies/NNNNNN-<msg id>.bin, the exact payload bytes) and messages.jsonl,
// one Message per line: store kind, msg id, where the record lies, queues
// or topic/queue id, exchange and routing keys or tags and keys,
// properties and headers, the body file, its size and sha256, and why it
// was selected. Selections (Select*):
//
//   - all: every decodable message (first copy of each id), RabbitMQ's
//     small messages included: those below queue_index_embed_msgs_below
//     never reach an .rdq but live in the queue's own files, a CQ v2
//     per-queue store entry (.qs, through its .qi slot; location
//     "queue-store") or a v1 index record (EmbSize > 0; "embedded");
//   - lost: RabbitMQ, referenced by a queue but unreadable by the broker
//     now (after a clean shutdown its saved index points elsewhere), and
//     .qs entries whose CRC or size check fails (the broker drops them at
//     recovery), exported only if their bytes still decode as a message;
//   - at-risk: RabbitMQ, referenced and a victim of a scanner misread of a
//     version given in BrokerVersions (or of any version when none is given);
//   - unreferenced: RabbitMQ, records no queue references (garbage to the
//     broker, but maybe exactly the message someone needs);
//   - after-corruption: valid records beyond a bad region that the broker's
//     recovery truncates away (RocketMQ: past the recovery end; RabbitMQ: in
//     the current file after the last referenced record and a gap).
//
// Publish re-sends the RabbitMQ messages of an export with their original
// exchange, routing key, properties and headers, persistent, mandatory,
// one at a time with publisher confirms; every confirmed message is
// appended (and fsynced) to confirmed.jsonl in the out dir, so an
// interrupted publish resumes where it stopped and never sends a
// confirmed message twice.
package salvage
