package rocketmq

// versionGuess says which broker generation wrote the store: "5.x" when
// any 5.x-only trace is present (V2 records, __CRC32# properties, a
// trailing property separator, checkpoint fields 24/32, abort.bak or a
// compaction dir), else "4.x".
func (v *verifier) versionGuess() string {
	for _, k := range []string{"v2_records", "prop_crc_records", "properties_trailing_separator"} {
		if n, _ := v.evidence[k].(int); n > 0 {
			return "5.x"
		}
	}
	if v.cp.Has5xFields() || trace5xFile(v.cfg.Root) != "" {
		return "5.x"
	}
	return "4.x"
}

// layout records what Verify detected and from which files.
func (v *verifier) layout() {
	l := v.res.Layout
	l["commitlog_files"] = len(v.store.lay.segs)
	l["mapped_file_size_source"] = "inferred from commitlog file sizes"
	if v.cfg.MappedFileSize > 0 {
		l["mapped_file_size_source"] = "config"
	}
	l["commitlog_min_offset"] = v.minPhy
	l["abort"] = v.abort
	l["checkpoint_present"] = v.cpPresent
	if v.cpPresent {
		l["checkpoint"] = map[string]int64{"physic_msg_timestamp": v.cp.PhysicMsgTimestamp,
			"logics_msg_timestamp": v.cp.LogicsMsgTimestamp, "index_msg_timestamp": v.cp.IndexMsgTimestamp,
			"master_flushed_offset": v.cp.MasterFlushedOffset, "confirm_phy_offset": v.cp.ConfirmPhyOffset,
			"min_timestamp": v.cp.MinTimestamp()}
	}
	l["dispatch_from_phy_offset"] = v.dispatchFrom
	if len(v.dispatchWaits) > 0 {
		// A lower bound: the files named may hold units that end later.
		l["dispatch_from_waits_on"] = v.dispatchWaitsOn()
	}
	l["cq_units_linked"], l["index_entries_linked"] = v.unitsLinked, v.entriesLinked
	v.evidence["checkpoint_5x_fields"] = v.cp.Has5xFields()
	l["store_version"] = v.versionGuess()
	l["store_version_evidence"] = v.evidence
}
