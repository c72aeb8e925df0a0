package rocketmq

// SYSFLAG bits (MessageSysFlag, §2.3).
const (
	FlagCompressed      int32 = 0x001 // body is compressed
	FlagMultiTags       int32 = 0x002 // topic filter type MULTI_TAG
	FlagTransactionMask int32 = 0x00C // bits 2-3: transaction type
	FlagBornHostV6      int32 = 0x010 // BORNHOST is 16+4 bytes
	FlagStoreHostV6     int32 = 0x020 // STOREHOSTADDRESS is 16+4 bytes
	FlagNeedUnwrap      int32 = 0x040 // client-side batch marker
	FlagInnerBatch      int32 = 0x080 // record carries an inner batch (INNER_NUM)
	FlagCompressionMask int32 = 0x700 // bits 8-10: compression type
)

// Transaction types (SYSFLAG & FlagTransactionMask).
const (
	TxNotType  int32 = 0x0
	TxPrepared int32 = 0x4
	TxCommit   int32 = 0x8
	TxRollback int32 = 0xC
)

// Compression types (SYSFLAG bits 8-10, CompressionType.findByValue).
const (
	CompressionZlibLegacy = 0 // 0 with FlagCompressed means ZLIB
	CompressionLZ4        = 1
	CompressionZSTD       = 2
	CompressionZLIB       = 3
)

// Compressed reports whether the body is compressed.
func (m *Message) Compressed() bool { return m.SysFlag&FlagCompressed != 0 }

// MultiTags reports the MULTI_TAG filter flag.
func (m *Message) MultiTags() bool { return m.SysFlag&FlagMultiTags != 0 }

// TransactionType is SYSFLAG & 0xC: TxNotType, TxPrepared, TxCommit or TxRollback.
func (m *Message) TransactionType() int32 { return m.SysFlag & FlagTransactionMask }

// BornHostV6 reports whether BORNHOST is an IPv6 address.
func (m *Message) BornHostV6() bool { return m.SysFlag&FlagBornHostV6 != 0 }

// StoreHostV6 reports whether STOREHOSTADDRESS is an IPv6 address.
func (m *Message) StoreHostV6() bool { return m.SysFlag&FlagStoreHostV6 != 0 }

// NeedUnwrap reports the client-side batch marker.
func (m *Message) NeedUnwrap() bool { return m.SysFlag&FlagNeedUnwrap != 0 }

// InnerBatch reports whether the record carries an inner batch.
func (m *Message) InnerBatch() bool { return m.SysFlag&FlagInnerBatch != 0 }

// CompressionType is SYSFLAG bits 8-10 (meaningful only when Compressed).
func (m *Message) CompressionType() int { return int(m.SysFlag&FlagCompressionMask) >> 8 }

// Dispatched reports whether the broker writes this record to a consume
// queue: PREPARED and ROLLBACK transaction messages are not dispatched.
func (m *Message) Dispatched() bool {
	t := m.TransactionType()
	return t == TxNotType || t == TxCommit
}
