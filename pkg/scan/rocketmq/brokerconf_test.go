package rocketmq

import "testing"

func TestParseBrokerConf(t *testing.T) {
	c, err := ParseBrokerConf([]byte("# comment\nbrokerName = b1\nstorePathRootDir=/data/store\nmappedFileSizeCommitLog=262144\nmappedFileSizeConsumeQueue: 1000\n"), "broker.conf")
	if err != nil {
		t.Fatal(err)
	}
	if c.StorePathRootDir != "/data/store" || c.MappedFileSizeCommitLog != 262144 || c.MappedFileSizeConsumeQueue != 1000 || c.Keys["brokerName"] != "b1" {
		t.Fatalf("%+v", c)
	}
	if _, err := ParseBrokerConf([]byte("mappedFileSizeCommitLog=1G\n"), "x"); err == nil {
		t.Fatal("non-numeric size accepted")
	}
}
