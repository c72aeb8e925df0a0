// Command storectl inspects and repairs RocketMQ and RabbitMQ store files.
package main

func main() {}
