package stream

// Finding codes of the stream scanner (docs/cli.md shape:
// store.component.what). Repair code matches these constants.
const (
	// Chunks.
	CodeChunkCRC      = "rabbitmq.stream.chunk-crc"        // data does not match the chunk's CRC
	CodeTornTail      = "rabbitmq.stream.torn-tail"        // the segment ends inside a chunk
	CodeBadChunk      = "rabbitmq.stream.bad-chunk"        // no chunk header where one must start (garbage)
	CodeEntryFraming  = "rabbitmq.stream.entry-framing"    // the data does not split into the entries the header counts
	CodeBadMessage    = "rabbitmq.stream.bad-message"      // a user entry that is not an AMQP 1.0 message
	CodeChunkIDGap    = "rabbitmq.stream.chunk-id-gap"     // offsets missing between two chunks
	CodeChunkOverlap  = "rabbitmq.stream.chunk-id-overlap" // a chunk starts before the previous one ends
	CodeEpochRegress  = "rabbitmq.stream.epoch-regression" // a chunk's epoch is below an earlier one's
	CodeSegmentHeader = "rabbitmq.stream.segment-header"   // not an OSIL v1 file
	CodeSegmentName   = "rabbitmq.stream.segment-name"     // the file name is not its first chunk id
	CodeEmptySegment  = "rabbitmq.stream.empty-segment"    // a segment without a chunk

	// Index against segment.
	CodeIndexHeader   = "rabbitmq.stream.index-header"   // not an OSII v1 file
	CodeIndexMissing  = "rabbitmq.stream.index-missing"  // a segment without its index (orphaned segment)
	CodeIndexShort    = "rabbitmq.stream.index-short"    // chunks the index has no record for
	CodeIndexExtra    = "rabbitmq.stream.index-extra"    // records for chunks that are not in the segment
	CodeIndexMismatch = "rabbitmq.stream.index-mismatch" // a record that disagrees with its chunk
	CodeIndexTorn     = "rabbitmq.stream.index-torn"     // the index ends inside a record
	CodeIndexZero     = "rabbitmq.stream.index-zero"     // all-zero records
	CodeOrphanIndex   = "rabbitmq.stream.orphan-index"   // an index without its segment

	// Directory.
	CodeStrayFile = "rabbitmq.stream.stray-file" // a file that is no segment or index
	// CodeRecovery says what the broker's next start will do to the
	// stream (truncate, delete files, refuse to start).
	CodeRecovery = "rabbitmq.stream.recovery"
	// CodeTooManyFindings replaces findings past the per-file limit.
	CodeTooManyFindings = "rabbitmq.stream.too-many-findings"
)
