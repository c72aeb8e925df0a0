// Package rocketmq plans repairs of a RocketMQ store as repair.Plans:
// truncating the commitlog where a correct recovery stops, and rebuilding
// the consume queues, index files and checkpoint timestamps that the
// broker's dispatch derives from the commitlog. Planning only reads the
// data dir; pkg/repair.Apply performs the writes. The files and what the
// broker does with them: docs/formats/rocketmq.md (section numbers in
// comments refer to it).
package rocketmq
